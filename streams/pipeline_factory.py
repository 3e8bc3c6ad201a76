"""Load the pipeline a worker calls, by dotted name, so `streams/` never imports NLP code directly.

Default: `workers.pipeline:Pipeline.from_settings` (what `dialcheck eval` uses). Another factory
(`--pipeline module:callable`, called as factory(settings, protocol=..., surface=...)) lets the
Kafka wiring be exercised or benchmarked without models.
"""
from __future__ import annotations

import importlib

DEFAULT_FACTORY = "workers.pipeline:Pipeline.from_settings"


def load_factory(spec: str):
    mod_name, _, attr = spec.partition(":")
    obj = importlib.import_module(mod_name)
    for part in (attr or "create").split("."):
        obj = getattr(obj, part)
    return obj


def item_factory():
    """The pipeline's input type: CheckItem(conversation_id, turn_id, context, claim)."""
    try:
        from workers.pipeline import CheckItem
    except ImportError:
        from workers.pipeline_types import CheckItem

    def make(conversation_id: str, turn_id: str, context: list[str], claim: str):
        return CheckItem(conversation_id=conversation_id, turn_id=turn_id, context=context, claim=claim)

    return make


def build_pipeline(settings, spec: str = DEFAULT_FACTORY, protocol: str = "e2e", surface: str = "r4g"):
    return load_factory(spec)(settings, protocol=protocol, surface=surface)
