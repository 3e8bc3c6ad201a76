"""`dialcheck adapt`: fine-tune the shipped verifier on a deployment's judged replies, check that it
ranks the deployment's conversations better with confidence and that it keeps what the deployment
would lose, certify its display, and write a model directory that `DIALCHECK_NLI_MODEL_DIR=DIR`
alone serves — or refuse and say why.

The steps (docs/operations.md "Adapt to your traffic"):
1. the judged pairs deduplicated (a reply judged twice counts once, judged both ways not at all:
   lab/nli/judged.py `dedupe`) and cut into `folds` folds by conversation (`folds_by_group`);
2. cross-fitting: for each fold, fine-tune on the other folds (lab/nli/adapt.py), mix the tuned
   weights with the shipped ones at each of `weights` (WiSE-FT) and score the fold it never read
   (in torch, lab/nli/adapt.py TorchMixes: a fold model is exported once, at the mix chosen, for 5);
   the out-of-fold p(entailment) of every judged reply, pooled, is what the mix is chosen and the
   display certified on — every label is spent both on fitting and on measuring, none on both at once;
3. the ranking gate: out-of-fold ROC AUC of each mix against the shipped model's on the same pairs,
   a paired bootstrap over conversations; a mix qualifies when the lower end of its gain's interval
   (`auc_confidence`, Bonferroni over the mixes tried) is above 0;
4. the final model: fine-tuned on all the judged pairs, mixed at the best qualifying weight; the
   safety guards are run on it, from the best mix down, the first that holds is kept: the
   unrelated-evidence probe's REFUTES ≤ `unrelated_max`, the silent-evidence probe's REFUTES at most
   `silent_rise` above the shipped model's, a general-NLI anchor (SNLI test, never trained on) with
   false SUPPORTS and false REFUTES within `anchor_drop`, accuracy and contradiction recall within
   `anchor_caution`, the
   relation/role stress set (lab/probes/stress.py) with false SUPPORTS and accuracy within
   `stress_drop`, and the everyday probe (lab/probes/everyday.py) with at most `everyday_rise` more
   false facts supported. The yardstick's claim-verification and chat sets are reported, not
   guarded (`guard_yardstick` restores the old limit of `auc_drop` ROC AUC per set): a chat
   deployment's convention is not claim verification's (docs/operations.md says why, with numbers);
5. the display: each fold's mix through the real FV pipeline on its own fold, the badges pooled and
   certified with `dialcheck calibrate`'s test (lab/tuning/calibrate.py) at `target`, else at the
   highest target it attains down to `min_target`, with how many more judged replies the asked
   target would need if they look like these; the shipped model's display is certified on the
   same replies, and the adapted one must show at least as much at the same target.
A model is written when 3 and 4 hold; the certificate says what 5 found (no badge shown when
nothing certifies from `min_target` up). Otherwise only adapt.json is written and AdaptRefused says
why in one line.

Caveats, also in adapt.json: the certificate is the cross-fitted procedure's (the fold models), the
final model is fitted on all the labels and so on a third more than each fold model; the mix and the
badge score are chosen on the same out-of-fold scores (one of len(weights) × 2), so its confidence is
nominal by that much."""
from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable, Sequence

import numpy as np

from schemas.errors import DialcheckError

from .judged import JudgedPair, dedupe, folds_by_group, target_counts

WEIGHTS = (0.25, 0.5, 0.75, 1.0)  # share of the tuned weights (0 is the shipped model)
MIN_FIT = 20  # fewer fit pairs than this teach nothing measurable
FOLDS = 3  # cross-fitting folds: K − 1 fine-tunes on 2/3 of the labels, one on all (CPU budget)
BOOTSTRAP = 1000  # conversation resamples of the paired AUC gain
CACHE = Path("artifacts/adapt/pairs.sqlite")  # the shipped model's yardstick and probe probabilities


class AdaptRefused(DialcheckError):
    """Too few labels, or the gate failed: the message says why in one line; `report` is adapt.json's
    content (None when nothing was measured)."""

    def __init__(self, line: str, report: dict | None = None):
        super().__init__(line)
        self.report = report


@dataclass
class AdaptOptions:
    folds: int = FOLDS
    seed: int = 0
    seeds: int = 1  # training seeds per fold: more measure the noise (reported), the first is used
    target: float = 0.85
    confidence: float = 0.9
    min_target: float | None = None  # lowest target certified when `target` is not (default target − 0.1)
    auc_confidence: float = 0.95  # one-sided, for the ranking gate
    weights: tuple = WEIGHTS
    epochs: float = 3.0
    max_steps: int = 200
    lr: float = 3e-4  # lab/nli/adapt.py LR: for the top layers only
    train_layers: int = 2  # the top encoder layers fine-tuned (lab/nli/adapt.py TRAIN_LAYERS, Trunk)
    # general NLI pairs replayed beside the judged ones (lab/nli/adapt.py REPLAY_PAIRS: 384); off by default:
    # on FaithDial it lifts the mix the anchor guard lets through but costs shown badges (docs/operations.md)
    replay_pairs: int = 0
    replay_loss: str = "distill"  # or "gold" (lab/nli/adapt.py fine_tune)
    limit_per_set: int = 100  # the yardstick report's records per set (reported, not guarded)
    probe_pairs: int = 200
    anchor_pairs: int = 500
    # the SNLI anchor: its errors a badge would show (false SUPPORTS, false REFUTES) within anchor_drop of
    # the shipped model's; accuracy and contradiction recall (REFUTES, which binary labels cannot teach back)
    # within anchor_caution; entailment recall free: the certificate measures it on the deployment's own replies
    anchor_drop: float = 0.03
    anchor_caution: float = 0.10
    unrelated_max: float = 0.01
    silent_rise: float = 0.03
    stress_drop: float = 0.02
    everyday_rise: int = 1  # false everyday facts supported, beyond the shipped model's (of 20)
    guard_yardstick: bool = False
    auc_drop: float = 0.03  # with guard_yardstick: the old per-set limit
    data_dir: str = ""
    progress: bool = True
    forgetting: bool = True  # False: tests only (a model dir is then never written)

    @property
    def floor(self) -> float:
        return round(self.target - 0.1, 2) if self.min_target is None else self.min_target


def roc_auc(scores, labels) -> float | None:
    from sklearn.metrics import roc_auc_score

    labels = np.asarray(labels, bool)
    if labels.all() or not labels.any():
        return None
    return round(float(roc_auc_score(labels, scores)), 4)


def _known(pairs: Sequence[JudgedPair]) -> list[JudgedPair]:
    """Pairs whose target says whether the reply is supported (AUC is taken over these)."""
    return [p for p in pairs if p.supported is not None]


def check_enough(pairs: list[JudgedPair], folds: list[int], opts: AdaptOptions, groups: int) -> None:
    from lab.tuning.calibrate import min_testable

    need = min_testable(opts.target, opts.confidence)
    known = _known(pairs)
    pos = sum(p.supported for p in known)
    fit_least = min((sum(f != k for f in folds) for k in range(opts.folds)), default=0)
    if groups < opts.folds or fit_least < MIN_FIT or pos < need or pos == len(known):
        raise AdaptRefused(
            f"too few judged replies to adapt and certify: {len(pairs)} pairs in {groups} conversations "
            f"({pos} supported, {len(known) - pos} not); at least {opts.folds} conversations, {MIN_FIT} pairs to fit "
            f"beside each fold, {need} supported replies (target {opts.target}, confidence {opts.confidence}) and "
            "some not supported are needed: judge more replies")


def badge_right(pair: JudgedPair, label: str) -> bool | None:
    """Is this badge right by the pair's target? None when the target does not say (a REFUTES judged
    wrong says nothing about a SUPPORTS badge). A binary "not supported" does not count a REFUTES
    badge wrong (it cannot tell REFUTES from NOT ENOUGH INFO); a three-way NOT ENOUGH INFO does."""
    t = pair.target
    if label == "SUPPORTS":
        return {"entailment": True, "not_entailment": False, "contradiction": False}.get(t)
    if label == "REFUTES":
        if t == "not_entailment":
            return pair.gold != "NOT ENOUGH INFO"
        return {"contradiction": True, "entailment": False, "not_contradiction": False}.get(t)
    return None


# --- scoring ------------------------------------------------------------------------------------

class Scorer:
    """Pair probabilities of one model; the shipped model's go through a disk cache (the yardstick
    and the probes are the same pairs on every run)."""

    def __init__(self, model_dir: str | Path, cache: bool = False):
        from lab.tuning.data import model_fingerprint

        from .adapt import _nli

        self.dir = Path(model_dir)
        self.nli = _nli(self.dir)
        self.cache = None
        if cache:
            from lab.tuning.cache import PairCache

            self.cache = PairCache(CACHE, model_fingerprint(self.dir))

    def probs(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        if not len(premises):
            return np.zeros((0, 3))
        if self.cache is not None:
            return self.cache.predict(self.nli.predict, list(premises), list(hypotheses))
        return np.asarray(self.nli.predict(list(premises), list(hypotheses)), float)

    def auc(self, pairs: Sequence[JudgedPair]) -> float | None:
        known = _known(pairs)
        p = self.probs([x.premise for x in known], [x.hypothesis for x in known])[:, 0]
        return roc_auc(p, [x.supported for x in known])


def yardstick_pairs(data_dir: str, limit: int) -> dict[str, list[JudgedPair]]:
    """The leave-one-dataset-out yardstick sets (lab/tuning/datasets.py SETS), each capped at `limit`
    records (an even spread over the file), as judged pairs with their gold evidence."""
    from lab.tuning.datasets import SETS, load_set

    from .judged import from_eval_set

    return {name: from_eval_set(load_set(name, data_dir, limit)) for name in SETS}


def probe_pairs(data_dir: str, n: int) -> dict[str, list]:
    """The unrelated-evidence probe (FoolMeTwice claims with two sentences of an unrelated page) and
    the silent-evidence probe (held-out VitaminC pages; lab/nli/hard_pairs.py): neutral by construction."""
    from .hard_pairs import page_swap_probe_pairs, silent_probe_pairs

    out = {"unrelated": page_swap_probe_pairs(data_dir, n=n)}
    try:
        out["silent"] = silent_probe_pairs(data_dir, per_kind=max(1, n // 3))
    except (OSError, ValueError, KeyError):  # the VitaminC pages are not in every data dir
        out["silent"] = []
    return out


def anchor_pairs(data_dir: str, n: int, seed: int = 0) -> list:
    """The general-NLI anchor: `n` SNLI test pairs (three-way gold; never trained on), seeded."""
    import random

    from .data import snli_test

    try:
        rows = snli_test(data_dir)
    except OSError:
        return []
    return rows if n >= len(rows) else random.Random(seed).sample(rows, n)


def stress_pairs(data_dir: str) -> list | None:
    """The relation/role stress set (lab/probes/stress.py, the issue "A SUPPORTS badge must mean the
    fact": role swaps, passives, recombined relations, entities and numbers, with their entailed twins),
    pair by pair: premise = its evidence, hypothesis = its claim, label 0 entailment / 1 neutral / 2
    contradiction. None when this build has no such module."""
    try:
        from lab.probes.stress import load_pairs
    except ImportError:
        return None
    order = ("entailment", "neutral", "contradiction")
    try:
        return [SimpleNamespace(premise=r["evidence"], hypothesis=r["claim"], label=order.index(r["label"]))
                for r in load_pairs() if r.get("label") in order]
    except (OSError, ValueError, KeyError):
        return None


def everyday_claims() -> list | None:
    """The everyday probe (lab/probes/everyday.py: true and false twins of 20 common facts) with the
    windows the verifier read for each, frozen in everyday_windows.json, so the guard needs no index.
    None when this build has no such file."""
    try:
        from lab.probes.everyday import load_windows

        return [SimpleNamespace(claim=c["claim"], supported=c["label"] == "SUPPORTS", windows=c["windows"])
                for c in load_windows() if c["windows"]]
    except (ImportError, OSError, ValueError, KeyError):
        return None


def _everyday_counts(scorer, claims: list) -> dict:
    """A claim counts as SUPPORTS when any of its windows' argmax is entailment (the verifier's own
    reading, before the decision's checks): true claims kept, false ones supported."""
    c = {"true_supports": 0, "false_supports": 0}
    for x in claims:
        p = scorer.probs(x.windows, [x.claim] * len(x.windows))
        c["true_supports" if x.supported else "false_supports"] += bool((p.argmax(1) == 0).any())
    return c


class _Batched:
    """`scorer`'s probabilities of `pairs`, computed in one call and looked up by (premise, hypothesis)."""

    def __init__(self, scorer: "Scorer", pairs: list):
        keys = list(dict.fromkeys((p.premise, p.hypothesis) for p in pairs))
        pr = scorer.probs([k[0] for k in keys], [k[1] for k in keys])
        self.scorer, self.memo = scorer, dict(zip(keys, pr))

    def probs(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        if not len(premises):
            return np.zeros((0, 3))
        got = [self.memo.get(k) for k in zip(premises, hypotheses)]
        if any(g is None for g in got):
            return self.scorer.probs(premises, hypotheses)
        return np.stack(got)


def _threeway(scorer: "Scorer", pairs: list) -> dict:
    """Accuracy, false SUPPORTS (argmax entailment where the gold is not), false REFUTES (argmax
    contradiction where the gold is not) and each class's recall, of three-way pairs."""
    pr = scorer.probs([p.premise for p in pairs], [p.hypothesis for p in pairs])
    y = np.array([int(p.label) for p in pairs])
    pred = pr.argmax(1)

    def rate(mask, cls):
        return round(float((pred[mask] == cls).mean()), 4) if mask.any() else None

    return {"accuracy": round(float((pred == y).mean()), 4), "false_supports": rate(y != 0, 0),
            "false_refutes": rate(y != 2, 2), "recall": [rate(y == c, c) for c in range(3)]}


def guards(base: "Scorer", model: "Scorer", probes: dict, anchor: list, stress: list | None,
           opts: AdaptOptions, everyday: list | None = None) -> dict:
    """The safety guards of one candidate against the shipped model (module docstring, step 4):
    what a chat deployment would lose. Each model scores all the guards' pairs in one call (length-
    sorted chunks across the sets: less padding than set by set)."""
    every = [p for pairs in probes.values() for p in pairs] + list(anchor) + list(stress or []) + \
        [SimpleNamespace(premise=w, hypothesis=x.claim) for x in everyday or [] for w in x.windows]
    base, model = _Batched(base, every), _Batched(model, every)
    failures, probe = [], {}
    for kind, pairs in probes.items():
        if not pairs:
            probe[kind] = {"pairs": 0, "note": "not in this data dir"}
            continue
        prem, hyp = [p.premise for p in pairs], [p.hypothesis for p in pairs]
        rates = {}
        for who, s in (("shipped", base), ("adapted", model)):
            pr = s.probs(prem, hyp)
            rates[who] = {"refutes": round(float((pr.argmax(1) == 2).mean()), 4),
                          "supports": round(float((pr.argmax(1) == 0).mean()), 4)}
        probe[kind] = {"pairs": len(pairs), **rates}
    unrelated = probe.get("unrelated", {}).get("adapted", {}).get("refutes")
    if unrelated is not None and unrelated > opts.unrelated_max:
        failures.append(f"unrelated-evidence REFUTES {100 * unrelated:.1f} % > {100 * opts.unrelated_max:.0f} %")
    silent = probe.get("silent", {})
    if silent.get("pairs") and silent["adapted"]["refutes"] > silent["shipped"]["refutes"] + opts.silent_rise:
        failures.append(f"silent-evidence REFUTES {100 * silent['shipped']['refutes']:.1f} → "
                        f"{100 * silent['adapted']['refutes']:.1f} % (more than {100 * opts.silent_rise:.0f} points up)")
    out = {"probes": probe, "limits": {"unrelated_refutes_max": opts.unrelated_max, "silent_refutes_rise": opts.silent_rise,
                                       "anchor_error_rise": opts.anchor_drop,
                                       "anchor_accuracy_drop": opts.anchor_caution, "stress_drop": opts.stress_drop}}
    if anchor:
        b, a = _threeway(base, anchor), _threeway(model, anchor)
        out["anchor"] = {"set": "SNLI test (never trained on)", "pairs": len(anchor), "shipped": b, "adapted": a}
        for err, name in (("false_supports", "false SUPPORTS"), ("false_refutes", "false REFUTES")):
            if a[err] is not None and b[err] is not None and a[err] > b[err] + opts.anchor_drop:
                failures.append(f"general-NLI anchor (SNLI) {name} {100 * b[err]:.1f} → {100 * a[err]:.1f} %")
        if a["accuracy"] < b["accuracy"] - opts.anchor_caution:
            failures.append(f"general-NLI anchor (SNLI) accuracy {b['accuracy']:.3f} → {a['accuracy']:.3f}")
        if a["recall"][2] is not None and b["recall"][2] is not None and a["recall"][2] < b["recall"][2] - opts.anchor_caution:
            failures.append(f"general-NLI anchor (SNLI) contradictions read as such {100 * b['recall'][2]:.1f} → "
                            f"{100 * a['recall'][2]:.1f} %")
    else:
        out["anchor"] = {"pairs": 0, "note": "SNLI test not in this data dir"}
    if stress:
        b, a = _threeway(base, stress), _threeway(model, stress)
        out["stress"] = {"set": "relation/role stress set (lab/probes/stress.py)", "pairs": len(stress),
                         "shipped": b, "adapted": a}
        if a["false_supports"] is not None and b["false_supports"] is not None and \
                a["false_supports"] > b["false_supports"] + opts.stress_drop:
            failures.append(f"relation/role stress set false SUPPORTS {100 * b['false_supports']:.1f} → "
                            f"{100 * a['false_supports']:.1f} %")
        if a["accuracy"] < b["accuracy"] - opts.stress_drop:
            failures.append(f"relation/role stress set accuracy {b['accuracy']:.3f} → {a['accuracy']:.3f}")
    else:
        out["stress"] = {"pairs": 0, "note": "lab/probes/stress.py not in this tree: not guarded"}
    if everyday:
        b, a = _everyday_counts(base, everyday), _everyday_counts(model, everyday)
        out["everyday"] = {"set": "everyday probe (lab/probes/everyday.py)", "claims": len(everyday),
                           "false": sum(not x.supported for x in everyday), "shipped": b, "adapted": a}
        if a["false_supports"] > b["false_supports"] + opts.everyday_rise:
            failures.append(f"everyday probe: false facts supported {b['false_supports']} → {a['false_supports']} "
                            f"(more than {opts.everyday_rise} up)")
    else:
        out["everyday"] = {"claims": 0, "note": "lab/probes/everyday_windows.json not in this tree: not guarded"}
    out["limits"]["everyday_false_supports_rise"] = opts.everyday_rise
    return {**out, "passed": not failures, "failures": failures}


def yardstick(base: "Scorer", model: "Scorer", sets: dict, fit_sources: set[str], opts: AdaptOptions,
              progress: Callable[[str], None]) -> dict:
    """Every yardstick set's ROC AUC, shipped and adapted (reported; a limit only with guard_yardstick)."""
    rows, failures = {}, []
    for name, pairs in sets.items():
        b, a = base.auc(pairs), model.auc(pairs)
        own = name in fit_sources
        row = {"pairs": len(_known(pairs)), "auc_shipped": b, "auc_adapted": a,
               "delta": None if a is None or b is None else round(a - b, 4), "adapted_on": own}
        rows[name] = row
        if opts.guard_yardstick and row["delta"] is not None and row["delta"] < -opts.auc_drop and not own:
            failures.append(f"{name} ROC AUC {b:.3f} → {a:.3f}")
        progress(f"yardstick {name}: {b} → {a}")
    return {"sets": rows, "guarded": opts.guard_yardstick, "failures": failures}


def _auc(y: np.ndarray, s: np.ndarray) -> float:
    """ROC AUC by ranks (Mann–Whitney, ties averaged): sklearn's, without its per-call checks, for
    the bootstrap's thousands of resamples."""
    from scipy.stats import rankdata

    pos = int(y.sum())
    return float((rankdata(s)[y].sum() - pos * (pos + 1) / 2) / (pos * (len(y) - pos)))


def paired_bootstrap(y, base, mixes: dict, groups: Sequence[str], reps: int = BOOTSTRAP, seed: int = 0) -> dict:
    """The gain in ROC AUC of each mix over the shipped scores on the same pairs, resampling whole
    conversations (the pairs of one conversation are not independent): per mix the gain, and the
    gains of `reps` resamples (sorted), from which one-sided lower bounds are read."""
    y = np.asarray(y, bool)
    gid = {g: i for i, g in enumerate(dict.fromkeys(groups))}
    idx_of = [[] for _ in gid]
    for i, g in enumerate(groups):
        idx_of[gid[g]].append(i)
    idx_of = [np.array(v) for v in idx_of]
    rng = np.random.default_rng(seed)
    gains = {w: [] for w in mixes}
    for _ in range(reps):
        pick = np.concatenate([idx_of[j] for j in rng.integers(0, len(idx_of), len(idx_of))])
        yy = y[pick]
        if yy.all() or not yy.any():
            continue
        b = _auc(yy, base[pick])
        for w, p in mixes.items():
            gains[w].append(_auc(yy, p[pick]) - b)
    point = {w: _auc(y, p) - _auc(y, base) for w, p in mixes.items()}
    return {w: {"gain": round(point[w], 4), "resamples": np.sort(np.array(g))} for w, g in gains.items()}


# --- judged replies through the real pipeline ---------------------------------------------------

def _stamped(layer, version: str, model_dir: Path, fingerprint: str):
    meta = {**layer.meta, "nli_model": {"dir": str(model_dir), "fingerprint": fingerprint, "version": version}}
    try:
        return dataclasses.replace(layer, meta=meta)
    except TypeError:  # a decision method is not a dataclass: its meta is a plain attribute
        layer.meta = meta
        return layer


def pipeline_verdicts(model_dir: Path, pairs: list[JudgedPair]) -> dict:
    """The judged replies through the FV pipeline with `model_dir` and the shipped decision rule:
    decisions, evidence and whether each badge is right (`badge_right`); pooled across folds by `_pool`."""
    from schemas.items import CheckItem
    from schemas.settings import load_settings
    from workers.decision import load_decision
    from workers.stages import claim_evidence

    from lab.tuning.tune import Tuner

    settings = load_settings(models={"nli_model_dir": str(model_dir)})
    decision = load_decision(load_settings().decision, "fv")
    tuner = Tuner(settings, str(model_dir), cache_dir=CACHE.parent / "tune")
    items = [CheckItem(f"judged-{i}", f"judged-{i}#reply", [], p.hypothesis, [("", p.premise)]) for i, p in enumerate(pairs)]
    evs = [claim_evidence(s) for s in tuner.states(items, "fv", "r0")]
    ds = decision.decide_many(evs)
    return {"pairs": list(pairs), "evs": evs, "ds": ds, "rights": [badge_right(p, d.label) for p, d in zip(pairs, ds)],
            "decision": decision}


def _pool(parts: list[dict]) -> dict:
    return {k: [x for part in parts for x in part[k]] for k in ("pairs", "evs", "ds", "rights")} | \
        {"decision": parts[0]["decision"]}


def badge_summary(v: dict) -> dict:
    ds, rights = v["ds"], v["rights"]
    refutes = [i for i, d in enumerate(ds) if d.label == "REFUTES"]
    false_refutes = sum(rights[i] is False for i in refutes)
    return {"claims": len(ds), "refutes": len(refutes), "false_refutes": false_refutes,
            "false_refutes_rate": round(false_refutes / max(len(ds), 1), 4),
            "labels": {lab: sum(d.label == lab for d in ds) for lab in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")}}


def more_needed(rows, policy, target: float, confidence: float) -> int | None:
    """About how many more judged replies would certify `target`, if they look like these: the
    smallest growth of the sample (counts of shown and wrong badges scaled alike) at which the
    fixed-sequence test passes for some label; None when no threshold's badges are right ≥ target
    here (more of the same would not help)."""
    from scipy.stats import beta

    from lab.tuning.calibrate import CANDIDATES, eligible, min_testable
    from workers.display import BADGES

    ok = eligible(rows, policy)
    n_min, alpha, claims = min_testable(target, confidence), 1.0 - target, len(rows.label)

    def passes(f: float) -> bool:
        for k, _ in enumerate(BADGES):
            m = ok & (rows.label == k)
            sc, right = rows.p[m], rows.right[m]
            passed = False
            for t in CANDIDATES:
                shown = sc >= t
                n = float(shown.sum()) * f
                if n < n_min:
                    continue
                wrong = float((~right[shown]).sum()) * f
                if wrong >= n or beta.ppf(confidence, wrong + 1, n - wrong) > alpha:
                    break
                passed = True
            if passed:
                return True
        return False

    for f in np.round(np.arange(1.05, 20.01, 0.05), 2):
        if passes(float(f)):
            return int(np.ceil(claims * (f - 1)))
    return None


def certificate(policy, v: dict, opts: AdaptOptions, data: dict) -> dict:
    """`policy` certified on the verdicts `v`: at opts.target, else at the highest target it attains
    down to opts.floor (with how many more judged replies opts.target would need), else nothing shown."""
    from lab.tuning.calibrate import NEVER, NotCertified, _take, certify_policy, highest_certifiable
    from lab.tuning.display_fit import BadgeRows
    from workers.display import BADGES

    known = [i for i, r in enumerate(v["rights"]) if r is not None or v["ds"][i].label not in ("SUPPORTS", "REFUTES")]
    rows = BadgeRows.of(v["ds"], [bool(r) for r in v["rights"]], v["evs"])
    checked = getattr(policy, "checked", False)  # the checks rule, where this build's display has one
    rows = _take(rows.scored(policy.scorer, policy.complete, checked) if checked else
                 rows.scored(policy.scorer, policy.complete), known)
    out = {"asked": opts.target, "confidence": opts.confidence, "claims": len(v["ds"]), "badge_known": len(known)}
    try:
        p, c = certify_policy(policy, rows, opts.target, opts.confidence, data=data)
        return {**out, "target": opts.target, "policy": p, "certified": c, "coverage": c["coverage"],
                "precision": c["precision"], "n": c["n"]}
    except NotCertified as e:
        out["not_certified"] = str(e).replace(": the current display is kept", "")
    out["more_needed"] = more_needed(rows, policy, opts.target, opts.confidence)
    best = highest_certifiable(rows, policy, opts.target, opts.confidence)
    out["best_attainable"] = best[0] if best else None
    if best and best[0] >= opts.floor - 1e-9:
        p, c = certify_policy(policy, rows, best[0], opts.confidence, data=data)
        return {**out, "target": best[0], "policy": p, "certified": c, "coverage": c["coverage"],
                "precision": c["precision"], "n": c["n"]}
    hidden = dataclasses.replace(policy, show={b: NEVER for b in BADGES}, high={b: NEVER for b in BADGES},
                                 meta={**policy.meta, "certified": None})
    return {**out, "target": None, "policy": hidden, "coverage": 0.0, "precision": None, "n": 0,
            "certified": {"target": None, "asked": opts.target, "confidence": opts.confidence, "claims": len(known),
                          "n": 0, "coverage": 0.0, "precision": None, "data": data,
                          "guarantee": f"nothing certified from target {opts.floor} up: no badge is shown",
                          "not_certified": list(BADGES), "date": dt.date.today().isoformat()}}


def certificate_line(c: dict) -> str:
    """The certificate in one line (adapt.json `summary`, the card, the command's output)."""
    asked = c["asked"]
    more = c.get("more_needed")
    need = (f"; {asked} needs about {more} more judged replies like these" if more is not None else
            f"; {asked} is out of reach with replies like these" if "not_certified" in c else "")
    if c["target"] == asked:
        return f"shown badges right ≥ {asked} with probability {c['confidence']}, {c['coverage']} % of replies shown"
    if c["target"] is not None:
        return (f"certified at {c['target']} (best attainable; {asked} asked): {c['coverage']} % of replies shown" + need)
    return f"no badge shown: nothing certified from {round(asked - 0.1, 2) if c.get('floor') is None else c['floor']} up" + need


def choose_mix(candidates: Sequence, holds: Callable[[object], bool], certify: Callable[[object], dict]) -> tuple:
    """The mix to write, from the best-ranking down: the first that `holds` the guards and whose display
    `certify` finds certifying at least the shipped one's coverage (neither "less" nor "none"): the best-
    ranking mix need not give the best badges. When no mix that holds the guards certifies anything, the
    best-ranking of them, with no badge shown; else None (refused). Returns it and each certificate tried."""
    tries: dict = {}
    for w in candidates:
        if not holds(w):
            continue
        c = tries[w] = certify(w)
        if not c["less"] and not c["none"]:
            return w, tries
    if tries and all(c["none"] for c in tries.values()):
        return next(iter(tries)), tries
    return None, tries


# --- the whole run ------------------------------------------------------------------------------

def adapt(pairs: list[JudgedPair], data: dict, base_dir: str | Path, out_dir: str | Path, opts: AdaptOptions,
          log: Callable[[str], None] = print) -> dict:
    """Run `dialcheck adapt` (module docstring); returns the report written as DIR/adapt.json. Raises
    AdaptRefused (with the report, also written) when labels are too few or the gate fails."""
    from lab.tuning.data import model_fingerprint

    from .adapt import model_version

    t0 = time.time()
    base_dir, out = Path(base_dir), Path(out_dir)
    given = len(pairs)
    pairs, deduped = dedupe(pairs)
    folds = folds_by_group(pairs, opts.folds, opts.seed) if len({p.group for p in pairs}) >= 2 else [0] * len(pairs)
    groups = len({p.group for p in pairs})
    check_enough(pairs, folds, opts, groups)
    base_version = model_version(base_dir)
    report: dict = {
        "format": "dialcheck-adapt", "version": 2, "date": dt.date.today().isoformat(),
        "base_model": {"dir": str(base_dir), "version": base_version, "fingerprint": model_fingerprint(base_dir)},
        "data": {**data, "given": given, "deduplicated": deduped, "pairs": len(pairs), "conversations": groups,
                 "labels": target_counts(pairs)},
        "crossfit": {"folds": opts.folds, "seed": opts.seed, "by": "conversation",
                     "fold_sizes": [{"pairs": sum(f == k for f in folds),
                                     "conversations": len({p.group for p, f in zip(pairs, folds) if f == k})}
                                    for k in range(opts.folds)]},
        "options": {k: v for k, v in dataclasses.asdict(opts).items() if k not in ("progress", "data_dir")},
        "machine": f"{len(os.sched_getaffinity(0))} CPU cores visible, torch/ONNX Runtime on 2 threads, "
                   f"load average {os.getloadavg()[0]:.1f} at the start",
    }
    # a run that broke (killed, out of disk) leaves its trained models here and the next run with the
    # same labels, base and recipe picks them up; anything else starts afresh
    work = out / ".adapt-work"
    key = {"pairs_sha1": report["data"].get("pairs_sha1"), "base": report["base_model"]["fingerprint"],
           **{k: report["options"][k] for k in ("folds", "seed", "seeds", "epochs", "max_steps", "lr", "train_layers",
                                             "replay_pairs", "replay_loss")}}
    if not (work / "key.json").is_file() or json.loads((work / "key.json").read_text()) != key:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    (work / "key.json").write_text(json.dumps(key))
    try:
        report = _run(pairs, folds, report, base_dir, out, work, opts, log, t0)
    except AdaptRefused:
        shutil.rmtree(work, ignore_errors=True)
        raise
    shutil.rmtree(work, ignore_errors=True)
    return report


def _cpu() -> float:
    """CPU seconds of this process and its children so far (what a quiet machine's wall time follows)."""
    t = os.times()
    return round(t.user + t.system + t.children_user + t.children_system, 1)


def _fitted(d: Path, marker: str = "calibration.json") -> Path | None:
    """`d` when an earlier, broken run of the same recipe finished it (its last file is written)."""
    return d if (d / marker).is_file() else None


def _mix(base_dir: Path, tuned: Path, w: float, where: Path) -> Path:
    from .adapt import interpolate

    return tuned if float(w) == 1.0 else interpolate(base_dir, tuned, float(w), where)


def _run(pairs, folds, report, base_dir, out, work, opts, log, t0) -> dict:
    from lab.tuning.data import model_fingerprint

    from .adapt import TUNED, TorchMixes, base_checkpoint, encoder_depth, fine_tune, replay_pairs, trunk_for

    timings, folds, shared = {}, np.asarray(folds), {}

    def ckpt() -> Path:  # the base as a trainable checkpoint, built once, only when something is trained
        d = work / "base-checkpoint"
        if not _fitted(d, ".done"):
            base_checkpoint(base_dir, d)
            (d / ".done").touch()
        return d

    def trunk():  # the frozen layers' output per pair, once for every fold, mix and the final model
        if "trunk" not in shared:
            shared["trunk"] = trunk_for(ckpt(), base_dir, opts.train_layers)
        return shared["trunk"]
    base = Scorer(base_dir, cache=True)
    known = np.array([p.supported is not None for p in pairs])
    y = np.array([bool(p.supported) for p in pairs])
    p_base = base.probs([p.premise for p in pairs], [p.hypothesis for p in pairs])[:, 0]
    log(f"adapt: {len(pairs)} judged pairs in {report['data']['conversations']} conversations, {opts.folds} folds by "
        f"conversation; shipped ROC AUC {roc_auc(p_base[known], y[known])}")
    # general NLI pairs replayed beside the judged ones (lab/nli/adapt.py: the anchor guard's loss)
    t = time.time()
    replay, replay_from = replay_pairs(opts.data_dir, opts.replay_pairs, seed=opts.seed) \
        if opts.replay_pairs > 0 else ([], {})
    replay_note = {"sources": replay_from, "drawn_from": "the training split of lab/nli/data.py TRAIN_SOURCES "
                   "(never SNLI dev/test or another evaluation set)"} if replay else \
        {"note": "off (--replay-pairs 0)" if opts.replay_pairs <= 0 else
         f"no general NLI training source in {opts.data_dir or 'the data dir'}: adapted without replay"}
    report["replay"] = {"pairs": len(replay), **({"loss": opts.replay_loss} if replay else {}), **replay_note}
    timings["replay_load"] = round(time.time() - t, 1)
    log(f"adapt: replaying {len(replay)} general NLI pairs ({opts.replay_loss}) {replay_from}" if replay else
        f"adapt: no replay: {replay_note['note']}")
    tune_replay = {"replay": replay, "replay_loss": opts.replay_loss, "replay_note": replay_note}
    # 1. cross-fitting: each fold scored by models that never read it
    t = time.time()
    seeds = [opts.seed + k for k in range(max(1, opts.seeds))]
    oof = {s: {str(w): np.zeros(len(pairs)) for w in opts.weights} for s in seeds}
    fold_runs = []
    for k in range(opts.folds):
        fit = [p for p, f in zip(pairs, folds) if f != k]
        held_idx = np.flatnonzero(folds == k)
        held = [pairs[i] for i in held_idx]
        for s in seeds:
            tk = time.time()
            # a fold model is only scored (and exported once, at the mix chosen, for the display):
            # trained without an ONNX export, its mixes scored in torch (TorchMixes)
            tuned = _fitted(work / f"fold{k}-s{s}", TUNED) or fine_tune(
                base_dir, fit, seed=s, out_dir=work / f"fold{k}-s{s}", epochs=opts.epochs, max_steps=opts.max_steps,
                lr=opts.lr, progress=opts.progress, checkpoint=ckpt(), export=False,
                train_layers=opts.train_layers, trunk=trunk(), **tune_replay)
            train_s = round(time.time() - tk, 1)
            tk = time.time()
            mixes = TorchMixes(ckpt(), tuned, trunk=trunk())
            for w in opts.weights:
                oof[s][str(w)][held_idx] = mixes.probs(w, [p.premise for p in held], [p.hypothesis for p in held])[:, 0]
            del mixes
            score_s = round(time.time() - tk, 1)
            if s != seeds[0]:
                shutil.rmtree(tuned, ignore_errors=True)
            fold_runs.append({"fold": k, "seed": s, "fit_pairs": len(fit), "scored_pairs": len(held),
                              "train_seconds": train_s, "score_seconds": score_s})
            log(f"adapt: fold {k + 1}/{opts.folds} seed {s}: fitted on {len(fit)}, scored {len(held)} at "
                f"{len(opts.weights)} mixes ({train_s} s to train, {score_s} s to score)")
    timings["crossfit"] = round(time.time() - t, 1)
    steps = json.loads((work / f"fold0-s{seeds[0]}" / "calibration.json").read_text())["adapt"]["steps"]
    primary = oof[seeds[0]]
    auc_base = roc_auc(p_base[known], y[known])
    auc_mix = {w: roc_auc(p[known], y[known]) for w, p in primary.items()}
    groups = [p.group for p, k in zip(pairs, known) if k]
    boot = paired_bootstrap(y[known], p_base[known], {w: p[known] for w, p in primary.items()}, groups,
                            seed=opts.seed)
    alpha = (1.0 - opts.auc_confidence) / len(opts.weights)  # Bonferroni over the mixes tried
    gain = {w: {"auc": auc_mix[w], "gain": b["gain"],
                "lower": round(float(np.quantile(b["resamples"], alpha)), 4) if len(b["resamples"]) else None,
                "resamples": int(len(b["resamples"]))} for w, b in boot.items()}
    depth = encoder_depth(ckpt())
    frozen = max(0, depth - opts.train_layers)
    report["training"] = {"steps_per_fold": steps, "epochs": opts.epochs, "lr": opts.lr, "batch_size": 16,
                          "runs": fold_runs, "trained_layers": depth - frozen,
                          "frozen": "word, position and type embeddings" + (
                              f" and encoder layers 1–{frozen} of {depth}" if frozen else ""),
                          "loss": "binary cross-entropy on the judged class's calibrated probability, plus a KL "
                                  "term keeping the shipped model's split of the other two classes" + (
                                      f", plus {len(replay)} general NLI pairs replayed (" +
                                      ("KL holding the shipped model's three-way probabilities" if
                                       opts.replay_loss == "distill" else "three-way cross-entropy on their gold") +
                                      ")" if replay else "; no general NLI replay")}
    if len(seeds) > 1:
        spread = {w: [roc_auc(oof[s][w][known], y[known]) for s in seeds] for w in primary}
        report["training"]["seed_auc"] = spread
        report["training"]["seed_spread"] = {w: round(max(v) - min(v), 4) for w, v in spread.items()}
    report["crossfit"].update({
        "auc_shipped": auc_base, "auc_out_of_fold": auc_mix, "gain": gain,
        "gate": f"lower end of the one-sided {opts.auc_confidence} interval of the gain (paired bootstrap over "
                f"conversations, {BOOTSTRAP} resamples, Bonferroni over {len(opts.weights)} mixes: quantile "
                f"{alpha:.4f}) above 0"})
    log(f"adapt: out-of-fold ROC AUC by mix {auc_mix} (shipped {auc_base}); lower bounds of the gain "
        f"{ {w: g['lower'] for w, g in gain.items()} }")
    candidates = sorted((w for w, g in gain.items() if g["lower"] is not None and g["lower"] > 0),
                        key=lambda w: -auc_mix[w])
    report["holdout"] = {"shipped": {"auc": auc_base}}
    if not candidates:
        best = max(gain, key=lambda w: gain[w]["gain"])
        return _refuse(report, out, t0, timings,
                       f"the adapted model does not rank the deployment's held-out conversations better with confidence "
                       f"(out-of-fold ROC AUC {auc_base} shipped, {auc_mix[best]} at best, mix {best}; the gain's lower "
                       f"bound {gain[best]['lower']} is not above 0): judge more replies")
    # 2. the final model on every label, guarded from the best mix down
    t = time.time()
    final_tuned = _fitted(work / "final-tuned") or fine_tune(
        base_dir, pairs, seed=seeds[0], out_dir=work / "final-tuned", epochs=opts.epochs, max_steps=opts.max_steps,
        lr=opts.lr, progress=opts.progress, checkpoint=ckpt(), train_layers=opts.train_layers, trunk=trunk(),
        **tune_replay)
    shared.pop("trunk", None)  # its cache is not needed past the last fine-tune
    timings["final_fit"] = round(time.time() - t, 1)
    t = time.time()
    probes = probe_pairs(opts.data_dir, opts.probe_pairs) if opts.forgetting else {}
    anchor = anchor_pairs(opts.data_dir, opts.anchor_pairs) if opts.forgetting else []
    stress = stress_pairs(opts.data_dir) if opts.forgetting else None
    everyday = everyday_claims() if opts.forgetting else None
    report["guards"] = {"candidates": {}}
    from schemas.settings import load_settings
    from workers.display import load_display

    shipped_display = load_display(load_settings().decision)
    where = {"source": "adapt, out-of-fold", "claims": len(pairs), "folds": opts.folds}
    shipped_v: list = []
    mixed: dict = {}  # mix → its model dir, built once by the guards (the fine-tune itself at 1.0)

    def certified(w) -> dict:
        """Mix `w` as the model to write (version, export) and its display certified on the
        out-of-fold verdicts (each fold by that mix of the fold model that never read it), beside the
        shipped model's display certified on the same replies."""
        digest = hashlib.sha1(f"{report['data'].get('pairs_sha1', '')}:{opts.seed}:{opts.folds}:{w}:{steps}".encode()).hexdigest()
        version = f"{report['base_model']['version']}+adapt-{digest[:8]}"
        final = work / f"final-written-w{round(100 * float(w))}"
        if final.exists():  # left by a run killed after this step: rebuilt from the guards' mix, never reused
            shutil.rmtree(final)
        shutil.copytree(mixed[w], final)
        cal = json.loads((final / "calibration.json").read_text())
        cal["version"] = version
        cal.setdefault("adapt", {}).update({"weight": float(w), "pairs": len(pairs), "folds": opts.folds})
        (final / "calibration.json").write_text(json.dumps(cal, indent=1))
        fp = model_fingerprint(final)
        log(f"adapt: mix {w}: the judged replies through the FV pipeline, out of fold")
        if not shipped_v:
            shipped_v.append(pipeline_verdicts(Path(base_dir), pairs))
        parts = []
        for k in range(opts.folds):
            idx = np.flatnonzero(folds == k)
            dk = TorchMixes(ckpt(), work / f"fold{k}-s{seeds[0]}").export(w, work / f"fold{k}-pipeline-w{round(100 * float(w))}")
            parts.append(pipeline_verdicts(dk, [pairs[i] for i in idx]))
        adapted_v = _pool(parts)
        # the adapted model's own p(label) may rank its badges better than the shipped badge scorer (fitted
        # on the shipped model's numbers): both are certified, the one that shows more is kept
        tried = {"shipped badge scorer": certificate(_stamped(shipped_display, version, out, fp), adapted_v, opts, where),
                 "p(label) alone": certificate(_stamped(dataclasses.replace(shipped_display, scorer=None), version, out, fp),
                                               adapted_v, opts, where)}
        kind = max(tried, key=lambda k: (tried[k]["target"] or 0.0, tried[k]["coverage"], k == "shipped badge scorer"))
        after = tried[kind]
        at = dataclasses.replace(opts, target=after["target"]) if after["target"] else opts
        before = certificate(shipped_display, shipped_v[0], dataclasses.replace(at, min_target=at.target), where)
        return {"w": w, "version": version, "final": final, "fp": fp, "adapted_v": adapted_v, "tried": tried,
                "kind": kind, "after": after, "before": before, "none": after["target"] is None,
                "less": after["target"] is not None and before["coverage"] > after["coverage"]}

    # 2b. the mix written (choose_mix)
    spent = {"guards": time.time() - t, "display": 0.0}  # the guards' time counts loading their pairs

    def holds(w) -> bool:
        t = time.time()
        mixed[w] = _mix(base_dir, final_tuned, w, work / f"final-w{round(100 * float(w))}")
        g = guards(base, Scorer(mixed[w]), probes, anchor, stress, opts, everyday)
        report["guards"]["candidates"][w] = g
        spent["guards"] += time.time() - t
        log(f"adapt: mix {w} guards: unrelated REFUTES {g['probes'].get('unrelated', {}).get('adapted', {}).get('refutes')}, "
            f"silent REFUTES {g['probes'].get('silent', {}).get('adapted', {}).get('refutes')}, anchor accuracy "
            f"{g['anchor'].get('shipped', {}).get('accuracy')} → {g['anchor'].get('adapted', {}).get('accuracy')}, "
            f"stress {g['stress'].get('pairs', 0)} pairs, everyday false facts supported "
            f"{g['everyday'].get('shipped', {}).get('false_supports')} → {g['everyday'].get('adapted', {}).get('false_supports')}")
        if not g["passed"]:
            log(f"adapt: mix {w} fails a guard: {'; '.join(g['failures'])}")
        return g["passed"]

    def certify_logged(w) -> dict:
        t = time.time()
        c = certified(w)
        spent["display"] += time.time() - t
        if c["none"] or c["less"]:
            log(f"adapt: mix {w} certifies nothing from {opts.floor} up" if c["none"] else
                f"adapt: mix {w} certifies less than the shipped model at target {c['after']['target']} "
                f"({c['after']['coverage']} % vs {c['before']['coverage']} % of replies)")
        return c

    chosen, tries = choose_mix(candidates, holds, certify_logged)
    timings["guards"] = round(spent["guards"], 1)
    t = time.time()
    sets = yardstick_pairs(opts.data_dir, opts.limit_per_set) if opts.forgetting else {}
    keys = {(p.premise, p.hypothesis) for p in pairs}
    fit_sources = {name for name, ps in sets.items() if any((x.premise, x.hypothesis) in keys for x in ps)}
    shown_w = chosen if chosen is not None else (next(iter(tries)) if tries else candidates[-1])
    ys = yardstick(base, Scorer(mixed[shown_w]), sets, fit_sources, opts,
                   lambda m: log(f"adapt: mix {shown_w}: {m}"))
    report["yardstick"] = {"mix": float(shown_w), "limit_per_set": opts.limit_per_set,
                           "scored": "pair by pair: the set's gold evidence as the premise, the claim as the hypothesis",
                           **ys}
    timings["yardstick"] = round(time.time() - t, 1)
    timings["display"] = round(spent["display"], 1)
    if not tries:
        worst = report["guards"]["candidates"][candidates[-1]]["failures"]
        return _refuse(report, out, t0, timings, f"every mix that ranks the deployment's conversations better fails a "
                       f"safety guard (at mix {candidates[-1]}: {'; '.join(worst)})")
    c = tries[shown_w]
    w, after, before = shown_w, c["after"], c["before"]
    report["timings"] = timings
    report["cpu_seconds"] = _cpu()
    report["holdout"] = {
        "what": f"every judged reply scored by fold models that never read its conversation ({opts.folds} folds)",
        "shipped": _figures(auc_base, before, badge_summary(shipped_v[0])),
        "adapted": _figures(auc_mix[w], after, badge_summary(c["adapted_v"])),
        "display_scores": c["kind"], "display_candidates": {k: (v["target"], v["coverage"]) for k, v in c["tried"].items()},
        "mixes_certified": {m: {"target": x["after"]["target"], "coverage": x["after"]["coverage"],
                                "shipped_coverage": x["before"]["coverage"]} for m, x in tries.items()},
        "mix_chosen_on": f"these out-of-fold scores (one of {len(opts.weights)} mixes, one of 2 badge scores): the "
                         "certificate's confidence is nominal by that much; it certifies the cross-fitted fold models, "
                         "the model written is fitted on all the labels"}
    report["certificate"] = {k: v for k, v in after.items() if k not in ("policy", "certified")}
    report["certificate"]["floor"] = opts.floor
    report["certificate"]["line"] = certificate_line({**after, "floor": opts.floor})
    if chosen is None:
        said = [f"mix {m}: nothing certified from {opts.floor} up" if x["none"] else
                f"mix {m}: {x['after']['coverage']} % vs {x['before']['coverage']} % of replies at target {x['after']['target']}"
                for m, x in tries.items()]
        return _refuse(report, out, t0, timings, "no mix that holds the guards certifies as many badges as the shipped "
                       f"model does ({'; '.join(said)})")
    if ys["failures"]:
        return _refuse(report, out, t0, timings, f"mix {shown_w} forgets beyond the yardstick limit "
                       f"({'; '.join(ys['failures'])}; --guard-yardstick set)")
    report["chosen_weight"] = float(w)
    report["gate"] = {"passed": True}
    report["summary"] = (f"{c['version']}: ranks this deployment's held-out conversations at ROC AUC {auc_mix[w]} "
                         f"(shipped {auc_base}, gain ≥ {gain[w]['lower']} at {opts.auc_confidence}); "
                         f"{report['certificate']['line']}; mix {float(w)}, {len(pairs)} judged replies")
    report["seconds"] = round(time.time() - t0, 1)
    _write_model(out, c["final"], {**after, "decision": c["adapted_v"]["decision"]}, report, c["fp"], c["version"])
    return report


def _figures(auc, c: dict, badges: dict) -> dict:
    cert = c.get("certified") or {}
    sup = (cert.get("labels") or {}).get("SUPPORTS", {})
    return {"auc": auc, "certified_target": c["target"], "certified_coverage": c["coverage"],
            "certified_precision": c.get("precision"), "certified_shown": c.get("n", 0),
            "supports_threshold": sup.get("threshold"), **badges,
            **({"not_certified": c["not_certified"]} if c.get("not_certified") else {})}


def _refuse(report: dict, out: Path, t0: float, timings: dict, why: str):
    report["gate"] = {"passed": False, "why": why}
    report["timings"] = timings
    report["cpu_seconds"] = _cpu()
    report["seconds"] = round(time.time() - t0, 1)
    report["summary"] = f"no model written: {why}"
    for name in ("model.onnx", "calibration.json", "decision.json", "display.json", "MODEL_CARD.md", "DECISION_CARD.md"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "tokenizer", ignore_errors=True)
    (out / "adapt.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    raise AdaptRefused(f"adapt: no model written: {why} (report: {out / 'adapt.json'})", report)


def _write_model(out: Path, final: Path, after: dict, report: dict, fp: str, version: str) -> None:
    from lab.tuning.calibrate import write_display

    from .adapt_card import render_card, render_decision_card

    shutil.copy(final / "model.onnx", out / "model.onnx")
    shutil.rmtree(out / "tokenizer", ignore_errors=True)
    shutil.copytree(final / "tokenizer", out / "tokenizer")
    shutil.copy(final / "calibration.json", out / "calibration.json")
    decision = _stamped(after["decision"], version, out, fp)
    doc = decision.to_dict() if hasattr(decision, "to_dict") else None
    if doc is None:
        from schemas.settings import load_settings

        doc = json.loads(Path(load_settings().decision.decision_params).read_text())
        doc["meta"] = {**doc.get("meta", {}), "nli_model": decision.meta["nli_model"]}
    doc.setdefault("meta", {})["adapted"] = {"note": "the shipped decision rule and parameters, stamped for this model; "
                                             "its display is certified on the adaptation's out-of-fold verdicts",
                                             "version": version}
    (out / "decision.json").write_text(json.dumps(doc, indent=1) + "\n")
    write_display(out / "display.json", after["policy"], after["certified"])
    report["model"] = {"version": version, "fingerprint": fp, "files": ["model.onnx", "tokenizer/", "calibration.json",
                                                                          "decision.json", "display.json", "MODEL_CARD.md",
                                                                          "DECISION_CARD.md", "adapt.json"]}
    (out / "adapt.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "MODEL_CARD.md").write_text(render_card(report))
    (out / "DECISION_CARD.md").write_text(render_decision_card(report))
