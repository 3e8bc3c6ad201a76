"""OpenSearch passage backend behind the Searcher interface.

Index layout (one index template): `passage` = "title text" analysed like the embedded index
(lowercase, same stopword list) and scored with BM25 k1 1.5 / b 0.4; `title`, `text`, `doc_id`
stored (and `url`, the source link, when the passage has one); `vector` = the encoder's
normalised vector as a k-NN (HNSW, inner product) field.
Servers without the k-NN plugin (e.g. the osmem imitation used in tests) still store the
vectors, and dense scoring then happens client-side on BM25 candidates; results say which.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

from schemas.protocols import Passage, SearchUnavailable
from schemas.secrets import mask_urls
from .bm25 import STOPWORDS

SERVER_KNN = "server-knn"
CLIENT_RESCORE = "client-rescore"


def index_template(index: str, dim: int | None, k1: float = 1.5, b: float = 0.4, shards: int = 1,
                   replicas: int = 0) -> dict:
    """Composable index template for `index` (and `index-*`, for blue/green rebuilds)."""
    settings: dict[str, Any] = {
        "number_of_shards": shards, "number_of_replicas": replicas,
        "similarity": {"dialcheck_bm25": {"type": "BM25", "k1": k1, "b": b}},
        "analysis": {
            "filter": {"dialcheck_stop": {"type": "stop", "stopwords": sorted(STOPWORDS)}},
            "analyzer": {"dialcheck_text": {"type": "custom", "tokenizer": "standard",
                                            "filter": ["lowercase", "dialcheck_stop"]}}},
    }
    props: dict[str, Any] = {
        "passage": {"type": "text", "analyzer": "dialcheck_text", "similarity": "dialcheck_bm25"},
        "title": {"type": "text", "analyzer": "dialcheck_text", "similarity": "dialcheck_bm25"},
        "text": {"type": "text", "index": False},
        "doc_id": {"type": "keyword"},
        "url": {"type": "keyword", "index": False},
    }
    if dim:
        settings["knn"] = True
        props["vector"] = {"type": "knn_vector", "dimension": int(dim),
                           "method": {"name": "hnsw", "space_type": "innerproduct", "engine": "lucene",
                                      "parameters": {"m": 16, "ef_construction": 128}}}
    return {"index_patterns": [index, f"{index}-*"], "priority": 100,
            "template": {"settings": {"index": settings}, "mappings": {"properties": props}}}


def connect(url: str, timeout_s: float = 30.0, retries: int = 3) -> Any:
    from opensearchpy import OpenSearch

    return OpenSearch(hosts=[url], timeout=timeout_s, max_retries=retries, retry_on_timeout=True)


def _actions(passages: Iterable[Passage], vectors: np.ndarray | None, index: str) -> Iterator[dict]:
    for i, p in enumerate(passages):
        src: dict[str, Any] = {"passage": f"{p.title} {p.text}", "title": p.title, "text": p.text,
                               "doc_id": p.doc_id or p.title}
        if p.url:
            src["url"] = p.url
        if vectors is not None:
            src["vector"] = [float(x) for x in vectors[i]]
        yield {"_op_type": "index", "_index": index, "_id": p.id, "_source": src}


def build_opensearch_index(passages: Iterable[Passage], vectors: np.ndarray | None, url: str, index: str, *,
                           k1: float = 1.5, b: float = 0.4, recreate: bool = True, chunk_size: int = 500,
                           retries: int = 3, progress: bool = True, total: int | None = None,
                           template_name: str | None = None) -> int:
    """Put the template, (re)create the index, bulk-index passages (row i of `vectors` belongs to
    the i-th passage), refresh. Bulk chunks rejected with 429 are retried with backoff.
    Returns the number of passages indexed; raises SearchUnavailable on failure."""
    from opensearchpy import helpers
    from opensearchpy.exceptions import NotFoundError, OpenSearchException
    from tqdm import tqdm

    client = connect(url, retries=retries)
    dim = int(vectors.shape[1]) if vectors is not None else None
    if total is None and hasattr(passages, "__len__"):
        total = len(passages)  # type: ignore[arg-type]
    try:
        base = template_name or index  # a versioned build shares the alias's template (pattern `alias-*`)
        client.indices.put_index_template(name=f"{base}-template", body=index_template(base, dim, k1, b))
        if recreate:
            try:
                client.indices.delete(index=index)
            except NotFoundError:
                pass
        if not client.indices.exists(index=index):
            client.indices.create(index=index)
        done = 0
        failed: list[Any] = []
        bar = tqdm(total=total, unit="passage", desc=f"opensearch {index}", disable=not progress)
        for ok, item in helpers.streaming_bulk(client, _actions(passages, vectors, index), chunk_size=chunk_size,
                                               max_retries=retries, initial_backoff=1, raise_on_error=False):
            if ok:
                done += 1
            else:
                failed.append(item)
            bar.update(1)
        bar.close()
        client.indices.refresh(index=index)
    except OpenSearchException as e:
        raise SearchUnavailable(f"opensearch {url}/{index}: {e}") from e
    if failed:
        raise SearchUnavailable(f"opensearch {url}/{index}: {len(failed)} passages failed, first: {failed[0]}")
    return done


def versioned_name(alias: str, now: float | None = None) -> str:
    """'dialcheck-passages' → 'dialcheck-passages-v20261130t041200' (UTC; sorts by build time;
    lowercase because OpenSearch refuses upper case in index names)."""
    return f"{alias}-v{time.strftime('%Y%m%dt%H%M%S', time.gmtime(now))}"


def alias_targets(client: Any, alias: str) -> list[str]:
    """Indices the alias points at now ([] when there is no such alias)."""
    from opensearchpy.exceptions import NotFoundError

    try:
        return sorted(client.indices.get_alias(name=alias))
    except NotFoundError:
        return []


def build_versioned_index(passages: Iterable[Passage], vectors: np.ndarray | None, url: str, alias: str, *,
                          keep: int = 1, k1: float = 1.5, b: float = 0.4, chunk_size: int = 500, retries: int = 3,
                          progress: bool = True, total: int | None = None, now: float | None = None) -> dict:
    """Re-index without downtime: build `<alias>-v<UTC time>`, check its document count, then move
    the alias to it in ONE update_aliases call (readers see the old index or the new one, never
    none). Until that call the old index keeps serving; after it, the `keep` newest previous
    versions stay for rollback and older ones are deleted. A legacy concrete index named like the
    alias is removed in the same atomic call. A failed build deletes the new index only.
    Returns {"alias", "index", "previous", "deleted", "passages"}."""
    from opensearchpy.exceptions import NotFoundError, OpenSearchException

    client = connect(url, retries=retries)
    new = versioned_name(alias, now)
    try:
        while client.indices.exists(index=new):  # two builds in one second
            new += "x"
        old = alias_targets(client, alias)
        legacy = not old and client.indices.exists(index=alias)
    except OpenSearchException as e:
        raise SearchUnavailable(f"opensearch {url}/{alias}: {e}") from e
    try:
        done = build_opensearch_index(passages, vectors, url, new, k1=k1, b=b, recreate=False, chunk_size=chunk_size,
                                      retries=retries, progress=progress, total=total, template_name=alias)
        count = int(client.count(index=new)["count"])
        if count != done:
            raise SearchUnavailable(f"opensearch {url}/{new}: {count} documents after indexing {done}")
    except BaseException:
        try:
            client.indices.delete(index=new)
        except (NotFoundError, OpenSearchException):
            pass
        raise
    actions: list[dict] = [{"remove": {"index": i, "alias": alias}} for i in old]
    if legacy:
        actions.append({"remove_index": {"index": alias}})
    actions.append({"add": {"index": new, "alias": alias}})
    try:
        client.indices.update_aliases(body={"actions": actions})
        versions = sorted(i for i in client.indices.get(index=f"{alias}-v*") if i != new)
        deleted = versions[:max(0, len(versions) - keep)]
        for i in deleted:
            client.indices.delete(index=i)
    except OpenSearchException as e:
        raise SearchUnavailable(f"opensearch {url}/{alias}: {e}") from e
    return {"alias": alias, "index": new, "previous": old or ([alias] if legacy else []), "deleted": deleted,
            "passages": done}


@dataclass(frozen=True)
class HybridResult:
    passages: list[Passage]
    dense_mode: str  # SERVER_KNN | CLIENT_RESCORE (only BM25 candidates were dense-scored) | "none"


def _minmax(scores: dict[str, float]) -> dict[str, float]:
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    return {k: (v - lo) / (hi - lo) if hi > lo else 1.0 for k, v in scores.items()}


class OpenSearchSearcher:
    """Searcher over an index written by build_opensearch_index. `knn_supported` is probed once
    (a k-NN query the server either answers or rejects)."""

    name = "opensearch"

    def __init__(self, url: str, index: str, *, timeout_s: float = 10.0, retries: int = 2, client: Any = None):
        self.url = mask_urls(url)  # for messages (status reasons, errors); the client has the real one
        self.index = index
        self.client = client or connect(url, timeout_s, retries)
        self._knn: bool | None = None

    def _call(self, fn: Any, **kwargs: Any) -> Any:
        from opensearchpy.exceptions import OpenSearchException

        try:
            return fn(**kwargs)
        except OpenSearchException as e:
            raise SearchUnavailable(f"opensearch {self.url}/{self.index}: {e}") from e

    @staticmethod
    def _passage(hit: dict) -> Passage:
        s = hit.get("_source", {})
        return Passage(hit["_id"], s.get("title", ""), s.get("text", ""), float(hit.get("_score") or 0.0),
                       s.get("doc_id", s.get("title", "")), s.get("url") or None)

    def _bm25_body(self, query: str, k: int) -> dict:
        return {"size": k, "query": {"match": {"passage": query}}, "_source": {"excludes": ["vector"]}}

    def search(self, query: str, k: int) -> list[Passage]:
        return self.search_many([query], k)[0]

    def search_many(self, queries: Sequence[str], k: int) -> list[list[Passage]]:
        """One _msearch round trip for several queries (the dialogue-context union uses it)."""
        if not queries:
            return []
        body: list[dict] = []
        for q in queries:
            body += [{"index": self.index}, self._bm25_body(q, k)]
        res = self._call(self.client.msearch, body=body)
        out = []
        for r in res["responses"]:
            if "error" in r:
                raise SearchUnavailable(f"opensearch {self.url}/{self.index}: {r['error']}")
            out.append([self._passage(h) for h in r["hits"]["hits"]])
        return out

    def context_search(self, claim_query: str, context: Sequence[str], k: int, per_turn: int = 1) -> list[Passage]:
        """Top-k for the claim ∪ top `per_turn` per context turn (same rule as the embedded path)."""
        from .dense import context_union

        return context_union(self, claim_query, context, k, per_turn)

    def vectors(self, passage_ids: Sequence[str]) -> np.ndarray | None:
        """Stored vectors (mget); None if the index keeps none or any id lacks one."""
        if not passage_ids:
            return None
        res = self._call(self.client.mget, index=self.index, body={"ids": list(passage_ids)},
                         _source_includes=["vector"])
        rows = []
        for d in res["docs"]:
            v = d.get("_source", {}).get("vector") if d.get("found") else None
            if v is None:
                return None
            rows.append(v)
        return np.asarray(rows, dtype=np.float32)

    @property
    def knn_supported(self) -> bool:
        """True when the index has a knn_vector field and the server answers a k-NN query."""
        if self._knn is None:
            from opensearchpy.exceptions import RequestError

            mapping = self._call(self.client.indices.get_mapping, index=self.index)
            props = next(iter(mapping.values()), {}).get("mappings", {}).get("properties", {})
            field = props.get("vector", {})
            if field.get("type") != "knn_vector":
                self._knn = False
            else:
                probe = {"size": 1, "_source": False,
                         "query": {"knn": {"vector": {"vector": [0.0] * int(field["dimension"]), "k": 1}}}}
                try:
                    self._call(self.client.search, index=self.index, body=probe)
                    self._knn = True
                except SearchUnavailable as e:
                    if not isinstance(e.__cause__, RequestError):  # outage, not a missing feature
                        raise
                    self._knn = False
        return self._knn

    def dense_search(self, query_vector: np.ndarray, k: int) -> list[Passage] | None:
        """Server-side k-NN; None where the server has no k-NN (callers re-score client-side)."""
        if not self.knn_supported:
            return None
        body = {"size": k, "_source": {"excludes": ["vector"]},
                "query": {"knn": {"vector": {"vector": [float(x) for x in query_vector], "k": k}}}}
        res = self._call(self.client.search, index=self.index, body=body)
        return [self._passage(h) for h in res["hits"]["hits"]]

    def hybrid_search(self, query: str, query_vector: np.ndarray, k: int, *, candidates: int = 100,
                      dense_weight: float = 0.5) -> HybridResult:
        """BM25 ∪ dense, each min-max normalised, combined convexly. With server k-NN the dense
        list is a corpus-wide k-NN; without it only the BM25 candidates are dense-scored, from
        their stored vectors (mode CLIENT_RESCORE)."""
        bm25 = self.search(query, candidates)
        by_id = {p.id: p for p in bm25}
        dense = self.dense_search(query_vector, candidates)
        if dense is not None:
            mode = SERVER_KNN
            dense_scores = {p.id: p.score for p in dense}
            by_id.update({p.id: p for p in dense if p.id not in by_id})
        else:
            pv = self.vectors([p.id for p in bm25]) if bm25 else None
            mode = CLIENT_RESCORE if pv is not None else "none"
            dense_scores = {p.id: float(s) for p, s in zip(bm25, pv @ query_vector)} if pv is not None else {}
        lex, den = _minmax({p.id: p.score for p in bm25}), _minmax(dense_scores)
        combined = {i: (1 - dense_weight) * lex.get(i, 0.0) + dense_weight * den.get(i, 0.0) for i in by_id}
        top = sorted(combined, key=lambda i: -combined[i])[:k]
        return HybridResult([by_id[i].with_score(combined[i]) for i in top], mode)

    def ready(self, timeout_s: float = 0.0) -> bool:
        """Index exists and answers; waits up to timeout_s (compose start-up ordering)."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                if self.client.indices.exists(index=self.index):
                    return True
            except Exception:
                pass
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.5)
