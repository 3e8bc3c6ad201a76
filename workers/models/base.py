"""The two small interfaces every model sits behind. Pipeline stages depend only on these, so
in-process ONNX Runtime and Triton implementations are interchangeable."""
from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


class ModelUnavailable(RuntimeError):
    """A model backend failed (server down, timeout, bad artifact). Callers degrade, never drop."""


@runtime_checkable
class NLIModel(Protocol):
    """Three-way NLI. Rows of the result are calibrated probabilities in workers.nli.labels order
    (entailment, neutral, contradiction)."""

    version: str

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray: ...


@runtime_checkable
class Encoder(Protocol):
    """Sentence encoder returning L2-normalised rows (so a dot product is a cosine)."""

    version: str
    dim: int

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray: ...


def softmax(logits: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    z = logits / temperature
    z = z - z.max(axis=1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)
