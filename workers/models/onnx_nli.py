"""In-process NLI backends: the shipped ONNX artifact under ONNX Runtime, or any HF
sequence-classification NLI model directory under torch. Both are `NLIClassifier`s."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from schemas.protocols import ModelUnavailable

from .nli_base import NLIClassifier, label_columns

MAX_LENGTH = 256
# How the CPU path runs a batch's pairs (settings `models.ort_nli_chunk` / `ort_nli_sort` /
# `ort_nli_workers`): sorted by token count, 4 at a time, the chunks run in parallel, one thread each.
# On the stream's pairs (1,000 DialFact E2E windows, ~56 tokens) chunks of 32 sorted by characters
# padded 42 % more tokens than they held, chunks of 8 by tokens 9 %: 1.35-1.5x faster; chunks of 4 on
# two single-threaded runs at once took 10.0-10.1 s against 11.3-12.3 s for chunks of 8 on one run of
# two threads. The logits are bit-identical in every case (the attention mask hides the padding).
CHUNK_PAIRS = 4
SORT_BY = "tokens"
WORKERS = 0  # parallel runs: 0 = one per core


def read_calibration(model_dir: Path) -> dict:
    p = model_dir / "calibration.json"
    return json.loads(p.read_text()) if p.exists() else {"temperature": 1.0, "label_order": None}


def model_version(model_dir: str | Path) -> str:
    """The version an NLI model dir names itself by (calibration.json), "dialcheck-nli" when unnamed."""
    return str(read_calibration(Path(model_dir)).get("version", "dialcheck-nli"))


class OnnxNLI(NLIClassifier):
    """The shipped artifact under ONNX Runtime; label order, temperature and (for an adopted model,
    lab/nli/adopt.py) the model's max length from calibration.json. `max_length` given (the Triton
    config's parameter) wins; else calibration.json `max_length`, else MAX_LENGTH."""

    def __init__(self, model_dir: str | Path, batch_size: int = CHUNK_PAIRS, threads: int = 0,
                 graph_optimization: str = "all", max_length: int | None = None, sort_by: str = SORT_BY,
                 workers: int = WORKERS):
        """`workers` > 1 (0: one per core): that many chunks run at once, each on one thread (`threads`
        is then ignored); 1: one chunk at a time on `threads` threads (0: ONNX Runtime's default)."""
        import os
        from concurrent.futures import ThreadPoolExecutor

        import onnxruntime as ort
        from transformers import AutoTokenizer

        self.dir = Path(model_dir)
        onnx_path = self.dir / "model.onnx"
        if not onnx_path.exists():
            raise ModelUnavailable(f"no model.onnx in {self.dir}")
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.dir / "tokenizer"))
        opts = ort.SessionOptions()
        self.workers = int(workers or len(os.sched_getaffinity(0)) or 1)
        if self.workers > 1:
            threads = 1
        if threads:
            opts.intra_op_num_threads = threads
        opts.graph_optimization_level = {
            "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL, "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
            "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
            "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}[graph_optimization]
        self.session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self.input_names = {i.name for i in self.session.get_inputs()}
        cal = read_calibration(self.dir)
        self.temperature = float(cal.get("temperature", 1.0))
        self.version = cal.get("version", "dialcheck-nli")
        self.columns = label_columns(cal.get("label_order"))
        self.batch_size = batch_size
        self.max_length = int(max_length or cal.get("max_length") or MAX_LENGTH)
        if sort_by not in ("tokens", "chars"):
            raise ValueError(f"sort_by {sort_by!r}: 'tokens' or 'chars'")
        self.sort_by = sort_by
        # run() frees the GIL: one session serves concurrent runs
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="dialcheck-nli") if self.workers > 1 else None

    def pair_lengths(self, premises, hypotheses) -> list[int]:
        if self.sort_by == "chars":
            return super().pair_lengths(premises, hypotheses)
        enc = self.tokenizer(list(premises), list(hypotheses), truncation="longest_first", max_length=self.max_length)
        return [len(ids) for ids in enc["input_ids"]]

    def _feed(self, premises: list[str], hypotheses: list[str]) -> dict[str, np.ndarray]:
        enc = self.tokenizer(premises, hypotheses, padding=True, truncation="longest_first",
                             max_length=self.max_length, return_tensors="np")
        return {k: v.astype(np.int64) for k, v in enc.items() if k in self.input_names}

    def _run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(["logits"], feed)[0]

    def forward(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        return self._run(self._feed(premises, hypotheses))

    def forward_sorted(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """With `workers` > 1 the chunks are tokenized here (a fast tokenizer must not be shared
        across threads) and run in parallel."""
        if self._pool is None:
            return super().forward_sorted(premises, hypotheses)
        b = self.batch_size
        feeds = [self._feed(premises[s:s + b], hypotheses[s:s + b]) for s in range(0, len(premises), b)]
        return np.concatenate(list(self._pool.map(self._run, feeds))).astype(np.float32)


class HFNLI(NLIClassifier):
    """Any Hugging Face NLI classifier directory under torch (e.g. the paper's DeBERTa). Its label
    names are mapped onto (entailment, neutral, contradiction); two-class models get neutral = 0."""

    def __init__(self, model_dir: str | Path, batch_size: int = 16, device: str = "cpu"):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.torch = torch
        self.device = device
        self.tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
        self.model = AutoModelForSequenceClassification.from_pretrained(str(model_dir)).eval().to(device)
        id2label = self.model.config.id2label
        try:
            self.columns = label_columns([id2label[i] for i in range(len(id2label))])
        except ValueError as e:
            raise ModelUnavailable(f"{model_dir}: {e}") from None
        self.temperature = float(read_calibration(Path(model_dir)).get("temperature", 1.0))
        self.version = f"hf:{Path(model_dir).name}"
        self.batch_size = batch_size

    def forward(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        enc = self.tokenizer(premises, hypotheses, padding=True, truncation=True, max_length=MAX_LENGTH,
                             return_tensors="pt").to(self.device)
        with self.torch.inference_mode(), self.torch.autocast(
                "cuda", dtype=self.torch.bfloat16, enabled=self.device.startswith("cuda")):
            return self.model(**enc).logits.float().cpu().numpy()


def load_local_nli(model_dir: str | Path, threads: int = 0, graph_optimization: str = "all",
                   device: str = "cpu", torch_dir: str | Path | None = None, chunk: int = CHUNK_PAIRS,
                   sort_by: str = SORT_BY, workers: int = WORKERS) -> NLIClassifier:
    """ONNX Runtime on CPU for the shipped artifact; torch for an HF checkpoint or on CUDA."""
    d = Path(model_dir)
    if device.startswith("cuda"):
        if not torch_dir:
            raise ModelUnavailable("device cuda needs an HF checkpoint of the NLI model (DIALCHECK_NLI_TORCH_DIR)")
        nli = HFNLI(torch_dir, batch_size=256, device=device)
        nli.temperature = float(read_calibration(d).get("temperature", nli.temperature))  # the release's T
        return nli
    if (d / "model.onnx").exists():
        return OnnxNLI(d, batch_size=chunk, threads=threads, graph_optimization=graph_optimization, sort_by=sort_by,
                       workers=workers)
    return HFNLI(d)
