"""The NLI model card (triton_models/nli/MODEL_CARD.md), generated from the artifact it describes.

Why generated: the hand-written card once said the shipped model was int8 and that the verifier's
hypothesis was context + claim; the artifact is fp32 and the default hypothesis is the claim alone.
Every fact here is read from the files: precision and inputs/outputs from the ONNX graph,
temperature, version and quantisation numbers from calibration.json, the hypothesis from the
settings default, sizes from the files. Training and evaluation numbers come from the release
record (`release.json` in the version directory) only when its `version` equals calibration.json's:
a newly released model is never described with its predecessor's numbers.

The card is a Hugging Face model card (huggingface_hub.ModelCard): YAML front matter with
license, base_model, datasets, metrics and a model-index of the evaluation results.
`python -m lab.nli.model_card [MODEL_DIR]` rewrites it; tests/test_model_card.py checks that
the committed card is exactly what the current files give.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .data import EXCLUDED_SOURCES, TRAIN_SOURCES

RELEASE_RECORD = "release.json"
# hand-written notes (history, candidates not shipped) live below this line and are kept as they are
NOTES_MARKER = "<!-- hand-written notes below: kept by lab/nli/model_card.py, not generated -->"
BASE_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
LICENSE = "apache-2.0"  # the project's license (pyproject.toml); training-data licenses are listed in the card
# evaluation keys of `dialcheck nli evaluate --json` → (model-index dataset name, metric type)
EVAL_METRICS = {
    "snli_test_accuracy": ("snli", "SNLI test", "accuracy"),
    "anli_dev_accuracy": ("anli", "ANLI dev (r1-r3)", "accuracy"),
    "true_dialfact_roc_auc": ("true-dialfact", "TRUE DialFact validation", "roc_auc"),
}
_INT8_OPS = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger", "ConvInteger",
             "QLinearMatMul", "QLinearConv", "QAttention", "DynamicQuantizeMatMul"}


def onnx_facts(model_path: Path) -> dict[str, Any]:
    """Precision, inputs and outputs as the ONNX graph says (weights are not loaded into memory twice)."""
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    ops = {n.op_type for n in model.graph.node}
    int_weights = {t.data_type for t in model.graph.initializer} & {onnx.TensorProto.INT8, onnx.TensorProto.UINT8}
    precision = "int8" if (ops & _INT8_OPS or int_weights) else (
        "fp16" if any(t.data_type == onnx.TensorProto.FLOAT16 for t in model.graph.initializer) else "fp32")
    return {"precision": precision, "inputs": [i.name for i in model.graph.input],
            "outputs": [o.name for o in model.graph.output], "opset": max((o.version for o in model.opset_import), default=None)}


def default_hypothesis_turns() -> int:
    """The verifier's default hypothesis context (DIALCHECK_HYP_CONTEXT_TURNS), from the settings."""
    from schemas.settings import WindowSettings

    return int(WindowSettings.model_fields["hypothesis_context_turns"].default)


def read_record(model_dir: Path, version: str | None) -> tuple[dict, str]:
    """(release record, note): the record only when it belongs to this artifact's version."""
    path = model_dir / RELEASE_RECORD
    if not path.exists():
        return {}, f"no release record ({RELEASE_RECORD}) in the artifact"
    record = json.loads(path.read_text())
    if record.get("version") != version:
        return {}, (f"the release record describes {record.get('version')!r}, not this artifact ({version!r}); "
                    "its numbers are left out")
    return record, ""


def _mb(path: Path) -> float:
    return round(path.stat().st_size / 2**20, 1)


def existing_notes(model_dir: Path) -> str:
    """The hand-written part of the current card (from NOTES_MARKER on), or ''."""
    path = card_path(model_dir)
    text = path.read_text() if path.exists() else ""
    return text[text.index(NOTES_MARKER):] if NOTES_MARKER in text else ""


def render(model_dir: str | Path, notes: str | None = None) -> str:
    """The card text for the artifact in `model_dir` (e.g. triton_models/nli/1); `notes` (default:
    the current card's hand-written part) is appended as it is."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    model_dir = Path(model_dir)
    cal = json.loads((model_dir / "calibration.json").read_text())
    facts = onnx_facts(model_dir / "model.onnx")
    version = cal.get("version")
    record, record_note = read_record(model_dir, version)
    evaluation = record.get("evaluation", {})
    counts = record.get("train_config", {}).get("source_counts", {})
    sources = [s for s in TRAIN_SOURCES if not counts or counts.get(s.name)]
    quant = cal.get("quantization", {})
    shipped = quant.get("shipped")
    turns = default_hypothesis_turns()
    label_order = cal.get("label_order", ["entailment", "neutral", "contradiction"])

    eval_results = [EvalResult(task_type="text-classification", task_name="Natural language inference",
                               dataset_type=dtype, dataset_name=dname, metric_type=metric,
                               metric_value=float(evaluation[key]))
                    for key, (dtype, dname, metric) in EVAL_METRICS.items() if key in evaluation]
    data = ModelCardData(
        language="en", license=LICENSE, library_name="onnx", pipeline_tag="text-classification",
        base_model=BASE_MODEL, datasets=[s.name for s in sources],
        metrics=sorted({m for _, _, m in EVAL_METRICS.values()} | {"ece"}),
        tags=["nli", "cross-encoder", "fact-checking", "dialcheck", facts["precision"]],
        model_name=version, eval_results=eval_results or None,
    )

    files = sorted(p for p in model_dir.iterdir() if p.is_file())
    lines = [
        f"# {version} — dialcheck three-way NLI cross-encoder",
        "",
        "Generated from the artifact by `python -m lab.nli.model_card` (lab/nli/model_card.py); do not edit by hand.",
        "",
        "## What it is",
        f"A cross-encoder over (premise, hypothesis) pairs with logits in the order {', '.join(label_order)};",
        f"probabilities = softmax(logits / T) with the temperature T = {cal.get('temperature')} from `calibration.json`.",
        f"Base model: {BASE_MODEL} (6-layer, 384-d BERT) with a fresh 3-way head, fine-tuned by `dialcheck nli train`.",
        "",
        "## How dialcheck uses it",
        "- Verifier: premise = an evidence window (a sentence or two adjacent sentences of a retrieved passage);",
        "  hypothesis = " + ("the claim surface alone" if turns == 0 else f"the last {turns} context turns + the claim surface")
        + f" (default `DIALCHECK_HYP_CONTEXT_TURNS={turns}`; the paper's context + claim measured far worse with this model, see README.md).",
        "- Gate: bidirectional entailment/contradiction between the context + original claim and its rewrite.",
        "",
        "## Artifact",
        f"- precision of `model.onnx`: **{facts['precision']}** (read from the ONNX graph; opset {facts['opset']})"
        + (f"; release choice recorded in calibration.json: {shipped}" if shipped else ""),
        f"- inputs {', '.join(facts['inputs'])}; outputs {', '.join(facts['outputs'])}",
        f"- `model.onnx`: {_mb(model_dir / 'model.onnx')} MB; other files: " + ", ".join(
            f"`{p.name}`" for p in files if p.name != "model.onnx")
        + (", `tokenizer/`" if (model_dir / "tokenizer").is_dir() else ""),
    ]
    if quant:
        lines += ["", "## Quantisation check (validation split; calibration.json)",
                  "| variant | validation accuracy | size MB | pairs/s |", "|---|---|---|---|"]
        for name, q in quant.items():
            if isinstance(q, dict):
                lines.append(f"| {name}{' (shipped)' if name == shipped else ''} | {q.get('validation_accuracy')} | "
                             f"{q.get('size_mb')} | {q.get('pairs_per_second')} |")
        if quant.get("why_fp32") and shipped == "fp32":
            lines.append(f"\nWhy {shipped}: {quant['why_fp32']}.")
    lines += ["", "## Calibration",
              f"Temperature scaling on {cal.get('validation_pairs', '?')} held-out validation pairs: ECE "
              f"{cal.get('validation_ece_before', '?')} → {cal.get('validation_ece_after', '?')}.",
              f"Training steps: {cal.get('training_step', '?')} of {cal.get('training_total_steps', '?')}."]
    lines += ["", "## Training data (only sources whose license allows a shipped model)",
              "| source | license | pairs (train + validation) | note |", "|---|---|---|---|"]
    lines += [f"| {s.name} | {s.license} | {counts.get(s.name, 'not recorded')} | {s.note} |" for s in sources]
    lines += ["", "Excluded:", ""] + [f"- {k}: {v}" for k, v in EXCLUDED_SOURCES.items()]
    lines += ["", "## Evaluation (`dialcheck nli evaluate --json`)"]
    if evaluation:
        lines += ["| metric | value | pairs |", "|---|---|---|"]
        for key, (_, dname, metric) in EVAL_METRICS.items():
            if key in evaluation:
                pairs_key = key.rsplit("_", 1)[0].replace("_roc", "") + "_pairs"
                lines.append(f"| {dname} {metric} | {evaluation[key]} | {evaluation.get(pairs_key, '')} |")
        if "pairs_per_second" in evaluation:
            lines.append(f"| throughput (pairs/s) | {evaluation['pairs_per_second']} | {evaluation.get('pairs_per_second_setup', '')} |")
        lines.append("\nTargets set for this model: SNLI test ≥ 0.80, TRUE-DialFact ROC AUC ≥ 0.75, ANLI dev above chance (0.33).")
    else:
        lines.append(f"Not recorded for this artifact: {record_note}.")
    if record.get("train_config"):
        cfg = {k: record["train_config"].get(k) for k in ("max_length", "batch_size", "lr", "weight_decay",
                                                          "warmup_ratio", "epochs", "seed", "total_steps",
                                                          "train_pairs", "valid_pairs")}
        lines += ["", "## Hyperparameters", "```", json.dumps(cfg, indent=1), "```"]
        if record.get("training_minutes") is not None:
            lines.append(f"Training time ≈ {record['training_minutes']} minutes.")
        if record.get("training_notes"):
            lines.append(record["training_notes"])
    lines += ["", "## Limitations",
              "- Far smaller than the paper's DeBERTa-v3-large; expect weaker gate and verifier decisions.",
              "- English only; trained on short evidence windows.",
              "- Any Hugging Face NLI classifier directory can replace it: set DIALCHECK_NLI_MODEL_DIR."]
    notes = existing_notes(model_dir) if notes is None else notes
    body = "\n".join(lines) + "\n" + (f"\n{notes.rstrip()}\n" if notes else "")
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + body))


def write_model_card(path: str | Path, train_config: dict, calibration: dict, evaluation: dict,
                     training_minutes: float | None, model_dir: str | Path | None = None) -> None:
    """Record this artifact's training config and evaluation (release.json), then render the card
    from the artifact. `calibration` must be the artifact's own (its version keys the record)."""
    model_dir = Path(model_dir) if model_dir else Path(path).parent / "1"
    record = {"version": calibration.get("version"), "train_config": train_config,
              "evaluation": {k: v for k, v in evaluation.items() if k != "model_dir"},
              "training_minutes": training_minutes}
    (model_dir / RELEASE_RECORD).write_text(json.dumps(record, indent=1) + "\n")
    Path(path).write_text(render(model_dir))


def card_path(model_dir: Path) -> Path:
    return model_dir.parent / "MODEL_CARD.md"


if __name__ == "__main__":
    from schemas.settings import load_settings

    target = Path(sys.argv[1] if len(sys.argv) > 1 else load_settings().models.nli_model_dir)
    card_path(target).write_text(render(target))
    print(card_path(target))
