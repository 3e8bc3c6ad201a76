"""Evidence windows and the cheap lexical pre-score (NLI windowing study, docs/method.md §5):
sentences and adjacent bi-sentence windows, scored 0.6·recall + 0.3·Jaccard + 0.1·bigram overlap
after NFKC, diacritic stripping and stemming.

The regex splitter cuts "Richard J. Daley" after "J." and the suffix stripper maps "species" →
"specy", "this" → "thi" (stop words are now stemmed the same way, so "this" is dropped as meant).
spaCy's sentencizer and nltk's Snowball stemmer are selectable (`splitter="spacy"`,
`stemmer="snowball"`) but did not measure as good on DialFact FV (`dialcheck tune windows`:
grouped-CV macro-F1 of the decision layer 59.48 old, 57.70 spaCy, 57.00 spaCy + Snowball, 58.26
Snowball; the threshold rule 46.83 for all), so the defaults stay."""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from .text import PRESCORE_STOP, WORD

_SENT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_WORD = WORD
_STOP = PRESCORE_STOP
SPLITTER = "regex"  # regex | spacy (measured: regex)
STEMMER = "suffix"  # suffix | snowball (measured: suffix)


@dataclass(frozen=True)
class Window:
    passage_index: int
    text: str
    prescore: float = 0.0


@lru_cache(maxsize=1)
def _sentencizer():
    import spacy

    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    return nlp


def split_sentences(text: str, splitter: str | None = None) -> list[str]:
    if (splitter or SPLITTER) == "regex":
        return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]
    return [s.text.strip() for s in _sentencizer()(text.strip()).sents if s.text.strip()]


def windows(passage: str, splitter: str | None = None, max_words: int = 0) -> list[str]:
    return list(_windows(passage, splitter or SPLITTER, max_words))


# The words of one window in a grounded reply read whole (`Pipeline` checks a longer one claim by
# claim) and, with `windows.max_window_words` set, the most of a passage sentence one window holds.
MAX_WINDOW_WORDS = 120


def _pieces(sentence: str, most: int) -> list[str]:
    """The sentence, or its consecutive pieces of `most` words when longer (0: always whole)."""
    words = sentence.split()
    if not most or len(words) <= most:
        return [sentence]
    return [" ".join(words[i:i + most]) for i in range(0, len(words), most)]


@lru_cache(maxsize=4096)
def _windows(passage: str, splitter: str, max_words: int = 0) -> tuple[str, ...]:
    """A passage's windows, remembered: in a chat stream follow-up turns read the same retrieved
    passages again (hit rate in `window_cache_stats`). `max_words` > 0: a longer sentence is read in
    pieces of that many words (`windows.max_window_words`, off by default: see its setting)."""
    sents = [piece for sent in split_sentences(passage, splitter) for piece in _pieces(sent, max_words)]
    if len(sents) <= 1:
        whole = ([passage] if not max_words else _pieces(passage.strip(), max_words)) if passage.strip() else []
        return tuple(sents or whole)
    return tuple(sents + [f"{a} {b}" for a, b in zip(sents, sents[1:])])


def window_cache_stats() -> dict[str, int]:
    """Hits, misses, entries and capacity of the (per-process) window cache."""
    info = _windows.cache_info()
    return {"hits": info.hits, "misses": info.misses, "entries": info.currsize, "capacity": info.maxsize}


def _suffix_lemma(w: str) -> str:
    for suf, rep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suf) and len(w) - len(suf) >= 3:
            return w[: -len(suf)] + rep
    return w


@lru_cache(maxsize=1)
def _snowball():
    from nltk.stem.snowball import SnowballStemmer

    return SnowballStemmer("english")


@lru_cache(maxsize=65536)
def _stem(w: str, stemmer: str) -> str:
    return _suffix_lemma(w) if stemmer == "suffix" else _snowball().stem(w)


def normalise(text: str, stemmer: str | None = None) -> list[str]:
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return [_stem(w, stemmer or STEMMER) for w in _WORD.findall(text.lower())]


@lru_cache(maxsize=16384)
def _tokens(text: str, stemmer: str) -> tuple[str, ...]:
    return tuple(normalise(text, stemmer))


@lru_cache(maxsize=4)
def _stems_of_stop(stemmer: str) -> frozenset[str]:
    return frozenset(_stem(w, stemmer) for w in _STOP)


def prescore(window: str, fact: str, stemmer: str | None = None) -> float:
    stemmer = stemmer or STEMMER
    wt, ft = _tokens(window, stemmer), _tokens(fact, stemmer)
    stop = _stems_of_stop(stemmer)
    fset = {t for t in ft if t not in stop} or set(ft)
    wset = set(wt)
    if not fset or not wset:
        return 0.0
    recall = len(fset & wset) / len(fset)
    jaccard = len(fset & wset) / len(fset | wset)
    fb, wb = set(zip(ft, ft[1:])), set(zip(wt, wt[1:]))
    bigram = len(fb & wb) / len(fb) if fb else 0.0
    return 0.6 * recall + 0.3 * jaccard + 0.1 * bigram


def top_windows(passages: list[str], fact: str, keep: int = 24, splitter: str | None = None,
                stemmer: str | None = None, max_words: int = 0) -> list[Window]:
    """All windows of all passages, best `keep` by pre-score (ties keep passage order)."""
    scored = [Window(i, w, prescore(w, fact, stemmer)) for i, p in enumerate(passages)
              for w in windows(p, splitter, max_words)]
    scored.sort(key=lambda w: -w.prescore)
    return scored[:keep]


# The adaptive window budget (`windows.window_first` / `windows.window_chunk`): most claims settle on
# their first windows, so reading the rest only for the unsettled ones saves NLI calls. Set before
# measuring, from the shipped rule's thresholds (workers/decision/params/decision.json: SUPPORTS at
# entailment >= 0.40, REFUTES at contradiction >= 0.56), not fitted: a claim whose windows read so
# far are all below half the lower threshold in entailment and contradiction is "quiet".
QUIET = 0.20


def quiet(probs: np.ndarray) -> bool:
    """Every window read so far is far from any threshold: neither entailment nor contradiction
    reaches QUIET (columns: entailment, neutral, contradiction)."""
    return len(probs) > 0 and float(np.max(probs[:, [0, 2]])) < QUIET


def read_in_rounds(counts: Sequence[int], score: Callable[[list[tuple[int, int]]], np.ndarray],
                   settled: Callable[[int, np.ndarray], bool], first: int, chunk: int) -> list[np.ndarray]:
    """Per claim, the NLI probabilities of its first n windows (best pre-score first), n chosen
    round by round: round one scores `first` windows of every claim in one call, each later round
    the next `chunk` windows of every claim that `settled(claim, probs so far)` does not call
    settled, until each claim is settled or has all `counts[claim]` windows read. One `score` call
    per round for the whole batch (its pairs length-sorted together by the NLI model): at most
    1 + ceil((max_windows - first) / chunk) calls. `first` 0: every window in one call, as before.
    `score(pairs)`: (claim, window index) pairs → (len(pairs), 3) probabilities."""
    probs = [np.zeros((0, 3), np.float32) for _ in counts]
    active = [i for i, n in enumerate(counts) if n > 0]
    step = first if first > 0 else max(counts, default=0)
    while active:
        want = [(i, j) for i in active for j in range(len(probs[i]), min(counts[i], len(probs[i]) + step))]
        got = np.asarray(score(want), np.float32).reshape(len(want), 3)
        rows: dict[int, list] = {}
        for (i, _), p in zip(want, got):
            rows.setdefault(i, []).append(p)
        for i, new in rows.items():
            probs[i] = np.concatenate([probs[i], np.stack(new)])
        active = [i for i in active if len(probs[i]) < counts[i] and not settled(i, probs[i])]
        step = max(chunk, 1)
    return probs
