"""The feedback contract and the embedded store: validation like chat turns, idempotent redelivery,
the join to the judged verdict (its badge facts readable back), and the live precision it reports.

Why: calibration and the drift alarm are only as good as the judgements counted; a redelivered
record counted twice, a bad record stored, or a judgement joined to the wrong verdict would move
the certified thresholds silently. A real SQLite file in tmp_path; no mocks."""
from __future__ import annotations

import sqlite3
import sys
import time
from urllib.parse import quote

import orjson
import pytest

from schemas import InvalidEvent, Reason
from schemas.feedback import Feedback, parse_feedback
from streams.feedback_store import FeedbackStore, StoreUnavailable
from streams.precision import buckets_of, clopper_pearson, lower_bound, precision_row, upper_bound
from tests.pg import free_port

pytestmark = pytest.mark.unit


def verdict(conv: str, turn: str, cid: str, label: str = "SUPPORTS", show: bool = True, conf: str = "medium") -> dict:
    return {"conversation_id": conv, "turn_id": turn, "claim_id": cid, "claim": f"claim {cid}", "label": label,
            "surface": {"name": "r0", "text": f"claim {cid}", "gate": None},
            "probabilities": {"SUPPORTS": 0.9, "REFUTES": 0.05, "NOT ENOUGH INFO": 0.05},
            "evidence": [], "model_versions": {}, "timings_ms": {}, "status": {"state": "ok", "evidence": "strong"},
            "display": {"show": show, "tone": "supported", "confidence": conf},
            "rationale": {"rule": "layer:guarded", "numbers": {"entail": 0.91, "contradict": 0.02, "coverage": 1.0,
                                                                "windows_read": 4, "reply": True}},
            "uncovered": []}


def fb(**kw) -> bytes:
    base = {"conversation_id": "c1", "turn_id": "t1", "claim_id": "a1", "label_shown": "SUPPORTS",
            "judgement": "right", "source": "user", "ts": 1000.0}
    return orjson.dumps({k: v for k, v in {**base, **kw}.items() if v is not None})  # None: the field left out


@pytest.fixture
def store(feedback_store_url):
    """The store on each backend (tests/conftest.py): a SQLite file, a fresh PostgreSQL database."""
    with FeedbackStore(feedback_store_url) as s:
        yield s


@pytest.mark.parametrize("raw, code", [
    (b"{", Reason.MALFORMED_JSON),
    (b'{"conversation_id": "c", "conversation_id": "d"}', Reason.MALFORMED_JSON),
    (b"\xff\xfe", Reason.INVALID_UTF8),
    (b"[1, 2]", Reason.SCHEMA),
    (fb(judgement="maybe"), Reason.SCHEMA),
    (fb(source="bot"), Reason.SCHEMA),
    (fb(label_shown="TRUE"), Reason.SCHEMA),
    (fb(ts="yesterday"), Reason.SCHEMA),
    (fb(extra=1), Reason.SCHEMA),
    (fb(claim_index=-1, claim_id=None), Reason.SCHEMA),
    (fb(claim_id=None), Reason.SCHEMA),  # names no verdict
    (fb(turn_id="t\u200b1"), Reason.INVALID_FIELD),
    (fb(note="x" * 20000), Reason.TOO_LARGE),
])
def test_bad_feedback_is_refused_with_a_reason(raw, code):
    with pytest.raises(InvalidEvent) as e:
        parse_feedback(raw)
    assert e.value.code == code and len(e.value.reason) < 400


def test_a_good_record_round_trips():
    f = parse_feedback(fb(note="the evidence is about another Paris", confidence_shown="high", shown=True))
    assert f == parse_feedback(f.to_json())
    assert f.key == ("user", "c1", "t1", "a1", repr(1000.0))
    assert parse_feedback(fb(claim_id=None, claim_index=2, feedback_id="x")).key == ("user", "c1", "t1", "#2", "x")


def test_redelivery_is_idempotent_and_a_changed_mind_replaces(store):
    store.add_verdicts([verdict("c1", "t1", "a1")])
    first = parse_feedback(fb(feedback_id="page-1", judgement="right", ts=10.0))
    for _ in range(3):  # at-least-once: the same record three times
        store.add_feedback([first])
    assert store.counts()["feedback"] == 1
    store.add_feedback([parse_feedback(fb(feedback_id="page-1", judgement="wrong", ts=20.0))])
    store.add_feedback([first])  # a stale replay of the first must not undo the change
    (j,) = store.judged()
    assert j.judgement == "wrong" and j.ts == 20.0
    store.add_feedback([parse_feedback(fb(source="moderator", judgement="right"))])  # another judge: its own row
    assert store.counts()["judgement"] == {"right": 1, "wrong": 1, "unsure": 0}


def test_judgements_join_their_verdict_by_claim_id_or_index_whatever_came_first(store):
    store.add_feedback([parse_feedback(fb(claim_id=None, claim_index=1, turn_id="t2", judgement="wrong"))])
    assert store.judged() == [] and len(store.judged(joined_only=False)) == 1
    assert store.counts()["unjoined"] == 1
    # the turn's verdicts in order: claim 0, claim 1, then the turn's own
    store.add_verdicts([verdict("c1", "t2", "b0"), verdict("c1", "t2", "b1", label="REFUTES"), verdict("c1", "t2", "bt")])
    (j,) = store.judged()
    assert j.verdict["claim_id"] == "b1" and j.claim_index == 1 and j.label_shown == "SUPPORTS"
    # the full verdict is kept: the badge facts can be recomputed from it
    from schemas import Verdict
    from workers.display import BadgeFacts

    facts = BadgeFacts.of_verdict(Verdict.from_dict(j.verdict))
    assert facts is not None and facts.entail == pytest.approx(0.91) and facts.windows == 4 and facts.in_dialogue
    store.add_verdicts([verdict("c1", "t2", "b1", label="NOT ENOUGH INFO")])  # a redelivered verdict: first copy kept
    assert store.judged()[0].verdict["label"] == "REFUTES" and store.counts()["verdicts"] == 3


def test_two_verdicts_at_one_index_join_the_first_stored(store):
    """A turn checked twice (another model, another claim split) leaves two verdicts at claim index
    0: a judgement naming the index joins the first stored, on both backends (PostgreSQL would
    refuse a scalar subquery with two rows)."""
    store.add_verdicts([verdict("c1", "t3", "first")])
    time.sleep(0.01)  # stored_at orders them
    store.add_verdicts([verdict("c1", "t3", "second", label="REFUTES")])
    store.add_feedback([parse_feedback(fb(turn_id="t3", claim_id=None, claim_index=0))])
    (j,) = store.judged()
    assert j.verdict["claim_id"] == "first" and store.counts()["unjoined"] == 0
    assert store.precision()[0].n == 1


def test_the_store_file_is_wal_and_survives_reopening(tmp_path):
    path = tmp_path / "fb.sqlite3"
    with FeedbackStore(path) as s:
        s.add_feedback([parse_feedback(fb())])
    assert sqlite3.connect(path).execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    with FeedbackStore(path) as s:
        assert s.counts()["feedback"] == 1


def test_a_postgres_url_without_its_driver_is_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # an install without the stream extra: import fails
    with pytest.raises(StoreUnavailable, match="needs psycopg 3") as e:
        FeedbackStore("postgresql://u:secret@db.example/dialcheck")
    assert "DIALCHECK_FEEDBACK_STORE" in str(e.value) and "secret" not in str(e.value)


def test_an_unwritable_store_is_one_line(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreUnavailable, match="cannot open"):
        FeedbackStore(tmp_path / "file" / "fb.sqlite3")


def test_precision_per_badge_bucket_counts_only_shown_badges(store):
    store.add_verdicts([verdict("c", f"s{i}", f"s{i}", conf="high" if i < 5 else "medium") for i in range(10)]
                       + [verdict("c", f"r{i}", f"r{i}", label="REFUTES") for i in range(4)]
                       + [verdict("c", f"h{i}", f"h{i}", show=False, conf="low") for i in range(6)])
    now = time.time()
    recs = [parse_feedback(fb(conversation_id="c", turn_id=f"s{i}", claim_id=f"s{i}", judgement="right" if i < 8 else "wrong", ts=now))
            for i in range(10)]
    recs += [parse_feedback(fb(conversation_id="c", turn_id=f"r{i}", claim_id=f"r{i}", label_shown="REFUTES",
                               judgement="wrong", ts=now)) for i in range(4)]
    recs += [parse_feedback(fb(conversation_id="c", turn_id=f"h{i}", claim_id=f"h{i}", judgement="wrong", ts=now))
             for i in range(6)]  # hidden badges: not in the shown precision
    recs += [parse_feedback(fb(conversation_id="c", turn_id="s0", claim_id="s0", source="moderator", judgement="unsure",
                               ts=now))]
    store.add_feedback(recs)
    rows = {r.label: r for r in store.precision(target=0.85, confidence=0.9)}
    s, r, h = rows["SUPPORTS"], rows["REFUTES"], rows["high"]
    assert (s.right, s.wrong, s.n, s.shown, s.verdicts) == (8, 2, 10, 10, 20)
    assert s.precision == pytest.approx(0.8) and s.coverage == pytest.approx(0.5)
    assert (s.lower, s.upper) == pytest.approx(clopper_pearson(8, 10, 0.9))
    assert (h.right, h.wrong, h.shown) == (5, 0, 5)
    assert (r.right, r.wrong, r.precision) == (0, 4, 0.0) and r.alarm  # upper end 0.53 < 0.85
    assert not s.alarm  # 0.8 with n=10: the interval still reaches 0.85


def test_clopper_pearson_matches_the_beta_quantiles():
    from scipy.stats import beta

    lo, hi = clopper_pearson(8, 10, 0.9)
    assert lo == pytest.approx(beta.ppf(0.05, 8, 3)) and hi == pytest.approx(beta.ppf(0.95, 9, 2))
    assert clopper_pearson(0, 0) == (0.0, 1.0) and clopper_pearson(0, 5)[0] == 0.0 and clopper_pearson(5, 5)[1] == 1.0
    assert upper_bound(1, 50, 0.9) == pytest.approx(beta.ppf(0.9, 2, 49)) and upper_bound(3, 3) == 1.0
    assert lower_bound(49, 50, 0.9) == pytest.approx(beta.ppf(0.1, 49, 2)) and lower_bound(0, 9) == 0.0
    # the alarm fires only when even the optimistic end is below the target
    assert precision_row("SUPPORTS", 30, 20, target=0.85).alarm and not precision_row("SUPPORTS", 3, 1, target=0.85).alarm
    assert not precision_row("SUPPORTS", 0, 0).alarm and precision_row("SUPPORTS", 0, 0).precision is None


def test_buckets():
    assert buckets_of("SUPPORTS", "high", True) == ("SUPPORTS", "high")
    assert buckets_of("REFUTES", "medium", None) == ("REFUTES",)
    assert buckets_of("SUPPORTS", "high", False) == () and buckets_of("NOT ENOUGH INFO", "high", True) == ()


def test_feedback_is_a_frozen_value():
    f = Feedback("c", "t", "SUPPORTS", "right", "user", 1.0, claim_id="x")
    with pytest.raises(Exception):
        f.judgement = "wrong"  # type: ignore[misc]


# -- PostgreSQL only: credentials, bad URLs, a server that goes away (a real server, tests/pg.py) -----------
def test_wrong_password_or_bad_url_is_one_line_naming_the_setting_never_the_password(postgres_server, capsys):
    from dialcheck.cli import main

    wrong = "Wr0ng-p@ss:word%"
    good_url = postgres_server.database()
    bad_port = good_url.replace(f":{postgres_server.port}/", ":notaport/")
    down = good_url.replace(f":{postgres_server.port}/", f":{free_port()}/")  # nothing listens there
    cases = {postgres_server.url(password=wrong): "password authentication failed",
             bad_port: "port", down: "refused",
             "postgresql://dialcheck:50%zz@127.0.0.1/x": "percent",  # a password libpq cannot decode
             "postgresql://dialcheck:sl/ash-pw@127.0.0.1:1/x": ""}  # '/' not encoded: no URL scrubber's userinfo
    pw = postgres_server.password  # each whole, and the part a naive scrubber leaves (after the first '@')
    secrets = [wrong, wrong.split("@")[-1], "50%zz", "sl/ash", pw, pw.split("@")[-1], quote(pw, safe=""), quote(wrong, safe="")]
    for url, reason in cases.items():
        with pytest.raises(StoreUnavailable) as e:
            FeedbackStore(url)
        msg = str(e.value)
        assert reason in msg.lower() and "DIALCHECK_FEEDBACK_STORE" in msg and "\n" not in msg, msg
        assert not [x for x in secrets if x in msg], msg
        for cmd in (["feedback", "stats"], ["calibrate", "--from-feedback"]):  # the CLI: one line, exit 2
            assert main([*cmd, "--store", url]) == 2
            out, err = capsys.readouterr()
            assert err.startswith("dialcheck: ") and err.count("\n") == 1 and "Traceback" not in err, err
            assert not [x for x in secrets if x in err], err
    with FeedbackStore(good_url) as st:  # the good URL (password with '@', ':' and '%', percent-encoded) works
        assert st.counts()["feedback"] == 0
        assert postgres_server.password not in st.public_url and "***@127.0.0.1" in st.public_url


def test_a_store_whose_server_restarts_says_unreachable_then_reconnects(postgres_server):
    """While the server is down every call is StoreUnavailable (the caller keeps its batch and retries);
    once it is back the next call opens a new connection and nothing committed before is lost."""
    with FeedbackStore(postgres_server.database()) as st:
        st.add_feedback([parse_feedback(fb(ts=1.0))])
        postgres_server.stop()
        try:
            with pytest.raises(StoreUnavailable, match="unreachable .*DIALCHECK_FEEDBACK_STORE") as e:
                st.add_feedback([parse_feedback(fb(ts=2.0))])
            assert postgres_server.password not in str(e.value)
            with pytest.raises(StoreUnavailable):
                st.counts()  # readers too (/metrics, stats)
        finally:
            postgres_server.start()
        st.add_feedback([parse_feedback(fb(ts=2.0))])
        assert st.counts()["feedback"] == 2


def test_model_events_are_recorded_in_order_and_counted_by_kind(store):
    """The adaptation loop's record (dialcheck adapt-loop): append only, oldest first, every kind counted."""
    store.add_event("built", "v1", other="v0", reason="ranks better", detail={"auc": [0.77, 0.91]}, ts=10.0)
    store.add_event("promoted", "v1", other="v0", reason="challenger won", ts=20.0)
    store.add_event("rolled_back", "v1", other="v0", reason="drift alarm", detail={"signalled": [42]}, ts=30.0)
    got = store.events()
    assert [(e.ts, e.event, e.version, e.other, e.reason) for e in got] == [
        (10.0, "built", "v1", "v0", "ranks better"), (20.0, "promoted", "v1", "v0", "challenger won"),
        (30.0, "rolled_back", "v1", "v0", "drift alarm")]
    assert got[0].detail == {"auc": [0.77, 0.91]} and got[2].detail == {"signalled": [42]}
    assert [e.event for e in store.events(last=2)] == ["promoted", "rolled_back"]
    assert store.event_counts() == {"built": 1, "not_built": 0, "scored": 0, "promoted": 1, "refused": 0,
                                    "rolled_back": 1}
    with pytest.raises(ValueError):
        store.add_event("deployed", "v1")


def test_a_store_from_before_model_events_gets_the_table_on_open(tmp_path):
    path = tmp_path / "old.sqlite3"
    with FeedbackStore(path):
        pass
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE model_events")
    with FeedbackStore(path) as st:
        assert st.events() == [] and st.event_counts()["built"] == 0
