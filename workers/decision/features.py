"""Claim-level features from window-level NLI probabilities (+ retrieval, claim text, gate).

The decision layer sees the same features in tuning, tests and the pipeline, so they are computed
in one place from a `ClaimEvidence`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from schemas.protocols import CONTRADICTION as C, ENTAILMENT as E, NEUTRAL as N

from ..text import TERM
FIRST_PERSON = frozenset("i i'm im i've ive i'd i'll me my mine myself we we're us our ours".split())
# Opinion / personal-experience markers (DialFact 'personal' responses: "I love ...", "that's cool").
OPINION = frozenset("""love loved like liked enjoy enjoyed favorite favourite favourites hate think believe guess feel
wish hope want cool awesome great nice fun interesting amazing wow yeah yes agree prefer fan beautiful""".split())

FEATURES = (
    "max_e", "max_n", "max_c", "mean3_e", "mean3_n", "mean3_c", "top_e", "top_n", "top_c",
    "margin_ec", "gap_e", "gap_c", "max_prescore", "mean_prescore", "log_windows",
    "frac_argmax_e", "frac_argmax_c", "passages_support", "passages_refute", "rank_best_e", "rank_best_c",
    "retrieval_score_best", "log_claim_len", "first_person", "opinion", "question",
    "gate_applied", "gate_accepted",
)


@dataclass
class ClaimEvidence:
    """What the verifier saw for one claim: windows (best pre-score first) with their probabilities."""
    claim: str
    probs: np.ndarray  # (n, 3) calibrated entail/neutral/contradict per window
    prescores: np.ndarray  # (n,)
    passage_index: np.ndarray  # (n,) which passage (retrieval rank, 0 = best) each window came from
    passage_scores: list = field(default_factory=list)  # retrieval score per passage (None under FV)
    gate: bool | None = None  # None: no gate candidate; else accepted?
    window_texts: list = field(default_factory=list)  # (n,) the windows' text (sufficiency)
    titles: list = field(default_factory=list)  # per passage: its title ("" when unknown)
    topic: str = ""  # what the claim is about, pronouns resolved (the R4 surface); "" = the claim
    in_dialogue: bool = False  # the claim is a reply in a conversation (it came with context turns)
    aliases: list = field(default_factory=list)  # per passage: the other names its opening gives its subject (aliases.py)

    @property
    def n(self) -> int:
        return int(len(self.probs))

    @property
    def coverage(self) -> np.ndarray:
        """(n, 3): per window, the share of the claim's key terms it covers, whether it states a
        claim number differently, and whether it names the claim's subject
        (workers/decision/sufficiency.py); full coverage without texts."""
        if getattr(self, "_coverage", None) is None:
            from .sufficiency import coverage, subject_covered

            if len(self.window_texts) != self.n:
                self._coverage = np.tile([1.0, 0.0, 1.0], (self.n, 1))
            else:
                topic = self.topic or self.claim
                title = lambda i: self.titles[i] if 0 <= i < len(self.titles) else ""  # noqa: E731
                self._coverage = np.array([(*coverage(topic, w, title(int(i))), subject_covered(topic, w, title(int(i))))
                                           for w, i in zip(self.window_texts, self.passage_index)],
                                          dtype=float).reshape(self.n, 3)
        return self._coverage

    @property
    def on_topic(self) -> np.ndarray:
        """(n,) per window: coverage share (0 where the window does not name the claim's subject)."""
        cov = self.coverage
        return np.where(cov[:, 2] > 0, cov[:, 0], 0.0) if self.n else np.zeros(0)

    @classmethod
    def of(cls, claim: str, decisions: list, passage_scores: list, gate: bool | None,
           titles: list | None = None, topic: str = "", in_dialogue: bool = False,
           aliases: list | None = None) -> "ClaimEvidence":
        """From a claim's window decisions (workers/decision/rule.py `WindowDecision`)."""
        return cls(claim, np.array([d.probs for d in decisions]).reshape(len(decisions), 3),
                   np.array([d.window.prescore for d in decisions]),
                   np.array([d.window.passage_index for d in decisions], dtype=int), list(passage_scores), gate,
                   [d.window.text for d in decisions], list(titles or []), topic, in_dialogue, list(aliases or []))


def claim_words(text: str) -> list[str]:
    """The claim's words, lower-cased, read with the tokeniser the rest of the decision reads
    (workers/text.py `TERM`: letters in any script; numbers are not words)."""
    return [w.lower().replace("’", "'") for w in TERM.findall(text) if not w[0].isdigit()]


def features(ev: ClaimEvidence) -> np.ndarray:
    words = claim_words(ev.claim)
    text_f = [math.log1p(len(words)), float(any(w in FIRST_PERSON for w in words)),
              float(any(w in OPINION for w in words)), float(ev.claim.strip().endswith("?"))]
    gate_f = [float(ev.gate is not None), float(bool(ev.gate))]
    if ev.n == 0:
        return np.array([0.0, 1.0, 0.0] * 3 + [0.0] * 12 + [-1.0, -1.0, 0.0] + text_f + gate_f)[: len(FEATURES)]
    p, pre, pidx = np.asarray(ev.probs, float), np.asarray(ev.prescores, float), np.asarray(ev.passage_index)
    top3 = p[:3]
    ie, ic = int(p[:, E].argmax()), int(p[:, C].argmax())
    arg = p.argmax(1)
    n_pass = max(int(pidx.max()) + 1, 1)
    sup = {int(pidx[i]) for i in range(len(p)) if p[i, E] >= 0.5}
    ref = {int(pidx[i]) for i in range(len(p)) if p[i, C] >= 0.5}
    scores = [s for s in ev.passage_scores if s is not None]
    best_score = float(ev.passage_scores[int(pidx[ie])]) if scores and int(pidx[ie]) < len(ev.passage_scores) \
        and ev.passage_scores[int(pidx[ie])] is not None else 0.0
    row = [p[:, E].max(), p[:, N].max(), p[:, C].max(), *top3.mean(0)[[E, N, C]], *p[0][[E, N, C]],
           p[:, E].max() - p[:, C].max(), p[ie, E] - max(p[ie, N], p[ie, C]), p[ic, C] - max(p[ic, E], p[ic, N]),
           pre.max(), pre.mean(), math.log1p(len(p)), float((arg == E).mean()), float((arg == C).mean()),
           len(sup) / n_pass, len(ref) / n_pass, float(pidx[ie]), float(pidx[ic]), best_score,
           *text_f, *gate_f]
    return np.array(row, dtype=np.float64)


def feature_matrix(evs) -> np.ndarray:
    return np.vstack([features(e) for e in evs]) if evs else np.zeros((0, len(FEATURES)))
