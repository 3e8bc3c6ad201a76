"""Text helpers in one place: dialogue turns (the gate, the retrieval query, the verifier's
hypothesis), the word tokeniser and the stop lists every stage uses.

Each stop list keeps its own job (they were measured separately, and merging them would move
verdicts): the lexical pre-score's short list, BM25's (also OpenSearch's analyser), the key-term list
of evidence sufficiency (scikit-learn's English list plus chat fillers, so "yeah I think" covers
nothing), and the training-pair overlap list of lab/nli. No scikit-learn at run time: its English list
is copied here (`ENGLISH_STOP_WORDS`; tests/test_sufficiency.py checks the copy against the library).

Two tokenisers, each with its job: `WORD` (ASCII alphanumerics, lower-cased) is what the pre-score,
BM25 and the stemmer read; `TERM` (letters in any script, numbers with their ordinal suffix) is what
the decision reads of a claim: its key terms (evidence sufficiency) and its words (the claim features)."""
from __future__ import annotations

import re

WORD = re.compile(r"[a-z0-9]+")  # lower-cased alphanumeric words: pre-score, BM25, pair overlap
# letters in any script ("Mödling", "Ramón": one word), with inner apostrophes and hyphens; numbers with
# their ordinal suffix ("4th": the number 4, not 4 and a word "th")
TERM = re.compile(r"[^\W\d_](?:[^\W\d_]|['’-])*|\d[\d,.]*\d(?:st|nd|rd|th)?|\d(?:st|nd|rd|th)?")
# scikit-learn 1.9.1's `sklearn.feature_extraction.text.ENGLISH_STOP_WORDS` (the Glasgow Information
# Retrieval Group's list, sklearn/feature_extraction/_stop_words.py), copied so the runtime needs no scikit-learn
ENGLISH_STOP_WORDS = frozenset("""
a about above across after afterwards again against all almost alone along already also although always am
among amongst amoungst amount an and another any anyhow anyone anything anyway anywhere are around as at back
be became because become becomes becoming been before beforehand behind being below beside besides between
beyond bill both bottom but by call can cannot cant co con could couldnt cry de describe detail do done down
due during each eg eight either eleven else elsewhere empty enough etc even ever every everyone everything
everywhere except few fifteen fifty fill find fire first five for former formerly forty found four from front
full further get give go had has hasnt have he hence her here hereafter hereby herein hereupon hers herself
him himself his how however hundred i ie if in inc indeed interest into is it its itself keep last latter
latterly least less ltd made many may me meanwhile might mill mine more moreover most mostly move much must my
myself name namely neither never nevertheless next nine no nobody none noone nor not nothing now nowhere of
off often on once one only onto or other others otherwise our ours ourselves out over own part per perhaps
please put rather re same see seem seemed seeming seems serious several she should show side since sincere six
sixty so some somehow someone something sometime sometimes somewhere still such system take ten than that the
their them themselves then thence there thereafter thereby therefore therein thereupon these they thick thin
third this those though three through throughout thru thus to together too top toward towards twelve twenty
two un under until up upon us very via was we well were what whatever when whence whenever where whereafter
whereas whereby wherein whereupon wherever whether which while whither who whoever whole whom whose why will
with within without would yet you your yours yourself yourselves""".split())

PRESCORE_STOP = frozenset("a an the of to in on at and or is are was were be been by for with as that this it its".split())
BM25_STOP = frozenset("""a an and are as at be been but by for from has have he her his i in is it its of on or
that the their them they this to was were will with you your we our she him me my not do does did so if than
then there these those what which who whom whose why how when where would could should can just also very""".split())
CHAT_FILLERS = frozenset({
    "yeah", "yes", "yep", "oh", "ok", "okay", "wow", "lol", "really", "actually", "pretty", "think", "know",
    "guess", "like", "love", "cool", "awesome", "great", "nice", "sure", "right", "just", "did", "does", "don't",
    "didn't", "i'm", "it's", "that's", "thats", "dont", "im", "i've", "i'd", "lot", "lots", "thing", "things",
    "kind", "sort", "maybe", "probably", "heard", "read", "say", "said", "want", "believe", "feel", "fun"})
KEY_TERM_STOP = ENGLISH_STOP_WORDS | CHAT_FILLERS
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
