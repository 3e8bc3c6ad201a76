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
TUNED = "tuned.pt"  # fine_tune(export=False): the tuned weights, torch state dict
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
              checkpoint: str | Path | None = None, export: bool = True) -> Path:
    """Fine-tune the artifact in `base_dir` on `pairs` (binary losses, module docstring) and write an
    artifact to `out_dir`: model.onnx, tokenizer/, calibration.json (the base temperature; version
    `version`, default `<base version>+adapt-<pairs sha1[:8]>`). Returns `out_dir`. `checkpoint`: the
    base already rebuilt as a trainable checkpoint (`base_checkpoint`), for several fine-tunes of one base.
    `export=False`: no ONNX export, the weights as TUNED (torch) beside calibration.json — for a model
    that is only scored (`TorchMixes`) and exported at most once, at the weight chosen (`TorchMixes.export`)."""
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
        out.mkdir(parents=True, exist_ok=True)
        if export:
            model.save_pretrained(str(work / "tuned"))
            tok.save_pretrained(str(work / "tuned"))
            export_dir = work / "export"
            fp32 = export_onnx(work / "tuned", export_dir)
            shutil.move(str(fp32), out / "model.onnx")
            if (out / "tokenizer").exists():
                shutil.rmtree(out / "tokenizer")
            shutil.copytree(export_dir / "tokenizer", out / "tokenizer")
        else:
            torch.save(model.state_dict(), out / TUNED)
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


class TorchMixes:
    """A fine-tune written with `export=False`, scored in torch at WiSE-FT weights w · tuned +
    (1 − w) · base, in this process: no ONNX export, no averaged graph written and no session built
    per weight (what a cross-fitting fold model, only ever scored, cost most outside its training).
    `probs` is the runtime's: tokens as OnnxNLI cuts them, length-sorted chunks, softmax(logits / T)
    with the base temperature, columns (entailment, neutral, contradiction)."""

    def __init__(self, checkpoint: str | Path, tuned_dir: str | Path, batch_size: int = 32):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        from workers.models.onnx_nli import MAX_LENGTH, read_calibration

        torch.set_num_threads(THREADS)
        self.tuned_dir = Path(tuned_dir)
        cal = read_calibration(self.tuned_dir)
        self.temperature = float(cal.get("temperature", 1.0))
        self.max_length = int(cal.get("max_length") or MAX_LENGTH)
        self.tok = AutoTokenizer.from_pretrained(str(checkpoint))
        self.model = AutoModelForSequenceClassification.from_pretrained(str(checkpoint)).float().eval()
        self.base = {k: v.clone() for k, v in self.model.state_dict().items()}
        self.tuned = torch.load(self.tuned_dir / TUNED, map_location="cpu")
        self.batch_size = batch_size

    def set_weight(self, w: float) -> None:
        if not 0.0 <= w <= 1.0:
            raise ValueError(f"weight must be in [0, 1], got {w}")
        self.model.load_state_dict({k: (w * self.tuned[k] + (1.0 - w) * b) if b.is_floating_point() else b
                                    for k, b in self.base.items()})

    def probs(self, w: float, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        import torch

        from workers.models.nli_base import softmax

        n = len(premises)
        if not n:
            return np.zeros((0, 3))
        self.set_weight(float(w))
        enc = self.tok(list(premises), list(hypotheses), truncation="longest_first", max_length=self.max_length)
        order = sorted(range(n), key=lambda i: len(enc["input_ids"][i]))
        logits = np.zeros((n, 3), np.float32)
        with torch.inference_mode():
            for s in range(0, n, self.batch_size):
                idx = order[s:s + self.batch_size]
                batch = self.tok.pad({k: [enc[k][i] for i in idx] for k in ("input_ids", "token_type_ids",
                                                                              "attention_mask")}, return_tensors="pt")
                logits[idx] = self.model(**batch).logits.float().numpy()
        return np.asarray(softmax(logits, self.temperature), float)

    def export(self, w: float, out_dir: str | Path) -> Path:
        """The mix at `w` as an artifact (model.onnx, tokenizer/, calibration.json with the weight),
        as `fine_tune` then `interpolate` would write it."""
        from .export import export_onnx

        out = Path(out_dir)
        self.set_weight(float(w))
        with tempfile.TemporaryDirectory(prefix="dialcheck-adapt-") as tmp:
            self.model.save_pretrained(str(Path(tmp) / "mixed"))
            self.tok.save_pretrained(str(Path(tmp) / "mixed"))
            fp32 = export_onnx(Path(tmp) / "mixed", Path(tmp) / "export")
            out.mkdir(parents=True, exist_ok=True)
            shutil.move(str(fp32), out / "model.onnx")
            shutil.copytree(Path(tmp) / "export" / "tokenizer", out / "tokenizer", dirs_exist_ok=True)
        cal = json.loads((self.tuned_dir / "calibration.json").read_text())
        cal.setdefault("adapt", {})["weight"] = float(w)
        (out / "calibration.json").write_text(json.dumps(cal, indent=1))
        return out


def _bar(total: int, progress: bool, desc: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, disable=not progress, leave=False, mininterval=2.0)
