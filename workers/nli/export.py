"""Turn a trained checkpoint into the shipped artifact: ONNX (fp32 and dynamic int8) plus
tokenizer, laid out as the Triton model-repository version directory triton_models/nli/1/."""
from __future__ import annotations

import json
import shutil
from pathlib import Path


def export_onnx(model_dir: str | Path, out_dir: str | Path, opset: int = 17) -> Path:
    """Export logits(input_ids, attention_mask, token_type_ids) with dynamic batch and length."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    enc = tok(["A man plays a guitar."], ["Someone makes music."], return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    dyn = {n: {0: "batch", 1: "sequence"} for n in names}
    dyn["logits"] = {0: "batch"}
    path = out / "model.fp32.onnx"
    torch.onnx.export(model, tuple(enc[n] for n in names), str(path), input_names=names,
                      output_names=["logits"], dynamic_axes=dyn, opset_version=opset, dynamo=False)
    tok_dir = out / "tokenizer"
    if tok_dir.exists():
        shutil.rmtree(tok_dir)
    tok.save_pretrained(str(tok_dir))
    return path


def quantize_int8(fp32_path: str | Path, int8_path: str | Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32_path), str(int8_path), weight_type=QuantType.QInt8)
    return Path(int8_path)


def write_calibration(out_dir: str | Path, temperature: float, version: str, **extra) -> None:
    data = {"temperature": temperature, "version": version,
            "label_order": ["entailment", "neutral", "contradiction"], **extra}
    (Path(out_dir) / "calibration.json").write_text(json.dumps(data, indent=1))
