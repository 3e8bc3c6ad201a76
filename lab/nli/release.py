"""From a trained checkpoint to the shipped artifact: export fp32 ONNX, quantise to int8, compare
both on the validation split (both reported), fit the temperature, write calibration.json. The
model card is written by `model_card.py` from these numbers."""
from __future__ import annotations

import json
import random
import shutil
import time
from pathlib import Path

import numpy as np

from workers.models.nli_base import softmax
from workers.models.onnx_nli import OnnxNLI
from .calibrate import ece, fit_temperature
from .data import training_pairs
from .export import export_onnx, quantize_int8, write_calibration


def validation_pairs(data_dir: str | Path, limit: int = 3000) -> tuple[list[str], list[str], np.ndarray]:
    """(premises, hypotheses, labels) of the seeded sample of the held-out validation split that every
    release fits its temperature on and reports accuracy on."""
    _, valid, _ = training_pairs(data_dir)
    valid = random.Random(7).sample(valid, min(limit, len(valid)))
    return [p.premise for p in valid], [p.hypothesis for p in valid], np.array([p.label for p in valid])


def validation_temperature(logits: np.ndarray, y: np.ndarray) -> tuple[float, dict]:
    """The temperature fitted on the validation sample, and the calibration record's validation
    fields (how many pairs, ECE before and after)."""
    t = fit_temperature(logits, y)
    return t, {"validation_pairs": len(y), "validation_ece_before": round(ece(softmax(logits, 1.0), y), 4),
               "validation_ece_after": round(ece(softmax(logits, t), y), 4)}


def release(checkpoint: str | Path, out_dir: str | Path, data_dir: str | Path, valid_limit: int = 3000,
            work_dir: str | Path = "artifacts/nli-export") -> dict:
    work, out = Path(work_dir), Path(out_dir)
    if work.exists():
        shutil.rmtree(work)
    fp32 = export_onnx(checkpoint, work)
    shutil.move(str(fp32), work / "model.onnx")
    int8_dir = work / "int8"
    int8_dir.mkdir()
    quantize_int8(work / "model.onnx", int8_dir / "model.onnx")
    shutil.copytree(work / "tokenizer", int8_dir / "tokenizer")
    prem, hyp, y = validation_pairs(data_dir, valid_limit)
    results = {}
    for name, d in (("fp32", work), ("int8", int8_dir)):
        write_calibration(d, 1.0, "tmp")
        t0 = time.perf_counter()
        logits = OnnxNLI(d).logits(prem, hyp)
        results[name] = {"logits": logits, "accuracy": float((logits.argmax(1) == y).mean()),
                         "size_mb": round((d / "model.onnx").stat().st_size / 2**20, 1),
                         "pairs_per_second": round(len(y) / (time.perf_counter() - t0), 1)}
    # Dynamic int8 computes activation scales per batch, so a pair's probabilities change with its
    # batch neighbours (~1e-2). The stream worker and the evaluator batch differently and must give
    # identical verdicts, so fp32 ships (it fits the 100 MB budget); int8 is measured and reported.
    within_one_point = results["fp32"]["accuracy"] - results["int8"]["accuracy"] <= 0.01
    chosen = "fp32"
    logits = results[chosen]["logits"]
    t, validation = validation_temperature(logits, y)
    step = json.loads((Path(checkpoint) / "progress.json").read_text()) if (Path(checkpoint) / "progress.json").exists() else {}
    quant = {k: {"validation_accuracy": round(v["accuracy"], 4), "size_mb": v["size_mb"],
                 "pairs_per_second": v["pairs_per_second"]} for k, v in results.items()}
    quant["shipped"] = chosen
    quant["int8_within_1_point"] = within_one_point
    quant["why_fp32"] = "dynamic int8 outputs depend on batch composition; stream and evaluator must agree"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy(work / "model.onnx", out / "model.onnx")
    if (out / "tokenizer").exists():
        shutil.rmtree(out / "tokenizer")
    shutil.copytree(work / "tokenizer", out / "tokenizer")
    stale = out / "model.fp32.onnx"
    if stale.exists():
        stale.unlink()
    info = {**validation, "quantization": quant, "training_step": step.get("step"), "training_total_steps": step.get("total_steps")}
    write_calibration(out, round(t, 4), f"dialcheck-nli-minilm-l6-{chosen}-step{step.get('step', 'x')}", **info)
    return {"temperature": t, **info}
