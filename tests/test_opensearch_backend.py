"""OpenSearch backend against osmem-server (an in-memory imitation of the OpenSearch API: no
k-NN, BM25 parameters accepted but not applied). Shows the API contract — template, bulk,
BM25 query, stored vectors, client-side dense fallback, context union — and that on a
collection where any BM25 variant ranks alike, the top passages equal the embedded index's."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas.settings import load_settings  # noqa: E402
from schemas.protocols import Passage, SearchUnavailable  # noqa: E402
from workers.retrieval.bm25 import EmbeddedIndex  # noqa: E402
from workers.retrieval.dense import context_union, dense_rescore  # noqa: E402
from workers.retrieval.opensearch import (CLIENT_RESCORE, OpenSearchSearcher,  # noqa: E402
                                          build_opensearch_index)

INDEX = "dialcheck-test"

# Equal-length passages; each query term's frequency differs per passage, so BM25 with any k1/b
# (and Lucene's or osmem's scoring) gives one order.
TEXTS = [
    ("Etna", "etna volcano volcano volcano erupts over sicily island"),
    ("Vesuvius", "vesuvius volcano volcano buried pompeii roman town ruins"),
    ("Fuji", "fuji volcano highest mountain japan snow capped peak"),
    ("Louvre", "louvre museum paris holds mona lisa painting today"),
    ("Prado", "prado museum museum madrid spanish royal art collection"),
    ("Guitar", "guitar fretted instrument six strings played plucking them"),
    ("Violin", "violin bowed instrument four strings strings strings orchestra"),
    ("Elvis", "elvis presley famous singer born tupelo mississippi usa"),
]
QUERIES = ["volcano", "museum", "strings", "elvis singer", "volcano pompeii", "instrument strings"]


@pytest.fixture(scope="module")
def collection() -> tuple[list[Passage], np.ndarray]:
    passages = [Passage(f"p{i}", t, x, doc_id=t) for i, (t, x) in enumerate(TEXTS)]
    v = np.random.default_rng(7).normal(size=(len(passages), 16)).astype(np.float32)
    return passages, v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def osmem():
    from osmem_server import OsmemServer

    with OsmemServer.start(addr="127.0.0.1:0", japanese=False) as srv:
        yield srv


@pytest.fixture(scope="module")
def searcher(osmem, collection) -> OpenSearchSearcher:
    passages, vectors = collection
    assert build_opensearch_index(iter(passages), vectors, osmem.url, INDEX, progress=False) == len(passages)
    return OpenSearchSearcher(osmem.url, INDEX)


@pytest.fixture(scope="module")
def embedded(collection) -> EmbeddedIndex:
    passages, vectors = collection
    return EmbeddedIndex.build(passages, vectors=vectors)


def test_template_and_mapping(searcher, collection):
    t = searcher.client.indices.get_index_template(name=f"{INDEX}-template")["index_templates"][0]
    settings = t["index_template"]["template"]["settings"]["index"]
    sim = settings["similarity"]["dialcheck_bm25"]
    assert (sim["type"], float(sim["k1"]), float(sim["b"])) == ("BM25", 1.5, 0.4)
    props = searcher.client.indices.get_mapping(index=INDEX)[INDEX]["mappings"]["properties"]
    assert props["passage"]["similarity"] == "dialcheck_bm25"
    assert props["vector"]["type"] == "knn_vector" and props["vector"]["dimension"] == collection[1].shape[1]
    assert searcher.client.count(index=INDEX)["count"] == len(collection[0])


def test_bm25_top_passages_match_embedded(searcher, embedded):
    for q in QUERIES:
        want = embedded.search(q, 3)
        got = searcher.search(q, 3)
        assert [p.id for p in got] == [p.id for p in want], q
        assert all(p.text and p.title and p.doc_id for p in got)
    assert [[p.id for p in r] for r in searcher.search_many(QUERIES, 2)] == \
        [[p.id for p in embedded.search(q, 2)] for q in QUERIES]


def test_context_union_matches_embedded(searcher, embedded):
    claim, context = "volcano", ["which museum is in madrid", "who played strings"]
    assert [p.id for p in searcher.context_search(claim, context, 2)] == \
        [p.id for p in context_union(embedded, claim, context, 2)]


def test_dense_falls_back_to_client_side(searcher, embedded, collection):
    passages, vectors = collection
    assert searcher.knn_supported is False           # osmem has no k-NN query
    assert searcher.dense_search(vectors[0], 3) is None
    ids = ["p3", "p0", "p6"]
    assert np.allclose(searcher.vectors(ids), vectors[[3, 0, 6]], atol=1e-6)
    q = vectors[2]
    cands_os, cands_emb = searcher.search("volcano museum strings", 8), embedded.search("volcano museum strings", 8)
    got, mode = dense_rescore(None, searcher, "", cands_os, 3, query_vector=q)
    want, _ = dense_rescore(None, embedded, "", cands_emb, 3, query_vector=q)
    assert mode == "stored-vectors" and [p.id for p in got] == [p.id for p in want]
    hybrid = searcher.hybrid_search("volcano", q, 3)
    assert hybrid.dense_mode == CLIENT_RESCORE
    assert {p.id for p in hybrid.passages} <= {"p0", "p1", "p2"}


@pytest.mark.data
def test_dialfact_evidence_top1_mostly_agrees(osmem):
    """Real evidence passages: osmem's ranking is not Lucene's, so only report/guard agreement."""
    from schemas.items import load_dialfact
    from workers.retrieval.collection import passage_id

    recs = load_dialfact(load_settings().data.dialfact_sample, limit=60)
    uniq = {passage_id(t, x): Passage(passage_id(t, x), t, x, doc_id=t) for r in recs for t, x in r.evidence}
    passages = list(uniq.values())
    build_opensearch_index(passages, None, osmem.url, "dialfact-evidence", progress=False)
    os_s, emb = OpenSearchSearcher(osmem.url, "dialfact-evidence"), EmbeddedIndex.build(passages)
    agree = sum([p.id for p in os_s.search(r.response, 1)] == [p.id for p in emb.search(r.response, 1)] for r in recs)
    assert agree / len(recs) >= 0.75, agree
    assert os_s.vectors([passages[0].id]) is None  # index built without vectors


def test_outage_raises_search_unavailable():
    from streams.processes import free_port

    dead = OpenSearchSearcher(f"http://127.0.0.1:{free_port()}", INDEX, timeout_s=1, retries=0)
    with pytest.raises(SearchUnavailable):
        dead.search("volcano", 3)
    with pytest.raises(SearchUnavailable):
        build_opensearch_index([Passage("x", "t", "x")], None, dead.url, INDEX, progress=False, retries=0)
