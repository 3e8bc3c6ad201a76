"""The one place a retrieval backend is chosen: `load_searcher` (pipeline, tuning, CLI) and
`build_index` (the `dialcheck index build` command). A new backend is a `Searcher`
(schemas/protocols.py) plus one branch in each function here and one value in
`RetrievalSettings.backend` (schemas/settings/retrieval.py)."""
from __future__ import annotations

from typing import Iterable

from schemas.protocols import Encoder, Searcher
from schemas.settings import Settings


def load_searcher(settings: Settings, encoder: Encoder | None = None) -> Searcher:
    """The configured backend: OpenSearch, or the embedded index (built with defaults on first use),
    behind a BM25 hit cache unless `perf.search_cache_entries` is 0."""
    if settings.retrieval.backend == "opensearch":
        from .opensearch import OpenSearchSearcher

        searcher = OpenSearchSearcher(settings.retrieval.opensearch_url, settings.retrieval.opensearch_index)
    else:
        from .build import ensure_index

        searcher = ensure_index(settings, encoder)
    if not settings.perf.search_cache_entries:
        return searcher
    from ..caches import CachedSearcher

    return CachedSearcher(searcher, settings.perf.search_cache_entries)


def build_index(settings: Settings, sources: Iterable[str] | None = None, tsv: str | None = None,
                with_vectors: bool = True, keep: int = 1) -> dict:
    """Index the collection into the configured backend; returns what was built (for the CLI's JSON).
    `sources` None: the defaults (benchmark evidence + the starter base unless DIALCHECK_STARTER_KB=0)."""
    if settings.retrieval.backend == "opensearch":
        from .build import collect, collection_meta, encode_passages
        from .opensearch import build_versioned_index

        sources, meta = collection_meta(settings, sources, tsv)
        passages = collect(settings, sources, tsv)
        vectors = None
        if with_vectors:
            from ..models.encoders import load_local_encoder

            vectors = encode_passages(load_local_encoder(settings.models.encoder), passages)
        result = build_versioned_index(passages, vectors, settings.retrieval.opensearch_url,
                                       settings.retrieval.opensearch_index, keep=keep,
                                       k1=settings.retrieval.bm25_k1, b=settings.retrieval.bm25_b)
        return {"backend": "opensearch", **result, **({"starter": meta["starter"]} if "starter" in meta else {})}
    from .build import build_index as build_embedded

    index = build_embedded(settings, sources=sources, tsv=tsv, with_vectors=with_vectors)
    return {"backend": "embedded", "dir": settings.retrieval.index_dir, **index.meta}
