"""One NLI classifier base: length sort, chunk, label order, temperature — forwards interchangeable.

Like sentence-transformers' `CrossEncoder(backend=...)`: ONNX Runtime (`OnnxNLI`), torch
(`HFNLI`) and Triton (`TritonNLI`) differ only in `forward` (a chunk of pairs → raw logits), so
every backend sorts, chunks, reorders columns and calibrates exactly the same way, and the stream
worker and the evaluator get the same numbers whichever backend serves them."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from schemas.protocols import NLI_LABELS as LABELS


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def label_columns(label_names: Sequence[str] | None) -> list[int | None]:
    """For each of (entailment, neutral, contradiction), the model output column that holds it
    (None where a two-class model has no neutral). `label_names`: the model's labels in output
    order (calibration.json `label_order` or a HF config's id2label); None means our own order."""
    if not label_names:
        return [0, 1, 2]
    names = [str(n).lower() for n in label_names]
    columns = []
    for want in LABELS:
        match = [i for i, n in enumerate(names) if n.startswith(want[:7])]
        columns.append(match[0] if match else None)
    if columns[0] is None:
        raise ValueError(f"no entailment label in {list(label_names)}")
    return columns


class NLIClassifier:
    """Base of every NLIModel. Subclasses set `version`, `temperature`, `batch_size`, `columns`
    and implement `forward(premises, hypotheses) -> logits` for one chunk."""

    version: str = "unknown"
    temperature: float = 1.0
    batch_size: int = 32
    columns: list[int | None] = [0, 1, 2]
    # `predict` may run on a thread other than its caller's, one call at a time (the Pipeline's
    # overlap, settings perf.overlap_parts); a wrapper that keeps thread-bound state (the lab's
    # SQLite pair cache) does not say so, and the Pipeline keeps it on the caller's thread
    any_thread: bool = True

    def forward(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        raise NotImplementedError

    def pair_lengths(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[int]:
        """What `logits` sorts the pairs by before chunking: characters here; a backend with its
        tokenizer at hand counts tokens, which pads less (OnnxNLI)."""
        return [len(p) + len(h) for p, h in zip(premises, hypotheses)]

    def forward_sorted(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Raw logits of length-sorted pairs, in chunks of `batch_size` (short pairs are not
        padded to long ones). Backends that parallelise requests override this."""
        chunks = [self.forward(premises[s:s + self.batch_size], hypotheses[s:s + self.batch_size])
                  for s in range(0, len(premises), self.batch_size)]
        return np.concatenate(chunks).astype(np.float32)

    def logits(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """Raw logits in the model's own column order, rows in input order."""
        if len(premises) != len(hypotheses):
            raise ValueError("premises and hypotheses differ in length")
        n = len(premises)
        if n == 0:
            return np.zeros((0, 3), np.float32)
        lengths = self.pair_lengths(premises, hypotheses)
        order = sorted(range(n), key=lengths.__getitem__)
        sorted_logits = self.forward_sorted([premises[i] for i in order], [hypotheses[i] for i in order])
        out = np.zeros((n, sorted_logits.shape[1]), np.float32)
        out[order] = sorted_logits
        return out

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        """Calibrated probabilities, columns (entailment, neutral, contradiction)."""
        raw = self.logits(premises, hypotheses)
        if len(raw) == 0:
            return np.zeros((0, 3), np.float32)
        full = np.full((len(raw), 3), -1e4, dtype=np.float32)
        for j, col in enumerate(self.columns):
            if col is not None:
                full[:, j] = raw[:, col]
        return softmax(full, self.temperature)
