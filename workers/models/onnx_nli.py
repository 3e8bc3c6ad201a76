"""In-process NLI: the shipped ONNX artifact under ONNX Runtime (or any HF sequence-classification
NLI model directory, e.g. the paper's DeBERTa, via torch)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from schemas.protocols import ModelUnavailable

from .nli_base import softmax

MAX_LENGTH = 256


def read_calibration(model_dir: Path) -> dict:
    p = model_dir / "calibration.json"
    return json.loads(p.read_text()) if p.exists() else {"temperature": 1.0, "label_order": None}


class OnnxNLI:
    """Tokenise → ONNX Runtime forward → temperature softmax. Batches in chunks of `batch_size`,
    length-sorted so short pairs are not padded to long ones."""

    def __init__(self, model_dir: str | Path, batch_size: int = 32, threads: int = 0):
        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.dir = Path(model_dir)
        onnx_path = self.dir / "model.onnx"
        if not onnx_path.exists():
            raise ModelUnavailable(f"no model.onnx in {self.dir}")
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.dir / "tokenizer"))
        opts = ort.SessionOptions()
        if threads:
            opts.intra_op_num_threads = threads
        self.session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        cal = read_calibration(self.dir)
        self.temperature = float(cal.get("temperature", 1.0))
        self.version = cal.get("version", "dialcheck-nli")
        self.batch_size = batch_size

    def logits(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        n = len(premises)
        out = np.zeros((n, 3), dtype=np.float32)
        order = sorted(range(n), key=lambda i: len(premises[i]) + len(hypotheses[i]))
        for s in range(0, n, self.batch_size):
            idx = order[s:s + self.batch_size]
            enc = self.tokenizer([premises[i] for i in idx], [hypotheses[i] for i in idx], padding=True,
                                 truncation="longest_first", max_length=MAX_LENGTH, return_tensors="np")
            feed = {k: v.astype(np.int64) for k, v in enc.items() if k in self.input_names}
            out[idx] = self.session.run(["logits"], feed)[0]
        return out

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        if len(premises) == 0:
            return np.zeros((0, 3), dtype=np.float32)
        return softmax(self.logits(premises, hypotheses), self.temperature)


class HFNLI:
    """Any Hugging Face NLI classifier directory (drop-in for users who have one). Its label names
    are mapped onto (entailment, neutral, contradiction); two-class models get neutral = 0."""

    def __init__(self, model_dir: str | Path, batch_size: int = 16):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval()
        names = {i: n.lower() for i, n in self.model.config.id2label.items()}
        self.columns = []
        for want in ("entail", "neutral", "contradict"):
            match = [i for i, n in names.items() if n.startswith(want)]
            self.columns.append(match[0] if match else None)
        if self.columns[0] is None:
            raise ModelUnavailable(f"{model_dir}: no entailment label in {names}")
        self.temperature = float(read_calibration(Path(model_dir)).get("temperature", 1.0))
        self.version = f"hf:{Path(model_dir).name}"
        self.batch_size = batch_size

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        rows = []
        for s in range(0, len(premises), self.batch_size):
            enc = self.tokenizer(list(premises[s:s + self.batch_size]), list(hypotheses[s:s + self.batch_size]),
                                 padding=True, truncation=True, max_length=MAX_LENGTH, return_tensors="pt")
            with self.torch.no_grad():
                rows.append(self.model(**enc).logits.numpy())
        logits = np.concatenate(rows) if rows else np.zeros((0, len(self.columns)))
        full = np.full((len(logits), 3), -1e4, dtype=np.float32)
        for j, col in enumerate(self.columns):
            if col is not None:
                full[:, j] = logits[:, col]
        return softmax(full, self.temperature)


def load_local_nli(model_dir: str | Path) -> "OnnxNLI | HFNLI":
    d = Path(model_dir)
    return OnnxNLI(d) if (d / "model.onnx").exists() else HFNLI(d)
