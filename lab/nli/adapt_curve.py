"""How much adapting the verifier to a deployment's judged replies buys, measured on conversations
the adapted model never saw: learning curve, cross-deployment and leave-one-dataset-out.

    python -m lab.nli.adapt_curve curve --fit faithdial --sizes 50,100,250,500,all --seeds 1,2
    python -m lab.nli.adapt_curve cross --fit faithdial --score begin_wow,begin_cmu,begin_tc --sizes all
    python -m lab.nli.adapt_curve lodo --leave begin_wow --seeds 1
    python -m lab.nli.adapt_curve table            # markdown tables of what is done
    python -m lab.nli.adapt_curve figure --out docs/figures/adapt_curve.png

The protocol, fixed before any number was seen:
- each judged set (lab/nli/judged_sets.py) is split once by conversation (`split_by_group`, half
  held out, split seed 0): the fit part is all adapting ever reads, the scored part all that is
  reported; the scored part is split again by conversation into halves A and B (seed 1);
- a model adapted on n replies drawn (training seed) from the fit part (lab/nli/adapt.py
  `fine_tune`, every layer, 3 epochs, batch 16, lr 3e-5, ≤ 300 steps) is scored by p(SUPPORTS) =
  the calibrated entailment probability of (evidence, reply), as the shipped model is;
- ROC AUC of p(SUPPORTS) on the whole scored part; certified coverage at target 0.85: `certify`
  (lab/tuning/calibrate.py: Learn then Test, Clopper-Pearson at confidence 0.9) on half A gives a
  threshold, coverage and precision of the replies it shows are read on half B, and the same with
  A and B swapped; the mean of the two is reported (0 coverage when nothing is certified);
- WiSE-FT: the adapted weights averaged with the shipped ones at 0.5 (`interpolate`).
Every cell is a JSON file under artifacts/adapt-curve/cells/; a rerun skips what is done.
Probabilities are cached per (model fingerprint, pair) in artifacts/adapt-curve/pairs.sqlite."""
from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Sequence

import numpy as np

import lab.nli.adapt as adapt
import lab.nli.export  # noqa: F401  (fine_tune's lazy import, loaded before the run)
from lab.nli.adapt_report import figure, table
from lab.nli.adapt_run import probe_pairs, yardstick_pairs
from lab.nli.judged import JudgedPair, split_by_group, target_counts
from lab.nli.judged_sets import CHAT_SETS, JUDGED_SETS, load_judged_set, supports_gold
# imported up front, not per cell: a long run then never meets a half-edited shared tree mid-way
from lab.tuning.cache import PairCache
from lab.tuning.calibrate import certify
from lab.tuning.data import model_fingerprint
from sklearn.metrics import roc_auc_score
from workers.models.onnx_nli import OnnxNLI

OUT = Path("artifacts/adapt-curve")
SHIPPED = Path("triton_models/nli/1")
DATA = Path("../shared/data")
HOLDOUT_FRAC = 0.5
SPLIT_SEED, HALVES_SEED = 0, 1
TARGET, CONFIDENCE = 0.85, 0.9
WISE_WEIGHT = 0.5
# one thread per fine-tune and per scorer: on shared, oversubscribed cores a two-thread torch step spent
# more CPU waiting at its barriers than it gained; several one-thread cells run side by side instead
THREADS = 1


# ---------------------------------------------------------------- splits

def fit_scored(pairs: Sequence[JudgedPair]) -> tuple[list[JudgedPair], list[JudgedPair]]:
    """(fit part, scored part) of one set: whole conversations on each side."""
    return split_by_group(list(pairs), HOLDOUT_FRAC, SPLIT_SEED)


def halves(scored: Sequence[JudgedPair]) -> np.ndarray:
    """A boolean mask over `scored`: True = half A (certify on one half, read on the other)."""
    a, _ = split_by_group(list(scored), 0.5, HALVES_SEED)
    in_a = {p.group for p in a}
    return np.array([p.group in in_a for p in scored], dtype=bool)


def draw(fit: Sequence[JudgedPair], n: int | None, seed: int) -> list[JudgedPair]:
    """n replies of the fit part drawn with the training seed (all of them when n is None or ≥ size)."""
    if n is None or n >= len(fit):
        return list(fit)
    return random.Random(seed).sample(list(fit), n)


# ---------------------------------------------------------------- metrics

def certified_coverage(p: np.ndarray, gold: np.ndarray, in_a: np.ndarray, target: float = TARGET,
                       confidence: float = CONFIDENCE) -> dict:
    """Certify a p(SUPPORTS) threshold on one half, read coverage / precision on the other, both ways."""
    sides = []
    for cal in (in_a, ~in_a):
        test = ~cal
        c = certify(p[cal], gold[cal] == 1, target, confidence)
        if c.threshold is None:
            sides.append({"threshold": None, "coverage": 0.0, "precision": None, "shown": 0})
            continue
        shown = p[test] >= c.threshold
        sides.append({"threshold": c.threshold, "coverage": round(100 * float(shown.mean()), 2),
                      "precision": round(100 * float(gold[test][shown].mean()), 2) if shown.any() else None,
                      "shown": int(shown.sum())})
    precs = [s["precision"] for s in sides if s["precision"] is not None]
    return {"coverage": round(float(np.mean([s["coverage"] for s in sides])), 2),
            "precision": round(float(np.mean(precs)), 2) if precs else None, "sides": sides}


def set_scores(p: np.ndarray, gold: Sequence[int], in_a: np.ndarray) -> dict:
    gold = np.asarray(gold)
    return {"auc": round(float(roc_auc_score(gold, p)), 4), "n": int(len(gold)), "positives": int(gold.sum()),
            "certified": certified_coverage(np.asarray(p, float), gold, in_a)}


# ---------------------------------------------------------------- scoring

class Scorer:
    """p(SUPPORTS) of a model directory on pairs, through the pair cache."""

    def __init__(self, out: Path = OUT):
        self.db = out / "pairs.sqlite"
        self._models: dict = {}

    def __call__(self, model_dir: Path, pairs: Sequence[JudgedPair]) -> np.ndarray:
        return self.probs(model_dir, pairs)[:, 0]

    def probs(self, model_dir: Path, pairs: Sequence[JudgedPair]) -> np.ndarray:
        key = str(model_dir)
        if key not in self._models:
            fp = model_fingerprint(model_dir)
            self._models = {key: (PairCache(self.db, fp), lambda: OnnxNLI(model_dir, batch_size=16, threads=THREADS, workers=1))}
        cache, make = self._models[key]
        nli = []

        def predict(prem, hyp):
            if not nli:
                nli.append(make())
            return nli[0].predict(prem, hyp)

        return cache.predict(predict, [p.premise for p in pairs], [p.hypothesis for p in pairs], chunk=64)


# ---------------------------------------------------------------- cells

class Harness:
    def __init__(self, data: Path = DATA, out: Path = OUT, shipped: Path = SHIPPED):
        self.data, self.out, self.shipped = Path(data), Path(out), Path(shipped)
        (self.out / "cells").mkdir(parents=True, exist_ok=True)
        self.score = Scorer(self.out)
        self._sets: dict[str, tuple] = {}

    def split(self, name: str) -> tuple[list[JudgedPair], list[JudgedPair], np.ndarray]:
        if name not in self._sets:
            fit, scored = fit_scored(load_judged_set(name, self.data))
            self._sets[name] = (fit, scored, halves(scored))
        return self._sets[name]

    def base_export(self) -> Path:
        """The shipped weights re-exported by this build's exporter: what interpolation averages with."""
        d = self.out / "models" / "base-export"
        if not (d / "model.onnx").exists():
            adapt.base_export(self.shipped, d)
        return d

    def _cell_path(self, key: str) -> Path:
        return self.out / "cells" / f"{key}.json"

    def _load(self, key: str) -> dict:
        p = self._cell_path(key)
        return json.loads(p.read_text()) if p.exists() else {}

    def _save(self, key: str, cell: dict) -> None:
        tmp = self._cell_path(key).with_suffix(f".{os.getpid()}.tmp")  # cells run side by side
        tmp.write_text(json.dumps(cell, indent=1))
        tmp.replace(self._cell_path(key))

    def score_into(self, key: str, model_dir: Path, sets: Sequence[str], meta: dict) -> dict:
        cell = self._load(key) or dict(meta)
        for s in sets:
            if s in cell.get("scores", {}):
                continue
            _, scored, in_a = self.split(s)
            t = time.process_time()
            p = self.score(model_dir, scored)
            cell.setdefault("scores", {})[s] = {**set_scores(p, supports_gold(scored), in_a),
                                                "score_cpu_s": round(time.process_time() - t, 1)}
            self._save(key, cell)
            log(f"{key} on {s}: AUC {cell['scores'][s]['auc']}, certified coverage "
                f"{cell['scores'][s]['certified']['coverage']} %")
        return cell

    def shipped_row(self, sets: Sequence[str]) -> dict:
        return self.score_into("shipped", self.shipped, sets, {"model": "shipped", "dir": str(self.shipped)})

    def adapted(self, key: str, train: list[JudgedPair], seed: int, sets: Sequence[str], meta: dict,
                weights: Sequence[float] = (1.0,)) -> None:
        """Fine-tune (once) on `train`, score on `sets`; the same for each WiSE-FT weight < 1."""
        adapt.THREADS = THREADS

        d = self.out / "models" / key
        cell = self._load(key)
        if not (d / "model.onnx").exists():
            log(f"{key}: fine-tune on {len(train)} pairs")
            t0, c0 = time.time(), time.process_time()
            adapt.fine_tune(self.shipped, train, seed=seed, out_dir=d, progress=False, lr=3e-5,
                            train_layers=None)  # the recipe these cells were measured with
            cell = {**meta, "pairs": len(train), "targets": target_counts(train), "seed": seed,
                    "train_wall_s": round(time.time() - t0, 1), "train_cpu_s": round(time.process_time() - c0, 1),
                    "steps": json.loads((d / "calibration.json").read_text()).get("adapt", {}).get("steps")}
            self._save(key, cell)
        for w in weights:
            if w >= 1.0:
                self.score_into(key, d, sets, cell)
                continue
            wkey, wd = f"{key}-w{w:g}", self.out / "models" / f"{key}-w{w:g}"
            if not (wd / "model.onnx").exists():
                adapt.interpolate(self.base_export(), d, w, wd)
            self.score_into(wkey, wd, sets, {**self._load(key), "weight": w, "scores": {}})


    def forgetting(self, key: str, model_dir: Path, limit: int = 200, probe_n: int = 200) -> dict:
        """The yardstick sets (each capped at `limit` records, an even spread) and the unrelated-evidence
        probe, scored by one model: ROC AUC of p(SUPPORTS) per set, the probe's SUPPORTS / REFUTES rates."""
        cell = self._load(key)
        if cell.get("forgetting", {}).get("limit") == limit:
            return cell
        sets = {}
        for name, pairs in yardstick_pairs(str(self.data), limit).items():
            known = [x for x in pairs if x.supported is not None]
            p = self.score(model_dir, known)
            y = [int(x.supported) for x in known]
            sets[name] = {"auc": round(float(roc_auc_score(y, p)), 4), "n": len(known)} if 0 < sum(y) < len(y) else None
        probes = {}
        for kind, pairs in probe_pairs(str(self.data), probe_n).items():
            if not pairs:
                continue
            jp = [JudgedPair(x.premise, x.hypothesis, "not_entailment", "probe", kind) for x in pairs]
            probs = self.score.probs(model_dir, jp)
            probes[kind] = {"pairs": len(jp), "supports": round(float((probs.argmax(1) == 0).mean()), 4),
                            "refutes": round(float((probs.argmax(1) == 2).mean()), 4)}
        cell["forgetting"] = {"limit": limit, "sets": sets, "probes": probes}
        self._save(key, cell)
        log(f"{key} forgetting: " + ", ".join(f"{k} {v['auc'] if v else None}" for k, v in sets.items()) + f"; {probes}")
        return cell


def log(msg: str) -> None:
    print(time.strftime("%H:%M:%S"), msg, flush=True)


def _sizes(text: str) -> list[int | None]:
    return [None if x.strip() == "all" else int(x) for x in text.split(",") if x.strip()]


def _size_name(n: int | None) -> str:
    return "all" if n is None else str(n)


def run_curve(h: Harness, fit_set: str, sizes, seeds, score_sets, weights) -> None:
    h.shipped_row(score_sets)
    for n in sizes:
        for seed in seeds:
            fit, _, _ = h.split(fit_set)
            train = draw(fit, n, seed)
            key = f"{fit_set}-n{_size_name(n)}-s{seed}"
            h.adapted(key, train, seed, score_sets, {"fit": fit_set, "n": _size_name(n), "weight": 1.0}, weights)


def run_lodo(h: Harness, leave: str, seeds, pool: Sequence[str], cap: int | None) -> None:
    """A model adapted on every pool set but `leave` (their fit parts and scored parts: none of them
    is scored here), scored on `leave`'s scored part, beside the shipped one."""
    h.shipped_row([leave])
    train_all = [p for s in pool if s != leave for p in load_judged_set(s, h.data)]
    for seed in seeds:
        train = draw(train_all, cap, seed)
        h.adapted(f"lodo-{leave}-s{seed}", train, seed, [leave],
                  {"fit": "+".join(s for s in pool if s != leave), "n": len(train), "weight": 1.0,
                   "left_out": leave}, (1.0, WISE_WEIGHT))


# ---------------------------------------------------------------- report: lab/nli/adapt_report.py


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--out", default=str(OUT))
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("curve", "cross"):
        c = sub.add_parser(name)
        c.add_argument("--fit", required=True, choices=JUDGED_SETS)
        c.add_argument("--sizes", default="50,100,250,500,all")
        c.add_argument("--seeds", default="1,2")
        c.add_argument("--score", default=None, help="sets to score (default: the fit set; cross: the other chat sets)")
        c.add_argument("--wise", action="store_true", help="also the WiSE-FT mix at 0.5")
    lo = sub.add_parser("lodo")
    lo.add_argument("--leave", required=True, choices=JUDGED_SETS)
    lo.add_argument("--seeds", default="1,2")
    lo.add_argument("--pool", default=",".join(JUDGED_SETS))
    lo.add_argument("--cap", type=int, default=None, help="at most this many training pairs (drawn per seed)")
    fo = sub.add_parser("forget", help="yardstick sets and probes scored by done models (keys of cells) and the shipped one")
    fo.add_argument("--keys", required=True, help="comma-separated cell keys, e.g. faithdial-nall-s1,faithdial-nall-s1-w0.5")
    fo.add_argument("--limit", type=int, default=200)
    sub.add_parser("table")
    fg = sub.add_parser("figure")
    fg.add_argument("--fit", default=",".join(CHAT_SETS))
    fg.add_argument("--to", default="docs/figures/adapt_curve.png")
    sub.add_parser("shipped")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.cmd == "table":
        print(table(out))
        return 0
    if args.cmd == "figure":
        print(*figure(Path(args.to), args.fit.split(","), out))
        return 0
    h = Harness(Path(args.data), out)
    if args.cmd == "shipped":
        h.shipped_row(JUDGED_SETS)
        return 0
    if args.cmd == "forget":
        h.forgetting("shipped", h.shipped, args.limit, args.limit)
        for key in args.keys.split(","):
            d = h.out / "models" / key
            if (d / "model.onnx").exists():
                h.forgetting(key, d, args.limit, args.limit)
            else:
                log(f"{key}: no model at {d}, skipped")
        return 0
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.cmd == "lodo":
        run_lodo(h, args.leave, seeds, args.pool.split(","), args.cap)
        return 0
    default = [args.fit] if args.cmd == "curve" else [s for s in CHAT_SETS if s != args.fit]
    score_sets = args.score.split(",") if args.score else default
    run_curve(h, args.fit, _sizes(args.sizes), seeds, score_sets, (1.0, WISE_WEIGHT) if args.wise else (1.0,))
    return 0


if __name__ == "__main__":
    sys.exit(main())
