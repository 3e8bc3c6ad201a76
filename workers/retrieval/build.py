"""`dialcheck index build`: collection → BM25 index + encoder vectors, saved to a directory."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Iterable

import numpy as np

from schemas.settings import Settings

from .bm25 import EmbeddedIndex
from .collection import DEFAULT_SOURCES, build_collection


def encode_passages(encoder, passages, batch: int = 64, progress: bool = True) -> np.ndarray:
    from tqdm import tqdm

    rows = []
    it = range(0, len(passages), batch)
    for s in tqdm(it, desc="encoding passages", unit="batch", disable=not progress, file=sys.stderr):
        rows.append(encoder.encode([f"{p.title}: {p.text}" for p in passages[s:s + batch]], is_query=False))
    return np.concatenate(rows) if rows else np.zeros((0, encoder.dim), dtype=np.float32)


def build_index(settings: Settings, out_dir: str | Path | None = None, sources: Iterable[str] = DEFAULT_SOURCES,
                tsv: str | None = None, with_vectors: bool = True, encoder=None, progress: bool = True) -> EmbeddedIndex:
    t0 = time.time()
    passages = build_collection(settings.data.dir, sources, tsv)
    vectors = None
    meta = {"sources": list(sources) + ([f"tsv:{tsv}"] if tsv else [])}
    if with_vectors:
        if encoder is None:
            from ..models.encoders import load_local_encoder

            encoder = load_local_encoder(settings.models.encoder)
        vectors = encode_passages(encoder, passages, progress=progress)
        meta["encoder"] = encoder.version
    index = EmbeddedIndex.build(passages, settings.retrieval.bm25_k1, settings.retrieval.bm25_b, vectors, meta)
    index.meta["build_seconds"] = round(time.time() - t0, 1)
    index.save(out_dir or settings.retrieval.index_dir)
    return index


class IndexEncoderMismatch(ValueError):
    """The index's stored vectors come from another encoder than the configured one: dense scores
    would be silently wrong (E5 and MiniLM are both 384-d), so the index is refused."""


def check_encoder(meta: dict, index_dir: str | Path, encoder) -> None:
    built_with = meta.get("encoder")
    if encoder is None or not built_with or built_with == getattr(encoder, "version", None):
        return
    raise IndexEncoderMismatch(
        f"index {index_dir} was built with encoder {built_with!r}, but the configured encoder is "
        f"{encoder.version!r}: rebuild it (`dialcheck index build`) or set DIALCHECK_ENCODER to match")


def ensure_index(settings: Settings, encoder=None, sources: Iterable[str] = DEFAULT_SOURCES,
                 tsv: str | None = None) -> EmbeddedIndex:
    """Load the configured index (refused if built with another encoder), building it first from
    `sources` (and `tsv`) if it does not exist: the bundled defaults unless told otherwise."""
    from filelock import FileLock

    d = Path(settings.retrieval.index_dir)
    if not (d / "meta.json").exists():
        # one builder at a time: a worker and a CLI started together on a fresh checkout would
        # otherwise both write the same files, and one could load the other's half-written passages
        d.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(d.parent / f".{d.name}.build.lock")):
            if not (d / "meta.json").exists():
                print(f"[dialcheck] building the index in {d} (first run only)", file=sys.stderr)
                return build_index(settings, d, sources=sources, tsv=tsv, encoder=encoder)
    index = EmbeddedIndex.load(d)
    check_encoder(index.meta, d, encoder)
    return index
