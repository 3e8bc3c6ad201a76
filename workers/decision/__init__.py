"""Decision layer: window-level NLI probabilities (+ features) → claim label, fitted by grouped
cross-validation (`dialcheck tune`), shipped as versioned JSON."""
from .features import FEATURES, ClaimEvidence, features
from .layer import LABELS, METHODS, DecisionLayer, macro_f1

__all__ = ["ClaimEvidence", "DecisionLayer", "FEATURES", "LABELS", "METHODS", "features", "macro_f1"]
