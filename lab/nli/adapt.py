"""Adapt the shipped NLI verifier to a deployment's judged verdicts on CPU (`dialcheck adapt`).

Why binary losses: a judgement speaks about one probability (lab/nli/judged.py). An entailment /
not_entailment pair trains p(entailment) of the three-way softmax against the rest, a contradiction
/ not_contradiction pair p(contradiction); the other two columns keep what the shipped model says
about them. The probabilities trained are the served ones: softmax(logits / T) with the shipped
model's temperature T, which the adapted model keeps.

Why interpolation: fine-tuned on one deployment's replies, the model learns that deployment's
convention and loses ground elsewhere. WiSE-FT (Wortsman et al., 2022) — the adapted weights
averaged with the shipped ones — keeps most of the gain and most of the rest; `interpolate`
writes such a mix with lab/nli/soup.py's `average_onnx` (the weight is chosen on the hold-out
conversations by lab/nli/adapt_run.py).

Training starts from the shipped ONNX weights (export.onnx_to_checkpoint), so a fresh clone adapts
the model it serves, not a file on one machine."""
from __future__ import annotations

import json
import math
import random
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np

from .judged import JudgedPair

THREADS = 2
BATCH = 16
MAX_STEPS = 300
# (column, positive?) each target trains: entailment column 0, contradiction column 2
TARGET_LOSS = {"entailment": (0, 1.0), "not_entailment": (0, 0.0),
               "contradiction": (2, 1.0), "not_contradiction": (2, 0.0)}


def model_version(model_dir: str | Path) -> str:
    from workers.models.onnx_nli import read_calibration

    return str(read_calibration(Path(model_dir)).get("version", "dialcheck-nli"))


def _nli(model_dir: str | Path):
    from workers.models.onnx_nli import OnnxNLI

    return OnnxNLI(model_dir, batch_size=16, threads=THREADS, workers=1)


def nli_probs(model_dir: str | Path, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """Calibrated (entailment, neutral, contradiction) per pair, as the runtime computes them."""
    if not len(premises):
        return np.zeros((0, 3))
    return np.asarray(_nli(model_dir).predict(list(premises), list(hypotheses)), dtype=float)


def p_supports(model_dir: str | Path, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """p(entailment) per pair: the probability a SUPPORTS verdict rests on."""
    return nli_probs(model_dir, premises, hypotheses)[:, 0]


def _checkpoint(base_dir: Path, work: Path) -> Path:
    from .export import onnx_to_checkpoint

    return onnx_to_checkpoint(base_dir, work / "base-checkpoint")


def base_checkpoint(base_dir: str | Path, out_dir: str | Path) -> Path:
    """The base artifact as a trainable checkpoint in `out_dir`, once for several `fine_tune` calls."""
    from .export import onnx_to_checkpoint

    return onnx_to_checkpoint(Path(base_dir), Path(out_dir))


def steps_for(n_pairs: int, epochs: float = 3.0, max_steps: int = MAX_STEPS, batch_size: int = BATCH) -> int:
    """Optimiser steps for `n_pairs`: `epochs` passes, at most `max_steps` (the CPU budget)."""
    return max(1, min(max_steps, math.ceil(epochs * n_pairs / batch_size)))


def fine_tune(base_dir: str | Path, pairs: Sequence[JudgedPair], *, seed: int, out_dir: str | Path,
              epochs: float = 3.0, max_steps: int = MAX_STEPS, lr: float = 3e-5, batch_size: int = BATCH,
              max_length: int | None = None, progress: bool = True, version: str | None = None,
              checkpoint: str | Path | None = None) -> Path:
    """Fine-tune the artifact in `base_dir` on `pairs` (binary losses, module docstring) and write an
    artifact to `out_dir`: model.onnx, tokenizer/, calibration.json (the base temperature; version
    `version`, default `<base version>+adapt-<pairs sha1[:8]>`). Returns `out_dir`. `checkpoint`: the
    base already rebuilt as a trainable checkpoint (`base_checkpoint`), for several fine-tunes of one base."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from workers.models.onnx_nli import MAX_LENGTH, read_calibration
    from .export import export_onnx, write_calibration
    from .judged import pairs_sha1, target_counts

    base_dir, out = Path(base_dir), Path(out_dir)
    bad = sorted({p.target for p in pairs} - set(TARGET_LOSS))
    if bad:
        raise ValueError(f"unknown targets {bad}: one of {', '.join(TARGET_LOSS)}")
    if not pairs:
        raise ValueError("no pairs to fine-tune on")
    cal = read_calibration(base_dir)
    temperature = float(cal.get("temperature", 1.0))
    length = int(max_length or cal.get("max_length") or MAX_LENGTH)
    torch.set_num_threads(THREADS)
    torch.manual_seed(seed)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="dialcheck-adapt-") as tmp:
        work = Path(tmp)
        ckpt = Path(checkpoint) if checkpoint else _checkpoint(base_dir, work)
        tok = AutoTokenizer.from_pretrained(str(ckpt))
        model = AutoModelForSequenceClassification.from_pretrained(str(ckpt)).float()
        for param in model.base_model.embeddings.parameters():  # the vocabulary stays the shipped one:
            param.requires_grad = False  # less to forget, and a third of the CPU time of a step
        enc = tok([p.premise for p in pairs], [p.hypothesis for p in pairs], truncation="longest_first",
                  max_length=length)
        cols = torch.tensor([TARGET_LOSS[p.target][0] for p in pairs])
        ys = torch.tensor([TARGET_LOSS[p.target][1] for p in pairs])
        total = steps_for(len(pairs), epochs, max_steps, batch_size)
        opt = torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=lr, weight_decay=0.01)
        warm = max(1, total // 10)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (total - s) / total))
        order: list[int] = []
        bar = _bar(total, progress, "adapt: fine-tune")
        model.train()
        for step in range(total):
            if len(order) < batch_size:
                more = list(range(len(pairs)))
                rng.shuffle(more)
                order += more
            idx, order = order[:batch_size], order[batch_size:]
            width = max(len(enc["input_ids"][i]) for i in idx)
            inp = torch.zeros(len(idx), width, dtype=torch.long)
            tt, att = torch.zeros_like(inp), torch.zeros_like(inp)
            for r, i in enumerate(idx):
                n = len(enc["input_ids"][i])
                inp[r, :n] = torch.tensor(enc["input_ids"][i])
                tt[r, :n] = torch.tensor(enc["token_type_ids"][i])
                att[r, :n] = 1
            logits = model(input_ids=inp, token_type_ids=tt, attention_mask=att).logits / temperature
            logp = torch.log_softmax(logits, dim=1).gather(1, cols[idx].unsqueeze(1)).squeeze(1)
            log1m = torch.log1p(-logp.exp().clamp(max=1 - 1e-6))
            y = ys[idx]
            loss = -(y * logp + (1 - y) * log1m).mean()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            bar.update(1)
            bar.set_postfix(loss=f"{loss.item():.3f}")
        bar.close()
        model.eval()
        model.save_pretrained(str(work / "tuned"))
        tok.save_pretrained(str(work / "tuned"))
        export_dir = work / "export"
        fp32 = export_onnx(work / "tuned", export_dir)
        out.mkdir(parents=True, exist_ok=True)
        shutil.move(str(fp32), out / "model.onnx")
        if (out / "tokenizer").exists():
            shutil.rmtree(out / "tokenizer")
        shutil.copytree(export_dir / "tokenizer", out / "tokenizer")
    digest = pairs_sha1(pairs)
    base_version = str(cal.get("version", "dialcheck-nli"))
    write_calibration(out, temperature, version or f"{base_version}+adapt-{digest[:8]}",
                      **({"max_length": cal["max_length"]} if "max_length" in cal else {}),
                      adapt={"base_version": base_version, "pairs": len(pairs), "pairs_sha1": digest,
                             "targets": target_counts(pairs), "seed": seed, "steps": total, "lr": lr,
                             "batch_size": batch_size, "max_length": length, "weight": 1.0,
                             "loss": "binary cross-entropy on the judged class's calibrated probability"})
    return out


def base_export(base_dir: str | Path, out_dir: str | Path) -> Path:
    """The base artifact re-exported by this build's exporter (same weights, same graph as
    `fine_tune` writes): what `interpolate` averages with when the shipped graph differs."""
    from .export import export_onnx, write_calibration

    base_dir, out = Path(base_dir), Path(out_dir)
    with tempfile.TemporaryDirectory(prefix="dialcheck-adapt-") as tmp:
        ckpt = _checkpoint(base_dir, Path(tmp))
        fp32 = export_onnx(ckpt, Path(tmp) / "export")
        out.mkdir(parents=True, exist_ok=True)
        shutil.move(str(fp32), out / "model.onnx")
        shutil.copytree(Path(tmp) / "export" / "tokenizer", out / "tokenizer", dirs_exist_ok=True)
    shutil.copy(base_dir / "calibration.json", out / "calibration.json")
    return out


def interpolate(base_dir: str | Path, tuned_dir: str | Path, weight: float, out_dir: str | Path,
                version: str | None = None) -> Path:
    """WiSE-FT: weight · tuned + (1 − weight) · base as one artifact in `out_dir` (tokenizer and
    temperature of the tuned one). The base graph must be the tuned one's export: when the shipped
    file differs (another exporter), pass `base_export(base)` instead."""
    from .soup import average_onnx

    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be in [0, 1], got {weight}")
    base_dir, tuned_dir, out = Path(base_dir), Path(tuned_dir), Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    average_onnx(tuned_dir / "model.onnx", base_dir / "model.onnx", weight, out / "model.onnx")
    if out.resolve() != tuned_dir.resolve():
        shutil.copytree(tuned_dir / "tokenizer", out / "tokenizer", dirs_exist_ok=True)
    cal = json.loads((tuned_dir / "calibration.json").read_text())
    cal.setdefault("adapt", {})["weight"] = weight
    if version:
        cal["version"] = version
    (out / "calibration.json").write_text(json.dumps(cal, indent=1))
    return out


def _bar(total: int, progress: bool, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not progress, leave=False, mininterval=2.0)
