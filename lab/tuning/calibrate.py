"""Certified display thresholds (`dialcheck calibrate`): the display policy's thresholds refitted on
labelled traffic with a finite-sample guarantee, in the style of Learn then Test (Angelopoulos et
al., 2021).

Why: the shipped thresholds are point estimates fitted on other data; how often a shown badge is
right depends on the traffic, which a deployment can label (feedback, an annotation export) but
the fit never saw. Certifying on those labels states what the operator can rely on.

The method, per badge label (SUPPORTS, REFUTES) with the policy's badge scorer kept as it is:
- the candidate thresholds on the badge score are a fixed sequence from strict to loose
  (`CANDIDATES`, chosen before any data is seen);
- at each, the badges it would show on the calibration data (the label, evidence the policy
  accepts, the completeness rule) give k wrong of n; the one-sided Clopper–Pearson upper bound on
  their error at `confidence` is `scipy.stats.beta.ppf(confidence, k + 1, n - k)`;
- fixed-sequence testing: the loosest threshold before the first one whose bound exceeds
  1 − target is kept. A threshold that would show fewer badges than could ever pass
  (`min_testable`: fewer than 15 at 0.85 / 0.9, even with none wrong) is not tested and does not
  stop the sequence: at the strict end a handful of right badges would otherwise end it at once;
- "high" the same way among the shown badges on strong evidence, from strict down to the
  certified show threshold, at `high_target`.
What it guarantees: with probability ≥ confidence over the draw of the calibration data, each
certified label's shown badges are right ≥ target on traffic drawn like it (per label; not
jointly). A label with no certified threshold is never shown. tests/test_calibrate.py measures the
guarantee on synthetic scores with a known precision curve."""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

import numpy as np
from scipy.stats import beta

from schemas import LABELS
from schemas.errors import DialcheckError
from workers.display import BADGES, BadgeFacts, DisplayPolicy

from .display_fit import BadgeRows

CANDIDATES = tuple(float(x) for x in np.round(np.arange(0.99, 0.295, -0.01), 2))  # strict → loose
NEVER = 1.01  # a threshold no score reaches: the badge is never shown (display_fit.GRID's last point)
METHOD = ("Learn then Test: fixed-sequence testing from strict to loose thresholds on the badge score, "
          "one-sided Clopper-Pearson upper bound on the error of the badges each would show")


class NotCertified(DialcheckError, ValueError):
    """Too few labelled badges to certify any threshold: the current display is kept."""


def error_bound(wrong: int, n: int, confidence: float) -> float:
    """One-sided Clopper–Pearson upper bound on the error rate from `wrong` of `n` (scipy's beta)."""
    if n <= 0 or wrong >= n:
        return 1.0
    return float(beta.ppf(confidence, wrong + 1, n - wrong))


def min_testable(target: float, confidence: float) -> int:
    """The fewest badges whose bound can stay within 1 − target (all of them right)."""
    return max(1, math.ceil(math.log(1.0 - confidence) / math.log(target) - 1e-12))


@dataclass
class Certificate:
    """One label's (or band's) certified threshold and what it was certified on."""
    threshold: float | None  # None: none certified
    n: int  # badges it shows on the calibration data
    wrong: int
    bound: float  # upper bound on their error (1.0 when none certified)
    tested: int  # candidates tested before the sequence stopped
    stopped: tuple | None = None  # the first test that failed: (threshold, n, wrong, bound)

    @property
    def precision(self) -> float | None:
        return (self.n - self.wrong) / self.n if self.n else None

    def to_dict(self, claims: int) -> dict:
        return {"threshold": self.threshold, "n": self.n, "wrong": self.wrong,
                "precision": None if self.precision is None else round(self.precision, 4),
                "bound": round(self.bound, 4), "precision_lower": round(1.0 - self.bound, 4),
                "coverage": round(100 * self.n / max(claims, 1), 2), "tested": self.tested}


def certify(scores, right, target: float, confidence: float, candidates=CANDIDATES) -> Certificate:
    """The loosest of `candidates` (strict → loose) that fixed-sequence testing certifies: shown
    badges (score ≥ threshold) right ≥ target with probability ≥ confidence."""
    scores, right = np.asarray(scores, float), np.asarray(right, bool)
    alpha, n_min = 1.0 - target, min_testable(target, confidence)
    best, tested = Certificate(None, 0, 0, 1.0, 0), 0
    for t in candidates:
        m = scores >= t
        n = int(m.sum())
        if n < n_min:  # cannot pass whatever its labels: not tested (module docstring)
            continue
        wrong = n - int(right[m].sum())
        b = error_bound(wrong, n, confidence)
        tested += 1
        if b > alpha:
            best.stopped = (float(t), n, wrong, b)
            break
        best = Certificate(float(t), n, wrong, b, tested)
    best.tested = tested
    return best


def point_estimate(scores, right, target: float, candidates=CANDIDATES, min_n: int = 1) -> float | None:
    """The loosest candidate whose shown badges' share right is ≥ target in-sample (no bound):
    what a point-estimate fit picks, the baseline the guarantee test compares against."""
    scores, right = np.asarray(scores, float), np.asarray(right, bool)
    best = None
    for t in candidates:
        m = scores >= t
        if m.sum() >= min_n and right[m].mean() >= target:
            best = float(t)
    return best


def eligible(rows: BadgeRows, policy: DisplayPolicy) -> np.ndarray:
    """Badges the policy could show at some threshold: a badge label on evidence it accepts (rows
    `scored` by the policy: an incomplete SUPPORTS rests on none)."""
    return (rows.label >= 0) & (rows.strong | (rows.weak if "weak" in policy.evidence else False))


def certify_policy(policy: DisplayPolicy, rows: BadgeRows, target: float = 0.85, confidence: float = 0.9,
                   high_target: float | None = None, data: dict | None = None,
                   candidates=CANDIDATES) -> tuple[DisplayPolicy, dict]:
    """`policy` with its show / high thresholds certified on `rows` (scored by the policy's own
    scorer), and the "certified" section. Raises NotCertified when no label can be certified."""
    high_target = high_target if high_target is not None else min(target + 0.05, 0.99)
    claims = len(rows.label)
    ok = eligible(rows, policy)
    show, high, labels = {}, {}, {}
    for k, label in enumerate(BADGES):
        m = ok & (rows.label == k)
        c = certify(rows.p[m], rows.right[m], target, confidence, candidates)
        show[label] = c.threshold if c.threshold is not None else NEVER
        entry = {**c.to_dict(claims), "badges": int(m.sum()),
                 **({"stopped": dict(zip(("threshold", "n", "wrong", "bound"), c.stopped))} if c.stopped else {})}
        hm = m & rows.strong & (rows.p >= show[label])
        hc = certify(rows.p[hm], rows.right[hm], high_target, confidence,
                     [t for t in candidates if t >= show[label]]) if c.threshold is not None else \
            Certificate(None, 0, 0, 1.0, 0)
        high[label] = hc.threshold if hc.threshold is not None else NEVER
        entry["high"] = hc.to_dict(claims)
        labels[label] = entry
    if all(show[label] == NEVER for label in BADGES):
        raise NotCertified(not_certified_line(rows, policy, labels, target, confidence, candidates))
    shown = shown_mask(rows, policy.evidence, show)
    certified = {"target": target, "high_target": high_target, "confidence": confidence, "method": METHOD,
                 "candidates": f"{candidates[0]} to {candidates[-1]} ({len(candidates)} points)",
                 "claims": claims, "n": int(shown.sum()),
                 "coverage": round(100 * float(shown.mean()) if claims else 0.0, 2),
                 "precision": round(float(rows.right[shown].mean()), 4) if shown.any() else None,
                 "labels": labels,
                 "not_certified": [lab for lab in BADGES if show[lab] == NEVER],
                 "data": data or {}, "base_thresholds": {"show": dict(policy.show), "high": dict(policy.high)},
                 "date": dt.date.today().isoformat(),
                 "guarantee": (f"with probability >= {confidence} over the calibration data, each certified label's "
                               f"shown badges are right >= {target} ('high' >= {high_target}) on traffic like it; a "
                               f"label not certified is never shown")}
    meta = {**policy.meta, "certified": {"target": target, "confidence": confidence, "n": certified["n"],
                                         "coverage": certified["coverage"]}}
    return DisplayPolicy(show, high, policy.evidence, meta, policy.scorer, policy.complete, policy.checked), certified


def highest_certifiable(rows: BadgeRows, policy: DisplayPolicy, target: float, confidence: float,
                         candidates=CANDIDATES) -> tuple[float, str, float] | None:
    """(target, label, threshold): the highest target below `target` (steps of 0.01, down to 0.50) at
    which some badge label certifies at `confidence`; None when none does."""
    ok = eligible(rows, policy)
    for t in np.round(np.arange(target - 0.01, 0.495, -0.01), 2):
        for k, label in enumerate(BADGES):
            m = ok & (rows.label == k)
            c = certify(rows.p[m], rows.right[m], float(t), confidence, candidates)
            if c.threshold is not None:
                return float(t), label, c.threshold
    return None


def not_certified_line(rows: BadgeRows, policy: DisplayPolicy, labels: dict, target: float, confidence: float,
                       candidates=CANDIDATES) -> str:
    """Why nothing certified, per label: too few badges (fewer than could ever pass), or the error
    bound at the first threshold tested (n shown, wrong, bound); and the highest target that would
    certify something on these labels."""
    need = min_testable(target, confidence)

    def why(lab: str, e: dict) -> str:
        st = e.get("stopped")
        if st is None:
            return (f"{lab}: too few badges ({e['badges']} labelled; even the loosest threshold shows fewer than "
                    f"the {need} that could pass with none wrong)")
        return (f"{lab}: the error bound stopped it at the first threshold tested (score >= {st['threshold']:.2f}: "
                f"n {st['n']}, {st['wrong']} wrong, bound {100 * st['bound']:.1f} % > {100 * (1 - target):.1f} %)")
    best = highest_certifiable(rows, policy, target, confidence, candidates)
    fallback = (f"the highest target it could certify is {best[0]:.2f} ({best[1]} from score {best[2]:.2f})"
                if best else "no target from 0.50 up certifies anything on these labels")
    return (f"nothing certified at target {target} and confidence {confidence}: "
            + "; ".join(why(lab, e) for lab, e in labels.items())
            + f"; {fallback}: the current display is kept")


def shown_mask(rows: BadgeRows, evidence: tuple[str, ...], show: dict) -> np.ndarray:
    ok = (rows.label >= 0) & (rows.strong | (rows.weak if "weak" in evidence else False))
    t = np.array([show[BADGES[k]] if k >= 0 else 9.0 for k in rows.label])
    return ok & (rows.p >= t)


def write_display(path: str | Path, policy: DisplayPolicy, certified: dict) -> None:
    """The display artifact as the runtime loads it (DisplayPolicy.from_dict ignores the rest) plus
    the "certified" section."""
    from schemas.atomic import write_text

    d = policy.to_dict()
    d["certified"] = certified
    write_text(path, json.dumps(d, indent=1) + "\n")  # a worker restarting meanwhile reads the old or the new


# --- labelled verdicts → rows the display sees -------------------------------------------------

def _facts(v: dict) -> BadgeFacts | None:
    """BadgeFacts from a verdict dict (published, or a run-file row that kept its rationale numbers)."""
    numbers = v.get("rationale_numbers")
    rationale = {"numbers": numbers} if numbers is not None else (v.get("rationale") if isinstance(v.get("rationale"), dict) else {})
    text = ((v.get("surface") or {}).get("text")) or v.get("claim") or ""
    return BadgeFacts.of_verdict(SimpleNamespace(rationale=rationale, uncovered=v.get("uncovered"),
                                                 mismatches=v.get("mismatches"), surface=SimpleNamespace(text=text)))


def rows_of_verdicts(policy: DisplayPolicy, verdicts: list[dict], right: list[bool]) -> BadgeRows:
    """Labelled verdict dicts → BadgeRows scored by `policy` (p is the badge score; a badge on a
    verdict that was not ok, or an incomplete SUPPORTS, rests on no evidence the display accepts)."""
    label, score, strong, weak = [], [], [], []
    for v in verdicts:
        lab = v.get("label")
        st = v.get("status") or {}
        ev = st.get("evidence") or "none"
        facts = _facts(v)
        k = BADGES.index(lab) if lab in BADGES else -1
        label.append(k)
        score.append(policy.score(lab, v.get("probabilities") or {}, ev, facts) if k >= 0 else 0.0)
        usable = st.get("state") == "ok" and not (policy.complete and lab == "SUPPORTS"
                                                  and (facts is None or facts.uncovered > 0)) \
            and not (policy.checked and lab == "SUPPORTS" and (facts is None or not facts.agreed()))
        strong.append(usable and ev == "strong")
        weak.append(usable and ev == "weak")
    return BadgeRows(np.array(label, int), np.array(score, float), np.array(strong, bool), np.array(weak, bool),
                     np.array(right, bool))


BINARY_GOLD = {"supported": "SUPPORTS", "supports": "SUPPORTS", "fully_attributable": "SUPPORTS", "1": "SUPPORTS",
               "not_supported": "NOT SUPPORTS", "not_supports": "NOT SUPPORTS", "unsupported": "NOT SUPPORTS",
               "not_fully_attributable": "NOT SUPPORTS", "0": "NOT SUPPORTS", "refutes": "REFUTES",
               "not_enough_info": "NOT ENOUGH INFO"}


def gold_label(raw) -> str | None:
    """A `response_label` as dialcheck spells it: three-way (SUPPORTS, REFUTES, NOT ENOUGH INFO) or
    binary attribution (SUPPORTS / NOT SUPPORTS: "supported", "not supported", "fully attributable",
    1 / 0, ...); None for one it does not know (TRUE / FALSE are ambiguous: true to what?)."""
    if raw in (*LABELS, "NOT SUPPORTS"):
        return raw
    return BINARY_GOLD.get(str(raw).strip().lower().replace("-", "_").replace(" ", "_"))


def gold_right(gold: str, label: str) -> bool:
    """Is a badge right against a DialFact-format gold label? 'NOT SUPPORTS' (a binary set) makes
    any REFUTES right that is not SUPPORTS (datasets.badge_right)."""
    if label == "SUPPORTS":
        return gold == "SUPPORTS"
    return gold != "SUPPORTS" if gold == "NOT SUPPORTS" else gold == label


def _sha(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()[:12]


def _objects(path: Path):
    """One JSON object per non-blank line; a line that is not one is a ValueError naming file and line."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a UTF-8 text file") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ValueError(f"{path}:{n}: not JSON ({getattr(e, 'msg', e)})") from None
        if not isinstance(obj, dict):
            raise ValueError(f"{path}:{n}: not a JSON object")
        yield obj


def from_run(policy: DisplayPolicy, run: str | Path, labels: str | Path, surface: str | None = None
             ) -> tuple[BadgeRows, dict]:
    """A `dialcheck eval --output` run file joined to a DialFact-format label file (`id`,
    `response_label`) on the record id. ValueError (a user mistake, one line) on a bad join."""
    run, labels = Path(run), Path(labels)
    rows = [r for r in _objects(run) if r.get("protocol") != "ir"]
    if not rows:
        raise ValueError(f"{run}: no verdict rows (make one with `dialcheck eval --output {run.name}`)")
    if not all(isinstance(r.get("surface_mode"), str) and "label" in r for r in rows):
        raise ValueError(f"{run}: not a run file of `dialcheck eval --output` (rows without surface_mode or label)")
    modes = sorted({r["surface_mode"] for r in rows})
    if surface is None:
        if len(modes) > 1:
            raise ValueError(f"{run} holds surfaces {','.join(modes)}: choose one with --surface")
        surface = modes[0]
    rows = [r for r in rows if r.get("surface_mode") == surface]
    if not rows:
        raise ValueError(f"{run}: no rows of surface {surface!r} (it holds {','.join(modes)})")
    if not any("rationale_numbers" in r for r in rows):
        raise ValueError(f"{run}: its rows lack the badge features (rationale_numbers): rerun `dialcheck eval --output`")
    gold = {}
    for r in _objects(labels):
        if "id" not in r or "response_label" not in r:
            raise ValueError(f"{labels}: every line needs `id` and `response_label` (DialFact format)")
        if gold_label(r["response_label"]) is None:
            raise ValueError(f"{labels}: id {r['id']}: response_label {r['response_label']!r} is neither three-way "
                             f"({', '.join(LABELS)}) nor binary (SUPPORTS / NOT SUPPORTS)")
        gold[str(r["id"])] = gold_label(r["response_label"])
    joined = [(r, gold[str(r.get("record_id"))]) for r in rows if str(r.get("record_id")) in gold]
    if not joined:
        raise ValueError(f"no run row's record_id is an id in {labels}")
    nli = {(r.get("model_versions") or {}).get("nli") for r, _ in joined} - {None}
    fitted = ((policy.meta.get("nli_model") or {}).get("version"))
    if fitted and nli and nli != {fitted}:
        raise ValueError(f"{run} was made with NLI model {', '.join(sorted(nli))}, but the display's scorer was "
                         f"fitted for {fitted!r}: rerun `dialcheck eval` with that model")
    badge_rows = rows_of_verdicts(policy, [r for r, _ in joined], [gold_right(g, r.get("label")) for r, g in joined])
    data = {"source": "run", "run": run.name, "run_sha1": _sha(run), "labels": labels.name, "labels_sha1": _sha(labels),
            "surface": surface, "protocol": joined[0][0].get("protocol"), "claims": len(joined),
            "unlabelled_rows": len(rows) - len(joined), "nli": sorted(nli)}
    return badge_rows, data


def _safe_url(url: str) -> str:
    """The store's address without a password (a certified section is not a place for secrets)."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(str(url))
    if parts.password is None:
        return str(url)
    host = parts.hostname + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def from_feedback(policy: DisplayPolicy, store) -> tuple[BadgeRows, dict]:
    """The feedback store's judged verdicts (streams/feedback_store.py `FeedbackStore.judged()`):
    'right' / 'wrong' judgements of a badge label; 'unsure' ones and judgements of another label
    than the verdict's are left out; the latest judgement of a claim wins."""
    judged = sorted(store.judged(), key=lambda j: float(j.received_at or 0.0))
    latest: dict = {}
    for j in judged:
        if j.judgement not in ("right", "wrong") or (j.label_shown and j.label_shown != j.verdict.get("label")):
            continue
        latest[(j.conversation_id, j.turn_id, j.claim_index)] = j
    kept = list(latest.values())
    rows = rows_of_verdicts(policy, [j.verdict for j in kept], [j.judgement == "right" for j in kept])
    sources: dict[str, int] = {}
    for j in kept:
        sources[j.source] = sources.get(j.source, 0) + 1
    times = [j.received_at for j in kept if j.received_at]
    # grounded verdicts (protocol fv) are certified with the rest: the certificate says the mix it rests on
    protocols = Counter(str((j.verdict.get("model_versions") or {}).get("protocol") or "unknown") for j in kept)
    data = {"source": "feedback", "store": _safe_url(getattr(store, "url", "") or ""), "judgements": len(judged),
            "claims": len(kept), "by_source": sources, "protocols": dict(sorted(protocols.items())),
            "from": min(times) if times else None, "to": max(times) if times else None,
            "note": "judged verdicts only: coverage is the share of judged verdicts shown"}
    return rows, data


# --- the yardstick: the shipped display certified on the chat-response sets ----------------------

def split_halves(groups: list[str], seed: int = 38) -> tuple[np.ndarray, np.ndarray]:
    """Two halves of a set's claims by conversation (a group never on both sides), fixed by `seed`."""
    side = np.array([int(hashlib.sha1(f"{seed}:{g}".encode()).hexdigest(), 16) % 2 for g in groups], dtype=bool)
    return np.flatnonzero(~side), np.flatnonzero(side)


def _take(rows: BadgeRows, idx) -> BadgeRows:
    idx = np.asarray(idx, int)
    return BadgeRows(rows.label[idx], rows.p[idx], rows.strong[idx], rows.weak[idx], rows.right[idx])


def _concat(parts: list[BadgeRows]) -> BadgeRows:
    return BadgeRows(*(np.concatenate([getattr(r, f) for r in parts]) for f in ("label", "p", "strong", "weak", "right")))


def shown_stats(rows: BadgeRows, policy: DisplayPolicy, confidence: float) -> dict:
    """Shown badges of `rows` (scored by the policy's scorer) under the policy: n, coverage %,
    precision % and its one-sided Clopper–Pearson lower bound at `confidence`, per label and "high"."""
    m = shown_mask(rows, policy.evidence, policy.show)
    high = m & rows.strong & np.array([rows.p[i] >= policy.high[BADGES[k]] if k >= 0 else False
                                       for i, k in enumerate(rows.label)], dtype=bool)

    def stat(mask) -> dict:
        n, good = int(mask.sum()), int(rows.right[mask].sum())
        return {"n": n, "precision": round(100 * good / n, 1) if n else None,
                "lower": round(100 * (1 - error_bound(n - good, n, confidence)), 1) if n else None}
    return {"claims": len(rows.label), "coverage": round(100 * float(m.mean()), 1) if len(m) else 0.0, **stat(m),
            "high": stat(high), **{lab: stat(m & (rows.label == k)) for k, lab in enumerate(BADGES)}}


def curve(rows: BadgeRows, policy: DisplayPolicy, points: int = 60) -> dict:
    """Risk–coverage: the badges the policy could show ranked by badge score, shown precision of
    the top share against coverage (share of all claims), at up to `points` evenly spaced ranks."""
    ok = eligible(rows, policy)
    order = np.argsort(-rows.p[ok], kind="stable")
    right = rows.right[ok][order]
    if not len(right):
        return {"coverage": [], "precision": []}
    ks = np.unique(np.linspace(1, len(right), min(points, len(right))).astype(int))
    cum = np.cumsum(right)
    return {"coverage": [round(100 * k / len(rows.label), 2) for k in ks],
            "precision": [round(100 * cum[k - 1] / k, 2) for k in ks]}


def yardstick_report(limit_per_set: int | None = 500, target: float = 0.85, confidence: float = 0.9,
                     high_target: float | None = None, seed: int = 38, display: str | None = None) -> dict:
    """`dialcheck calibrate --yardstick`: on the cached FV evidence of every yardstick set,
    - shipped: the shipped decision and display, certified on the chat-response sets' fit halves
      (conversations apart) and scored on their report halves; and certified with each chat set left
      out in turn, scored on it (the coverage it costs beside the shipped thresholds);
    - split_half: per chat set, certified on one half of its conversations, scored on the other;
    - lodo: each set left out of the decision, the badge scorer and the certification (on the other
      chat-response sets), scored on it, beside the uncertified fit (`fit_badges`);
    - generic: BEGIN's Generic replies, how many get a badge;
    - curves: risk–coverage per set under the shipped decision and scorer (in-sample for the sets
      the scorer was fitted on), the shipped thresholds' point and the point of those certified on
      the chat-response sets without that set."""
    from schemas.settings import load_settings
    from workers.decision import load_decision
    from workers.display import load_display

    from .datasets import CHAT_RESPONSE_SETS, FIT_SETS, SETS, badge_right, begin_generic, load_set, set_metrics
    from .display_fit import displays
    from .lodo import _display, _fit, set_evidence
    from .tune import Tuner, log

    settings = load_settings()
    policy = DisplayPolicy.load(display) if display else load_display(settings.decision)  # before any set is read
    if policy is None or policy.scorer is None:
        raise ValueError("the settings name no fitted display with a badge scorer: pass --display PATH")
    tuner = Tuner(settings)
    sets = {n: load_set(n, tuner.settings.data.dir, limit_per_set) for n in SETS}
    evs = {n: set_evidence(tuner, s) for n, s in sets.items()}
    shipped = load_decision(settings.decision, "fv")
    variant = shipped.meta.get("variant", "guarded")
    kw = {"target": target, "confidence": confidence, "high_target": high_target}

    def rows_of(s, layer, es, pol) -> BadgeRows:
        ds = layer.decide_many(es)
        return BadgeRows.of(ds, [badge_right(s, g, d.label) for g, d in zip(s.labels, ds)], es).scored(pol.scorer, pol.complete, pol.checked)

    def certified_on(pol, parts: dict, what: str):
        try:
            return certify_policy(pol, _concat(list(parts.values())), data={"sets": {k: len(v.label) for k, v in parts.items()},
                                                                           "what": what}, **kw)
        except NotCertified as e:
            return None, {"not_certified": str(e)}

    report: dict = {"target": target, "confidence": confidence, "high_target": high_target or min(target + 0.05, 0.99),
                    "limit_per_set": limit_per_set, "seed": seed, "protocol": "fv", "surface": "r0",
                    "nli": tuner.nli.version, "decision": variant, "chat_sets": list(CHAT_RESPONSE_SETS),
                    "sets": {n: len(s) for n, s in sets.items()}}
    # 1. the shipped display, certified with conversations apart
    ship_rows = {n: rows_of(s, shipped, evs[n], policy) for n, s in sets.items()}
    chat = {n: ship_rows[n] for n in CHAT_RESPONSE_SETS}
    halves = {n: split_halves(sets[n].groups, seed) for n in CHAT_RESPONSE_SETS}
    cert_pol, cert = certified_on(policy, {n: _take(r, halves[n][0]) for n, r in chat.items()}, "fit halves")
    report["shipped"] = {
        "certified_on_fit_halves": {"display": _thresholds(cert_pol), "certified": cert,
                                    "report_halves": {n: {"certified": shown_stats(_take(r, halves[n][1]), cert_pol, confidence)
                                                          if cert_pol else None,
                                                          "shipped": shown_stats(_take(r, halves[n][1]), policy, confidence)}
                                                      for n, r in chat.items()}},
        "each_left_out": {}}
    for held in CHAT_RESPONSE_SETS:
        pol, c = certified_on(policy, {n: r for n, r in chat.items() if n != held}, f"chat sets but {held}")
        report["shipped"]["each_left_out"][held] = {
            "display": _thresholds(pol), "fit_n": c.get("n"), "fit_coverage": c.get("coverage"),
            "certified": shown_stats(chat[held], pol, confidence) if pol else None,
            "shipped": shown_stats(chat[held], policy, confidence)}
        log(f"shipped display certified without {held}: {report['shipped']['each_left_out'][held]}")
    # 2. split-half transfer on each chat set
    report["split_half"] = {}
    for n, r in chat.items():
        a, b = halves[n]
        out = {}
        for name, (fit, test) in {"a_to_b": (a, b), "b_to_a": (b, a)}.items():
            pol, c = certified_on(policy, {n: _take(r, fit)}, f"{n} half {name[0]}")
            out[name] = {"fit_claims": len(fit), "display": _thresholds(pol), "fit": {k: c.get(k) for k in ("n", "coverage", "precision")},
                         "test": shown_stats(_take(r, test), pol, confidence) if pol else None,
                         "shipped_on_test": shown_stats(_take(r, test), policy, confidence),
                         **({"not_certified": c["not_certified"]} if "not_certified" in c else {})}
        report["split_half"][n] = out
    # 3. leave-one-dataset-out with the certified display
    report["lodo"], report["curves"] = {}, {}
    for held, s in sets.items():
        train = [(sets[n], evs[n]) for n in FIT_SETS if n != held]
        layer = _fit(variant, train)
        fitted = _display(layer, train)  # the shipped fit (fit_badges) on the other sets
        train_chat = {n: rows_of(sets[n], layer, evs[n], fitted) for n in CHAT_RESPONSE_SETS if n != held}
        pol, c = certified_on(fitted, train_chat, f"chat sets but {held}")
        ds = layer.decide_many(evs[held])
        pred = [d.label for d in ds]
        m = set_metrics(s, pred, displays(fitted, ds, evs[held]))
        rows = rows_of(s, layer, evs[held], fitted)
        report["lodo"][held] = {"macro_f1": m["macro_f1"], "supports_precision": m["supports_precision"],
                                "supports_predicted": m["supports_predicted"], "refutes_precision": m["refutes_precision"],
                                "refutes_predicted": m["refutes_predicted"],
                                "certified_display": _thresholds(pol), "fit_n": c.get("n"),
                                "certified": shown_stats(rows, pol, confidence) if pol else None,
                                "uncertified": shown_stats(rows, fitted, confidence),
                                "uncertified_display": _thresholds(fitted)}
        log(f"lodo {held}: {report['lodo'][held]}")
    # 4. risk–coverage under the shipped decision and scorer: the shipped thresholds, and the ones
    # certified on the chat-response sets without this set
    cert_all, _ = certified_on(policy, chat, "all chat sets")
    for n, r in ship_rows.items():
        pol = cert_all
        if n in CHAT_RESPONSE_SETS:
            pol, _ = certified_on(policy, {k: v for k, v in chat.items() if k != n}, f"chat sets but {n}")
        point = lambda st: {k: st[k] for k in ("coverage", "precision", "n")}  # noqa: E731
        report["curves"][n] = {**curve(r, policy), "shipped": point(shown_stats(r, policy, confidence)),
                               "certified": point(shown_stats(r, pol, confidence)) if pol else None}
    report["certified_on_all_chat_sets"] = {"display": _thresholds(cert_all)}
    # 5. Generic replies: no badge
    gen = begin_generic(tuner.settings.data.dir)
    gen_evs = set_evidence(tuner, gen)
    gds = shipped.decide_many(gen_evs)
    shown = displays(policy, gds, gen_evs)
    shown_c = displays(cert_all, gds, gen_evs) if cert_all else []
    report["generic"] = {"replies": len(gen), "labels": {lab: sum(d.label == lab for d in gds) for lab in LABELS},
                         "badges_shown_shipped": sum(d.show for d in shown),
                         "badges_shown_certified": sum(d.show for d in shown_c) if cert_all else None,
                         "shown": [{"reply": it.claim, "label": d.label}
                                   for it, d, sh in zip(gen.items, gds, shown) if sh.show]}
    return report


def _thresholds(policy: DisplayPolicy | None) -> dict | None:
    if policy is None:
        return None
    return {"show": dict(policy.show), "high": dict(policy.high), "evidence": list(policy.evidence)}
