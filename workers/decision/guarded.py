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


def decide(ev, t_supports: float, t_refutes: float, on_topic: float) -> tuple[int, int | None]:
    """(label code S/R/NEI, index of the window shown first) for one claim."""
    if ev.n == 0:
        return NEI, None
    p = np.asarray(ev.probs)
    e, c = p[:, ENTAILMENT], p[:, CONTRADICTION]
    top = p.argmax(1)
    supporting = (e >= t_supports) & (top == ENTAILMENT)
    if supporting.any():
        return S, int(np.argmax(np.where(supporting, e, -1.0)))
    topical = ev.on_topic >= on_topic
    refuting = topical & (c >= t_refutes) & (top == CONTRADICTION)
    if refuting.any():
        return R, int(np.argmax(np.where(refuting, c, -1.0)))
    decided = np.maximum(e, c)  # shown: the on-topic window closest to deciding, else any
    return NEI, int(np.argmax(np.where(topical, decided, decided - 2.0)))
