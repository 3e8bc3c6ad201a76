"""`dialcheck adapt`: fine-tune the shipped verifier on judged replies, choose its mix with the shipped
weights on hold-out conversations, check what it forgot, certify its display, and write a model
directory that `DIALCHECK_NLI_MODEL_DIR=DIR` alone serves — or refuse and say why.

The steps (docs/operations.md "Adapt to your traffic"):
1. split the judged pairs by conversation into fit and hold-out (`holdout`, seeded);
2. fine-tune on the fit part (lab/nli/adapt.py), one run per seed (`seeds`, the spread reported);
3. WiSE-FT: the tuned weights mixed with the shipped ones at each of `WEIGHTS`; each mix's hold-out
   ROC AUC of p(entailment), pair by pair (premise = the evidence, hypothesis = the reply);
4. from the best hold-out AUC down, the first mix that keeps the forgetting limits: every
   leave-one-dataset-out yardstick set within `auc_drop` ROC AUC of the shipped model (not with
   `specialise`; sets the fit pairs come from are the deployment itself and exempt), and the
   unrelated-evidence probe's REFUTES rate ≤ `unrelated_max` (always); the silent probe reported;
5. the real FV pipeline over the hold-out replies with the shipped model (shipped decision and
   display) and with the mix (the same decision rule and badge scorer, stamped for the adapted
   model), each display certified with `dialcheck calibrate`'s test (lab/tuning/calibrate.py);
6. the gate: the mix must beat the shipped model on the hold-out in ROC AUC and certify at least
   its coverage at the same target; else adapt.json alone is written (no model) and AdaptRefused
   says why in one line.

Caveat, also in adapt.json: the mix is chosen on the same hold-out conversations it is certified on
(one of len(WEIGHTS) candidates), so the certificate's confidence is nominal by that much."""
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
from typing import Callable, Sequence

import numpy as np

from .judged import JudgedPair, split_by_group, target_counts

WEIGHTS = (0.25, 0.5, 0.75, 1.0)  # share of the tuned weights (0 is the shipped model)
MIN_FIT = 20  # fewer fit pairs than this teach nothing measurable
CACHE = Path("artifacts/adapt/pairs.sqlite")  # the shipped model's yardstick and probe probabilities


class AdaptRefused(Exception):
    """Too few labels, or the gate failed: `line` says why in one line; `report` is adapt.json's content
    (None when nothing was measured)."""

    def __init__(self, line: str, report: dict | None = None):
        super().__init__(line)
        self.line, self.report = line, report


@dataclass
class AdaptOptions:
    holdout: float = 0.3
    seed: int = 0
    seeds: int = 2
    target: float = 0.85
    confidence: float = 0.9
    specialise: bool = False
    weights: tuple = WEIGHTS
    epochs: float = 2.0
    max_steps: int = 200
    lr: float = 3e-5
    limit_per_set: int = 300
    probe_pairs: int = 200
    auc_drop: float = 0.03
    unrelated_max: float = 0.01
    data_dir: str = ""
    progress: bool = True
    forgetting: bool = True  # False: tests only (a model dir is then never written)


def roc_auc(scores, labels) -> float | None:
    from sklearn.metrics import roc_auc_score

    labels = np.asarray(labels, bool)
    if labels.all() or not labels.any():
        return None
    return round(float(roc_auc_score(labels, scores)), 4)


def _known(pairs: Sequence[JudgedPair]) -> list[JudgedPair]:
    """Pairs whose target says whether the reply is supported (AUC is taken over these)."""
    return [p for p in pairs if p.supported is not None]


def check_enough(fit: list[JudgedPair], held: list[JudgedPair], opts: AdaptOptions, total: int, groups: int) -> None:
    from lab.tuning.calibrate import min_testable

    need = min_testable(opts.target, opts.confidence)
    known = _known(held)
    pos = sum(p.supported for p in known)
    if len(fit) < MIN_FIT or pos < need or pos == len(known):
        raise AdaptRefused(
            f"too few judged replies to adapt and certify: {total} pairs in {groups} conversations split into {len(fit)} "
            f"to fit and {len(held)} held out ({pos} supported, {len(known) - pos} not); at least {MIN_FIT} to fit and, "
            f"held out, {need} supported replies (target {opts.target}, confidence {opts.confidence}) and some not "
            "supported are needed: judge more replies")


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


def forgetting(base: Scorer, model: Scorer, sets: dict, probes: dict, fit_sources: set[str], opts: AdaptOptions,
               progress: Callable[[str], None]) -> dict:
    """The forgetting check of one candidate against the shipped model (module docstring, step 4)."""
    rows, failures = {}, []
    for name, pairs in sets.items():
        b, a = base.auc(pairs), model.auc(pairs)
        own = name in fit_sources
        row = {"pairs": len(_known(pairs)), "auc_shipped": b, "auc_adapted": a,
               "delta": None if a is None or b is None else round(a - b, 4), "adapted_on": own}
        rows[name] = row
        if row["delta"] is not None and row["delta"] < -opts.auc_drop and not own and not opts.specialise:
            failures.append(f"{name} ROC AUC {b:.3f} → {a:.3f}")
        progress(f"forgetting {name}: {b} → {a}")
    probe = {}
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
        failures.append(f"unrelated-evidence REFUTES rate {100 * unrelated:.1f} % > {100 * opts.unrelated_max:.0f} %")
    return {"sets": rows, "probes": probe, "passed": not failures, "failures": failures}


# --- the hold-out through the real pipeline -----------------------------------------------------

def _stamped(layer, version: str, model_dir: Path, fingerprint: str):
    meta = {**layer.meta, "nli_model": {"dir": str(model_dir), "fingerprint": fingerprint, "version": version}}
    try:
        return dataclasses.replace(layer, meta=meta)
    except TypeError:  # a decision method is not a dataclass: its meta is a plain attribute
        layer.meta = meta
        return layer


def holdout_badges(model_dir: Path, held: list[JudgedPair], opts: AdaptOptions, displays: dict | None = None) -> dict:
    """The hold-out replies through the FV pipeline with `model_dir` (the shipped decision rule), once,
    and each of `displays` (name → policy; default the shipped display) certified on them: per name
    the certified policy (None when nothing certifies), its section, and false REFUTES."""
    from schemas.items import CheckItem
    from schemas.settings import load_settings
    from workers.decision import load_decision
    from workers.display import load_display
    from workers.stages import claim_evidence

    from lab.tuning.calibrate import NotCertified, _take, certify_policy
    from lab.tuning.display_fit import BadgeRows
    from lab.tuning.tune import Tuner

    settings = load_settings(models={"nli_model_dir": str(model_dir)})
    shipped = load_settings()
    decision = load_decision(shipped.decision, "fv")
    displays = displays or {"shipped": load_display(shipped.decision)}
    tuner = Tuner(settings, str(model_dir), cache_dir=CACHE.parent / "tune")
    items = [CheckItem(f"holdout-{i}", f"holdout-{i}#reply", [], p.hypothesis, [("", p.premise)]) for i, p in enumerate(held)]
    evs = [claim_evidence(s) for s in tuner.states(items, "fv", "r0")]
    ds = decision.decide_many(evs)
    rights = [badge_right(p, d.label) for p, d in zip(held, ds)]
    known = [i for i, r in enumerate(rights) if r is not None or ds[i].label not in ("SUPPORTS", "REFUTES")]
    refutes = [i for i, d in enumerate(ds) if d.label == "REFUTES"]
    false_refutes = sum(rights[i] is False for i in refutes)
    out = {"claims": len(held), "badge_known": len(known), "refutes": len(refutes), "false_refutes": false_refutes,
           "false_refutes_rate": round(false_refutes / max(len(held), 1), 4),
           "labels": {lab: sum(d.label == lab for d in ds) for lab in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")},
           "decision": decision}
    results = {}
    for name, policy in displays.items():
        rows = _take(BadgeRows.of(ds, [bool(r) for r in rights], evs).scored(policy.scorer, policy.complete), known)
        try:
            cert_policy, certified = certify_policy(policy, rows, opts.target, opts.confidence,
                                                    data={"source": "adapt hold-out", "claims": len(held)})
        except NotCertified as e:
            results[name] = {**out, "policy": None, "certified": None, "not_certified": str(e), "coverage": 0.0,
                             "precision": None}
            continue
        results[name] = {**out, "policy": cert_policy, "certified": certified, "coverage": certified["coverage"],
                         "precision": certified["precision"], "n": certified["n"]}
    return results


# --- the whole run ------------------------------------------------------------------------------

def adapt(pairs: list[JudgedPair], data: dict, base_dir: str | Path, out_dir: str | Path, opts: AdaptOptions,
          log: Callable[[str], None] = print) -> dict:
    """Run `dialcheck adapt` (module docstring); returns the report written as DIR/adapt.json. Raises
    AdaptRefused (with the report, also written) when labels are too few or the gate fails."""
    from lab.tuning.data import model_fingerprint

    from .adapt import model_version

    t0 = time.time()
    base_dir, out = Path(base_dir), Path(out_dir)
    fit, held = split_by_group(pairs, opts.holdout, opts.seed)
    groups = len({p.group for p in pairs})
    check_enough(fit, held, opts, len(pairs), groups)
    base_version = model_version(base_dir)
    report: dict = {
        "format": "dialcheck-adapt", "version": 1, "date": dt.date.today().isoformat(),
        "base_model": {"dir": str(base_dir), "version": base_version, "fingerprint": model_fingerprint(base_dir)},
        "data": {**data, "pairs": len(pairs), "conversations": groups, "labels": target_counts(pairs)},
        "split": {"holdout": opts.holdout, "seed": opts.seed, "by": "conversation",
                  "fit": {"pairs": len(fit), "conversations": len({p.group for p in fit}), "labels": target_counts(fit)},
                  "holdout_set": {"pairs": len(held), "conversations": len({p.group for p in held}),
                                  "labels": target_counts(held)}},
        "options": {k: v for k, v in dataclasses.asdict(opts).items() if k not in ("progress", "data_dir")},
        "machine": f"{len(os.sched_getaffinity(0))} CPU cores visible, torch/ONNX Runtime on 2 threads",
    }
    work = out / ".adapt-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    try:
        return _run(pairs, fit, held, report, base_dir, out, work, opts, log, t0)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(pairs, fit, held, report, base_dir, out, work, opts, log, t0) -> dict:
    from lab.tuning.data import model_fingerprint

    from .adapt import fine_tune, interpolate

    base = Scorer(base_dir, cache=True)
    auc_before = base.auc(held)
    log(f"adapt: {len(fit)} pairs to fit, {len(held)} held out ({report['split']['holdout_set']['conversations']} "
        f"conversations); shipped hold-out ROC AUC {auc_before}")
    seeds, runs = [opts.seed + k for k in range(max(1, opts.seeds))], {}
    for seed in seeds:
        t = time.time()
        tuned = fine_tune(base_dir, fit, seed=seed, out_dir=work / f"seed{seed}", epochs=opts.epochs,
                          max_steps=opts.max_steps, lr=opts.lr, progress=opts.progress)
        row = {"train_seconds": round(time.time() - t, 1), "auc": {}}
        for w in opts.weights:
            d = tuned if w == 1.0 else interpolate(base_dir, tuned, w, work / f"seed{seed}-w{round(100 * w)}")
            row["auc"][str(w)] = Scorer(d).auc(held)
        runs[seed] = row
        log(f"adapt: seed {seed}: hold-out ROC AUC by mix {row['auc']} ({row['train_seconds']} s to train)")
    steps = json.loads((work / f"seed{seeds[0]}" / "calibration.json").read_text())["adapt"]["steps"]
    report["training"] = {"steps": steps, "epochs": opts.epochs, "lr": opts.lr, "batch_size": 16, "seeds": runs,
                          "frozen": "word, position and type embeddings",
                          "loss": "binary cross-entropy on the judged class's calibrated probability"}
    primary = runs[seeds[0]]["auc"]
    spread = {w: [runs[s]["auc"][w] for s in seeds] for w in primary}
    report["training"]["seed_spread"] = {w: round(max(v) - min(v), 4) if None not in v else None for w, v in spread.items()}
    report["holdout"] = {"shipped": {"auc": auc_before}}
    candidates = sorted((w for w, a in primary.items() if a is not None and auc_before is not None and a > auc_before),
                        key=lambda w: -primary[w])
    if not candidates:
        return _refuse(report, out, t0, f"the adapted model does not rank the held-out replies better than the shipped one "
                       f"(ROC AUC {auc_before} shipped, {max((a for a in primary.values() if a is not None), default=None)} "
                       "at best adapted)")
    sets = yardstick_pairs(opts.data_dir, opts.limit_per_set) if opts.forgetting else {}
    probes = probe_pairs(opts.data_dir, opts.probe_pairs) if opts.forgetting else {}
    fit_keys = {(p.premise, p.hypothesis) for p in fit}
    fit_sources = {name for name, ps in sets.items() if any((x.premise, x.hypothesis) in fit_keys for x in ps)}
    report["forgetting"] = {"limit_per_set": opts.limit_per_set, "auc_drop_limit": opts.auc_drop,
                            "unrelated_refutes_limit": opts.unrelated_max, "specialise": opts.specialise,
                            "scored": "pair by pair: the set's gold evidence as the premise, the claim as the hypothesis",
                            "candidates": {}}
    chosen = None
    for w in candidates:
        d = work / f"seed{seeds[0]}" if float(w) == 1.0 else work / f"seed{seeds[0]}-w{round(100 * float(w))}"
        f = forgetting(base, Scorer(d), sets, probes, fit_sources, opts, lambda m: log(f"adapt: mix {w}: {m}"))
        report["forgetting"]["candidates"][w] = f
        if f["passed"]:
            chosen = (w, d)
            break
        log(f"adapt: mix {w} forgets: {'; '.join(f['failures'])}")
    if chosen is None:
        worst = report["forgetting"]["candidates"][candidates[-1]]["failures"]
        return _refuse(report, out, t0, f"every mix that ranks the hold-out better forgets beyond the limits "
                       f"(at mix {candidates[-1]}: {'; '.join(worst)})"
                       + ("" if opts.specialise else "; --specialise lifts the yardstick limit"))
    w, d = chosen
    report["chosen_weight"] = float(w)
    digest = hashlib.sha1(f"{report['data'].get('pairs_sha1', '')}:{opts.seed}:{w}:{steps}".encode()).hexdigest()
    version = f"{report['base_model']['version']}+adapt-{digest[:8]}"
    final = work / "final"
    interpolate(base_dir, work / f"seed{seeds[0]}", float(w), final, version=version)
    fp = model_fingerprint(final)
    log("adapt: the hold-out through the FV pipeline, shipped and adapted")
    before = holdout_badges(Path(base_dir), held, opts)["shipped"]
    from schemas.settings import load_settings
    from workers.display import load_display

    shipped_display = load_display(load_settings().decision)
    # the adapted model's own p(label) may rank its badges better than the shipped badge scorer (fitted
    # on the shipped model's numbers): both are certified, the one that shows more is kept
    displays = {"shipped badge scorer": _stamped(shipped_display, version, out, fp),
                "p(label) alone": _stamped(dataclasses.replace(shipped_display, scorer=None), version, out, fp)}
    tried = holdout_badges(final, held, opts, displays)
    kind = max(tried, key=lambda k: (tried[k]["coverage"], k == "shipped badge scorer"))
    after = tried[kind]
    report["holdout"] = {"shipped": _figures(auc_before, before), "adapted": _figures(primary[w], after),
                         "display_scores": kind,
                         "display_candidates": {k: v["coverage"] for k, v in tried.items()},
                         "mix_chosen_on": "these hold-out conversations (one of %d mixes, one of 2 badge scores): the "
                                          "certificate's confidence is nominal by that much" % len(opts.weights)}
    if after["policy"] is None:
        return _refuse(report, out, t0, f"the adapted model's display certifies nothing on the hold-out at target "
                       f"{opts.target} ({after['not_certified'].replace(': the current display is kept', '')})")
    if after["coverage"] < before["coverage"]:
        return _refuse(report, out, t0, f"the adapted model certifies less on the hold-out than the shipped one "
                       f"({after['coverage']} % vs {before['coverage']} % of replies at target {opts.target})")
    report["gate"] = {"passed": True}
    report["seconds"] = round(time.time() - t0, 1)
    _write_model(out, final, after, report, fp, version)
    return report


def _figures(auc, h: dict) -> dict:
    c = h.get("certified") or {}
    sup = (c.get("labels") or {}).get("SUPPORTS", {})
    return {"auc": auc, "certified_coverage": h["coverage"], "certified_precision": h.get("precision"),
            "certified_shown": h.get("n", 0), "supports_threshold": sup.get("threshold"),
            "false_refutes": h["false_refutes"], "false_refutes_rate": h["false_refutes_rate"],
            "refutes": h["refutes"], "labels": h["labels"], "claims": h["claims"],
            **({"not_certified": h["not_certified"]} if h.get("not_certified") else {})}


def _refuse(report: dict, out: Path, t0: float, why: str):
    report["gate"] = {"passed": False, "why": why}
    report["seconds"] = round(time.time() - t0, 1)
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
                                             "its display is certified on the adaptation's hold-out", "version": version}
    (out / "decision.json").write_text(json.dumps(doc, indent=1) + "\n")
    write_display(out / "display.json", after["policy"], after["certified"])
    report["model"] = {"version": version, "fingerprint": fp, "files": ["model.onnx", "tokenizer/", "calibration.json",
                                                                          "decision.json", "display.json", "MODEL_CARD.md",
                                                                          "DECISION_CARD.md", "adapt.json"]}
    (out / "adapt.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "MODEL_CARD.md").write_text(render_card(report))
    (out / "DECISION_CARD.md").write_text(render_decision_card(report))
