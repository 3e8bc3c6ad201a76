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


def onnx_to_checkpoint(artifact_dir: str | Path, out_dir: str | Path, config_from: str | Path | None = None) -> Path:
    """The reverse of `export_onnx`: a trainable Hugging Face checkpoint rebuilt from a released ONNX
    artifact, so training can continue from the shipped model (releases ship ONNX only).

    `config_from`: a checkpoint of the same architecture, read for its config (default: the installed
    all-MiniLM-L6-v2 base every dialcheck NLI model is trained from), with dialcheck's three labels. Named initializers map by name; the anonymous MatMul weights the exporter
    folds (`onnx::MatMul_N`) map by the node that reads them (/bert/encoder/layer.0/…/query/MatMul →
    bert.encoder.layer.0.….query.weight, transposed). Refuses an artifact that leaves a weight unset."""
    import onnx
    import torch
    from onnx import numpy_helper
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from .labels import LABELS
    from .train import base_model_dir

    graph = onnx.load(str(Path(artifact_dir) / "model.onnx")).graph
    arrays = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    config = AutoConfig.from_pretrained(str(config_from or base_model_dir()), num_labels=len(LABELS),
                                        id2label=dict(enumerate(LABELS)),
                                        label2id={lab: i for i, lab in enumerate(LABELS)})
    model = AutoModelForSequenceClassification.from_config(config)
    state = model.state_dict()
    loaded = {name: torch.tensor(a.copy()) for name, a in arrays.items() if name in state}
    for node in graph.node:
        if node.op_type != "MatMul":
            continue
        weights = [x for x in node.input if x in arrays and x not in state]
        if not weights:
            continue
        name = node.name.strip("/").replace("/", ".").rsplit(".", 1)[0] + ".weight"
        w = arrays[weights[0]].T
        if name not in state or tuple(w.shape) != tuple(state[name].shape):
            raise ValueError(f"{artifact_dir}: ONNX weight {weights[0]} ({node.name}) has no matching {name}")
        loaded[name] = torch.tensor(w.copy())
    unset = [k for k in state if k not in loaded and not k.endswith("position_ids")]
    if unset:
        raise ValueError(f"{artifact_dir}: no ONNX weight for {unset[:3]}{' …' if len(unset) > 3 else ''}")
    model.load_state_dict({**state, **loaded})
    out = Path(out_dir)
    model.save_pretrained(str(out))
    tok = Path(artifact_dir) / "tokenizer"
    for f in tok.iterdir():
        shutil.copy(f, out / f.name)
    return out
