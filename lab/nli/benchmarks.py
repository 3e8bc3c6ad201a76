"""`dialcheck nli evaluate`: held-out benchmarks for the shipped NLI artifact (never trained on):
SNLI test accuracy, ANLI dev accuracy, TRUE-DialFact ROC AUC, the silent-evidence probe's
false-contradiction rate, calibration and throughput."""
from __future__ import annotations

import random
import time
from pathlib import Path

import numpy as np

from workers.models.nli_base import softmax
from workers.models.onnx_nli import OnnxNLI, read_calibration
from .calibrate import ece
from .data import anli_dev, snli_test, true_dialfact
from .labels import ENTAILMENT


def _sample(rows: list, limit: int | None, seed: int = 0) -> list:
    if not limit or limit >= len(rows):
        return rows
    return random.Random(seed).sample(rows, limit)


def roc_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(labels, scores))


def evaluate_model(model: OnnxNLI, data_dir: str | Path, limit: int | None = None) -> dict:
    t_cal = model.temperature
    out: dict = {"model_dir": str(model.dir), "version": model.version}
    snli = _sample(snli_test(data_dir), limit)
    logits = model.logits([p.premise for p in snli], [p.hypothesis for p in snli])
    y = np.array([p.label for p in snli])
    out["snli_test_accuracy"] = round(float((logits.argmax(1) == y).mean()), 4)
    out["snli_test_pairs"] = len(snli)
    out["temperature"] = round(t_cal, 4)
    out["ece_before"] = round(ece(softmax(logits, 1.0), y), 4)
    out["ece_after"] = round(ece(softmax(logits, t_cal), y), 4)
    out["ece_split"] = "snli test (T was fitted on dialcheck's held-out validation split, not on SNLI)"
    anli = _sample(anli_dev(data_dir), limit)
    la = model.logits([p.premise for p in anli], [p.hypothesis for p in anli])
    out["anli_dev_accuracy"] = round(float((la.argmax(1) == np.array([p.label for p in anli])).mean()), 4)
    out["anli_dev_pairs"] = len(anli)
    true_rows = _sample(true_dialfact(data_dir), limit)
    probs = model.predict([g for g, _, _ in true_rows], [r for _, r, _ in true_rows])
    out["true_dialfact_roc_auc"] = round(roc_auc(probs[:, ENTAILMENT], np.array([l for _, _, l in true_rows])), 4)
    out["true_dialfact_pairs"] = len(true_rows)
    bench = snli[:512] if len(snli) >= 512 else snli
    t = time.perf_counter()
    saved = model.batch_size
    model.batch_size = 32
    model.predict([p.premise for p in bench], [p.hypothesis for p in bench])
    model.batch_size = saved
    out["pairs_per_second"] = round(len(bench) / (time.perf_counter() - t), 1)
    out["pairs_per_second_setup"] = "batch 32, SNLI test pairs, ONNX Runtime CPU, this machine"
    from .hard_pairs import page_swap_probe_pairs, silent_probe, silent_probe_pairs

    probe = silent_probe(model, silent_probe_pairs(data_dir, per_kind=min(limit or 400, 400)))
    out["silent_probe_false_contradiction"] = probe["false_contradiction_argmax"]
    out["silent_probe_false_contradiction_p55"] = probe["false_contradiction_p55"]
    out["silent_probe"] = probe
    out["silent_probe_setup"] = ("claims of held-out VitaminC pages with a non-evidence sentence of their page, the "
                                 "nearest other page's most claim-like sentence, or two sentences of a random page "
                                 "(neutral by construction; never trained on); share called contradiction "
                                 "(argmax; calibrated P ≥ 0.55)")
    swap = silent_probe(model, page_swap_probe_pairs(data_dir, n=min(limit or 400, 400)))
    out["swap_probe_false_contradiction"] = swap["false_contradiction_argmax"]
    out["swap_probe_false_contradiction_p55"] = swap["false_contradiction_p55"]
    out["swap_probe_pairs"] = swap["pairs"]
    out["swap_probe_setup"] = ("FoolMeTwice dev claims (an evaluation set; the shipped and h200 models trained on "
                               "them with their own evidence) each with two sentences of an unrelated page")
    cal = read_calibration(model.dir)
    for k in ("validation_ece_before", "validation_ece_after", "quantization"):
        if k in cal:
            out[k] = cal[k]
    return out
