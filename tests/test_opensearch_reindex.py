"""Re-indexing without downtime, against osmem-server (an in-memory imitation of the OpenSearch
API that implements indices, aliases with atomic update_aliases, bulk, count and search).

Why: `index build --backend opensearch` used to delete the live index and rebuild it in place,
so readers saw no index (or half of one) during a rebuild. Now each build writes a versioned
index and only a complete one gets the alias; the test reads through the alias *while* the new
index is being filled, from inside the passage stream the bulk request consumes.
Not covered (osmem): real OpenSearch's alias semantics under concurrent searches and k-NN fields.
"""
from __future__ import annotations

import osmem_server as osmem  # the [test] extra installs it: a missing install fails here, not skips
import pytest

from schemas.protocols import Passage
from workers.retrieval.opensearch import (OpenSearchSearcher, alias_targets, build_versioned_index,  # noqa: E402
                                          connect)

pytestmark = pytest.mark.unit

ALIAS = "dialcheck-passages"


def passages(tag: str, n: int = 5) -> list[Passage]:
    return [Passage(f"{tag}-{i}", f"Title {tag}", f"{tag} passage number {i} about lighthouses") for i in range(n)]


def ids_via_alias(url: str) -> set[str]:
    return {p.id for p in OpenSearchSearcher(url, ALIAS).search("lighthouses", 50)}


@pytest.fixture
def url():
    with osmem.OsmemServer.start() as srv:
        yield srv.url


def test_first_build_creates_a_versioned_index_behind_the_alias(url):
    out = build_versioned_index(passages("a"), None, url, ALIAS, progress=False, now=1_000_000_000)
    assert out["index"] == f"{ALIAS}-v20010909t014640" and out["previous"] == [] and out["passages"] == 5
    assert alias_targets(connect(url), ALIAS) == [out["index"]]
    assert ids_via_alias(url) == {f"a-{i}" for i in range(5)}


def test_readers_see_the_old_index_until_the_switch(url):
    first = build_versioned_index(passages("a"), None, url, ALIAS, progress=False, now=1_000_000_000)
    seen_during_build: list[set[str]] = []

    def streaming():  # consumed by the bulk request: look through the alias mid-build
        for i, p in enumerate(passages("b")):
            if i == 3:
                seen_during_build.append(ids_via_alias(url))
            yield p

    second = build_versioned_index(streaming(), None, url, ALIAS, progress=False, now=1_000_000_100)
    assert seen_during_build == [{f"a-{i}" for i in range(5)}]
    assert ids_via_alias(url) == {f"b-{i}" for i in range(5)}
    assert second["previous"] == [first["index"]]
    client = connect(url)
    assert client.indices.exists(index=first["index"])  # kept for rollback (keep=1)
    third = build_versioned_index(passages("c"), None, url, ALIAS, progress=False, now=1_000_000_200)
    assert third["deleted"] == [first["index"]] and not client.indices.exists(index=first["index"])
    assert client.indices.exists(index=second["index"])


def test_a_failed_build_leaves_the_alias_and_removes_the_partial_index(url):
    first = build_versioned_index(passages("a"), None, url, ALIAS, progress=False, now=1_000_000_000)

    def broken():
        yield from passages("b", 2)
        raise RuntimeError("the collection reader failed half-way")

    with pytest.raises(RuntimeError):
        build_versioned_index(broken(), None, url, ALIAS, progress=False, now=1_000_000_100)
    client = connect(url)
    assert alias_targets(client, ALIAS) == [first["index"]]
    assert not client.indices.exists(index=f"{ALIAS}-v20010909t014820")
    assert ids_via_alias(url) == {f"a-{i}" for i in range(5)}


def test_a_legacy_concrete_index_is_replaced_in_the_same_atomic_call(url):
    client = connect(url)
    client.indices.create(index=ALIAS)
    client.index(index=ALIAS, id="old", body={"passage": "old lighthouses", "title": "t", "text": "x"}, refresh=True)
    out = build_versioned_index(passages("a"), None, url, ALIAS, progress=False, now=1_000_000_000)
    assert out["previous"] == [ALIAS]
    assert alias_targets(client, ALIAS) == [out["index"]]
    assert ids_via_alias(url) == {f"a-{i}" for i in range(5)}
