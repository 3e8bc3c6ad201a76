"""Evidence windows and the cheap lexical pre-score (NLI windowing study, method.md §5):
sentences and adjacent bi-sentence windows, scored 0.6·recall + 0.3·Jaccard + 0.1·bigram overlap
after NFKC, diacritic stripping and light lemmatisation."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

_SENT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("a an the of to in on at and or is are was were be been by for with as that this it its".split())


@dataclass(frozen=True)
class Window:
    passage_index: int
    text: str
    prescore: float = 0.0


def split_sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


def windows(passage: str) -> list[str]:
    sents = split_sentences(passage)
    if len(sents) <= 1:
        return sents or ([passage] if passage.strip() else [])
    return sents + [f"{a} {b}" for a, b in zip(sents, sents[1:])]


def _lemma(w: str) -> str:
    for suf, rep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)] + rep
    return w


def normalise(text: str) -> list[str]:
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return [_lemma(w) for w in _WORD.findall(text.lower())]


def prescore(window: str, fact: str) -> float:
    wt, ft = normalise(window), normalise(fact)
    fset = {t for t in ft if t not in _STOP} or set(ft)
    wset = set(wt)
    if not fset or not wset:
        return 0.0
    recall = len(fset & wset) / len(fset)
    jaccard = len(fset & wset) / len(fset | wset)
    fb, wb = set(zip(ft, ft[1:])), set(zip(wt, wt[1:]))
    bigram = len(fb & wb) / len(fb) if fb else 0.0
    return 0.6 * recall + 0.3 * jaccard + 0.1 * bigram


def top_windows(passages: list[str], fact: str, keep: int = 24) -> list[Window]:
    """All windows of all passages, best `keep` by pre-score (ties keep passage order)."""
    scored = [Window(i, w, prescore(w, fact)) for i, p in enumerate(passages) for w in windows(p)]
    scored.sort(key=lambda w: -w.prescore)
    return scored[:keep]
