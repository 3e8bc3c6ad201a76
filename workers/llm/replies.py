"""What real models return, named: each reply of an LLM step gets a `kind`, and every kind but "ok"
is the step's fallback (R5: the R4 path; editing: the first retrieval; the judge: the NLI verdict).

Why: a real model (SmolLM2-135M here; any model at a bad moment) does not always answer the question.
It repeats the prompt or its one-shot example ("echo"), wraps the answer in words ("Sure! Here is the
sentence: …", reasoning after the label lines: "explanation"), answers nothing ("empty"), runs into
`max_tokens` ("truncated": the server's finish_reason "length"), answers in another shape than asked
("wrong-format": no LABEL/WINDOW lines, a window that does not exist) or names what neither the
dialogue nor the claim does ("drift"). None of them is an outage of the endpoint (status stays ok);
each is written into the verdict's rationale (`reply`, with a reason) and counted per step and kind in
`COUNTS` (process-wide; `dialcheck llm yardstick` prints them), so a model that mostly echoes shows
up as a number, not as silently unchanged verdicts."""
from __future__ import annotations

import re
import threading
from collections import Counter

KINDS = ("ok", "empty", "truncated", "echo", "explanation", "wrong-format", "drift")
UNAVAILABLE = "unavailable"  # counted beside the kinds: no reply at all (the endpoint failed; status degraded)
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
ECHO_MIN_WORDS = 6  # a reply opening with this many words of the system instructions is an echo


class Reply(str):
    """A reply's text (a `str`, so `schemas.protocols.LLM` holds) with the server's finish_reason
    ("stop", "length", … or None when the server sent none)."""

    finish_reason: str | None

    def __new__(cls, text: str, finish_reason: str | None = None) -> "Reply":
        obj = super().__new__(cls, text)
        obj.finish_reason = finish_reason
        return obj


def truncated(reply: str) -> bool:
    return getattr(reply, "finish_reason", None) == "length"


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text or "")]


def _prompt_units(messages: list[dict]) -> list[str]:
    """Every line and sentence the prompt showed the model, without the prompt's own line labels."""
    out = []
    for m in messages:
        for line in str(m.get("content", "")).splitlines():
            line = re.sub(r"^\s*(?:-\s+|\[\d+\]\s*(?:\([^)]*\)\s*)?|[A-Z][A-Za-z ]{0,30}:\s*)", "", line)
            if line.strip():
                out.append(line)
                out.extend(re.split(r"(?<=[.!?])\s+", line))
    return out


def is_echo(reply: str, messages: list[dict], own: list[str], allow: tuple[str, ...] = ("LABEL", "WINDOW")) -> bool:
    """Does the reply repeat the prompt rather than answer it? True when it carries the prompt's
    scaffolding (a line the prompt labels: "Dialogue:", "Reply:", "Claim to judge:", "Evidence
    windows:" …), or its words are those of a line or sentence of the prompt other than the text
    being rewritten (`own`: the claim or sub-claim — a rewrite equal to it is "unchanged", not an
    echo): a dialogue turn, the one-shot example's answer, an evidence window; or it holds a run of
    ECHO_MIN_WORDS+ words of the system instructions. Lines labelled as the answer is asked to be
    (`allow`: the judge's LABEL and WINDOW lines) are no echo."""
    text = reply.strip()
    labels = {m.group(1) for msg in messages
              for m in re.finditer(r"^([A-Z][A-Za-z ]{0,30}):", str(msg.get("content", "")), re.MULTILINE)} - set(allow)
    if any(re.search(rf"^\s*{re.escape(label)}:", text, re.MULTILINE) for label in labels):
        return True
    said = words(text)
    if not said or any(said == words(o) for o in own):
        return False
    if any(said == words(unit) for unit in _prompt_units(messages)):
        return True
    system = " ".join(" ".join(words(str(m.get("content", "")))) for m in messages if m.get("role") == "system")
    return len(said) >= ECHO_MIN_WORDS and f" {' '.join(said[:ECHO_MIN_WORDS])} " in f" {system} "


_ANY_LABEL = re.compile(r"LABEL\s*:\s*(SUPPORTS|REFUTES|NOT ENOUGH INFO)", re.IGNORECASE)


def judge_kind(reply: str, messages: list[dict]) -> str:
    """What a judge answer that does not parse (workers/llm/judge.py `parse_answer`) was instead."""
    if not words(reply):
        return "empty"
    if truncated(reply):
        return "truncated"
    if is_echo(reply, messages, []):
        return "echo"
    if _ANY_LABEL.search(reply):  # the label is there, with words after it or around it, or not in capitals
        return "explanation"
    return "wrong-format"


class ReplyCounts:
    """Replies per (step, kind), process-wide and thread-safe (the client answers from a pool)."""

    def __init__(self) -> None:
        self._counts: Counter = Counter()
        self._lock = threading.Lock()

    def count(self, step: str, kind: str) -> None:
        with self._lock:
            self._counts[(step, kind)] += 1

    def snapshot(self) -> dict[str, dict[str, int]]:
        """{step: {kind: n}} of every reply counted so far."""
        with self._lock:
            out: dict[str, dict[str, int]] = {}
            for (step, kind), n in sorted(self._counts.items()):
                out.setdefault(step, {})[kind] = n
            return out

    def clear(self) -> None:
        with self._lock:
            self._counts.clear()


COUNTS = ReplyCounts()
