"""Training-side label spellings. The label order itself is the NLIModel contract
(schemas/protocols.py `NLI_LABELS`); it is re-exported here for the training code."""
from __future__ import annotations

from schemas.protocols import CONTRADICTION, ENTAILMENT, NEUTRAL
from schemas.protocols import NLI_LABELS as LABELS

__all__ = ["CONTRADICTION", "ENTAILMENT", "LABELS", "NEUTRAL", "label_id"]

_ALIASES = {
    "entailment": 0, "e": 0, "supports": 0, "supported": 0, "true": 0, "entailed": 0,
    "neutral": 1, "n": 1, "not enough info": 1, "not_enough_info": 1, "nei": 1,
    "unknown": 1, "uncertain": 1,
    "contradiction": 2, "c": 2, "refutes": 2, "refuted": 2, "false": 2,
}


def label_id(raw: str | None) -> int | None:
    """Map a source's label spelling to our id; None for labels we do not train on."""
    if raw is None:
        return None
    return _ALIASES.get(str(raw).strip().lower())
