"""R5: BiCon-Gate's one-shot LLM rewrite (dialogue context + claim → one self-contained claim),
and the checks its output must pass before the gate sees it.

Why checks before the gate: the paper reports R5 drifting (FV macro-F1 56.9 vs R0 61.1) and the
gate accepting only 0.9 % of R5 rewrites. The gate judges meaning; cheap checks refuse the
rewrites no gate should have to see: more than one sentence, a name or number that is in neither
the context nor the claim (the LLM adding facts), or a rewrite far longer than the claim."""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..text import last_turns
from .replies import is_echo, truncated

CONTEXT_TURNS = 3  # the turns the prompt shows (antecedents live in the last few)
SYSTEM = ("You rewrite the last reply of a dialogue into one self-contained, checkable sentence. Replace "
          "pronouns and vague references with the names they refer to in the dialogue, restore casing, "
          "punctuation and contractions, and keep every fact of the reply. Do not add facts, names or numbers "
          "that are not in the dialogue or the reply. Answer with the sentence only.")
# the one shot (DialFact-style; not a test record)
EXAMPLE_CONTEXT = ["Do you like Elvis Presley?", "I love his music, especially the early records."]
EXAMPLE_CLAIM = "yeah he was born in tupelo in 1935 i think"
EXAMPLE_REWRITE = "Elvis Presley was born in Tupelo in 1935."
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_LABEL = re.compile(r"^\s*(rewrite|rewritten claim|claim|answer|sentence|query)\s*:\s*", re.IGNORECASE)
_QUOTES = "\"'“”‘’`"
# words that may appear capitalised or as entities without naming anything new
_FUNCTION_WORDS = {"the", "a", "an", "of", "and", "in", "on", "at", "to", "for", "s", "i", "it"}


def dialogue_block(context: list[str], claim: str) -> str:
    turns = "\n".join(f"- {t}" for t in context) or "- (no earlier turns)"
    return f"Dialogue:\n{turns}\nReply: {claim}\nRewrite:"


def prompt(context: list[str], claim: str) -> list[dict]:
    """The chat messages: instructions, the one shot, then this claim (last CONTEXT_TURNS turns)."""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": dialogue_block(EXAMPLE_CONTEXT, EXAMPLE_CLAIM)},
            {"role": "assistant", "content": EXAMPLE_REWRITE},
            {"role": "user", "content": dialogue_block(last_turns(context, CONTEXT_TURNS), claim)}]


@dataclass(frozen=True)
class Checked:
    text: str | None  # the cleaned rewrite, None when refused
    reason: str = ""  # why refused
    kind: str = "ok"  # what the reply was (workers/llm/replies.py KINDS): "ok" unless refused


def clean_reply(reply: str) -> str:
    """The reply without a leading label ("Rewrite:") and surrounding quotes or blanks."""
    text = reply.strip()
    for _ in range(2):  # '"Rewrite: ..."' and 'Rewrite: "..."' alike
        text = _LABEL.sub("", text).strip()
        if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
            text = text[1:-1].strip()
    return text


def max_words(source: str) -> int:
    """Length bound of a rewrite: twice the source's words plus room for resolved names."""
    return 2 * len(_WORD.findall(source)) + 12


def check_rewrite(reply: str, sources: list[str], source: str, messages: list[dict] | None = None) -> Checked:
    """Accept `reply` as a rewrite of `source` if it is one sentence, within the length bound, and
    names nothing (entity, proper noun, number) whose words are in none of `sources`. Refused, the
    `kind` says what the reply was: empty, truncated (finish_reason "length"), an echo of the prompt
    `messages` (a dialogue turn, the one-shot example, the prompt's own labels), an explanation around
    the sentence (more than one line or sentence, or far longer than the claim), or drift (a name or
    number from nowhere)."""
    from ..surfaces.pronouns import nlp

    text = clean_reply(reply)
    if not text or not _WORD.search(text):
        return Checked(None, "empty rewrite", "empty")
    if truncated(reply):
        return Checked(None, "cut off at the completion's max_tokens", "truncated")
    if messages and is_echo(text, messages, [source]):
        return Checked(None, "the reply repeats the prompt (a dialogue turn, the example or its labels), not a "
                             "rewrite", "echo")
    if "\n" in text:
        return Checked(None, "more than one line", "explanation")
    n = len(_WORD.findall(text))
    if n > max_words(source):
        return Checked(None, f"too long ({n} words > {max_words(source)})", "explanation")
    doc = nlp()(text)
    sents = [s for s in doc.sents if any(t.is_alpha or t.like_num for t in s)]
    if len(sents) != 1:
        return Checked(None, f"{len(sents)} sentences, not one", "explanation")
    known = {w.casefold() for s in sources for w in _WORD.findall(s)}
    named = [e.text for e in doc.ents] + [t.text for t in doc if t.pos_ in ("PROPN", "NUM") or t.like_num]
    new = [x for x in dict.fromkeys(named)
           if any(w.casefold() not in known and w.casefold() not in _FUNCTION_WORDS for w in _WORD.findall(x))]
    if new:
        return Checked(None, "names what neither the context nor the claim does: " + ", ".join(new[:3]), "drift")
    return Checked(text)


class RewriteCache:
    """Checked R5 rewrites by (context shown, claim, model): an LLM call per claim is the costly
    step, and redeliveries and eval's surface loop repeat claims. Outages are not cached."""

    def __init__(self, entries: int):
        from cachetools import LRUCache

        self._cache = LRUCache(maxsize=entries) if entries else None

    def get(self, key: tuple) -> Checked | None:
        return self._cache.get(key) if self._cache is not None else None

    def put(self, key: tuple, value: Checked) -> None:
        if self._cache is not None:
            self._cache[key] = value


def cache_key(context: list[str], claim: str, model: str) -> tuple:
    return (tuple(last_turns(context, CONTEXT_TURNS)), claim, model)
