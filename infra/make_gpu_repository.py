"""Assemble the GPU model repository for the NGC container: triton_models/embed as is, plus the
`nli` ensemble of infra/triton_gpu/ filled with an NLI artifact (fp32 ONNX for TensorRT,
tokenizer and calibration for the tokenizer step). Default: the shipped artifact; `--artifact`
takes another one, e.g. a checkpoint adopted by `dialcheck nli adopt` (DeBERTa, RoBERTa, BERT):
the ensemble then carries only the inputs its ONNX graph takes (no token_type_ids for RoBERTa or
DeBERTa-v3) and the tokenizer step truncates at the artifact's max length (calibration.json).

    python infra/make_gpu_repository.py OUT_DIR [--artifact DIR]   # then mount OUT_DIR at /models
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOKEN_TYPES = "token_type_ids"


def onnx_inputs(model_path: Path) -> list[str]:
    import onnx

    return [i.name for i in onnx.load(str(model_path), load_external_data=False).graph.input]


def _drop_lines(text: str, needle: str) -> str:
    """The lines naming `needle` removed, and a list's separator left before its `]` with them."""
    text = "\n".join(line for line in text.splitlines() if needle not in line) + "\n"
    return re.sub(r"\},(\s*\n\s*\])", r"}\1", text)


def _set_param(text: str, key: str, value: str) -> str:
    pattern = re.compile(r'(parameters \{ key: "' + re.escape(key) + r'"\s+value: \{ string_value: ")[^"]*(")')
    return pattern.sub(lambda m: m.group(1) + value + m.group(2), text) if pattern.search(text) else \
        text + f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'


def make(out: Path, artifact: Path | None = None) -> Path:
    src, gpu = REPO / "triton_models", REPO / "infra" / "triton_gpu"
    art = Path(artifact) if artifact else src / "nli" / "1"
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(src / "embed", out / "embed", dirs_exist_ok=True)
    for name in ("nli", "nli_tokenize", "nli_onnx"):
        shutil.copytree(gpu / name, out / name, dirs_exist_ok=True)
    (out / "nli" / "1").mkdir(exist_ok=True)  # ensembles need an (empty) version directory
    tok = out / "nli_tokenize" / "1"
    if (tok / "tokenizer").exists():
        shutil.rmtree(tok / "tokenizer")
    shutil.copytree(art / "tokenizer", tok / "tokenizer")
    shutil.copy2(art / "calibration.json", tok / "calibration.json")
    (out / "nli_onnx" / "1").mkdir(parents=True, exist_ok=True)
    fp32 = art / "model.fp32.onnx"
    onnx_path = out / "nli_onnx" / "1" / "model.onnx"
    shutil.copy2(fp32 if fp32.exists() else art / "model.onnx", onnx_path)
    if artifact is None:
        return out  # the shipped artifact: the configs as committed
    cal = json.loads((art / "calibration.json").read_text())
    inputs = onnx_inputs(onnx_path)
    configs = {name: (out / name / "config.pbtxt").read_text() for name in ("nli", "nli_tokenize", "nli_onnx")}
    if TOKEN_TYPES not in inputs:  # RoBERTa, DeBERTa-v3: the graph takes ids and mask only
        configs = {k: _drop_lines(v, TOKEN_TYPES) for k, v in configs.items()}
    if cal.get("max_length"):
        configs["nli_tokenize"] = _set_param(configs["nli_tokenize"], "max_length", str(cal["max_length"]))
    note = f"# Written by infra/make_gpu_repository.py for {cal.get('version')} (inputs {', '.join(inputs)}).\n"
    for name, text in configs.items():
        (out / name / "config.pbtxt").write_text(note + text)
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="assemble the GPU Triton model repository")
    ap.add_argument("out", nargs="?", default="triton_models_gpu")
    ap.add_argument("--artifact", default=None, help="an NLI artifact dir (default: triton_models/nli/1)")
    a = ap.parse_args()
    print(make(Path(a.out), Path(a.artifact) if a.artifact else None))
