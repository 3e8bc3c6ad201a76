"""Untrusted JSON from the wire: bounded parsing and JSON Schema validation.

The JSON Schemas are the files next to this module; size and depth are checked before anything
recursive runs on the input, and every failure is an InvalidEvent with a reason."""
from __future__ import annotations

import json
from dataclasses import fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema.exceptions
import orjson

from schemas.errors import InvalidEvent, Reason

SCHEMA_DIR = Path(__file__).resolve().parent


@lru_cache(maxsize=None)
def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def validate(name: str, obj: Any) -> None:
    """Raise InvalidEvent with the most relevant schema error (jsonschema's `best_match`), its message
    cut short: messages repr the offending value, which may be huge."""
    err = jsonschema.exceptions.best_match(_validator(name).iter_errors(obj))
    if err is not None:
        where = "/".join(str(p) for p in err.absolute_path) or "(root)"
        msg = err.message if len(err.message) <= 200 else err.message[:200] + "…"
        raise InvalidEvent(Reason.SCHEMA, f"schema {name}: {where}: {msg}")


def json_depth(obj: Any) -> int:
    """Nesting depth of parsed JSON, without recursion (the input may be adversarial)."""
    depth, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, (dict, list)):
            depth = max(depth, d)
            stack.extend((v, d + 1) for v in (o.values() if isinstance(o, dict) else o))
    return depth


def load_bounded_json(raw: bytes, max_depth: int) -> Any:
    """Parse untrusted JSON bytes and refuse nesting deeper than `max_depth` (InvalidEvent), before
    anything recursive runs on it."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise InvalidEvent(Reason.MALFORMED_JSON, f"malformed JSON: {str(e)[:200]}") from None
    depth = json_depth(obj)
    if depth > max_depth:
        raise InvalidEvent(Reason.MALFORMED_JSON, f"JSON nested too deep: {depth} > {max_depth} levels")
    return obj


def no_duplicate_keys(pairs: list) -> dict:
    """`object_pairs_hook` for json.loads: a duplicate key is refused (readers disagree on which wins)."""
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        dup = next(k for k in keys if keys.count(k) > 1)
        raise InvalidEvent(Reason.MALFORMED_JSON, f"duplicate JSON key {dup[:64]!r} (readers disagree on which value wins)")
    return dict(pairs)


def known_fields(cls, d: dict) -> dict:
    """Only the fields `cls` has: readers ignore fields they do not know (a later minor version's)."""
    names = {f.name for f in fields(cls)}
    return {k: v for k, v in d.items() if k in names}



def decode_record(raw: bytes | str, max_bytes: int | None, max_depth: int, what: str = "event") -> Any:
    """Wire bytes → the JSON value, or InvalidEvent with a short reason: size, UTF-8, depth (before
    anything recursive runs), JSON syntax and duplicate keys, checked the same way for every topic."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if max_bytes is not None and len(raw) > max_bytes:
        raise InvalidEvent(Reason.TOO_LARGE, f"{what} too large: {len(raw)} bytes > {max_bytes}")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidEvent(Reason.INVALID_UTF8, f"invalid UTF-8 at byte {e.start}") from None
    obj = load_bounded_json(raw, max_depth)
    try:
        json.loads(text, object_pairs_hook=no_duplicate_keys)
    except InvalidEvent:
        raise
    except (ValueError, RecursionError) as e:  # orjson accepted it; json should too
        raise InvalidEvent(Reason.MALFORMED_JSON, f"malformed JSON: {str(e)[:200]}") from None
    return obj
