"""Adopt any Hugging Face sequence-classification NLI checkpoint (DeBERTa-v2/v3, RoBERTa, BERT;
two-way or three-way) as a dialcheck NLI artifact: the same layout as triton_models/nli/1
(model.onnx, calibration.json, tokenizer/), so OnnxNLI, both Triton repositories and the tuning
code read it unchanged.

    dialcheck nli adopt HF_DIR --out DIR [--int8] [--skip-refit] [--triton-repo REPO]

Steps (docs/verifiers.md):
1. labels: `config.id2label` names mapped to dialcheck's columns (entailment, neutral,
   contradiction), by name only, never by position; a name it does not know is refused.
   Two-way models (entailment / not_entailment): neutral gets the not-entailment logit and
   contradiction a logit of -1e4 (probability 0), so a two-way verifier never says REFUTES.
2. ONNX fp32 with the columns already in dialcheck's order (a reordering wrapper is exported with
   the model), inputs as the model takes them (token_type_ids only where the model has token type
   embeddings: BERT yes, RoBERTa and DeBERTa-v3 no); opset 17 (DeBERTa-v2 needs >= 14). The ONNX
   logits are checked against torch on a few pairs. `--int8`: dynamic int8 becomes model.onnx, the
   fp32 export is kept as model.fp32.onnx (the GPU repository builder takes that one).
3. tokenizer: saved with save_pretrained, plus the checkpoint's own tokenizer files (spm.model,
   vocab.txt, merges.txt, ...) copied beside it; the saved tokenizer must give the checkpoint's ids.
4. max length: what the model was trained on (tokenizer model_max_length, else
   max_position_embeddings less RoBERTa's padding offset), capped at 512 (`--max-length`),
   recorded in calibration.json `max_length` and read by OnnxNLI.
5. temperature fitted on the validation split like `nli release` (lab/nli/release.py); for a
   two-way model on the labels collapsed to entailment / not entailment.
6. model card (DIR/MODEL_CARD.md) and fingerprint (lab/tuning/data.py model_fingerprint).
7. unless --skip-refit: the shipped guarded decision refitted for this model on the yardstick's
   sets (lab/tuning/card.py fit_union_and_write) → DIR/decision.json + DIR/DECISION_CARD.md.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from schemas.protocols import NLI_LABELS
from schemas.errors import DialcheckError

MAX_LENGTH_CAP = 512
NEG = -1e4  # logit of a column a two-way model does not have (same constant as nli_base.predict)
TOKENIZER_FILES = ("spm.model", "sentencepiece.bpe.model", "vocab.txt", "vocab.json", "merges.txt",
                   "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
# spellings accepted in config.id2label (lower-cased, '-' and ' ' read as '_')
LABEL_SPELLINGS = {
    "entailment": "entailment", "entail": "entailment", "entails": "entailment", "entailed": "entailment",
    "neutral": "neutral",
    "contradiction": "contradiction", "contradict": "contradiction", "contradicts": "contradiction",
    "contradictory": "contradiction",
    "not_entailment": "not_entailment", "non_entailment": "not_entailment", "not_entail": "not_entailment",
    "not_entailed": "not_entailment",
}
SAMPLE_PAIRS = [("A man plays a guitar on stage.", "Someone makes music."),
                ("The Eiffel Tower is in Paris, France, and was finished in 1889.", "The tower is in Berlin."),
                ("She was born in 1970.", "Her brother likes football and plays every weekend with friends.")]


class AdoptError(DialcheckError, ValueError):
    """A checkpoint dialcheck cannot adopt as it is; the message is one line naming the fix."""


def label_mapping(id2label: dict, where: str = "config.json") -> tuple[list[int | None], bool]:
    """For each of dialcheck's columns (entailment, neutral, contradiction) the checkpoint's output
    column, and whether the model is two-way (neutral then holds the not-entailment column and
    contradiction is None). Refuses unknown, repeated or missing names."""
    ids = sorted(int(i) for i in id2label)
    if ids != list(range(len(ids))) or len(ids) not in (2, 3):
        raise AdoptError(f"{where}: id2label has ids {ids}; an NLI model has 2 or 3 labels numbered from 0")
    names: dict[str, int] = {}
    for i in ids:
        raw = str(id2label.get(i, id2label.get(str(i))))
        key = raw.strip().lower().replace("-", "_").replace(" ", "_")
        if key not in LABEL_SPELLINGS:
            raise AdoptError(f"{where}: label {raw!r} (id {i}) is not an NLI label dialcheck knows "
                             f"(entailment, neutral, contradiction, not_entailment); set config.id2label to the "
                             "model's real label names (labels are never guessed from their position)")
        canon = LABEL_SPELLINGS[key]
        if canon in names:
            raise AdoptError(f"{where}: labels {id2label} name {canon} twice")
        names[canon] = i
    if set(names) == {"entailment", "neutral", "contradiction"}:
        return [names[lab] for lab in NLI_LABELS], False
    if set(names) == {"entailment", "not_entailment"}:
        return [names["entailment"], names["not_entailment"], None], True
    raise AdoptError(f"{where}: labels {sorted(names)} are neither three-way (entailment, neutral, contradiction) "
                     "nor two-way (entailment, not_entailment)")


def trained_max_length(config, tokenizer, cap: int = MAX_LENGTH_CAP) -> int:
    """The longest input the model was trained on, capped: the tokenizer's model_max_length when it
    is set, else max_position_embeddings (less RoBERTa-style padding offsets)."""
    candidates = []
    tml = getattr(tokenizer, "model_max_length", None)
    if tml and tml < 100_000:
        candidates.append(int(tml))
    mpe = getattr(config, "max_position_embeddings", None)
    if mpe:
        offset = (int(config.pad_token_id or 0) + 1) if config.model_type in ("roberta", "xlm-roberta", "camembert") else 0
        candidates.append(int(mpe) - offset)
    return min(candidates + [cap])


def model_inputs(model, tokenizer) -> list[str]:
    """ONNX inputs: input_ids, attention_mask, and token_type_ids only where the tokenizer gives
    them and the model has token type embeddings (type_vocab_size > 0; DeBERTa-v3 has 0)."""
    enc = tokenizer("a", "b")
    names = ["input_ids", "attention_mask"]
    if "token_type_ids" in enc and int(getattr(model.config, "type_vocab_size", 0) or 0) > 0:
        names.append("token_type_ids")
    return names


def export_reordered(model, tokenizer, columns: list[int | None], inputs: list[str], path: Path, opset: int = 17) -> Path:
    """Export logits in dialcheck's column order (the reordering is part of the graph)."""
    import torch

    class Reordered(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *args):
            logits = self.model(**dict(zip(inputs, args))).logits
            cols = [logits[:, c:c + 1] if c is not None else torch.full_like(logits[:, :1], NEG) for c in columns]
            return torch.cat(cols, dim=1)

    enc = tokenizer([p for p, _ in SAMPLE_PAIRS[:2]], [h for _, h in SAMPLE_PAIRS[:2]], padding=True, return_tensors="pt")
    dyn = {n: {0: "batch", 1: "sequence"} for n in inputs}
    dyn["logits"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(Reordered().eval(), tuple(enc[n] for n in inputs), str(path), input_names=inputs,
                          output_names=["logits"], dynamic_axes=dyn, opset_version=opset, dynamo=False)
    return path


def _torch_logits(model, tokenizer, columns, pairs, max_length: int) -> np.ndarray:
    import torch

    enc = tokenizer([p for p, _ in pairs], [h for _, h in pairs], padding=True, truncation="longest_first",
                    max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        raw = model(**enc).logits.float().numpy()
    return np.stack([raw[:, c] if c is not None else np.full(len(raw), NEG, np.float32) for c in columns], 1)


def copy_tokenizer(hf_dir: Path, tokenizer, out: Path) -> list[str]:
    """save_pretrained, then the checkpoint's own tokenizer files that it did not write (the
    SentencePiece model included). Returns the file names in out."""
    if out.exists():
        shutil.rmtree(out)
    tokenizer.save_pretrained(str(out))
    for name in TOKENIZER_FILES:
        if (hf_dir / name).exists() and not (out / name).exists():
            shutil.copy2(hf_dir / name, out / name)
    return sorted(p.name for p in out.iterdir())


def _weights_digest(hf_dir: Path) -> str:
    h = hashlib.sha1()
    for p in sorted(hf_dir.glob("*.safetensors")) + sorted(hf_dir.glob("pytorch_model*.bin")) + [hf_dir / "config.json"]:
        if p.exists():
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 22), b""):
                    h.update(chunk)
    return h.hexdigest()[:8]


def adopt(hf_dir: str | Path, out: str | Path, data_dir: str | Path, *, int8: bool = False, refit: bool = True,
          limit_per_set: int | None = None, valid_limit: int = 3000, max_length: int | None = None,
          folds: int = 5, tune_cache: str | Path | None = None, name: str | None = None,
          log=print) -> dict:
    """Adopt the checkpoint in `hf_dir` into the artifact directory `out`; returns the adoption
    record (also written as out/adopt.json)."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    from workers.models.onnx_nli import OnnxNLI
    from lab.tuning.data import model_fingerprint
    from .export import quantize_int8, write_calibration
    from .release import validation_pairs, validation_temperature

    hf_dir, out = Path(hf_dir), Path(out)
    if not (hf_dir / "config.json").is_file():
        raise AdoptError(f"{hf_dir}: no config.json (a Hugging Face checkpoint directory: save_pretrained or "
                         "huggingface-cli download --local-dir)")
    config = AutoConfig.from_pretrained(str(hf_dir))
    columns, two_way = label_mapping(config.id2label, str(hf_dir / "config.json"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(hf_dir))
    except Exception as e:  # noqa: BLE001 - any loader failure is the user's checkpoint, said in one line
        raise AdoptError(f"{hf_dir}: its tokenizer does not load ({type(e).__name__}: {str(e).splitlines()[0][:200]})") from None
    model = AutoModelForSequenceClassification.from_pretrained(str(hf_dir)).eval()
    length = min(max_length or MAX_LENGTH_CAP, trained_max_length(config, tokenizer))
    inputs = model_inputs(model, tokenizer)
    if out.resolve() == hf_dir.resolve():
        raise AdoptError(f"--out {out} is the checkpoint directory itself: choose another")
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("model.onnx", "model.fp32.onnx", "decision.json", "DECISION_CARD.md", "lodo.json"):
        (out / stale).unlink(missing_ok=True)
    log(f"adopt: {config.model_type} {'two' if two_way else 'three'}-way, inputs {', '.join(inputs)}, max length {length}")

    fp32 = export_reordered(model, tokenizer, columns, inputs, out / "model.fp32.onnx")
    tok_files = copy_tokenizer(hf_dir, tokenizer, out / "tokenizer")
    reloaded = AutoTokenizer.from_pretrained(str(out / "tokenizer"))
    for p, h in SAMPLE_PAIRS:
        if reloaded(p, h)["input_ids"] != tokenizer(p, h)["input_ids"]:
            raise AdoptError(f"{hf_dir}: the saved tokenizer gives other ids than the checkpoint's own")
    if int8:
        quantize_int8(fp32, out / "model.onnx")
    else:
        shutil.move(str(fp32), out / "model.onnx")
    precision = "int8" if int8 else "fp32"
    stem = name or hf_dir.resolve().name
    version = f"adopted-{stem}-{precision}-{_weights_digest(hf_dir)}"
    source = {"dir": str(hf_dir.resolve()), "model_type": config.model_type,
              "architecture": (config.architectures or [type(model).__name__])[0],
              "id2label": {int(k): v for k, v in config.id2label.items()}, "two_way": two_way,
              "columns": {lab: c for lab, c in zip(NLI_LABELS, columns)},
              "name_or_path": getattr(config, "_name_or_path", "") or stem}
    extra = {"max_length": length, "inputs": inputs, "source": source,
             "quantization": {"shipped": precision, **({"why_int8": "--int8 asked for (batch-dependent outputs)"}
                                                      if int8 else {})}}
    write_calibration(out, 1.0, version, **extra)

    onnx_model = OnnxNLI(out)
    check = SAMPLE_PAIRS + [(" ".join(["The old iron tower stands in the middle of the city."] * 60), "It is tall.")]
    got = onnx_model.logits([p for p, _ in check], [h for _, h in check])
    want = _torch_logits(model, tokenizer, columns, check, length)
    onnx_diff = float(np.abs(got - want).max())
    if not int8 and onnx_diff > 1e-3:
        raise AdoptError(f"{hf_dir}: ONNX logits differ from torch by {onnx_diff:.2g} (export problem)")

    prem, hyp, y = validation_pairs(data_dir, valid_limit)
    logits = onnx_model.logits(prem, hyp)
    y_fit = np.where(y == 2, 1, y) if two_way else y  # two-way: not entailment = neutral + contradiction
    fit_logits = logits[:, :2] if two_way else logits
    t, validation = validation_temperature(fit_logits, y_fit)
    accuracy = float((fit_logits.argmax(1) == y_fit).mean())
    write_calibration(out, round(t, 4), version, **extra, **validation,
                      validation_accuracy=round(accuracy, 4),
                      validation_labels="entailment / not entailment" if two_way else "three-way")
    fingerprint = model_fingerprint(out)
    record = {"version": version, "fingerprint": fingerprint, "temperature": round(t, 4), "max_length": length,
              "inputs": inputs, "precision": precision, "onnx_vs_torch_max_abs": round(onnx_diff, 6),
              "validation_accuracy": round(accuracy, 4), **validation, "tokenizer_files": tok_files,
              "source": source, "date": dt.date.today().isoformat()}
    log(f"adopt: {version} T={t:.3f} validation accuracy {accuracy:.3f} on {len(y)} pairs, fingerprint {fingerprint}")
    if refit:
        record["decision"] = refit_decision(out, data_dir, limit_per_set, folds, tune_cache)
        log(f"adopt: decision refitted → {out / 'decision.json'}")
    (out / "adopt.json").write_text(json.dumps(record, indent=1) + "\n")
    (out / "MODEL_CARD.md").write_text(render_card(out, record))
    return record


def refit_decision(model_dir: Path, data_dir: str | Path, limit_per_set: int | None, folds: int = 5,
                   tune_cache: str | Path | None = None) -> dict:
    """The shipped guarded decision refitted for this model on the yardstick's sets (as `dialcheck
    tune fit --method guarded` does for the shipped model): model_dir/decision.json + card."""
    from schemas.settings import load_settings
    from lab.tuning.card import fit_union_and_write
    from lab.tuning.datasets import FIT_SETS, load_set
    from lab.tuning.tune import DEFAULT_DIR, Tuner

    tuner = Tuner(load_settings(data={"dir": str(data_dir)}), str(model_dir), cache_dir=Path(tune_cache or DEFAULT_DIR))
    sets = [load_set(n, data_dir, limit_per_set) for n in FIT_SETS]
    layer = fit_union_and_write(tuner, sets, model_dir / "decision.json", folds)
    return {"path": "decision.json", "method": layer.name, "params": layer.params,
            "fitted_on": layer.meta["fitted_on"]["sets"], "nli_model": layer.meta["nli_model"]}


def render_card(model_dir: Path, record: dict) -> str:
    """A Hugging Face model card for the adopted artifact, from its files and adopt.json."""
    from huggingface_hub import ModelCard, ModelCardData

    from .model_card import onnx_facts

    facts = onnx_facts(model_dir / "model.onnx")
    src = record["source"]
    data = ModelCardData(language="en", library_name="onnx", pipeline_tag="text-classification",
                         base_model=src["name_or_path"] if "/" in str(src["name_or_path"]) else None,
                         tags=["nli", "cross-encoder", "fact-checking", "dialcheck", "adopted", facts["precision"]],
                         model_name=record["version"])
    mapping = ", ".join(f"{lab} ← column {c} ({src['id2label'].get(c, '-') if c is not None else 'none: logit -1e4'})"
                        for lab, c in src["columns"].items())
    dec = record.get("decision")
    lines = [
        f"# {record['version']} — an NLI checkpoint adopted by dialcheck",
        "",
        "Generated by `dialcheck nli adopt` (lab/nli/adopt.py); do not edit by hand.",
        "",
        "## Source",
        f"- checkpoint: `{src['name_or_path']}` ({src['architecture']}, model type `{src['model_type']}`); its "
        "own model card describes its training data, licence and evaluation — dialcheck did not train it.",
        f"- labels ({'two-way' if src['two_way'] else 'three-way'}, mapped by name from config.id2label): {mapping}",
        ("- two-way: neutral carries the not-entailment probability and contradiction is always 0, so this "
         "verifier never gives REFUTES." if src["two_way"] else ""),
        "",
        "## Artifact",
        f"- `model.onnx`: **{facts['precision']}** (opset {facts['opset']}), inputs {', '.join(facts['inputs'])}; "
        f"outputs {', '.join(facts['outputs'])} in dialcheck's order (entailment, neutral, contradiction)",
        f"- ONNX vs torch logits on {len(SAMPLE_PAIRS) + 1} pairs (one truncated at the max length): max |Δ| {record['onnx_vs_torch_max_abs']}",
        f"- max length {record['max_length']} tokens (premise + hypothesis, truncated longest first)",
        f"- tokenizer files: {', '.join(record['tokenizer_files'])}",
        f"- fingerprint `{record['fingerprint']}` (lab/tuning/data.py model_fingerprint: model.onnx + calibration.json)",
        "",
        "## Calibration",
        f"Temperature {record['temperature']} fitted on {record['validation_pairs']} held-out validation pairs of "
        f"dialcheck's NLI data ({'entailment vs not entailment' if src['two_way'] else 'three-way'}): ECE "
        f"{record['validation_ece_before']} → {record['validation_ece_after']}; validation accuracy "
        f"{record['validation_accuracy']}.",
        "",
        "## Decision",
    ]
    if dec:
        lines += [f"`decision.json` (method `{dec['method']}`) refitted for this model on "
                  + ", ".join(f"{k} ({v})" for k, v in dec["fitted_on"].items())
                  + "; its card is DECISION_CARD.md (leave-one-dataset-out numbers). The model dir alone brings "
                  "it (and display.json) when no other decision is named:",
                  "", "```", f"DIALCHECK_NLI_MODEL_DIR={model_dir} dialcheck check ...", "```"]
    else:
        lines.append("Not refitted (--skip-refit): the shipped decision refuses this model; run "
                     f"`dialcheck tune fit --method guarded --model-dir {model_dir} --out {model_dir}/decision.json`.")
    body = "\n".join(x for x in lines if x is not None) + "\n"
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + body))
