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
4. the final model: fine-tuned on all the judged pairs, each qualifying mix exported by the folds'
   path (TorchMixes.export: the directory the guards score is the one written); the
   safety guards are run on it, from the best mix down, the first that holds is kept: the
   unrelated-evidence probe's REFUTES ≤ `unrelated_max`, the silent-evidence probe's REFUTES at most
   `silent_rise` above the shipped model's, a general-NLI anchor (SNLI test, never trained on) with
   false SUPPORTS and false REFUTES within `anchor_drop`, accuracy and contradiction recall within
   `anchor_caution`, the
   relation/role stress set (lab/probes/stress.py) with false SUPPORTS and accuracy within
   `stress_drop`, and the everyday probe (lab/probes/everyday.py) with at most `everyday_rise` more
   false facts supported. The yardstick's claim-verification and chat sets are reported, not
   guarded (`guard_yardstick` restores the old limit of `auc_drop` ROC AUC per set, as one more
   guard a mix yields on): a chat
   deployment's convention is not claim verification's (docs/operations.md says why, with numbers);
5. the display: each fold's mix through the real FV pipeline on its own fold, the badges pooled and
   certified with `dialcheck calibrate`'s test (lab/tuning/calibrate.py) at `target`, else at the
   highest target it attains down to `min_target`, with how many more judged replies the asked
   target would need if they look like these; the shipped model's display is certified on the
   same replies, and the adapted one must show at least as much at the same target.
A model is written when 3 and 4 hold; the certificate says what 5 found (no badge shown when
nothing certifies from `min_target` up). Otherwise only adapt.json is written and AdaptRefused says
why in one line (`refusal` lists every reason). `_run` is these steps in order over one `Run`.

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
from dataclasses import dataclass, field
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
    """ROC AUC rounded to 4 places (adapt.json's figures); None when the labels are all one class."""
    labels = np.asarray(labels, bool)
    if labels.all() or not labels.any():
        return None
    return round(_auc(labels, np.asarray(scores, float)), 4)


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
        from .adapt import predicted

        if self.cache is None or not len(premises):
            return predicted(self.nli, premises, hypotheses)
        return self.cache.predict(self.nli.predict, list(premises), list(hypotheses))


def pairs_auc(scorer, pairs: Sequence[JudgedPair]) -> float | None:
    """ROC AUC of `scorer`'s p(entailment) over the pairs whose target says whether the reply is supported."""
    known = _known(pairs)
    p = scorer.probs([x.premise for x in known], [x.hypothesis for x in known])[:, 0]
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
    """The relation/role stress set (lab/probes/stress.py, docs/stress.md; a SUPPORTS badge must mean the
    fact): role swaps, passives, recombined relations, entities and numbers, with their entailed twins),
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
        b, a = pairs_auc(base, pairs), pairs_auc(model, pairs)
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
    t0 = time.time()
    base_dir, out = Path(base_dir), Path(out_dir)
    given = len(pairs)
    pairs, deduped = dedupe(pairs)
    folds = folds_by_group(pairs, opts.folds, opts.seed) if len({p.group for p in pairs}) >= 2 else [0] * len(pairs)
    groups = len({p.group for p in pairs})
    check_enough(pairs, folds, opts, groups)
    report = _opening_report(pairs, folds, data, base_dir, opts, given, deduped, groups)
    work = _work_dir(out, report)
    try:
        report = _run(Run(pairs, np.asarray(folds), report, base_dir, out, work, opts, log, t0))
    except AdaptRefused:
        shutil.rmtree(work, ignore_errors=True)
        raise
    shutil.rmtree(work, ignore_errors=True)
    return report


def _opening_report(pairs: list[JudgedPair], folds: list[int], data: dict, base_dir: Path, opts: AdaptOptions,
                    given: int, deduped: int, groups: int) -> dict:
    """adapt.json as it starts: the base model, the labels, the folds, the options and the machine."""
    from lab.tuning.data import model_fingerprint
    from workers.models.onnx_nli import model_version

    return {
        "format": "dialcheck-adapt", "version": 2, "date": dt.date.today().isoformat(),
        "base_model": {"dir": str(base_dir), "version": model_version(base_dir),
                       "fingerprint": model_fingerprint(base_dir)},
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


def _work_dir(out: Path, report: dict) -> Path:
    """DIR/.adapt-work: a run that broke (killed, out of disk) leaves its trained models here and the next
    run with the same labels, base and recipe picks them up; anything else starts afresh."""
    work = out / ".adapt-work"
    key = {"pairs_sha1": report["data"].get("pairs_sha1"), "base": report["base_model"]["fingerprint"],
           **{k: report["options"][k] for k in ("folds", "seed", "seeds", "epochs", "max_steps", "lr", "train_layers",
                                             "replay_pairs", "replay_loss")}}
    if not (work / "key.json").is_file() or json.loads((work / "key.json").read_text()) != key:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    (work / "key.json").write_text(json.dumps(key))
    return work


def _cpu() -> float:
    """CPU seconds of this process and its children so far (what a quiet machine's wall time follows)."""
    t = os.times()
    return round(t.user + t.system + t.children_user + t.children_system, 1)


def _fitted(d: Path, marker: str = "calibration.json") -> Path | None:
    """`d` when an earlier, broken run of the same recipe finished it (its last file is written)."""
    return d if (d / marker).is_file() else None


def _pct(w) -> int:
    """A mix as the percentage its work directories are named by."""
    return round(100 * float(w))


@dataclass
class Forgetting:
    """What each mix is guarded on (empty when opts.forgetting is off: tests): the probes, the SNLI
    anchor, the stress set, the everyday claims, and the yardstick sets (guarded only with
    guard_yardstick; else reported for the mix chosen) with the sets the labels came from."""
    probes: dict = field(default_factory=dict)
    anchor: list = field(default_factory=list)
    stress: list | None = None
    everyday: list | None = None
    sets: dict | None = None
    fit_sources: set = field(default_factory=set)


def mix_guards(base: "Scorer", model: "Scorer", f: Forgetting, opts: AdaptOptions,
               progress: Callable[[str], None]) -> dict:
    """`guards`, and with guard_yardstick the yardstick's limit per set: a mix failing any of them
    yields to the next mix (choose_mix), none is checked after the mix is chosen."""
    g = guards(base, model, f.probes, f.anchor, f.stress, opts, f.everyday)
    if not opts.guard_yardstick:
        return g
    ys = yardstick(base, model, f.sets or {}, f.fit_sources, opts, progress)
    return {**g, "yardstick": ys, "failures": g["failures"] + ys["failures"],
            "passed": g["passed"] and not ys["failures"]}


@dataclass
class Run:
    """One run's inputs and what each stage found, read and filled in the module docstring's order
    (`_run`); `report` is adapt.json as it grows. `w`, a mix, is the str key of `oof` ("0.5")."""
    pairs: list[JudgedPair]
    folds: np.ndarray
    report: dict
    base_dir: Path
    out: Path
    work: Path
    opts: AdaptOptions
    log: Callable[[str], None]
    t0: float
    timings: dict = field(default_factory=dict)
    shared: dict = field(default_factory=dict)  # the trunk, built on first use, dropped after the last fine-tune
    tune_args: dict = field(default_factory=dict)  # the replay pairs every fine-tune reads
    base: "Scorer | None" = None
    known: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    y: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    p_base: np.ndarray = field(default_factory=lambda: np.zeros(0))
    oof: dict = field(default_factory=dict)  # seed → mix → out-of-fold p(entailment)
    steps: int = 0
    auc_base: float | None = None
    auc_mix: dict = field(default_factory=dict)
    gain: dict = field(default_factory=dict)
    candidates: list = field(default_factory=list)  # the mixes that pass the ranking gate, best first
    final: "object | None" = None  # the final fine-tune's TorchMixes: every mix written comes from it
    forgetting: Forgetting = field(default_factory=Forgetting)
    mixed: dict = field(default_factory=dict)  # mix → the model dir it would write, built once by the guards
    shipped_v: dict | None = None
    tries: dict | None = None  # mix → its certificate (None: the guards have not run)
    chosen: str | None = None
    shown: str | None = None  # the mix reported: the chosen one, else the first tried, else the last candidate
    spent: dict = field(default_factory=lambda: {"guards": 0.0, "display": 0.0})

    @property
    def seeds(self) -> list[int]:
        return [self.opts.seed + k for k in range(max(1, self.opts.seeds))]

    def checkpoint(self) -> Path:
        """The base as a trainable checkpoint, built once, only when something is trained."""
        from .adapt import base_checkpoint

        d = self.work / "base-checkpoint"
        if not _fitted(d, ".done"):
            base_checkpoint(self.base_dir, d)
            (d / ".done").touch()
        return d

    def trunk(self):
        """The frozen layers' output per pair, once for every fold, mix and the final model."""
        from .adapt import trunk_for

        if "trunk" not in self.shared:
            self.shared["trunk"] = trunk_for(self.checkpoint(), self.base_dir, self.opts.train_layers)
        return self.shared["trunk"]

    def tuned(self, name: str, pairs: list[JudgedPair], seed: int) -> Path:
        """work/`name`: `pairs` fine-tuned as torch weights (scored and mixed by TorchMixes), or the one
        a broken run of the same recipe left there."""
        from .adapt import TUNED, fine_tune

        o = self.opts
        return _fitted(self.work / name, TUNED) or fine_tune(
            self.base_dir, pairs, seed=seed, out_dir=self.work / name, epochs=o.epochs, max_steps=o.max_steps,
            lr=o.lr, progress=o.progress, checkpoint=self.checkpoint(), export=False, train_layers=o.train_layers,
            trunk=self.trunk(), **self.tune_args)

    def roc_known(self, p: np.ndarray) -> float | None:
        """ROC AUC of the scores `p` over the pairs whose target says whether the reply is supported."""
        return roc_auc(p[self.known], self.y[self.known])

    def version(self, w: str) -> str:
        """The written model's version at mix `w`: the base's, + a digest of the labels and the recipe."""
        digest = hashlib.sha1(f"{self.report['data'].get('pairs_sha1', '')}:{self.opts.seed}:{self.opts.folds}:"
                              f"{w}:{self.steps}".encode()).hexdigest()
        return f"{self.report['base_model']['version']}+adapt-{digest[:8]}"


def _run(run: Run) -> dict:
    """The module docstring's steps over one `Run`; `refusal` after the ranking gate and after the
    mix is chosen."""
    _score_shipped(run)
    _load_replay(run)
    _crossfit(run)
    _rank(run)
    if why := refusal(run):
        return _refuse(run, why)
    _fit_final(run)
    _load_forgetting(run)
    _choose(run)
    _report_yardstick(run)
    run.timings["display"] = round(run.spent["display"], 1)
    if run.tries:
        _report_display(run)
    if why := refusal(run):
        return _refuse(run, why)
    return _write(run)


def refusal(run: Run) -> str | None:
    """Why no model is written, or None: every refusal after the labels are counted (check_enough),
    in the order the stages meet them. The guards (the yardstick's limit among them) and the display
    each let the next mix through before anything is refused (choose_mix)."""
    if not run.candidates:
        best = max(run.gain, key=lambda w: run.gain[w]["gain"])
        return (f"the adapted model does not rank the deployment's held-out conversations better with confidence "
                f"(out-of-fold ROC AUC {run.auc_base} shipped, {run.auc_mix[best]} at best, mix {best}; the gain's "
                f"lower bound {run.gain[best]['lower']} is not above 0): judge more replies")
    if run.tries is None:  # the mixes are not tried yet
        return None
    if not run.tries:
        worst = run.report["guards"]["candidates"][run.candidates[-1]]["failures"]
        return (f"every mix that ranks the deployment's conversations better fails a safety guard (at mix "
                f"{run.candidates[-1]}: {'; '.join(worst)})")
    if run.chosen is None:
        floor = run.opts.floor
        said = [f"mix {m}: nothing certified from {floor} up" if x["none"] else
                f"mix {m}: {x['after']['coverage']} % vs {x['before']['coverage']} % of replies at target "
                f"{x['after']['target']}" for m, x in run.tries.items()]
        return ("no mix that holds the guards certifies as many badges as the shipped model does "
                f"({'; '.join(said)})")
    return None


# --- 1. cross-fitting ---------------------------------------------------------------------------

def _score_shipped(run: Run) -> None:
    """The shipped model's p(entailment) of every judged pair: what each mix's gain is measured against."""
    run.base = Scorer(run.base_dir, cache=True)
    run.known = np.array([p.supported is not None for p in run.pairs])
    run.y = np.array([bool(p.supported) for p in run.pairs])
    run.p_base = run.base.probs([p.premise for p in run.pairs], [p.hypothesis for p in run.pairs])[:, 0]
    run.log(f"adapt: {len(run.pairs)} judged pairs in {run.report['data']['conversations']} conversations, "
            f"{run.opts.folds} folds by conversation; shipped ROC AUC {run.roc_known(run.p_base)}")


def _load_replay(run: Run) -> None:
    """General NLI pairs replayed beside the judged ones (lab/nli/adapt.py: the anchor guard's loss)."""
    from .adapt import replay_pairs

    t, opts = time.time(), run.opts
    replay, replay_from = replay_pairs(opts.data_dir, opts.replay_pairs, seed=opts.seed) \
        if opts.replay_pairs > 0 else ([], {})
    replay_note = {"sources": replay_from, "drawn_from": "the training split of lab/nli/data.py TRAIN_SOURCES "
                   "(never SNLI dev/test or another evaluation set)"} if replay else \
        {"note": "off (--replay-pairs 0)" if opts.replay_pairs <= 0 else
         f"no general NLI training source in {opts.data_dir or 'the data dir'}: adapted without replay"}
    run.report["replay"] = {"pairs": len(replay), **({"loss": opts.replay_loss} if replay else {}), **replay_note}
    run.timings["replay_load"] = round(time.time() - t, 1)
    run.log(f"adapt: replaying {len(replay)} general NLI pairs ({opts.replay_loss}) {replay_from}" if replay else
            f"adapt: no replay: {replay_note['note']}")
    run.tune_args = {"replay": replay, "replay_loss": opts.replay_loss, "replay_note": replay_note}


def _crossfit(run: Run) -> None:
    """Each fold scored at every mix by models that never read it (`oof`)."""
    t = time.time()
    run.oof = {s: {str(w): np.zeros(len(run.pairs)) for w in run.opts.weights} for s in run.seeds}
    runs = [_fold(run, k, s) for k in range(run.opts.folds) for s in run.seeds]
    run.timings["crossfit"] = round(time.time() - t, 1)
    run.steps = json.loads((run.work / f"fold0-s{run.seeds[0]}" / "calibration.json").read_text())["adapt"]["steps"]
    run.report["training"] = _training(run, runs)


def _fold(run: Run, k: int, s: int) -> dict:
    """Fold `k`, seed `s`: fine-tuned on the other folds (never exported: a fold model is only scored,
    and exported once per mix the display certifies), its mixes scored in torch on fold `k`."""
    from .adapt import TorchMixes

    fit = [p for p, f in zip(run.pairs, run.folds) if f != k]
    held_idx = np.flatnonzero(run.folds == k)
    held = [run.pairs[i] for i in held_idx]
    tk = time.time()
    tuned = run.tuned(f"fold{k}-s{s}", fit, s)
    train_s = round(time.time() - tk, 1)
    tk = time.time()
    mixes = TorchMixes(run.checkpoint(), tuned, trunk=run.trunk())
    for w in run.opts.weights:
        run.oof[s][str(w)][held_idx] = mixes.probs(w, [p.premise for p in held], [p.hypothesis for p in held])[:, 0]
    del mixes
    score_s = round(time.time() - tk, 1)
    if s != run.seeds[0]:
        shutil.rmtree(tuned, ignore_errors=True)
    run.log(f"adapt: fold {k + 1}/{run.opts.folds} seed {s}: fitted on {len(fit)}, scored {len(held)} at "
            f"{len(run.opts.weights)} mixes ({train_s} s to train, {score_s} s to score)")
    return {"fold": k, "seed": s, "fit_pairs": len(fit), "scored_pairs": len(held),
            "train_seconds": train_s, "score_seconds": score_s}


def _training(run: Run, runs: list[dict]) -> dict:
    """adapt.json `training`: the recipe, the fold runs and (with several seeds) their spread."""
    from .adapt import encoder_depth

    opts, replay = run.opts, run.tune_args["replay"]
    depth = encoder_depth(run.checkpoint())
    frozen = max(0, depth - opts.train_layers)
    out = {"steps_per_fold": run.steps, "epochs": opts.epochs, "lr": opts.lr, "batch_size": 16,
           "runs": runs, "trained_layers": depth - frozen,
           "frozen": "word, position and type embeddings" + (
               f" and encoder layers 1–{frozen} of {depth}" if frozen else ""),
           "loss": "binary cross-entropy on the judged class's calibrated probability, plus a KL "
                   "term keeping the shipped model's split of the other two classes" + (
                       f", plus {len(replay)} general NLI pairs replayed (" +
                       ("KL holding the shipped model's three-way probabilities" if
                        opts.replay_loss == "distill" else "three-way cross-entropy on their gold") +
                       ")" if replay else "; no general NLI replay")}
    if len(run.seeds) > 1:
        spread = {w: [run.roc_known(run.oof[s][w]) for s in run.seeds] for w in run.oof[run.seeds[0]]}
        out["seed_auc"] = spread
        out["seed_spread"] = {w: round(max(v) - min(v), 4) for w, v in spread.items()}
    return out


def _rank(run: Run) -> None:
    """The ranking gate: each mix's out-of-fold gain in ROC AUC over the shipped model, its lower
    bound by a paired bootstrap over conversations; `candidates`: the mixes whose bound is above 0."""
    opts, known = run.opts, run.known
    primary = run.oof[run.seeds[0]]
    run.auc_base = run.roc_known(run.p_base)
    run.auc_mix = {w: run.roc_known(p) for w, p in primary.items()}
    groups = [p.group for p, k in zip(run.pairs, known) if k]
    boot = paired_bootstrap(run.y[known], run.p_base[known], {w: p[known] for w, p in primary.items()}, groups,
                            seed=opts.seed)
    alpha = (1.0 - opts.auc_confidence) / len(opts.weights)  # Bonferroni over the mixes tried
    run.gain = {w: {"auc": run.auc_mix[w], "gain": b["gain"],
                    "lower": round(float(np.quantile(b["resamples"], alpha)), 4) if len(b["resamples"]) else None,
                    "resamples": int(len(b["resamples"]))} for w, b in boot.items()}
    run.report["crossfit"].update({
        "auc_shipped": run.auc_base, "auc_out_of_fold": run.auc_mix, "gain": run.gain,
        "gate": f"lower end of the one-sided {opts.auc_confidence} interval of the gain (paired bootstrap over "
                f"conversations, {BOOTSTRAP} resamples, Bonferroni over {len(opts.weights)} mixes: quantile "
                f"{alpha:.4f}) above 0"})
    run.log(f"adapt: out-of-fold ROC AUC by mix {run.auc_mix} (shipped {run.auc_base}); lower bounds of the gain "
            f"{ {w: g['lower'] for w, g in run.gain.items()} }")
    run.candidates = sorted((w for w, g in run.gain.items() if g["lower"] is not None and g["lower"] > 0),
                            key=lambda w: -run.auc_mix[w])
    run.report["holdout"] = {"shipped": {"auc": run.auc_base}}


# --- 2. the final model, guarded from the best mix down -----------------------------------------

def _fit_final(run: Run) -> None:
    """The final model, fine-tuned on every label; its mixes come from one TorchMixes, as the folds' do."""
    from .adapt import TorchMixes

    t = time.time()
    tuned = run.tuned("final-tuned", run.pairs, run.seeds[0])
    run.shared.pop("trunk", None)  # its cache is not needed past the last fine-tune
    run.final = TorchMixes(run.checkpoint(), tuned)
    run.timings["final_fit"] = round(time.time() - t, 1)


def _load_forgetting(run: Run) -> None:
    """The guards' pairs (their loading counts as the guards' time)."""
    t, opts = time.time(), run.opts
    on = opts.forgetting
    run.forgetting = Forgetting(probes=probe_pairs(opts.data_dir, opts.probe_pairs) if on else {},
                                anchor=anchor_pairs(opts.data_dir, opts.anchor_pairs) if on else [],
                                stress=stress_pairs(opts.data_dir) if on else None,
                                everyday=everyday_claims() if on else None)
    if opts.guard_yardstick:
        _load_yardstick(run)
    run.report["guards"] = {"candidates": {}}
    run.spent["guards"] = time.time() - t


def _load_yardstick(run: Run) -> None:
    """The yardstick sets and which of them the labels came from (not held to the limit)."""
    sets = yardstick_pairs(run.opts.data_dir, run.opts.limit_per_set) if run.opts.forgetting else {}
    keys = {(p.premise, p.hypothesis) for p in run.pairs}
    run.forgetting.sets = sets
    run.forgetting.fit_sources = {name for name, ps in sets.items() if any((x.premise, x.hypothesis) in keys for x in ps)}


def _candidate(run: Run, w: str) -> Path:
    """Mix `w` of the final model as the directory it would write (version stamped): what the guards
    score, the yardstick reports and `_write` copies, so the model written is the one measured."""
    d = run.work / f"final-w{_pct(w)}"
    shutil.rmtree(d, ignore_errors=True)  # left by a run killed after this step: rebuilt, never reused
    return run.final.export(float(w), d, run.version(w), pairs=len(run.pairs), folds=run.opts.folds)


def _holds(run: Run, w: str) -> bool:
    """Does mix `w` hold every guard (`mix_guards`)? Logged and kept in adapt.json either way."""
    t = time.time()
    run.mixed[w] = _candidate(run, w)
    g = mix_guards(run.base, Scorer(run.mixed[w]), run.forgetting, run.opts, lambda m: run.log(f"adapt: mix {w}: {m}"))
    run.report["guards"]["candidates"][w] = g
    run.spent["guards"] += time.time() - t
    run.log(f"adapt: mix {w} guards: unrelated REFUTES {_refutes(g, 'unrelated')}, silent REFUTES "
            f"{_refutes(g, 'silent')}, "
            f"anchor accuracy {g['anchor'].get('shipped', {}).get('accuracy')} → "
            f"{g['anchor'].get('adapted', {}).get('accuracy')}, stress {g['stress'].get('pairs', 0)} pairs, everyday "
            f"false facts supported {g['everyday'].get('shipped', {}).get('false_supports')} → "
            f"{g['everyday'].get('adapted', {}).get('false_supports')}")
    if not g["passed"]:
        run.log(f"adapt: mix {w} fails a guard: {'; '.join(g['failures'])}")
    return g["passed"]


def _refutes(g: dict, probe: str) -> float | None:
    return g["probes"].get(probe, {}).get("adapted", {}).get("refutes")


def _choose(run: Run) -> None:
    """The mix to write (choose_mix: guards, then display, from the best-ranking down) and the one
    reported: the chosen one, else the first that held the guards, else the last candidate."""
    run.chosen, run.tries = choose_mix(run.candidates, lambda w: _holds(run, w), lambda w: _certify_logged(run, w))
    run.timings["guards"] = round(run.spent["guards"], 1)
    run.shown = run.chosen if run.chosen is not None else (next(iter(run.tries)) if run.tries else run.candidates[-1])


# --- 3. the display, certified out of fold ------------------------------------------------------

def _certify_logged(run: Run, w: str) -> dict:
    t = time.time()
    c = _certify(run, w)
    run.spent["display"] += time.time() - t
    if c["none"] or c["less"]:
        run.log(f"adapt: mix {w} certifies nothing from {run.opts.floor} up" if c["none"] else
                f"adapt: mix {w} certifies less than the shipped model at target {c['after']['target']} "
                f"({c['after']['coverage']} % vs {c['before']['coverage']} % of replies)")
    return c


def _certify(run: Run, w: str) -> dict:
    """Mix `w`'s display certified on the out-of-fold verdicts (each fold by that mix of the fold model
    that never read it), beside the shipped model's display certified on the same replies."""
    from lab.tuning.data import model_fingerprint
    from schemas.settings import load_settings
    from workers.display import load_display

    from .adapt import TorchMixes

    opts, final = run.opts, run.mixed[w]
    version, fp = run.version(w), model_fingerprint(final)
    where = {"source": "adapt, out-of-fold", "claims": len(run.pairs), "folds": opts.folds}
    run.log(f"adapt: mix {w}: the judged replies through the FV pipeline, out of fold")
    if run.shipped_v is None:
        run.shipped_v = pipeline_verdicts(run.base_dir, run.pairs)
    parts = []
    for k in range(opts.folds):
        idx = np.flatnonzero(run.folds == k)
        dk = TorchMixes(run.checkpoint(), run.work / f"fold{k}-s{run.seeds[0]}").export(
            float(w), run.work / f"fold{k}-pipeline-w{_pct(w)}")
        parts.append(pipeline_verdicts(dk, [run.pairs[i] for i in idx]))
    adapted_v = _pool(parts)
    # the adapted model's own p(label) may rank its badges better than the shipped badge scorer (fitted
    # on the shipped model's numbers): both are certified, the one that shows more is kept
    shipped_display = load_display(load_settings().decision)
    tried = {kind: certificate(_stamped(policy, version, run.out, fp), adapted_v, opts, where) for kind, policy in (
        ("shipped badge scorer", shipped_display), ("p(label) alone", dataclasses.replace(shipped_display, scorer=None)))}
    kind = max(tried, key=lambda k: (tried[k]["target"] or 0.0, tried[k]["coverage"], k == "shipped badge scorer"))
    after = tried[kind]
    at = dataclasses.replace(opts, target=after["target"]) if after["target"] else opts
    before = certificate(shipped_display, run.shipped_v, dataclasses.replace(at, min_target=at.target), where)
    return {"w": w, "version": version, "final": final, "fp": fp, "adapted_v": adapted_v, "tried": tried,
            "kind": kind, "after": after, "before": before, "none": after["target"] is None,
            "less": after["target"] is not None and before["coverage"] > after["coverage"]}


def _report_yardstick(run: Run) -> None:
    """adapt.json `yardstick`: the mix shown, set by set (the guards' own when they held it to a limit)."""
    t, w = time.time(), run.shown
    guarded = run.report["guards"]["candidates"].get(w, {}).get("yardstick")
    if guarded is None:
        if run.forgetting.sets is None:
            _load_yardstick(run)
        guarded = yardstick(run.base, Scorer(run.mixed.get(w) or _candidate(run, w)), run.forgetting.sets,
                            run.forgetting.fit_sources, run.opts, lambda m: run.log(f"adapt: mix {w}: {m}"))
    run.report["yardstick"] = {"mix": float(w), "limit_per_set": run.opts.limit_per_set,
                               "scored": "pair by pair: the set's gold evidence as the premise, the claim as the "
                                         "hypothesis", **guarded}
    run.timings["yardstick"] = round(time.time() - t, 1)


def _report_display(run: Run) -> None:
    """adapt.json `holdout` and `certificate`: the shipped and the adapted model out of fold, at the mix shown."""
    c, opts = run.tries[run.shown], run.opts
    after, before = c["after"], c["before"]
    run.report["holdout"] = {
        "what": f"every judged reply scored by fold models that never read its conversation ({opts.folds} folds)",
        "shipped": _figures(run.auc_base, before, badge_summary(run.shipped_v)),
        "adapted": _figures(run.auc_mix[run.shown], after, badge_summary(c["adapted_v"])),
        "display_scores": c["kind"], "display_candidates": {k: (v["target"], v["coverage"]) for k, v in c["tried"].items()},
        "mixes_certified": {m: {"target": x["after"]["target"], "coverage": x["after"]["coverage"],
                                "shipped_coverage": x["before"]["coverage"]} for m, x in run.tries.items()},
        "mix_chosen_on": f"these out-of-fold scores (one of {len(opts.weights)} mixes, one of 2 badge scores): the "
                         "certificate's confidence is nominal by that much; it certifies the cross-fitted fold models, "
                         "the model written is fitted on all the labels"}
    run.report["certificate"] = {k: v for k, v in after.items() if k not in ("policy", "certified")}
    run.report["certificate"]["floor"] = opts.floor
    run.report["certificate"]["line"] = certificate_line({**after, "floor": opts.floor})


def _figures(auc, c: dict, badges: dict) -> dict:
    cert = c.get("certified") or {}
    sup = (cert.get("labels") or {}).get("SUPPORTS", {})
    return {"auc": auc, "certified_target": c["target"], "certified_coverage": c["coverage"],
            "certified_precision": c.get("precision"), "certified_shown": c.get("n", 0),
            "supports_threshold": sup.get("threshold"), **badges,
            **({"not_certified": c["not_certified"]} if c.get("not_certified") else {})}


# --- the outcome: refused, or the model written -------------------------------------------------

def _closing(run: Run) -> None:
    """What every outcome's adapt.json ends with: where the time went."""
    run.report["timings"] = run.timings
    run.report["cpu_seconds"] = _cpu()
    run.report["seconds"] = round(time.time() - run.t0, 1)


def _refuse(run: Run, why: str):
    report, out = run.report, run.out
    report["gate"] = {"passed": False, "why": why}
    _closing(run)
    report["summary"] = f"no model written: {why}"
    for name in ("model.onnx", "calibration.json", "decision.json", "display.json", "MODEL_CARD.md", "DECISION_CARD.md"):
        (out / name).unlink(missing_ok=True)
    shutil.rmtree(out / "tokenizer", ignore_errors=True)
    (out / "adapt.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    raise AdaptRefused(f"adapt: no model written: {why} (report: {out / 'adapt.json'})", report)


def _write(run: Run) -> dict:
    """The chosen mix's directory, its decision and certified display, the cards and adapt.json into DIR."""
    w, report = run.chosen, run.report
    c = run.tries[w]
    report["chosen_weight"] = float(w)
    report["gate"] = {"passed": True}
    report["summary"] = (f"{c['version']}: ranks this deployment's held-out conversations at ROC AUC {run.auc_mix[w]} "
                         f"(shipped {run.auc_base}, gain ≥ {run.gain[w]['lower']} at {run.opts.auc_confidence}); "
                         f"{report['certificate']['line']}; mix {float(w)}, {len(run.pairs)} judged replies")
    _closing(run)
    _write_model(run.out, c["final"], {**c["after"], "decision": c["adapted_v"]["decision"]}, report, c["fp"],
                 c["version"])
    return report


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
