"""What tuning caches and feeds to the real Pipeline: NLI probabilities per pair on disk, search
results in memory, and the records of a set as CheckItems with their gold labels.

Tuning runs `workers.pipeline.Pipeline` itself (lab/tuning/tune.py), so the numbers it reports
come from the same stages the stream and `dialcheck eval` run; this module only makes re-runs cheap."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Sequence

import numpy as np

from .cache import PairCache


def model_fingerprint(model_dir: str | Path) -> str:
    """Content hash of the ONNX weights + calibration: the pair-cache key of a model."""
    d = Path(model_dir)
    h = hashlib.sha1()
    for name in ("model.onnx", "calibration.json", "model.safetensors"):
        p = d / name
        if p.exists():
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 22), b""):
                    h.update(chunk)
    return h.hexdigest()[:16]


class CachedNLI:
    """An NLIModel whose predictions go through the pair cache (used for windows and the gate)."""

    def __init__(self, nli, cache: PairCache):
        self.nli, self.cache, self.version = nli, cache, getattr(nli, "version", "?")

    def predict(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
        if len(premises) == 0:
            return np.zeros((0, 3))
        return self.cache.predict(self.nli.predict, premises, hypotheses)


class MemoSearcher:
    """A Searcher that remembers `search_many` results per (query, k) for the process: the τ_IR
    sweep retrieves the same queries for every τ."""

    def __init__(self, inner):
        self.inner, self.name = inner, getattr(inner, "name", "?")
        self._hits: dict = {}

    def search_many(self, queries: Sequence[str], k: int) -> list:
        missing = list(dict.fromkeys(q for q in queries if (q, k) not in self._hits))
        if missing:
            for q, hits in zip(missing, self.inner.search_many(missing, k)):
                self._hits[(q, k)] = hits
        return [self._hits[(q, k)] for q in queries]

    def __getattr__(self, name):  # vectors(), dense scoring ... of the wrapped backend
        return getattr(self.inner, name)
