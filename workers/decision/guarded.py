"""The guarded rule: NOT ENOUGH INFO unless the evidence decides, and no REFUTES from evidence that
is off the claim's topic (../shared/docs/verifier-recipes.md §6.1–6.2).

- SUPPORTS if some window's entailment ≥ t_supports and is its most likely class (the most
  entailing such window decides);
- else REFUTES if some window is on topic (it names the claim's subject, pronouns resolved by R4,
  and covers ≥ on_topic of the claim's key terms: workers/decision/sufficiency.py)
  with contradiction ≥ t_refutes as its most likely class (the most contradicting such window);
- else NOT ENOUGH INFO.
With all three at 0 this is the argmax rule with SUPPORTS first; the fit can only add guards.
t_supports and t_refutes are fitted offline by a grid search (lab/tuning/fit.py `fit_guarded`);
on_topic is fixed (below)."""
from __future__ import annotations

import numpy as np

from schemas.protocols import CONTRADICTION, ENTAILMENT

S, R, NEI, NOT_S = 0, 1, 2, 3
GOLD_CODES = {"SUPPORTS": S, "REFUTES": R, "NOT ENOUGH INFO": NEI, "NOT SUPPORTS": NOT_S}
# The on-topic level is fixed, not fitted: the yardstick's sets come with gold evidence, which is
# on topic by construction, so they cannot show what the guard is for (retrieved passages about
# something else, the Disneyland-for-Eiffel case). Half the claim's key terms (names and numbers
# count twice) is the design value; the swap probe (`tune decision --lodo` report) measures it.
ON_TOPIC_DEFAULT = (0.5,)


# what a SUPPORTS window must state of the claim (see `covers`): every name and number, and this
# share of its content words (None: coverage not asked)
COVER_LEVELS = {"none": None, "names": 0.0, "half": 0.5, "most": 0.75, "all": 1.0}
# a reply asked coverage must state at least this many key terms to be covered at all: one that
# states fewer ("Seems so.", "Oh there it is", "I have an iguana") is too thin to check — every
# word of it may stand in the evidence while what it says (about the speaker, about nothing) does not
MIN_TERMS = 2
TOPIC = "topic"  # a level of its own: the supporting window must be on the claim's topic (as REFUTES's must)
SUBJECT = "subject"  # weaker: the supporting window (or its title) names the claim's grammatical subject


def window_text(ev, i: int) -> str:
    """Window i with its passage title: what coverage reads (a title names the subject)."""
    k = int(ev.passage_index[i])
    title = ev.titles[k] if 0 <= k < len(ev.titles) else ""
    text = ev.window_texts[i] if i < len(ev.window_texts) else ""
    return f"{title} {text}" if title else text


def missing_terms(ev, windows: tuple[int, ...]) -> tuple[list[str], bool]:
    """The claim's terms (pronouns resolved: the R4 topic) none of these windows state, and whether
    one of its numbers is stated differently there (sufficiency.uncovered)."""
    from .sufficiency import uncovered

    if len(ev.window_texts) != ev.n:  # no texts (a caller that gave probabilities only): nothing to check
        return [], False
    return uncovered(ev.topic or ev.claim, tuple(window_text(ev, i) for i in windows))


def too_thin(ev) -> bool:
    """Does the claim (pronouns resolved) state fewer than MIN_TERMS key terms?"""
    from .sufficiency import _claim_terms

    return len(_claim_terms(ev.topic or ev.claim)) < MIN_TERMS


def covers(ev, windows: tuple[int, ...], level: str) -> bool:
    """Does the claim hold nothing these windows do not state? Every name and number of the claim
    must be there, and at least COVER_LEVELS[level] of its content words ('all': every key term;
    'none': not asked); a claim of fewer than MIN_TERMS key terms is never covered (`too_thin`).
    'topic': one of the windows is on the claim's topic (it names its subject and covers
    ON_TOPIC_DEFAULT of its key terms), the test REFUTES evidence already has to pass; 'subject': one
    of them (or its passage title) names the claim's grammatical subject."""
    if level == TOPIC:
        return any(float(ev.on_topic[i]) >= ON_TOPIC_DEFAULT[0] for i in windows)
    if level == SUBJECT:
        return any(float(ev.coverage[i, 2]) > 0 for i in windows)
    share = COVER_LEVELS[level]
    if share is None:
        return True
    if too_thin(ev):
        return False
    missing = set(missing_terms(ev, windows)[0])
    if not missing:
        return True
    from .sufficiency import _claim_terms

    terms = _claim_terms(ev.topic or ev.claim)
    if any(k in ("anchor", "number") and w in missing for k, w, _ in terms):
        return False
    words = [w for k, w, _ in terms if k == "word"]
    return bool(words) and sum(w not in missing for w in words) / len(words) >= share and share < 1.0


# scope → the level asked of a claim without context (None: the same as of a reply)
COVER_SCOPES = {"all": None, "dialogue": "none", "dialogue+names": "names", "dialogue+topic": TOPIC,
                "dialogue+subject": SUBJECT}


def effective_cover(ev, cover: str, cover_scope: str = "all") -> str:
    """The coverage level asked of this claim: `cover`; for a claim that came without dialogue context
    under a dialogue scope, COVER_SCOPES' level for it ("dialogue": none, the claim is read as it stands;
    "dialogue+names" / "+topic" / "+subject": its names and numbers, an on-topic window, or a window
    naming its subject)."""
    standalone = COVER_SCOPES[cover_scope]
    if standalone is None or cover == "none" or getattr(ev, "in_dialogue", False):
        return cover
    return standalone


def decide(ev, t_supports: float, t_refutes: float, on_topic: float, cover: str = "none",
           slot_refutes: bool = False, cover_scope: str = "all") -> tuple[int, int | None, tuple[int, ...]]:
    """(label code S/R/NEI, index of the window shown first, the windows the label rests on) for one claim. With `cover`, a
    supporting window decides only if it (or it and one other supporting window, together) covers
    the claim (`covers`); otherwise the claim is at most NOT ENOUGH INFO — or, with `slot_refutes`,
    REFUTES when an on-topic supporting window states a different value in the claim's number slot.
    `cover_scope` "dialogue": the guard applies to replies in a conversation only (a chat reply is
    where an added detail hides; a claim written to be checked is read as it stands); "dialogue+names" /
    "dialogue+topic": a claim without context must still have its names and numbers stated / its
    supporting window on its topic (`effective_cover`)."""
    cover = effective_cover(ev, cover, cover_scope)
    slot_refutes = slot_refutes and cover != "none"
    if ev.n == 0:
        return NEI, None, ()
    p = np.asarray(ev.probs)
    e, c = p[:, ENTAILMENT], p[:, CONTRADICTION]
    top = p.argmax(1)
    supporting = (e >= t_supports) & (top == ENTAILMENT)
    topical = ev.on_topic >= on_topic
    if supporting.any():
        order = [int(i) for i in np.argsort(-np.where(supporting, e, -1.0)) if supporting[i]]
        for k, i in enumerate(order):
            if covers(ev, (i,), cover):
                return S, i, (i,)
        pair = next(((i, j) for a, i in enumerate(order) for j in order[a + 1:] if covers(ev, (i, j), cover)), None)
        if pair is not None:
            return S, pair[0], pair
        if slot_refutes:
            clash = next((i for i in order if topical[i] and missing_terms(ev, (i,))[1]), None)
            if clash is not None:
                return R, clash, (clash,)
        return NEI, order[0], (order[0],)
    refuting = topical & (c >= t_refutes) & (top == CONTRADICTION)
    if refuting.any():
        i = int(np.argmax(np.where(refuting, c, -1.0)))
        return R, i, (i,)
    decided = np.maximum(e, c)  # shown: the on-topic window closest to deciding, else any
    i = int(np.argmax(np.where(topical, decided, decided - 2.0)))
    return NEI, i, (i,)
