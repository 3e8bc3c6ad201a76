"""A weight-space average of two released NLI artifacts ("model soup", Wortsman et al. 2022;
WiSE-FT, Wortsman et al. 2022).

Why: NLI v3 was continued from the H200 checkpoint on hard NOT ENOUGH INFO pairs. It learned to
call silent evidence neutral, but lost REFUTES recall on real contradictions (FoolMeTwice). Both
models come from one fine-tuning run, so their weights lie in one basin. Averaging them gives a
model between the two at the cost of one: no ensemble at run time, and Triton serves one model.
The two artifacts must come from the same export (`dialcheck nli release`): the same ONNX graph
and initializer names. Only float initializers are averaged; every other initializer must be
equal. The temperature is refitted on the validation sample that `release` uses."""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from workers.models.onnx_nli import OnnxNLI, read_calibration
from .export import write_calibration
from .release import validation_pairs, validation_temperature


def average_onnx(model_a: Path, model_b: Path, weight_a: float, out: Path) -> int:
    """Write weight_a·A + (1 − weight_a)·B as one ONNX graph; returns how many tensors were averaged."""
    import onnx
    from onnx import numpy_helper

    a, b = onnx.load(str(model_a)), onnx.load(str(model_b))
    tensors_b = {t.name: t for t in b.graph.initializer}
    if {t.name for t in a.graph.initializer} != set(tensors_b) or \
            [n.op_type for n in a.graph.node] != [n.op_type for n in b.graph.node]:
        raise ValueError(f"{model_a} and {model_b} are not the same export: graphs differ")
    averaged = 0
    for t in a.graph.initializer:
        x, y = numpy_helper.to_array(t), numpy_helper.to_array(tensors_b[t.name])
        if x.shape != y.shape:
            raise ValueError(f"tensor {t.name}: shape {x.shape} vs {y.shape}")
        if x.dtype.kind == "f":
            t.CopyFrom(numpy_helper.from_array((weight_a * x + (1.0 - weight_a) * y).astype(x.dtype), t.name))
            averaged += 1
        elif not np.array_equal(x, y):
            raise ValueError(f"non-float tensor {t.name} differs between the two models")
    onnx.save(a, str(out))
    return averaged


def soup(model_a: str | Path, model_b: str | Path, weight_a: float, out_dir: str | Path, data_dir: str | Path,
         valid_limit: int = 3000) -> dict:
    """Average two artifact directories into `out_dir` (model.onnx, tokenizer of A, calibration.json)."""
    if not 0.0 <= weight_a <= 1.0:
        raise ValueError(f"weight_a must be in [0, 1], got {weight_a}")
    a, b, out = Path(model_a), Path(model_b), Path(out_dir)
    cal_a, cal_b = read_calibration(a), read_calibration(b)
    out.mkdir(parents=True, exist_ok=True)
    averaged = average_onnx(a / "model.onnx", b / "model.onnx", weight_a, out / "model.onnx")
    if out.resolve() != a.resolve():
        shutil.copytree(a / "tokenizer", out / "tokenizer", dirs_exist_ok=True)
    write_calibration(out, 1.0, "tmp")
    prem, hyp, y = validation_pairs(data_dir, valid_limit)
    logits = OnnxNLI(out).logits(prem, hyp)
    t, validation = validation_temperature(logits, y)
    info = {"soup": {"a": cal_a.get("version"), "b": cal_b.get("version"), "weight_a": weight_a,
                     "tensors_averaged": averaged},
            "validation_accuracy": round(float((logits.argmax(1) == y).mean()), 4), **validation}
    version = f"dialcheck-nli-minilm-l6-fp32-soup{round(100 * weight_a)}"
    write_calibration(out, round(t, 4), version, **info)
    return {"version": version, "temperature": round(t, 4), **info}
