"""R3 true-casing: a statistical truecaser (plus sentence starts and the pronoun I) decides the
case of each token's first letter; nothing else in the text may change."""
from __future__ import annotations

import re
from functools import lru_cache

from .protect import protect, restore

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’\-]*|\d+|[^\sA-Za-z\d]")


@lru_cache(maxsize=1)
def _truecaser():
    """The statistical truecaser, made deterministic: its casing alternatives are Python sets, so
    score ties were broken by hash order (different per process). Ordered lowercase-first, a tie
    now always keeps the lowercase form (the conservative choice)."""
    import truecase

    tc = truecase.get_truecaser()
    tc.word_casing_lookup = {k: sorted(v, key=lambda w: (w != w.lower(), w))
                             for k, v in tc.word_casing_lookup.items()}
    return tc


def truecase(text: str) -> str:
    """R3: only token-initial letters change; spelling, spacing and punctuation are kept."""
    shielded, saved = protect(text)
    return restore(_truecase_unprotected(shielded), saved)


def _truecase_unprotected(text: str) -> str:
    matches = list(_TOKEN.finditer(text))
    if not matches:
        return text
    tokens = [m.group(0) for m in matches]
    cased = _truecaser().get_true_case_from_tokens([t.lower() for t in tokens], "as-is")
    out = list(text)
    sentence_start = True
    for m, tok, tc in zip(matches, tokens, cased):
        first = tok[0]
        if first.isalpha():
            want = tc[0] if tc and tc[0].lower() == first.lower() else first
            if tok.lower() == "i" or sentence_start:
                want = first.upper()
            elif first.isupper() and want.islower() and (tok[1:2].isupper() or not tok[1:].islower()):
                want = first  # acronyms and mixed case (NASA, McDonald) keep their case
            elif first.isupper() and want.islower():
                want = first  # never lower-case what the writer capitalised
            out[m.start()] = want
            sentence_start = False
        elif tok in ".!?":
            sentence_start = True
        elif tok.isdigit():
            sentence_start = False
    return "".join(out)
