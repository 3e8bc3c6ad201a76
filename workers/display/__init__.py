"""What a chat app shows end users (the verdict's `display` hint): the policy (policy.py) beside the
fitted artifact it loads (params/display.json, loader.py). Fitting it is offline work:
lab/tuning/display_fit.py, lab/tuning/calibrate.py."""
from .loader import SHIPPED, display_file, display_path_for, load_display
from .policy import (BADGE_FEATURES, BADGES, CONSTANT, FORMAT, TONES, VERSION, VERSIONS, BadgeFacts, BadgeScorer,
                     DisplayPolicy, display_for, display_of)

__all__ = ["BADGE_FEATURES", "BADGES", "CONSTANT", "FORMAT", "SHIPPED", "TONES", "VERSION", "VERSIONS", "BadgeFacts",
           "BadgeScorer", "DisplayPolicy", "display_file", "display_for", "display_of", "display_path_for",
           "load_display"]
