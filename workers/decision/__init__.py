"""The runtime decision: a claim's windows → a typed `Decision` (methods.py), from parameters
loaded by decider.py; the window rule and aggregation (rule.py), claim features (features.py),
evidence sufficiency (sufficiency.py). Fitting the parameters is offline work: lab/tuning/fit.py."""
from schemas import LABELS

from .decider import DecisionModelMismatch, load_decision
from .features import FEATURES, ClaimEvidence, features
from .methods import METHODS, RULES, Decision, DecisionMethod, method
from .rule import NO_EVIDENCE, WindowDecision, aggregate, decide_window, label_probs

__all__ = ["ClaimEvidence", "Decision", "DecisionMethod", "DecisionModelMismatch", "FEATURES", "LABELS", "METHODS",
           "NO_EVIDENCE", "RULES", "WindowDecision", "aggregate", "decide_window", "features", "label_probs",
           "load_decision", "method"]
