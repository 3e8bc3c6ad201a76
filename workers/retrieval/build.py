"""`dialcheck index build`: collection → BM25 index + encoder vectors, saved to a directory.

The default index (no sources named: `default_sources`, the benchmark evidence plus the starter
knowledge base) records `"default": true` and what it was built from (`sources`, the starter's
pinned package); `ensure_index` rebuilds such an index when the defaults it was built from are no
longer the configured ones (DIALCHECK_STARTER_KB switched, a new starter pin, an index from before
the starter base). An index built from sources one named is never rebuilt behind one's back."""
from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Iterable

import numpy as np

from schemas.atomic import replaced
from schemas.errors import DialcheckError
from schemas.settings import Settings

from .bm25 import EmbeddedIndex
from .collection import BENCHMARK_SOURCES, build_collection, default_sources


def encode_passages(encoder, passages, batch: int = 64, progress: bool = True) -> np.ndarray:
    from tqdm import tqdm

    rows = []
    texts = [f"{p.title}: {p.text}" for p in passages]
    order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths together: less padding
    it = range(0, len(passages), batch)
    for s in tqdm(it, desc="encoding passages", unit="batch", disable=not progress, file=sys.stderr):
        rows.append(encoder.encode([texts[i] for i in order[s:s + batch]], is_query=False))
    if not rows:
        return np.zeros((0, encoder.dim), dtype=np.float32)
    out = np.empty((len(texts), encoder.dim), dtype=np.float32)
    out[order] = np.concatenate(rows)
    return out


def collection_meta(settings: Settings, sources: Iterable[str] | None, tsv: str | None) -> tuple[list[str], dict]:
    """(sources, meta) of a build: `sources` None means the defaults (recorded as such); with the
    starter base, its package pin, licence and attribution."""
    default = sources is None and not tsv
    sources = list(default_sources(settings) if sources is None else sources)
    meta: dict = {"sources": sources + ([f"tsv:{tsv}"] if tsv else []), "default": default}
    if "starter" in sources:
        from .starter import SOURCE_TAG, starter_meta

        meta["starter"] = {"package": SOURCE_TAG, **starter_meta()}
    return sources, meta


def stale_default(meta: dict, settings: Settings, encoder=None) -> str | None:
    """Why a default index no longer matches the configured defaults — its sources, the starter base's
    package or, given the configured `encoder`, the encoder it was built with (None: it does, or it was
    built from sources someone named: such an index is refused by `check_encoder` instead). An index from
    before `default` was recorded counts as a default one when it holds exactly the old defaults."""
    if not meta.get("default", meta.get("sources") == list(BENCHMARK_SOURCES)):
        return None
    version = getattr(encoder, "version", None)
    if version and meta.get("encoder") and meta["encoder"] != version:
        return f"built with encoder {meta['encoder']}, the configured encoder is {version}"
    _, want = collection_meta(settings, None, None)
    if meta.get("sources") != want["sources"]:
        hint = "; DIALCHECK_STARTER_KB=0 keeps the index without it" if "starter" in want["sources"] else ""
        return (f"built from {','.join(meta.get('sources') or [])}, the defaults are now "
                f"{','.join(want['sources'])}{hint}")
    if "starter" in want and (meta.get("starter") or {}).get("package") != want["starter"]["package"]:
        return f"starter base {(meta.get('starter') or {}).get('package')} → {want['starter']['package']}"
    return None


def collect(settings: Settings, sources: Iterable[str], tsv: str | None = None) -> list:
    """The passages of `sources` (and `tsv`); the starter base is read from settings.retrieval.starter_dir."""
    def starter():
        from .starter import starter_passages

        return starter_passages(settings.retrieval.starter_dir)

    return build_collection(settings.data.dir, sources, tsv, readers={"starter": starter})


def build_index(settings: Settings, out_dir: str | Path | None = None, sources: Iterable[str] | None = None,
                tsv: str | None = None, with_vectors: bool = True, encoder=None, progress: bool = True) -> EmbeddedIndex:
    """Build and save the index; `sources` None: the defaults (`default_sources`)."""
    t0 = time.time()
    sources, meta = collection_meta(settings, sources, tsv)
    passages = collect(settings, sources, tsv)
    vectors = None
    if with_vectors:
        if encoder is None:
            from ..models.encoders import load_local_encoder

            encoder = load_local_encoder(settings.models.encoder)
        vectors = encode_passages(encoder, passages, progress=progress)
        meta["encoder"] = encoder.version
    index = EmbeddedIndex.build(passages, settings.retrieval.bm25_k1, settings.retrieval.bm25_b, vectors, meta)
    index.meta["build_seconds"] = round(time.time() - t0, 1)
    with replaced(out_dir or settings.retrieval.index_dir) as tmp:  # readers never see a half-written index
        index.save(tmp)
    return index


class IndexEncoderMismatch(DialcheckError, ValueError):
    """The index's stored vectors come from another encoder than the configured one: dense scores
    would be silently wrong (E5 and MiniLM are both 384-d), so the index is refused."""


def check_encoder(meta: dict, index_dir: str | Path, encoder) -> None:
    built_with = meta.get("encoder")
    if encoder is None or not built_with or built_with == getattr(encoder, "version", None):
        return
    raise IndexEncoderMismatch(
        f"index {index_dir} was built with encoder {built_with!r}, but the configured encoder is "
        f"{encoder.version!r}: rebuild it (`dialcheck index build`) or set DIALCHECK_ENCODER to match")


def _read_meta(d: Path) -> dict | None:
    import json

    try:
        return json.loads((d / "meta.json").read_text())
    except (OSError, ValueError):
        return None


def ensure_index(settings: Settings, encoder=None, sources: Iterable[str] | None = None,
                 tsv: str | None = None) -> EmbeddedIndex:
    """Load the configured index (refused if built with another encoder), building it first from
    `sources` (and `tsv`) if it does not exist: the defaults (`default_sources`) unless told
    otherwise. A default index whose defaults changed (`stale_default`: sources, starter base,
    encoder) is rebuilt."""
    from filelock import FileLock

    d = Path(settings.retrieval.index_dir)
    defaults = sources is None and not tsv

    def why_build() -> str | None:
        meta = _read_meta(d)
        if meta is None:
            return "first run only"
        stale = stale_default(meta, settings, encoder) if defaults else None
        return f"rebuilding: {stale}" if stale else None

    if why_build():
        # one builder at a time: a worker and a CLI started together on a fresh checkout would
        # otherwise both build; the build is written beside `d` and swapped in when complete
        d.parent.mkdir(parents=True, exist_ok=True)
        with FileLock(str(d.parent / f".{d.name}.build.lock")):
            reason = why_build()
            if reason:
                print(f"[dialcheck] building the index in {d} ({reason})", file=sys.stderr)
                return build_index(settings, d, sources=sources, tsv=tsv, encoder=encoder)
    index = EmbeddedIndex.load(d)
    check_encoder(index.meta, d, encoder)
    return index
