"""Embedded index: BM25 (bm25s, Lucene variant, k1 1.5 / b 0.4) plus stored encoder vectors,
saved as one directory (passages.jsonl, bm25/, vectors.npy, meta.json)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from schemas.protocols import Passage, SearchUnavailable

from ..jsonl import read_jsonl
from ..text import BM25_STOP, WORD
from .collection import WIKIPEDIA_SOURCES, wikipedia_url

_TOKEN = WORD
STOPWORDS = BM25_STOP


def tokenize(text: str) -> list[str]:
    return [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


class EmbeddedIndex:
    name = "embedded"

    def __init__(self, passages: list[Passage], bm25, vectors: np.ndarray | None, meta: dict):
        self.passages = passages
        self._bm25 = bm25
        self._vectors = vectors
        self._row = {p.id: i for i, p in enumerate(passages)}
        self.meta = meta

    @classmethod
    def build(cls, passages: list[Passage], k1: float = 1.5, b: float = 0.4,
              vectors: np.ndarray | None = None, meta: dict | None = None) -> "EmbeddedIndex":
        import bm25s

        bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
        bm25.index([tokenize(f"{p.title} {p.text}") for p in passages], show_progress=False)
        return cls(passages, bm25, vectors, {"k1": k1, "b": b, "passages": len(passages), **(meta or {})})

    def save(self, directory: str | Path) -> None:
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        with open(d / "passages.jsonl", "w", encoding="utf-8") as f:
            for p in self.passages:
                row = {"id": p.id, "title": p.title, "text": p.text, "doc_id": p.doc_id}
                f.write(json.dumps({**row, "url": p.url} if p.url else row) + "\n")
        self._bm25.save(str(d / "bm25"))
        if self._vectors is not None:
            np.save(d / "vectors.npy", self._vectors.astype(np.float32))
        (d / "meta.json").write_text(json.dumps(self.meta, indent=1))

    @classmethod
    def load(cls, directory: str | Path) -> "EmbeddedIndex":
        import bm25s

        d = Path(directory)
        if not (d / "meta.json").exists():
            raise SearchUnavailable(f"no index at {d}: run `dialcheck index build`")
        meta = json.loads((d / "meta.json").read_text())
        rows = list(read_jsonl(d / "passages.jsonl"))
        passages = [Passage(r["id"], r["title"], r["text"], doc_id=r.get("doc_id", r["title"]), url=r.get("url"))
                    for r in rows]
        if not any("url" in r for r in rows) and set(meta.get("sources") or ["?"]) <= WIKIPEDIA_SOURCES:
            # built before passages kept their url, from bundled Wikipedia sources only: the article link
            passages = [Passage(p.id, p.title, p.text, doc_id=p.doc_id, url=wikipedia_url(p.title)) for p in passages]
        vectors = np.load(d / "vectors.npy") if (d / "vectors.npy").exists() else None
        return cls(passages, bm25s.BM25.load(str(d / "bm25")), vectors, meta)

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        k = min(k, len(self.passages))
        toks = [tokenize(q) or ["_"] for q in queries]
        docs, scores = self._bm25.retrieve(toks, k=k, show_progress=False, n_threads=1)
        out = []
        for row_docs, row_scores in zip(docs, scores):
            out.append([self.passages[int(i)].with_score(s) for i, s in zip(row_docs, row_scores) if s > 0])
        return out

    def vectors(self, passage_ids: Sequence[str]) -> np.ndarray | None:
        if self._vectors is None:
            return None
        return self._vectors[[self._row[i] for i in passage_ids]]

    def dense_search(self, query_vector: np.ndarray, k: int) -> list[Passage] | None:
        if self._vectors is None:
            return None
        scores = self._vectors @ query_vector
        top = np.argsort(-scores)[:k]
        return [self.passages[i].with_score(scores[i]) for i in top]
