"""R1 de-contraction: restore apostrophes only where unambiguous (im → I'm, dont → don't), then
expand contractions (it's → it is). Words that are also real words without an apostrophe
(its, wont, ill, id, well, were, shed, lets, hell) are never touched."""
from __future__ import annotations

import re

from .protect import protect, restore

_MISSING_APOSTROPHE = {
    "im": "I'm", "ive": "I've", "dont": "don't", "doesnt": "doesn't", "didnt": "didn't", "cant": "can't",
    "couldnt": "couldn't", "wouldnt": "wouldn't", "shouldnt": "shouldn't", "isnt": "isn't", "arent": "aren't",
    "wasnt": "wasn't", "werent": "weren't", "hasnt": "hasn't", "havent": "haven't", "hadnt": "hadn't",
    "thats": "that's", "whats": "what's", "theyre": "they're", "youre": "you're", "youve": "you've",
    "theyve": "they've", "weve": "we've", "youll": "you'll", "theyll": "they'll", "itll": "it'll",
    "didn": "didn't", "aint": "ain't", "shes": "she's", "hes": "he's", "theres": "there's",
}

_IRREGULAR = {"can't": "cannot", "won't": "will not", "shan't": "shall not", "ain't": "is not",
              "let's": "let us", "y'all": "you all"}
_S_HOSTS = {"it", "he", "she", "that", "what", "there", "here", "who", "where", "how", "when", "why", "this"}
_SUFFIX = {"n't": " not", "'re": " are", "'ve": " have", "'ll": " will", "'m": " am", "'d": " would"}

_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?")


def _match_case(src: str, dst: str) -> str:
    if src.isupper() and len(src) > 1 and dst.lower() not in ("i'm", "i've"):
        return dst.upper()
    if src[:1].isupper():
        return dst[:1].upper() + dst[1:]
    return dst


def restore_apostrophes(text: str) -> str:
    def fix(m: re.Match) -> str:
        w = m.group(0)
        rep = _MISSING_APOSTROPHE.get(w.lower())
        if rep is None:
            return w
        return rep if rep.startswith("I'") else _match_case(w, rep)

    return _WORD.sub(fix, text)


def expand_contractions(text: str) -> str:
    def expand(m: re.Match) -> str:
        w = m.group(0).replace("’", "'")
        low = w.lower()
        if low in _IRREGULAR:
            return _match_case(w, _IRREGULAR[low])
        if low.endswith("n't"):
            if re.match(r"\s+(i|you|we|they|he|she|it)\b", text[m.end():], re.I):
                return m.group(0)  # inverted question ("don't you think"): expansion would be ungrammatical
            return w[:-3] + " not"
        for suf, rep in _SUFFIX.items():
            if low.endswith(suf) and len(low) > len(suf):
                return w[: -len(suf)] + rep
        if low.endswith("'s") and low[:-2] in _S_HOSTS:
            nxt = text[m.end():m.end() + 6].lower()
            return w[:-2] + (" has" if nxt.startswith(" been") or nxt.startswith(" got") else " is")
        return m.group(0)

    return _WORD.sub(expand, text)


def decontract(text: str) -> str:
    """R1: protected spans untouched; apostrophes restored, then contractions expanded."""
    shielded, saved = protect(text)
    return restore(expand_contractions(restore_apostrophes(shielded)), saved)
