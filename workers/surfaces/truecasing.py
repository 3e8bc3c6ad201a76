"""R3 true-casing: a statistical truecaser (plus sentence starts and the pronoun I) decides the
case of each token's first letter; nothing else in the text may change.

Only confident capitals: the truecaser's English distribution counts every token,
sentence starts and headlines included, so a common noun it has seen capitalised a little more
often than not ("Pizza" 18 times, "pizza" 13) came out capitalised mid-sentence ("I love Pizza").
A word the truecaser also knows in lower case is now capitalised only when, in this context, its
own score for the capitalised form beats the lowercase form by at least `CONFIDENT_LOG_RATIO`
(e ≈ 2.7 times as likely: "Paris" 7.8, "China" 5.4, "United" 17.9 in "the united states", but
"pizza" 0.06-0.25, "army" 0.9, "video" 0.4), or when it continues a name the previous word started
(any margin above 0: "james brown"). A word the truecaser only knows capitalised ("Elvis",
"Tupelo", "English") stays capitalised. Why the truecaser's own distribution and not spaCy's
vocabulary: en_core_web_sm ships no word frequencies (every lexeme is out of vocabulary for
`is_oov`), and `is_stop` covers ~300 function words, none of them the nouns that went wrong.
"""
from __future__ import annotations

import re
import string
from functools import lru_cache

from .protect import protect, restore

_TOKEN = re.compile(r"[A-Za-z][A-Za-z'’\-]*|\d+|[^\sA-Za-z\d]")
# log(score(capitalised) / score(lowercase)) a word known in both cases needs to be capitalised
CONFIDENT_LOG_RATIO = 1.0


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


def cased_tokens(tokens: list[str]) -> list[str]:
    """The truecaser's choice per lowercase token (its `get_true_case_from_tokens` loop, scores and
    out-of-vocabulary "as-is"), except that a capitalised choice for a word it also knows in
    lower case must be confident (module docstring); otherwise the lowercase form is kept. No
    sentence-start capital here: the caller adds those."""
    tc = _truecaser()
    out: list[str] = []
    name = False  # the previous word was capitalised as a name
    for i, token in enumerate(tokens):
        if token in string.punctuation or token.isdigit():
            out.append(token)
            name = False
            continue
        alternatives = tc.word_casing_lookup.get(token)
        if not alternatives:
            out.append(token)  # out of vocabulary: as is
            name = False
            continue
        if len(alternatives) == 1:
            out.append(alternatives[0])
            name = alternatives[0][:1].isupper()
            continue
        prev = out[i - 1] if i > 0 else None
        nxt = tokens[i + 1] if i + 1 < len(tokens) else None
        scores = {alt: tc.get_score(prev, alt, nxt) for alt in alternatives}
        best = max(alternatives, key=lambda alt: scores[alt])  # first of equals: lowercase (sorted first)
        if best[:1].isupper() and token in scores:
            margin = scores[best] - scores[token]
            if (margin <= 0.0) if name else (margin < CONFIDENT_LOG_RATIO):
                best = token
        out.append(best)
        name = best[:1].isupper()
    return out


def _truecase_unprotected(text: str) -> str:
    matches = list(_TOKEN.finditer(text))
    if not matches:
        return text
    tokens = [m.group(0) for m in matches]
    cased = cased_tokens([t.lower() for t in tokens])
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
