"""The ui's store (streams/ui/store.py) against hostile records: each off-schema verdict a producer once sent
is kept out with a counted reason, nothing stored can fail to serialise, a turn id means something
only inside its conversation, and every bound (conversations, turns, verdicts for turns never seen,
bytes = snapshot size) holds.

The builders here are also used by tests/test_ui_browser.py, which sends the same records through
a real broker to `dialcheck ui` and a headless Chromium."""
from __future__ import annotations

import json

import orjson
import pytest

from schemas import ChatTurn, Evidence, GateDecision, Status, Surface, Verdict, claim_id, validate
from schemas.settings import load_settings
from streams.ui.store import CONVERSATION_OVERHEAD, Store

pytestmark = pytest.mark.unit


def good_verdict(conv: str, turn: str, text: str, label: str = "REFUTES", evidence_text: str = "Paris is in France.",
                 gate: bool = True) -> dict:
    """A verdict as the worker publishes it (the schemas.Verdict type, checked against the schema)."""
    v = Verdict(conversation_id=conv, turn_id=turn, claim_id=claim_id(conv, turn, text), claim=text,
                surface=Surface("r4g", text, "r4", text + " (rewritten)",
                                GateDecision(0.91, 0.9, 0.02, 0.95, 0.8, True) if gate else None),
                label=label, probabilities={"SUPPORTS": 0.1, "REFUTES": 0.8, "NOT ENOUGH INFO": 0.1},
                evidence=[Evidence("p1", "Paris", evidence_text, window=evidence_text, entail=0.1, neutral=0.1,
                                   contradict=0.8)],
                model_versions={"nli": "test"}, timings_ms={"verify": 1.0}, status=Status())
    d = v.to_dict()
    validate("verdict", d)
    return d


def turn(conv: str, tid: str, text: str, speaker: str = "assistant", check: bool | None = True) -> bytes:
    return ChatTurn(conv, tid, speaker, text, check=check).to_json()


def deep(n: int) -> dict:
    d: dict = {"x": 1}
    for _ in range(n - 1):
        d = {"x": d}
    return d


def hostile_verdicts() -> dict[str, bytes]:
    """One of each off-schema verdict that once broke the page (name → record); each must be rejected."""
    def bad(name: str, change) -> bytes:
        v = good_verdict("hostile", f"h-{name}", f"hostile claim {name}")
        change(v)
        return json.dumps(v).encode()  # orjson refuses to write 300 levels; json writes what an attacker would
    return {
        "gate without score": bad("gate", lambda v: v["surface"]["gate"].pop("score")),
        "evidence text not a string": bad("evtext", lambda v: v["evidence"][0].__setitem__("text", {"html": "<b>"})),
        "probabilities nested 300 deep": bad("deep", lambda v: v["probabilities"].__setitem__("x", deep(300))),
        'surface "x"': bad("surface", lambda v: v.__setitem__("surface", "x")),
        "evidence [1]": bad("evlist", lambda v: v.__setitem__("evidence", [1])),
    }


def test_each_hostile_verdict_is_rejected_with_a_counted_reason():
    store = Store()
    for name, raw in hostile_verdicts().items():
        events = store.add_verdict_raw(raw, where=name)
        assert [e["type"] for e in events] == ["counts"], name
    assert store.counts["rejected"] == 5 and store.counts["verdicts"] == 0
    assert not store.conversations
    reasons = [r["reason"] for r in store.last_rejected]
    assert "score" in reasons[0] and "schemas.Verdict" in reasons[0]
    assert "evidence/0/text" in reasons[1]
    assert "nested too deep" in reasons[2]
    assert "surface" in reasons[3] and "evidence/0" in reasons[4]
    assert sum(store.rejected.values()) == 5
    orjson.dumps(store.snapshot())  # the snapshot always serialises


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'"\\ud800"', b"{}", b'{"conversation_id": 1}',
                                 b"1e400", orjson.dumps({**good_verdict("c", "t", "x"), "label": "BANANA"})])
def test_unreadable_verdicts_are_rejected_never_raised(raw):
    store = Store()
    store.add_verdict_raw(raw)
    assert store.counts["rejected"] == 1 and not store.conversations


def test_too_large_verdict_rejected_before_parsing():
    store = Store(max_verdict_bytes=2048)
    v = good_verdict("c", "t", "x", evidence_text="y" * 5000)
    store.add_verdict_raw(orjson.dumps(v))
    assert store.counts["rejected"] == 1 and "too large" in store.last_rejected[0]["reason"]


def test_unknown_fields_are_ignored_and_not_stored():
    """Forward compatibility (the schema: readers ignore fields they do not know), but nothing unknown
    reaches the page."""
    v = good_verdict("c", "t", "x")
    v["future_field"] = deep(5)
    v["evidence"][0]["future"] = 1
    v["probabilities"]["extra"] = 0.5
    store = Store()
    (ev,) = store.add_verdict_raw(orjson.dumps(v))
    assert ev["type"] == "verdict" and "future_field" not in ev["verdict"]
    assert set(ev["verdict"]["probabilities"]) == {"SUPPORTS", "REFUTES", "NOT ENOUGH INFO"}
    assert "future" not in ev["verdict"]["evidence"][0]


def test_hostile_turns_are_rejected_like_the_worker_rejects_them():
    store = Store()
    for raw in (b"{", orjson.dumps({"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "x", "meta": deep(40)}),
                orjson.dumps({"conversation_id": "c", "turn_id": "t", "speaker": "user"}),
                orjson.dumps({"conversation_id": "c", "turn_id": "t", "speaker": "user", "text": "x" * 20000})):
        store.add_turn_raw(raw)
    assert store.counts["rejected"] == 4 and store.counts["turns"] == 0 and not store.conversations


def test_turn_ids_are_per_conversation():
    """Bob's turn "1" and Alice's turn "1" are two turns; Alice's verdict is hers only."""
    store = Store()
    store.add_turn_raw(turn("alice", "1", "Paris is in Spain."))
    store.add_turn_raw(turn("bob", "1", "I like tea."))
    store.add_verdict_raw(orjson.dumps(good_verdict("alice", "1", "Paris is in Spain.")))
    snap = {c["id"]: c for c in store.snapshot()["conversations"]}
    assert [v["turn_id"] for v in snap["alice"]["verdicts"]] == ["1"]
    assert snap["bob"]["verdicts"] == [] and snap["bob"]["turns"][0]["text"] == "I like tea."


def test_verdicts_for_unseen_turns_are_bounded():
    """1,500 verdicts for turns the store never saw once gave a 75 MB snapshot."""
    store = Store(max_verdicts=10)
    for i in range(1500):
        store.add_verdict_raw(orjson.dumps(good_verdict("c", f"unseen-{i}", f"claim {i}")))
    conv = store.conversations["c"]
    assert len(conv.verdicts) == 10 and list(conv.verdicts)[-1] == "unseen-1499"
    assert store.counts["verdicts"] == 1500


def test_turns_and_conversations_are_bounded():
    store = Store(max_conversations=3, max_turns=4)
    for c in range(10):
        for t in range(10):
            store.add_turn_raw(turn(f"c{c}", f"t{t}", f"turn {t}", check=False))
    assert list(store.conversations) == ["c7", "c8", "c9"]
    assert all(len(conv.turns) == 4 for conv in store.conversations.values())
    assert store.counts["evicted"] == 7


def test_snapshot_size_is_bounded_by_max_bytes():
    """Big verdicts in many conversations: the serialised snapshot stays within the byte bound, the
    least recently active conversations go first, and the byte count matches what is stored."""
    max_bytes = 200_000
    store = Store(max_conversations=1000, max_bytes=max_bytes)
    for i in range(200):
        store.add_verdict_raw(orjson.dumps(good_verdict(f"c{i}", "t", f"claim {i}", evidence_text="z" * 4000)))
    snap = store.snapshot()
    size = len(orjson.dumps(snap))
    assert max_bytes // 2 < size <= max_bytes + 4096
    assert snap["conversations"][0]["id"] == "c199" and len(snap["conversations"]) < 200
    assert store.bytes == sum(c.bytes for c in store.conversations.values())
    stored = sum(len(orjson.dumps(v)) for c in store.conversations.values() for v, _ in c.verdicts.values())
    assert stored <= store.bytes


def test_one_conversation_alone_cannot_exceed_max_bytes():
    store = Store(max_bytes=100_000, max_verdicts=1000)
    for i in range(100):
        store.add_verdict_raw(orjson.dumps(good_verdict("c", f"t{i}", f"claim {i}", evidence_text="z" * 4000)))
    assert len(orjson.dumps(store.snapshot())) <= 100_000 + 4096
    assert "t99" in store.conversations["c"].verdicts


def test_duplicate_verdicts_counted_once():
    store = Store()
    raw = orjson.dumps(good_verdict("c", "t", "x"))
    store.add_verdict_raw(raw)
    assert store.add_verdict_raw(raw) == []
    assert store.counts["verdicts"] == 1 and store.counts["duplicates"] == 1


def test_store_takes_its_bounds_from_settings(monkeypatch):
    monkeypatch.setenv("DIALCHECK_UI_MAX_TURNS", "7")
    monkeypatch.setenv("DIALCHECK_UI_MAX_VERDICTS", "8")
    monkeypatch.setenv("DIALCHECK_UI_MAX_SNAPSHOT_BYTES", "123456")
    store = Store.from_settings(load_settings())
    assert (store.max_turns, store.max_verdicts, store.max_bytes) == (7, 8, 123456)


# -- what the page gets for people (latency, display hint, source links, counts) ---

def v21(conv: str, turn_id: str, text: str, label: str = "REFUTES", *, display=None, url=None, latency_ms=None,
        ts=None) -> dict:
    """A schema 2.1 verdict: the display hint, a source link on its evidence, ts and latency_ms."""
    v = good_verdict(conv, turn_id, text, label=label)
    v["schema_version"] = "2.1"
    if display is not None:
        v["display"] = display
    v["evidence"][0]["url"] = url
    v["ts"], v["latency_ms"] = ts, latency_ms
    return v


def test_display_hint_latency_and_source_link_reach_the_page():
    store = Store()
    v = v21("c", "t", "Paris is in Spain.", display={"show": False, "tone": "disputed", "confidence": "low"},
            url="https://en.wikipedia.org/wiki/Paris", latency_ms=2345.6, ts=1_700_000_000.5)
    (ev,) = store.add_verdict_raw(orjson.dumps(v))
    seen = ev["verdict"]
    assert seen["display"] == {"show": False, "tone": "disputed", "confidence": "low"}
    assert seen["evidence"][0]["url"] == "https://en.wikipedia.org/wiki/Paris"
    assert (seen["latency_ms"], seen["ts"]) == (2345.6, 1_700_000_000.5)


def test_an_older_verdict_has_these_fields_absent_not_broken():
    """Schema 2 verdicts (no display, no url, no latency) are shown as before, with None for each."""
    store = Store()
    (ev,) = store.add_verdict_raw(orjson.dumps(good_verdict("c", "t", "x")))
    seen = ev["verdict"]
    assert seen["display"] is None and seen["latency_ms"] is None and seen["ts"] is None
    assert seen["evidence"][0]["url"] is None


@pytest.mark.parametrize("url", ["javascript:alert(1)", "JaVaScRiPt:alert(1)", "data:text/html,<script>x</script>",
                                 "/relative/path", "//evil.example/x", "javascript://example.org/%0aalert(1)", "ftp://example.org/x", "https://", "http:///x",
                                 "https://user:pw@example.org/", "https://exa mple.org/", "https://example.org/\nx",
                                 "java\tscript:alert(1)", "https://example.org:99999/", "https://" + "a" * 3000, 7,
                                 {"href": "https://example.org"}, ["https://example.org"], ""])
def test_only_plain_http_links_are_kept(url):
    """A link that is not absolute http(s) with a host (or carries credentials, whitespace, a bad
    port) is dropped to None: the verdict is still shown, without the link."""
    store = Store()
    events = store.add_verdict_raw(orjson.dumps(v21("c", "t", "x", url=url)))
    if store.counts["rejected"]:  # the schema may type url (2.1): then the record is refused outright
        assert not store.conversations
        return
    (ev,) = events
    assert ev["verdict"]["evidence"][0]["url"] is None


@pytest.mark.parametrize("url", ["http://example.org", "https://en.wikipedia.org/wiki/Elvis_Presley?x=1#History",
                                 "HTTPS://EXAMPLE.ORG/A", "https://[2001:db8::1]:8443/p"])
def test_http_links_are_kept_as_sent(url):
    (ev,) = Store().add_verdict_raw(orjson.dumps(v21("c", "t", "x", url=url)))
    assert ev["verdict"]["evidence"][0]["url"] == url


@pytest.mark.parametrize("display", [{"show": "yes", "tone": "angry", "confidence": 0.9}, {"show": 1}, {}])
def test_an_unusable_display_hint_is_treated_as_absent(display):
    store = Store()
    events = store.add_verdict_raw(orjson.dumps(v21("c", "t", "x", display=display)))
    if store.counts["rejected"]:  # refused by a schema that types display: also never shown
        assert not store.conversations
        return
    assert events[-1]["verdict"]["display"] is None


def test_a_partly_known_display_hint_keeps_only_known_values():
    store = Store()
    events = store.add_verdict_raw(orjson.dumps(v21("c", "t", "x", display={"show": True, "tone": "angry",
                                                                            "confidence": "medium", "extra": deep(3)})))
    if store.counts["rejected"]:
        return  # a strict 2.1 schema refuses it: nothing unknown reaches the page either way
    assert events[-1]["verdict"]["display"] == {"show": True, "confidence": "medium"}


def test_conversation_summary_counts_labels_latency_and_last_time():
    """The snapshot's per-conversation summary: turns held, checked turns, verdicts by label (status
    error counted as "error"), the median produce→verdict latency of the verdicts that have one, and
    the last turn's time."""
    store = Store()
    for i, ts in enumerate((100.0, 130.0, 120.0, 110.0)):
        store.add_turn(ChatTurn("c", f"t{i}", "assistant", f"claim {i}", ts=ts))
    store.add_turn(ChatTurn("c", "t9", "user", "hello", check=False))  # no ts
    store.add_verdict_raw(orjson.dumps(v21("c", "t0", "claim 0", "REFUTES", latency_ms=900.0)))
    store.add_verdict_raw(orjson.dumps(v21("c", "t1", "claim 1", "SUPPORTS", latency_ms=3000.0)))
    store.add_verdict_raw(orjson.dumps(v21("c", "t2", "claim 2", "REFUTES", latency_ms=1500.0)))
    err = v21("c", "t3", "claim 3", "NOT ENOUGH INFO")  # no latency_ms: not in the median
    err["status"] = {"state": "error", "reason": "backend down"}
    store.add_verdict_raw(orjson.dumps(err))
    (conv,) = store.snapshot()["conversations"]
    assert conv["summary"] == {"turns": 5, "checked": 4, "labels": {"REFUTES": 2, "SUPPORTS": 1, "error": 1},
                               "last_ts": 130.0, "latency_ms_median": 1500.0, "latency_n": 3}


def test_summary_of_a_conversation_without_times_or_latency():
    store = Store()
    store.add_verdict_raw(orjson.dumps(good_verdict("c", "t", "x")))
    (conv,) = store.snapshot()["conversations"]
    assert conv["summary"] == {"turns": 0, "checked": 1, "labels": {"REFUTES": 1}, "last_ts": None,
                               "latency_ms_median": None, "latency_n": 0}


# -- grounded turns (schema 2.4): each claim's span and the passage it was checked against ---

def grounded_verdicts(conv: str, turn_id: str, text: str, claims: list[tuple[str, str]], *, source: str = "turn",
                      url: str | None = None, display: bool = True) -> list[dict]:
    """What the worker publishes for a reply of several claims checked against given passages: one
    verdict per claim (`claims`: (claim text, label), each found in `text`; its claim_span in code
    points) and then the turn's summary (rule turn-summary, spanning the whole text, the worst label)."""
    out = []
    for claim, label in claims:
        start = text.index(claim)
        v = good_verdict(conv, turn_id, claim, label=label, gate=False)
        v.update(schema_version="2.4", claim_span={"start": start, "end": start + len(claim)},
                 rationale={"rule": "fv", "summary": f"{label}."})
        if display:
            tone = {"SUPPORTS": "supported", "REFUTES": "disputed", "NOT ENOUGH INFO": "unverified"}[label]
            v["display"] = {"show": label != "NOT ENOUGH INFO", "tone": tone, "confidence": "high"}
        v["evidence"][0].update(source=source, url=url, title=f"help article for {turn_id}")
        validate("verdict", v)
        out.append(v)
    worst = next(v for label in ("REFUTES", "SUPPORTS", "NOT ENOUGH INFO") for v in out if v["label"] == label)
    summary = {**worst, "claim": text, "claim_id": claim_id(conv, turn_id, text), "claim_span": {"start": 0, "end": len(text)},
               "rationale": {"rule": "turn-summary", "summary": "the worst of the claims"}}
    validate("verdict", summary)
    return out + [summary]


def test_a_grounded_turn_keeps_its_summary_as_badge_and_each_claims_span():
    text = "🎉 Our plan costs $10 a month. It includes phone support."
    store = Store()
    store.add_turn_raw(turn("g", "2", text))
    claims = [("Our plan costs $10 a month.", "SUPPORTS"), ("It includes phone support.", "NOT ENOUGH INFO")]
    *parts, summary = grounded_verdicts("g", "2", text, claims, url="https://help.example.com/plans")
    for v in [parts[0], summary, parts[1]]:  # a claim arriving after its summary does not replace the badge
        store.add_verdict_raw(orjson.dumps(v))
    (conv,) = store.snapshot()["conversations"]
    (badge,) = conv["verdicts"]
    assert badge["summary"] is True and badge["claim_id"] == summary["claim_id"]
    spans = {c["claim"]: c["claim_span"] for c in conv["claims"]}
    assert spans == {claim: {"start": text.index(claim), "end": text.index(claim) + len(claim)} for claim, _ in claims}
    assert all(not c["summary"] for c in conv["claims"])
    ev = conv["claims"][0]["evidence"][0]
    assert (ev["source"], ev["url"], ev["title"]) == ("turn", "https://help.example.com/plans", "help article for 2")
    assert conv["summary"]["checked"] == 1  # a turn is checked once, however many claims it has
    assert store.bytes == sum(len(orjson.dumps(x)) for x in [conv["turns"][0], badge, *conv["claims"]]) + len("g") + CONVERSATION_OVERHEAD


def test_claims_leave_with_their_turn_and_bad_spans_or_sources_are_absent():
    store = Store(max_turns=1)
    text = "It is open on Sundays. It closes at noon."
    store.add_turn_raw(turn("g", "1", text))
    for v in grounded_verdicts("g", "1", text, [("It is open on Sundays.", "REFUTES"), ("It closes at noon.", "SUPPORTS")]):
        store.add_verdict_raw(orjson.dumps(v))
    assert len(store.conversations["g"].claims) == 2
    store.add_turn_raw(turn("g", "2", "Next turn."))
    conv = store.conversations["g"]
    assert not conv.claims and not conv.verdicts
    assert conv.bytes == sum(n for _, n in conv.turns.values()) + len("g") + CONVERSATION_OVERHEAD
    (odd,) = grounded_verdicts("g", "2", "Next turn.", [("Next turn.", "SUPPORTS")])[:1]
    odd["evidence"][0]["source"] = None
    odd["claim_span"] = None
    (ev,) = store.add_verdict_raw(orjson.dumps(odd))
    assert ev["verdict"]["claim_span"] is None and ev["verdict"]["evidence"][0]["source"] is None
    assert not store.conversations["g"].claims  # nothing to underline without a span
