"""Assemble the GPU model repository for the NGC container: triton_models/embed as is, plus the
`nli` ensemble of infra/triton_gpu/ filled with the shipped artifact (fp32 ONNX for TensorRT,
tokenizer and calibration for the tokenizer step).

    python infra/make_gpu_repository.py OUT_DIR      # then mount OUT_DIR at /models
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def make(out: Path) -> Path:
    src, gpu = REPO / "triton_models", REPO / "infra" / "triton_gpu"
    art = src / "nli" / "1"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "embed", out / "embed", dirs_exist_ok=True)
    for name in ("nli", "nli_tokenize", "nli_onnx"):
        shutil.copytree(gpu / name, out / name, dirs_exist_ok=True)
    (out / "nli" / "1").mkdir(exist_ok=True)  # ensembles need an (empty) version directory
    tok = out / "nli_tokenize" / "1"
    shutil.copytree(art / "tokenizer", tok / "tokenizer", dirs_exist_ok=True)
    shutil.copy2(art / "calibration.json", tok / "calibration.json")
    (out / "nli_onnx" / "1").mkdir(parents=True, exist_ok=True)
    fp32 = art / "model.fp32.onnx"
    shutil.copy2(fp32 if fp32.exists() else art / "model.onnx", out / "nli_onnx" / "1" / "model.onnx")
    return out


if __name__ == "__main__":
    print(make(Path(sys.argv[1] if len(sys.argv) > 1 else "triton_models_gpu")))
