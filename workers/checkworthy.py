"""Check-worthiness (claim detection, as in Chamoun et al. and LiveFC): a turn that states no
checkable fact ("I love cheerleading!", "That's cool, I didn't know that") is answered NOT ENOUGH
INFO with the reason "not check-worthy", before any retrieval or NLI.

Rule over the spaCy parse, conservative on purpose (a wrongly skipped factual claim loses a
SUPPORTS or REFUTES; a wrongly checked personal turn usually still ends NOT ENOUGH INFO): a turn
is not check-worthy only when every sentence is a question, a short reaction without any entity
or number, or a first/second-person experience or opinion that names no entity or number.
Reported facts ("I read that the cod is ...") stay checkable."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

REASON = "not check-worthy"
_FIRST_SECOND = {"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your", "yours"}
_OPINION = {"love", "like", "enjoy", "hate", "prefer", "think", "guess", "feel", "wish", "hope", "want", "believe",
            "cool", "awesome", "great", "nice", "fun", "interesting", "amazing", "wow", "favorite", "favourite",
            "fan", "agree", "glad", "sad", "sorry", "appreciate", "thank", "thanks", "suppose"}
_REPORTING = {"read", "know", "hear", "learn", "see", "find"}  # "I read that ..." introduces a fact
_FACT_ENTS = {"PERSON", "ORG", "GPE", "NORP", "WORK_OF_ART", "EVENT", "FAC", "LOC", "PRODUCT", "LANGUAGE",
              "DATE", "CARDINAL", "QUANTITY", "MONEY", "PERCENT", "ORDINAL", "LAW"}


@dataclass(frozen=True)
class Worthiness:
    checkworthy: bool
    reason: str = ""


def _nlp():
    from .surfaces.pronouns import nlp

    return nlp()


def sentence_kind(sent) -> str:
    """'question' | 'reaction' | 'personal' | 'fact' for one spaCy sentence."""
    text = sent.text.strip()
    alpha = [t for t in sent if t.is_alpha]
    has_ent = any(e.label_ in _FACT_ENTS for e in sent.ents) or any(t.pos_ == "NUM" for t in sent)
    low = text.lower()
    if text.endswith("?") and not (low.startswith(("did you know", "do you know")) and has_ent):
        return "question"
    if not has_ent and len(alpha) < 6:
        return "reaction"
    reported = any(t.lemma_.lower() in _REPORTING and any(c.dep_ == "ccomp" and c.i > t.i for c in t.children)
                   and not any(c.dep_ == "neg" for c in t.children) for t in sent)
    subj = {t.lower_ for t in sent if t.dep_ in ("nsubj", "nsubjpass")}
    opinion = any(t.lemma_.lower() in _OPINION or t.lower_ in _OPINION for t in sent)
    if not reported and not has_ent and subj & _FIRST_SECOND and opinion:
        return "personal"
    return "fact"


def check_worthiness(turn: str) -> Worthiness:
    doc = _nlp()(turn)
    if any(sentence_kind(s) == "fact" for s in doc.sents):
        return Worthiness(True)
    return Worthiness(False, REASON)


# ---- a small learned alternative, compared by cross-validation (`dialcheck tune checkworthy`) ----
FEATURES = ("frac_question", "frac_reaction", "frac_personal", "frac_fact", "ents", "propn", "num", "first_second",
            "opinion", "log_tokens", "sentences")


def features(turn: str) -> np.ndarray:
    doc = _nlp()(turn)
    sents = list(doc.sents) or [doc[:]]
    kinds = [sentence_kind(s) for s in sents]
    toks = [t for t in doc if t.is_alpha]
    return np.array([kinds.count("question") / len(kinds), kinds.count("reaction") / len(kinds),
                     kinds.count("personal") / len(kinds), kinds.count("fact") / len(kinds),
                     sum(e.label_ in _FACT_ENTS for e in doc.ents), sum(t.pos_ == "PROPN" for t in doc),
                     sum(t.pos_ == "NUM" for t in doc), sum(t.lower_ in _FIRST_SECOND for t in toks) / max(len(toks), 1),
                     sum(t.lemma_.lower() in _OPINION for t in toks), np.log1p(len(toks)), len(sents)], dtype=float)
