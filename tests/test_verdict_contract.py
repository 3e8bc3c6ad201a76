"""Verdict contract 2.1: the display hint and its rule, evidence source links,
`status.reason` null on a complete ok check, timings that are the claim's own where the work is,
and old verdicts still read.

Why: an app decides what to show from `display`, links `evidence[].url`, and reads `timings_ms`
for capacity; a rule that silently changed, a link to the wrong page, or a batch average passed
off as a claim's own time would each mislead it.

Fixtures: tests/fixtures/verdict_v2.json is the real version-2 verdict shown in docs/integration.md
(a worker before 2.1); tests/fixtures/verdict.schema.v2.json is verdict.schema.json as it was at
version 2 (commit 6fc4118), the schema an old reader validates with."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from schemas import Display, Status, Verdict, parse_verdict, validate
from schemas.items import CheckItem
from schemas.protocols import Passage, turn_verdicts
from workers.display import CONSTANT, display_for

HIGH, MEDIUM = CONSTANT.high["SUPPORTS"], CONSTANT.show["SUPPORTS"]  # the constant rule's bands

FIXTURES = Path(__file__).parent / "fixtures"
REPO = Path(__file__).resolve().parent.parent
ELVIS = "Elvis Presley was born in Tupelo, Mississippi, in 1935. He moved to Memphis, Tennessee, when he was 13."


# ---- the constant display rule (the baseline, and what display_for applies without a policy) ----
def probs(label: str, p: float) -> dict[str, float]:
    rest = [k for k in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO") if k != label]
    return {label: p, rest[0]: (1 - p) / 2, rest[1]: (1 - p) / 2}


@pytest.mark.unit
@pytest.mark.parametrize("label,p,state,evidence,expected", [
    # high: p >= HIGH with strong evidence; the bound itself counts
    ("SUPPORTS", HIGH, "ok", "strong", (True, "supported", "high")),
    ("REFUTES", 0.97, "ok", "strong", (True, "disputed", "high")),
    # just under HIGH, or weak evidence however sure: medium
    ("SUPPORTS", HIGH - 1e-4, "ok", "strong", (True, "supported", "medium")),
    ("REFUTES", 0.97, "ok", "weak", (True, "disputed", "medium")),
    ("SUPPORTS", MEDIUM, "ok", "weak", (True, "supported", "medium")),
    # under MEDIUM, or no evidence read (or not said): low, not shown
    ("SUPPORTS", MEDIUM - 1e-4, "ok", "strong", (False, "supported", "low")),
    ("REFUTES", 0.97, "ok", "none", (False, "disputed", "low")),
    ("REFUTES", 0.97, "ok", None, (False, "disputed", "low")),
    # NOT ENOUGH INFO: rated like the others, never shown by default
    ("NOT ENOUGH INFO", 0.95, "ok", "strong", (False, "unverified", "high")),
    ("NOT ENOUGH INFO", 0.30, "ok", "weak", (False, "unverified", "low")),
    # a backend failed: low and hidden, however sure the fallback was
    ("SUPPORTS", 0.99, "degraded", "strong", (False, "supported", "low")),
    ("REFUTES", 0.99, "error", "strong", (False, "disputed", "low")),
])
def test_display_rule(label, p, state, evidence, expected):
    got = display_for(label, probs(label, p), Status(state, None if state == "ok" else "x", evidence))
    assert (got.show, got.tone, got.confidence) == expected


@pytest.mark.unit
def test_the_shipped_display_policy_is_the_documented_one(tmp_path):
    """The integration guide states the shipped policy's thresholds, in its prose and in its generated
    table (the rule sentence and the left-out precision rows, exactly as `dialcheck tune fit` writes
    them from the policy's own meta), and the policy is fingerprinted to the NLI model."""
    import re

    from lab.tuning.card import GUIDE_END, GUIDE_START, write_guide_table
    from workers.display import SHIPPED, DisplayPolicy

    policy = DisplayPolicy.load(SHIPPED)
    guide = (REPO / "docs" / "integration.md").read_text()
    shown = re.search(r"threshold for that label \(today SUPPORTS\s+([\d.]+), REFUTES ([\d.]+)\)", guide)
    high = re.search(r"reaches ([\d.]+) \(SUPPORTS\) / ([\d.]+) \(REFUTES\)", guide)
    assert shown and high, "the guide's display bullet no longer states the thresholds"
    assert tuple(map(float, shown.groups())) == (policy.show["SUPPORTS"], policy.show["REFUTES"])
    assert tuple(map(float, high.groups())) == (policy.high["SUPPORTS"], policy.high["REFUTES"])
    variant = "shipped"
    written = tmp_path / "guide.md"
    write_guide_table(written, policy, {"left_out": {n: {variant: {"shown": sh}} for n, sh in policy.meta["lodo"].items()}},
                      variant)
    block = lambda text: text[text.index(GUIDE_START): text.index(GUIDE_END) + len(GUIDE_END)]  # noqa: E731
    assert block(guide) == block(written.read_text())
    assert set(policy.meta["lodo"]) >= {"dialfact", "hybridial", "faithdial"}
    assert policy.meta["nli_model"]["version"]  # fingerprinted to the NLI model, like the decision


@pytest.mark.unit
def test_the_streams_error_verdict_follows_the_rule():
    from streams.checking import error_verdict

    v = error_verdict(CheckItem("c", "t", [], "a claim"), "batch deadline")
    assert v.display == display_for(v.label, v.probabilities, v.status) == Display(False, "unverified", "low")
    validate("verdict", json.loads(v.to_json()))


# ---- source links ------------------------------------------------------------------------------
@pytest.mark.unit
def test_wikipedia_url():
    from workers.retrieval.collection import wikipedia_url

    assert wikipedia_url("Tupelo, Mississippi") == "https://en.wikipedia.org/wiki/Tupelo,_Mississippi"
    assert wikipedia_url("Beyoncé") == "https://en.wikipedia.org/wiki/Beyonc%C3%A9"
    assert wikipedia_url("AC/DC") == "https://en.wikipedia.org/wiki/AC/DC"
    assert wikipedia_url("Who Framed Roger Rabbit?") == "https://en.wikipedia.org/wiki/Who_Framed_Roger_Rabbit%3F"
    assert wikipedia_url("Gandhi (film)") == "https://en.wikipedia.org/wiki/Gandhi_%28film%29"
    assert wikipedia_url("Guns N' Roses") == "https://en.wikipedia.org/wiki/Guns_N%27_Roses"


@pytest.mark.unit
def test_passages_carry_their_source_url(tmp_path, data_dir):
    """A TSV row's own url column, DialFact's own article URL (it may name a redirect target), a
    derived Wikipedia URL for FoolMeTwice pages, none for WiCE web pages or a TSV row without one."""
    from workers.retrieval.collection import (dialfact_passages, foolmetwice_passages, tsv_passages, wice_passages,
                                              wikipedia_url)

    tsv = tmp_path / "kb.tsv"
    tsv.write_text("id\ttitle\ttext\turl\n"
                   "1\tOpening hours\tThe shop opens at nine.\thttps://shop.example/hours\n"
                   "2\tReturns\tReturns are free within 30 days.\t\n"
                   "3\tDelivery\tDelivery takes two days.\n", encoding="utf-8")
    assert [(p.title, p.url) for p in tsv_passages(tsv)] == [
        ("Opening hours", "https://shop.example/hours"), ("Returns", None), ("Delivery", None)]

    dialfact = list(dialfact_passages(data_dir))
    assert dialfact and all(p.url and p.url.startswith("https://en.wikipedia.org/wiki/") for p in dialfact)
    # DialFact's own link wins over one derived from the title (a redirect: not the same page name)
    assert {p.url for p in dialfact if p.title == "Sergeant major general"} == {
        "https://en.wikipedia.org/wiki/Sergeant_major"}
    fmt = list(foolmetwice_passages(data_dir))
    assert fmt and all(p.url == wikipedia_url(p.title) for p in fmt)
    assert all(p.url is None for p in wice_passages(data_dir))


@pytest.mark.unit
def test_index_keeps_urls_and_derives_them_for_old_wikipedia_indexes(tmp_path):
    """Saved and loaded with their urls; an index written before passages kept a url gets the
    Wikipedia link only when all its sources are bundled Wikipedia sources (else none: a passage's
    source cannot be told)."""
    from workers.retrieval.bm25 import EmbeddedIndex

    passages = [Passage("a", "Elvis Presley", ELVIS, doc_id="Elvis Presley",
                        url="https://en.wikipedia.org/wiki/Elvis_Presley"),
                Passage("b", "Returns", "Returns are free within 30 days.", doc_id="Returns")]
    EmbeddedIndex.build(passages, meta={"sources": ["dialfact", "tsv:kb.tsv"]}).save(tmp_path / "new")
    loaded = EmbeddedIndex.load(tmp_path / "new")
    assert [p.url for p in loaded.passages] == ["https://en.wikipedia.org/wiki/Elvis_Presley", None]
    assert loaded.search("Elvis Presley born", 1)[0].url == "https://en.wikipedia.org/wiki/Elvis_Presley"

    def old_index(name: str, sources: list[str]) -> list:
        d = tmp_path / name
        EmbeddedIndex.build([Passage(p.id, p.title, p.text, doc_id=p.doc_id) for p in passages],
                            meta={"sources": sources}).save(d)
        assert "url" not in (d / "passages.jsonl").read_text()
        return [p.url for p in EmbeddedIndex.load(d).passages]

    assert old_index("old-wiki", ["dialfact", "foolmetwice"]) == [
        "https://en.wikipedia.org/wiki/Elvis_Presley", "https://en.wikipedia.org/wiki/Returns"]
    assert old_index("old-mixed", ["dialfact", "tsv:kb.tsv"]) == [None, None]
    assert old_index("old-wice", ["dialfact", "wice"]) == [None, None]


@pytest.mark.unit
def test_opensearch_documents_keep_their_url():
    """The OpenSearch backend stores a passage's url and gives it back with the hit (osmem-server,
    the in-memory imitation the backend tests use); a document without one comes back without."""
    from osmem_server import OsmemServer

    from workers.retrieval.opensearch import OpenSearchSearcher, build_opensearch_index

    passages = [Passage("a", "Elvis Presley", ELVIS, doc_id="Elvis Presley", url="https://kb.example/elvis"),
                Passage("b", "Graceland", "Graceland is a mansion in Memphis, Tennessee.", doc_id="Graceland")]
    with OsmemServer.start(addr="127.0.0.1:0", japanese=False) as srv:
        assert build_opensearch_index(passages, None, srv.url, "urls", progress=False) == 2
        searcher = OpenSearchSearcher(srv.url, "urls")
        assert [(p.id, p.url) for p in searcher.search("elvis presley tupelo", 1)] == [("a", "https://kb.example/elvis")]
        assert [(p.id, p.url) for p in searcher.search("graceland mansion", 1)] == [("b", None)]


# ---- status.reason -----------------------------------------------------------------------------
@pytest.mark.unit
def test_reason_is_null_when_ok_and_the_check_was_complete():
    from workers.state import ClaimState
    from workers.verdict import status

    st = ClaimState(CheckItem("c", "t", [], "x"), passages=[Passage("a", "T", "text")])
    assert status(st, "e2e", "weak") == Status("ok", None, "weak")
    assert status(st, "e2e", "strong") == Status("ok", None, "strong")
    skipped = ClaimState(CheckItem("c", "t", [], "x"), skip_reason="not check-worthy")
    assert status(skipped, "e2e") == Status("ok", None, "none")
    # an evidence problem keeps its reason: nothing was there to read
    assert status(ClaimState(CheckItem("c", "t", [], "x")), "e2e") == Status("ok", "no passage retrieved", "none")
    broken = ClaimState(CheckItem("c", "t", [], "x"), problems=[("degraded", "gate unavailable")])
    assert status(broken, "e2e", "strong") == Status("degraded", "gate unavailable", "strong")


# ---- a real batch through the pipeline ---------------------------------------------------------
@pytest.fixture(scope="module")
def small_index(tmp_path_factory, encoder):
    """Four passages (one with a derived Wikipedia link, one with its own, two without), real
    encoder vectors, saved and loaded like `dialcheck index build` output."""
    from workers.retrieval.bm25 import EmbeddedIndex
    from workers.retrieval.build import encode_passages
    from workers.retrieval.collection import chunk, tsv_passages, wikipedia_url

    d = tmp_path_factory.mktemp("index")
    tsv = d / "kb.tsv"
    tsv.write_text("1\tEiffel Tower\tThe Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was "
                   "completed in 1889.\thttps://kb.example/eiffel\n"
                   "2\tTupelo, Mississippi\tTupelo is a city in Lee County, Mississippi. It is known as the "
                   "birthplace of Elvis Presley.\n"
                   "3\tCheerleading\tCheerleading is an activity in which participants cheer for their team.\n",
                   encoding="utf-8")
    passages = list(chunk("Elvis Presley", ELVIS, url=wikipedia_url("Elvis Presley"))) + list(tsv_passages(tsv))
    EmbeddedIndex.build(passages, vectors=encode_passages(encoder, passages, progress=False),
                        meta={"sources": ["dialfact", f"tsv:{tsv}"], "encoder": encoder.version}).save(d / "idx")
    return EmbeddedIndex.load(d / "idx")


@pytest.fixture(scope="module")
def batch(settings, nli, encoder, small_index):
    from workers.pipeline import Pipeline

    pipe = Pipeline(settings.updated(claims={"checkworthy": True}), nli, encoder, small_index, "e2e", "r4g")
    items = [CheckItem("c", "1", ["Do you like Elvis?"], "Elvis Presley was born in Tupelo, Mississippi."),
             CheckItem("c", "2", [], "The Eiffel Tower in Paris was completed in 1889, and it is made of wrought iron."),
             CheckItem("c", "3", [], "I love cheerleading!"),
             CheckItem("c", "4", [], "Zyxxq blorf wuzzle qwop vrank snib tolp in 1887.")]
    return turn_verdicts(pipe.check_turns(items))


@pytest.mark.model
def test_fresh_verdicts_are_valid_2_2_with_display_and_links(batch, small_index):
    from workers.display import BadgeFacts, DisplayPolicy

    shipped = DisplayPolicy.load(REPO / "workers" / "display" / "params" / "display.json")
    urls = {p.id: p.url for p in small_index.passages}
    for v in batch:
        d = json.loads(v.to_json())
        validate("verdict", d)
        assert d["schema_version"] == "2.4"
        assert d["display"] == {"show": v.display.show, "tone": v.display.tone, "confidence": v.display.confidence}
        # the shipped policy's, recomputed from what the verdict says (its badge scorer reads the rationale's numbers)
        assert v.display == display_for(v.label, v.probabilities, v.status, shipped, BadgeFacts.of_verdict(v))
        for e in d["evidence"]:
            assert e["url"] == urls[e["passage_id"]]
            assert all(round(e[k], 4) == e[k] for k in ("entail", "neutral", "contradict"))
        assert all(round(x, 4) == x for x in d["probabilities"].values())
    shown = {e.url for v in batch for e in v.evidence}
    assert "https://en.wikipedia.org/wiki/Elvis_Presley" in shown or "https://kb.example/eiffel" in shown
    elvis, eiffel = batch[0], batch[1]
    assert elvis.label == "SUPPORTS" and elvis.status == Status("ok", None, elvis.status.evidence)
    assert eiffel.status.state == "ok" and eiffel.status.reason is None


@pytest.mark.model
def test_not_check_worthy_and_no_evidence(batch):
    chat, nonsense = batch[2], batch[3]
    assert chat.status == Status("ok", None, "none")
    assert chat.rationale["rule"] == "not-check-worthy" and "not check-worthy" in chat.rationale["summary"]
    assert chat.display == Display(False, "unverified", chat.display.confidence)
    assert nonsense.status == Status("ok", "no passage retrieved", "none") and not nonsense.display.show


@pytest.mark.model
def test_the_summary_never_names_an_evidence_strength_the_status_does_not_give(settings, nli, encoder, small_index,
                                                                               monkeypatch):
    """`status.evidence` (strong | weak | none) is the one word for how well the evidence bears on the
    claim; the summary's note on a low lexical pre-score must not say "weak evidence" beside a strong one
    (the pre-score bar raised so that the note is written for this claim)."""
    import workers.verdict
    from workers.pipeline import Pipeline

    monkeypatch.setattr(workers.verdict, "WEAK_EVIDENCE_PRESCORE", 1.01)
    pipe = Pipeline(settings, nli, encoder, small_index, "e2e", "r0")
    v = turn_verdicts(pipe.check_turns([CheckItem("c", "9", [], "Elvis Presley was born in Tupelo, Mississippi.")]))[0]
    summary = v.rationale["summary"]
    assert v.status.evidence == "strong" and "Few shared words" in summary, (summary, v.status)
    assert "weak evidence" not in summary.lower(), summary


@pytest.mark.model
def test_timings_are_the_claims_own_where_the_work_is(batch):
    """Every stage is batched now (checkworthy parses the batch's turns in one spaCy pass, settings
    `perf.batch_parsing`): each claim gets the same share of a stage's time, checkworthy's over all four
    turns, the later stages' over the three checked claims, and each says by how many claims it was
    divided."""
    own = [v.timings_ms["checkworthy"] for v in batch]
    assert all(ms > 0 for ms in own) and len(set(own)) == 1
    checked = [v for v in batch if v.rationale["rule"] != "not-check-worthy"]
    assert len(checked) == 3 and all(v.timings_ms["batch_items"] == 3 for v in checked)
    for stage in ("surfaces", "gate", "retrieve", "verify"):
        assert len({v.timings_ms[stage] for v in checked}) == 1, stage
    # the chit-chat turn's one stage was checkworthy, shared by the four turns
    assert batch[2].timings_ms["batch_items"] == 4 and "verify" not in batch[2].timings_ms


@pytest.mark.model
def test_model_loading_happens_before_the_first_verdict():
    """from_settings loads models, spaCy and the truecaser and checks a warm-up claim: the first
    verdict's stages then hold no loading (a fresh process, so nothing was loaded before)."""
    code = """
import json
from schemas.settings import load_settings
from workers.pipeline import CheckItem, Pipeline
from workers.surfaces.pronouns import nlp
from workers.surfaces.truecasing import _truecaser
from schemas.protocols import turn_verdicts
pipe = Pipeline.from_settings(load_settings(), protocol="fv", surface="r4g")
loaded = {"spacy": nlp.cache_info().currsize, "truecaser": _truecaser.cache_info().currsize}
item = CheckItem("c", "1", ["Do you like Elvis?"], "He was born in Memphis.",
                 gold_evidence=[("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi.")])
print(json.dumps({"load_ms": pipe.load_ms, "loaded": loaded, "first": turn_verdicts(pipe.check_turns([item]))[0].timings_ms}))
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["loaded"] == {"spacy": 1, "truecaser": 1}
    assert set(got["load_ms"]) == {"models", "index", "warm_up"} and got["load_ms"]["models"] > 0
    print("load_ms", got["load_ms"], "first verdict timings_ms", got["first"])


# ---- old verdicts and old readers --------------------------------------------------------------
@pytest.mark.unit
def test_version_2_and_1_verdicts_still_parse():
    raw = (FIXTURES / "verdict_v2.json").read_bytes()
    v2 = parse_verdict(raw)
    assert v2.schema_version == "2" and v2.display is None and v2.evidence[0].url is None
    assert v2.label == "SUPPORTS" and v2.status == Status("ok", None, "strong")
    v1 = json.loads(raw)
    for k in ("schema_version", "rationale", "ts", "latency_ms"):
        del v1[k]
    del v1["status"]["evidence"]
    back = parse_verdict(json.dumps(v1).encode())
    assert back.schema_version == "1" and back.rationale is None and back.status == Status("ok", None, None)
    assert back.evidence[0].title == "Tupelo, Mississippi"


@pytest.mark.unit
def test_fields_of_a_later_minor_version_are_ignored():
    d = json.loads((FIXTURES / "verdict_v2.json").read_bytes())
    d.update(schema_version="2.2", future={"x": 1}, display={"show": True, "tone": "supported",
                                                           "confidence": "high", "badge": "✓"})
    d["evidence"][0]["url"], d["evidence"][0]["favicon"] = "https://en.wikipedia.org/wiki/Tupelo,_Mississippi", "x"
    d["status"]["retry_after_s"] = 3
    v = Verdict.from_dict(d)
    assert v.display == Display(True, "supported", "high") and v.evidence[0].url.endswith("Tupelo,_Mississippi")


@pytest.mark.model
def test_a_2_1_verdict_validates_against_the_version_2_schema(batch):
    """Old readers that validate with the version-2 schema accept the new verdicts (new fields only)."""
    old = jsonschema.Draft202012Validator(json.loads((FIXTURES / "verdict.schema.v2.json").read_text()))
    for v in batch:
        assert not list(old.iter_errors(json.loads(v.to_json())))
