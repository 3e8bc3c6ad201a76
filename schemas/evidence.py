"""The `evidence` of a grounded turn: the passages its assistant was given, as a producer sends them
(chat_turn.schema.json, a /check body, the Python API, `dialcheck check --evidence`): a list, each a
string or an object {"text" (required), "title", "url", "id"}.

Why one parser: the stream, the HTTP API, the Python API and the CLI hold evidence to the same rules,
so a passage list accepted by one is accepted by all. A wrong shape is refused (InvalidEvent: a dead
letter in the stream, a 400 elsewhere) with a short reason naming the passage; a list that is merely
too long is not refused: what lies beyond the limits (schemas/settings/grounding.py) is not read, and
the returned note says how much was, for the verdict's status.reason. Passage text is never quoted in
a reason (it may be private)."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from schemas.errors import InvalidEvent, Reason
from schemas.items import GivenPassage
from schemas.limits import MAX_EVIDENCE_CHARS, MAX_EVIDENCE_PASSAGES, MAX_PASSAGE_CHARS
from schemas.text import clean_text, has_invisible

PASSAGE_KEYS = ("text", "title", "url", "id")
MAX_ID_CHARS = 256
MAX_TITLE_CHARS = 1000
MAX_URL_CHARS = 2048
SHAPE = 'a list of passages, each a string or an object {"text", "title"?, "url"?, "id"?}'


@dataclass(frozen=True)
class EvidenceLimits:
    """How much of a turn's evidence is read: passages, characters per passage, characters in all."""
    max_passages: int = MAX_EVIDENCE_PASSAGES
    max_passage_chars: int = MAX_PASSAGE_CHARS
    max_chars: int = MAX_EVIDENCE_CHARS

    @classmethod
    def of(cls, grounding) -> "EvidenceLimits":
        """From the settings' `grounding` section (DIALCHECK_EVIDENCE_MAX_*)."""
        return cls(grounding.max_passages, grounding.max_passage_chars, grounding.max_chars)


def _refuse(code: Reason, where: str, why: str) -> InvalidEvent:
    return InvalidEvent(code, f"{where}: {why}")


def _shape(raw: Any, where: str) -> tuple[str, dict]:
    """One passage's raw text and its other fields, shape checked (no text cleaned yet)."""
    if isinstance(raw, str):
        return raw, {}
    if not isinstance(raw, dict):
        kind = "a list" if isinstance(raw, list) else type(raw).__name__ if raw is not None else "null"
        raise _refuse(Reason.SCHEMA, where, f"{kind} is not a passage (a string, or an object with \"text\")")
    unknown = sorted(set(raw) - set(PASSAGE_KEYS))
    if unknown:
        raise _refuse(Reason.SCHEMA, where, f"unknown key {str(unknown[0])[:64]!r} (expected {', '.join(PASSAGE_KEYS)})")
    if not isinstance(raw.get("text"), str):
        raise _refuse(Reason.SCHEMA, where, "an object passage needs \"text\" (a string)")
    extra = {}
    for key, most in (("title", MAX_TITLE_CHARS), ("url", MAX_URL_CHARS), ("id", MAX_ID_CHARS)):
        value = raw.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise _refuse(Reason.SCHEMA, where, f"{key} must be a string or null")
        if len(value) > most:
            raise _refuse(Reason.TOO_LARGE, where, f"{key} too long: {len(value)} > {most} characters")
        extra[key] = value
    return raw["text"], extra


def _fields(extra: dict, where: str) -> dict:
    """Title cleaned as text is; id and url refused when they hold blanks-only, control or invisible
    characters (they are matched and followed, not read)."""
    out = {}
    if "title" in extra:
        title = clean_text(extra["title"]).strip()
        out["title"] = title or None
    for key in ("id", "url"):
        if key in extra:
            value = extra[key]
            if not value.strip() or has_invisible(value) or any(ch.isspace() for ch in value.strip()):
                raise _refuse(Reason.INVALID_FIELD, where, f"{key} is blank or holds spaces, control or invisible characters")
            out[key] = value.strip()
    return out


def parse_evidence(raw: Any, limits: EvidenceLimits = EvidenceLimits(), source: str = "turn",
                   name: str = "evidence") -> tuple[list[GivenPassage], str | None]:
    """A producer's evidence → the passages read (text cleaned as a turn's: NFKC, invisible characters
    removed) and a note saying what the limits left unread (None: all was read), or InvalidEvent.

    Every passage's shape is checked, read or not (a wrong shape is the producer's bug, wherever it
    sits); only the passages read are cleaned. Each passage is read to `max_passage_chars`, all of them
    to `max_chars` (`_read_within`)."""
    if not isinstance(raw, list):
        kind = "a string" if isinstance(raw, str) else type(raw).__name__ if raw is not None else "null"
        raise InvalidEvent(Reason.SCHEMA, f"{name} must be {SHAPE}, not {kind}")
    shaped = [_shape(p, f"{name}[{i}]") for i, p in enumerate(raw)]

    def cleaned(i: int, text: str, most: int, extra: dict) -> GivenPassage:
        clean = clean_text(text[: 2 * most])[:most]  # NFKC and removal only shrink or keep, save rare ligatures
        if not clean.strip():
            raise _refuse(Reason.EMPTY_TEXT, f"{name}[{i}]", "empty text (after NFKC and removal of invisible characters)")
        return GivenPassage(clean, source=source, **_fields(extra, f"{name}[{i}]"))

    return _read_within(shaped, limits, cleaned, name)


def read_passages(passages: list[GivenPassage], limits: EvidenceLimits,
                  name: str = "evidence") -> tuple[list[GivenPassage], str | None]:
    """Passages already parsed (a conversation's knowledge, cleaned when it arrived) read to `limits`
    by the same rule as `parse_evidence`, without parsing or cleaning them again."""
    return _read_within([(p.text, p) for p in passages], limits,
                        lambda i, text, most, p: p if len(text) <= most else replace(p, text=text[:most]), name)


def _read_within(items: list[tuple[str, Any]], limits: EvidenceLimits, read_one,
                 name: str) -> tuple[list[GivenPassage], str | None]:
    """The one reading rule: (text, what else) items in order, each read by `read_one(i, text, most,
    what else)` to at most `most` characters (`max_passage_chars`, and what `max_chars` leaves), at most
    `max_passages` of them. The note counts passages and characters read against those given."""
    passages: list[GivenPassage] = []
    budget, read_chars, given_chars = limits.max_chars, 0, sum(len(text) for text, _ in items)
    for i, (text, extra) in enumerate(items):
        if len(passages) >= limits.max_passages or budget <= 0:
            break
        most = min(limits.max_passage_chars, budget)
        passage = read_one(i, text, most, extra)
        passages.append(passage)
        taken = len(passage.text) if len(text) > most else len(text)
        budget -= taken
        read_chars += taken
    if len(passages) == len(items) and read_chars >= given_chars:
        return passages, None
    return passages, (f"{name} cut: read {len(passages)} of {len(items)} passages, {read_chars} of {given_chars} "
                      f"characters (limits: {limits.max_passages} passages, {limits.max_passage_chars} characters "
                      f"each, {limits.max_chars} in all)")


def evidence_json(passages) -> list[dict]:
    """The passages as a producer sends them (only the fields given): a replayed turn, a /check body."""
    return [{k: v for k, v in (("text", p.text), ("title", p.title), ("url", p.url), ("id", p.id)) if v is not None}
            for p in passages]
