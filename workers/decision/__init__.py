"""The runtime decision: window rule, aggregation, fitted layer and the ClaimDecider the verify
stage calls. The offline half (caches, cross-validation, tuning, the layer's card) is workers/tuning/."""
from schemas import LABELS

from .decider import ClaimDecider, DecisionModelMismatch, load_layer
from .features import FEATURES, ClaimEvidence, features
from .layer import METHODS, DecisionLayer
from .rule import NO_EVIDENCE, WindowDecision, aggregate, decide_window, label_probs

__all__ = ["ClaimDecider", "DecisionModelMismatch", "ClaimEvidence", "DecisionLayer", "FEATURES", "LABELS", "METHODS", "NO_EVIDENCE",
           "WindowDecision", "aggregate", "decide_window", "features", "label_probs", "load_layer"]
