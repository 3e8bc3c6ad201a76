"""Text helpers in one place: dialogue turns (the gate, the retrieval query, the verifier's
hypothesis), the word tokeniser and the stop lists every stage uses.

Each stop list keeps its own job (they were measured separately, and merging them would move
verdicts): the lexical pre-score's short list, BM25's (also OpenSearch's analyser), the key-term list
of evidence sufficiency (scikit-learn's English list plus chat fillers, so "yeah I think" covers
nothing), and the training-pair overlap list of lab/nli."""
from __future__ import annotations

import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

WORD = re.compile(r"[a-z0-9]+")  # lower-cased alphanumeric words: pre-score, BM25, pair overlap

PRESCORE_STOP = frozenset("a an the of to in on at and or is are was were be been by for with as that this it its".split())
BM25_STOP = frozenset("""a an and are as at be been but by for from has have he her his i in is it its of on or
that the their them they this to was were will with you your we our she him me my not do does did so if than
then there these those what which who whom whose why how when where would could should can just also very""".split())
CHAT_FILLERS = frozenset({
    "yeah", "yes", "yep", "oh", "ok", "okay", "wow", "lol", "really", "actually", "pretty", "think", "know",
    "guess", "like", "love", "cool", "awesome", "great", "nice", "sure", "right", "just", "did", "does", "don't",
    "didn't", "i'm", "it's", "that's", "thats", "dont", "im", "i've", "i'd", "lot", "lots", "thing", "things",
    "kind", "sort", "maybe", "probably", "heard", "read", "say", "said", "want", "believe", "feel", "fun"})
KEY_TERM_STOP = frozenset(ENGLISH_STOP_WORDS) | CHAT_FILLERS
PAIR_OVERLAP_STOP = frozenset("a an the of in on at to for by with and or is was are were be been has have had it its "
                              "as from that this which who he she his her they their i s".split())


def words(text: str) -> list[str]:
    """Lower-cased alphanumeric words."""
    return WORD.findall(text.lower())


def last_turns(context: list[str], n: int) -> list[str]:
    """The last n turns; none for n <= 0 (a bare context[-0:] would return them all)."""
    return context[-n:] if n > 0 else []


def with_context(context: list[str], text: str, turns: int) -> str:
    """The last `turns` context turns then `text`: the verifier's hypothesis (paper: 2 turns +
    claim surface) and the retrieval query (C + Rk)."""
    return " ".join([*last_turns(context, turns), text])
