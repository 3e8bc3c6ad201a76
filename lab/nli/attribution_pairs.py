"""Attribution pairs: a verifier that knows "adds a detail".

On held-out chat data about half of the SUPPORTS verdicts are wrong: a reply that restates its evidence
and adds a name, a number or an opinion of its own is still entailed. The LLM-free halves of MiniCheck's
C2D/D2C recipes (docs/method.md §7), with labels right by construction:

- extension → neutral: a supported claim (premise = its evidence) extended by a clause the evidence does
  not state: another claim of the same page ("…, and she wrote …"), a predicate of another page's claim
  put on this subject ("…, and it has 40 floors"), or a personal / evaluative addition. The clause must
  carry a content term (name, number or content word) absent from the premise (`added_terms`);
- slot swap → contradiction: a name after a functional slot ("directed by X", "born in X") or a month,
  stated in that slot by the evidence, replaced by another of the same kind (a name seen after the same
  kind of slot on another page; another month);
- removal → neutral (source `hard_attr_removal`, filtered like the other silent pairs): a window of the claim's page (its evidence + 2–3 other sentences that are not
  revisions of it) with the supporting sentence dropped, kept only when some key term of the claim is then
  missing from the window; the full window → entailment is kept beside it as the contrast twin, so that
  "a longer premise" is not what the model learns to call neutral;
- a share of all of them in the existing chat wrappers (`hard_pairs.chat_wrap`).

Built from the VitaminC pages `hard_pairs` reads (training sources), probe pages excluded by the caller;
`attribution_probe_pairs` builds the same kinds from the held-out probe pages only, for measuring.
"""
from __future__ import annotations

import random
import re
from collections import defaultdict
from pathlib import Path
from typing import Sequence

from .data import NLIPair
from .hard_pairs import (_COMPARATIVE, _STOP, PageClaim, _by_page, _inline, _pronoun, _silent, _subject_words, chat_wrap,
                         clean_claim, clean_title, is_probe_page, jaccard, page_claims, tokens)
from .labels import CONTRADICTION, ENTAILMENT, NEUTRAL

# Words that carry no content of their own, beside hard_pairs' stop words.
_GENERIC = set("also which what when where there then than them these those into onto over very just "
               "about after before such some many much more most only other another being would could "
               "should will shall can may might one ones not no yes did does do done made make thing "
               "things really well".split())
_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")
# Functional slots: the verb before the preposition says what kind of name follows, and the slot holds
# one value (a film has its director, a person one birthplace), so another name there contradicts.
_PLACE_VERBS = set("born died located based headquartered situated founded buried held raised "
                   "established formed opened".split())
_AGENT_VERBS = set("directed written produced composed designed created developed published performed "
                   "sung recorded painted built authored illustrated owned founded released distributed "
                   "edited hosted narrated coached invented discovered manufactured".split())
_SLOTS = {"in": _PLACE_VERBS, "at": _PLACE_VERBS, "from": {"hails", "comes", "came"}, "by": _AGENT_VERBS}
# A changed month can leave a comparison true ("before March 2010", "fewer than 10 as of May"): such
# claims keep their month.
_TEMPORAL = _COMPARATIVE | set("early late circa prior as".split())
_WORD = re.compile(r"[A-Za-z0-9][\w'.-]*")
# Personal and evaluative additions (DialFact labels personal replies NEI; FaithDial calls them hallucination).
# Unlike the hedges and reactions of `hard_pairs` ("I think …", "that's interesting!"), which keep the
# label, each of these asserts something about the subject or the speaker that no evidence states.
_OPINIONS = ("and honestly that makes it the best of its kind", "and most critics consider it a masterpiece",
             "and I was there to see it in person", "and everybody in my family loves that",
             "and it is way more popular in Japan", "which I read about in a magazine last summer",
             "and I think that is the most impressive record of all", "and it won a lot of awards for that")


def _stem(t: str) -> str:
    return t[:5] if len(t) > 5 else t


def content_terms(text: str) -> set[str]:
    """Lower-cased content terms: numbers, names and content words (≥ 3 letters, not stop/generic words)."""
    out = set()
    for t in tokens(text):
        if t.isdigit() or (len(t) >= 3 and t not in _GENERIC and t not in _STOP):
            out.add(t)
    return out


def added_terms(clause: str, premise: str) -> set[str]:
    """The content terms of `clause` that `premise` does not contain (compared on 5-letter stems, so
    'floors' counts as present when the premise says 'floor')."""
    present = {_stem(t) for t in tokens(premise)}
    return {t for t in content_terms(clause) if _stem(t) not in present}


def _predicate(claim: str, title: str) -> str | None:
    """'Ada Lovelace wrote notes' with title 'Ada Lovelace' → 'wrote notes' (None unless the claim starts
    with its subject)."""
    c = clean_claim(claim).rstrip(" .!?")
    if c.startswith(title + " ") and not c.startswith(title + " 's") and not c.startswith(title + "'s"):
        pred = c[len(title) + 1:].strip()
        return pred if len(pred.split()) >= 2 else None
    return None


def _title(page: str) -> str:
    return re.sub(r"\s*\(.*?\)", "", clean_title(page))


def extension_pairs(records: Sequence[PageClaim], rng: random.Random, n: int, max_words: int = 40) -> list[NLIPair]:
    """A supported claim + a clause its evidence does not state → neutral (see the module docstring)."""
    sents, _ = _by_page(records)
    by_page: dict[str, list[PageClaim]] = defaultdict(list)
    for r in records:
        by_page[r.page].append(r)
    pron = {p: _pronoun(sents[p]) for p in by_page}
    # predicates of claims that start with their page's subject, grouped by the subject's pronoun
    preds: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for p in sorted(by_page):
        for r in by_page[p]:
            pred = _predicate(r.claim, _title(p))
            # a detail worth adding: a name or a number, not "is a village"
            if pred and pron[p] and len(pred.split()) >= 4 and re.search(r"\d|\s[A-Z]", pred):
                preds[pron[p]].append((p, pred))
    supported = sorted((r for r in records if r.label == ENTAILMENT), key=lambda r: (r.page, r.claim, r.evidence))
    rng.shuffle(supported)
    out, seen = [], set()
    for r in supported:
        if len(out) >= n:
            break
        premise, c = clean_claim(r.evidence), _inline(r.claim)
        p = pron[r.page]
        kind = rng.choice(("same_page", "same_page", "other_page", "opinion"))
        clause = None
        if kind == "same_page":
            others = [o for o in by_page[r.page] if o.claim != r.claim and
                      jaccard(tokens(o.evidence), tokens(r.evidence)) <= 0.3 and
                      jaccard(tokens(o.claim), tokens(r.evidence)) <= 0.3]
            if others:
                o = rng.choice(others)
                pred = _predicate(o.claim, _title(r.page))
                clause = f"and {p} {pred}" if pred and p else "and " + _inline(o.claim)
        elif kind == "other_page" and p:
            cands = [pr for pg, pr in preds[p] if pg != r.page]
            if cands:
                clause = f"and {p} {rng.choice(cands)}"
        elif kind == "opinion":
            clause = rng.choice(_OPINIONS)
        if not clause or not added_terms(clause, premise):
            continue
        hyp = f"{c}, {clause}."
        if len(hyp.split()) > max_words or (premise, hyp) in seen:
            continue
        seen.add((premise, hyp))
        out.append(NLIPair(premise, hyp, NEUTRAL, f"attr_extension_{kind}"))
    return out


def _spans(text: str) -> list[tuple[str, str, int, int]]:
    """(verb, preposition, name, start) for every capitalised name after a functional slot in `text`
    ('directed by Steven Spielberg' → ('directed', 'by', 'Steven Spielberg', …))."""
    words = [(m.group(0), m.start(), m.end()) for m in _WORD.finditer(text)]
    out = []
    for i in range(2, len(words)):
        verb, prep = words[i - 2][0].lower(), words[i - 1][0]
        if prep not in _SLOTS or verb not in _SLOTS[prep] or not words[i][0][0].isupper():
            continue
        j = i
        while j < len(words) and words[j][0][0].isupper() and not words[j][0].rstrip(".").isdigit():
            j += 1
        name = text[words[i][1]:words[j - 1][2]].rstrip(".'")
        if name and name not in _MONTHS and not any(ch.isdigit() for ch in name):
            out.append((verb, prep, name, words[i][1]))
    return out


def _slot_kind(prep: str) -> str:
    return "agent" if prep == "by" else "place"


def slot_swap_pairs(records: Sequence[PageClaim], rng: random.Random, n: int) -> list[NLIPair]:
    """A supported claim whose name (after a functional slot) or month, stated in that slot by its
    evidence, is replaced by another of the same kind → contradiction."""
    pool: dict[tuple[str, int], set[tuple[str, str]]] = defaultdict(set)  # (kind, words) → (page, name)
    for r in records:
        for text in (clean_claim(r.claim), clean_claim(r.evidence)):
            for _, prep, name, _ in _spans(text):
                pool[(_slot_kind(prep), len(name.split()))].add((r.page, name))
    pool_lists = {k: sorted(v) for k, v in pool.items()}
    supported = sorted((r for r in records if r.label == ENTAILMENT), key=lambda r: (r.page, r.claim, r.evidence))
    rng.shuffle(supported)
    out, n_months = [], 0
    for r in supported:
        if len(out) >= n:
            break
        claim, premise = clean_claim(r.claim), clean_claim(r.evidence)
        subject = _subject_words(clean_title(r.page))
        premise_tokens = tokens(premise)
        options = []
        for verb, prep, name, start in _spans(claim):
            if f"{prep} {name}" in premise and not tokens(name) & subject:
                options.append(("name", prep, name, start))
        if not options and n_months < n // 2 and not set(claim.lower().replace(",", " ").split()) & _TEMPORAL:
            for m in re.finditer(r"\b(" + "|".join(_MONTHS) + r")\b", claim):
                if re.search(r"\b" + m.group(1) + r"\b", premise):
                    options.append(("month", "", m.group(1), m.start()))
        if not options:
            continue
        kind, prep, name, start = rng.choice(options)
        if kind == "month":
            n_months += 1
            other = rng.choice([m for m in _MONTHS if m != name and not re.search(r"\b" + m + r"\b", premise)])
        else:
            cands = [nm for pg, nm in pool_lists.get((_slot_kind(prep), len(name.split())), ())
                     if pg != r.page and not tokens(nm) & (premise_tokens | subject | tokens(claim))]
            if not cands:
                continue
            other = rng.choice(cands)
        swapped = claim[:start] + other + claim[start + len(name):]
        out.append(NLIPair(premise, swapped, CONTRADICTION, f"attr_slot_swap_{kind}"))
    return out


def removal_pairs(records: Sequence[PageClaim], rng: random.Random, n: int, max_words: int = 70,
                  twins: bool = True) -> list[NLIPair]:
    """A window of the claim's page without the supporting sentence → neutral, kept only when a key term
    of the claim is missing from what is left; with `twins`, the same window with the sentence → entailment."""
    sents, own = _by_page(records)
    supported = sorted((r for r in records if r.label == ENTAILMENT), key=lambda r: (r.page, r.claim, r.evidence))
    rng.shuffle(supported)
    out, n_removed = [], 0
    for r in supported:
        if n_removed >= n:
            break
        ev = clean_claim(r.evidence)
        # every sentence of the page that is no revision of any evidence this claim was paired with
        others = [clean_claim(s) for s in sents[r.page] if s not in own[(r.page, r.claim)]
                  and _silent(r.claim, s, own[(r.page, r.claim)])]
        if len(others) < 2:
            continue
        rng.shuffle(others)
        window, words, size = [], len(ev.split()), rng.choice((2, 3))
        for s in others:
            if len(window) >= size or words + len(s.split()) > max_words:
                continue
            window.append(s)
            words += len(s.split())
        if len(window) < 2:
            continue
        rest = " ".join(window)
        if not content_terms(r.claim) - {t for t in tokens(rest)}:
            continue  # every key term of the claim is still in the window: not neutral by construction
        full = list(window)
        full.insert(rng.randint(0, len(full)), ev)
        # "hard_": filtered like the other silent pairs when a filter model is given (a window sentence
        # that really supports the claim), which the extensions are not (the model is wrong on those)
        out.append(NLIPair(rest, clean_claim(r.claim), NEUTRAL, "hard_attr_removal"))
        if twins:
            out.append(NLIPair(" ".join(full), clean_claim(r.claim), ENTAILMENT, "attr_window_support"))
        n_removed += 1
    return out


def attribution_pairs(records: Sequence[PageClaim], rng: random.Random, n_extensions: int = 0,
                      n_slot_swaps: int = 0, n_removals: int = 0, wrap_share: float = 0.3) -> list[NLIPair]:
    """All three kinds (each only when asked), `wrap_share` of them in a chat wrapper (label kept)."""
    pairs: list[NLIPair] = []
    if n_extensions:
        pairs += extension_pairs(records, rng, n_extensions)
    if n_slot_swaps:
        pairs += slot_swap_pairs(records, rng, n_slot_swaps)
    if n_removals:
        pairs += removal_pairs(records, rng, n_removals)
    return chat_wrap(pairs, rng, share=wrap_share)


def attribution_probe_pairs(root: str | Path, per_kind: int = 300, seed: int = 5) -> list[NLIPair]:
    """The same kinds from the held-out probe pages only (never trained on), for measuring a model:
    extensions and removals should not be entailment, slot swaps should be contradiction, the
    window twins should stay entailment."""
    recs = [r for r in page_claims(root) if is_probe_page(r.page)]
    rng = random.Random(seed)
    return attribution_pairs(recs, rng, per_kind, per_kind, per_kind)
