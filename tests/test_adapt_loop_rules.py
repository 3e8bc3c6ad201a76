"""The adaptation loop's rules without a model or a broker (dialcheck/adapt_loop.py): feedback
cannot steer them (user clicks off, a claim judged both ways dropped, one conversation one vote),
the challenger gate holds against a poisoned batch, and a tick rolls a drifting version back on a
real feedback store with real renames and a real SIGHUP to a child process, each step recorded as a
model event and exported on /metrics.

What is not here: scoring a challenger with real models and building one (tests/test_adapt_loop.py,
end to end); the poisoned *training* batch (tests/test_adapt.py)."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dialcheck.adapt_loop import (AdaptLoop, Layout, LoopOptions, badge_votes, challenger_gate, drift, new_pairs,
                                  parse_duration)
from lab.nli.judged import JudgedPair
from schemas.feedback import Feedback
from streams.feedback_store import FeedbackStore, JudgedVerdict

pytestmark = pytest.mark.unit

V_GOOD, V_BAD = "base+adapt-good", "base+adapt-bad"


def verdict(conv: str, version: str, label: str = "SUPPORTS", claim: str = "Paris is in France.") -> dict:
    return {"conversation_id": conv, "turn_id": f"{conv}#r", "claim_id": f"{conv}-c", "claim": claim, "label": label,
            "display": {"show": True, "confidence": "medium"}, "model_versions": {"nli": version},
            "evidence": [{"window": f"Paris is the capital of France ({conv}).", "entail": 0.9, "contradict": 0.0}]}


def judged(conv: str, judgement: str, version: str = V_BAD, source: str = "annotator", at: float = 1.0,
           label: str = "SUPPORTS", turn: str | None = None) -> JudgedVerdict:
    v = verdict(conv, version, label)
    if turn:
        v = {**v, "turn_id": turn, "claim_id": f"{turn}-c"}
    return JudgedVerdict(verdict=v, judgement=judgement, source=source, conversation_id=conv, turn_id=v["turn_id"],
                         claim_index=0, label_shown=label, received_at=at, claim_id=v["claim_id"],
                         confidence_shown="medium", shown=True, ts=at)


def test_user_clicks_and_one_flooded_conversation_do_not_move_the_rollback_count():
    honest = [judged(f"c{i}", "right") for i in range(8)]
    users = [judged(f"u{i}", "wrong", source="user") for i in range(40)]  # off by default
    flood = [judged("flood", "wrong", turn=f"flood#{i}") for i in range(60)]  # 60 wrong claims, one conversation
    votes, left = badge_votes([*honest, *users, *flood], V_BAD)
    assert votes["SUPPORTS"] == (8, 1)  # the flood is one vote, the users none
    assert left["same_conversation"] == 59
    assert not drift([*honest, *users, *flood], V_BAD, target=0.8, confidence=0.9)["alarm"]
    with_users = badge_votes([*honest, *users], V_BAD, sources=("annotator", "user"))[0]
    assert with_users["SUPPORTS"] == (8, 40)  # what the users would have done, had they been trusted


def test_a_claim_judged_both_ways_is_dropped_and_a_tied_conversation_votes_not():
    both = [judged("c0", "right", source="moderator", at=1.0), judged("c0", "wrong", source="annotator", at=2.0)]
    tie = [judged("c1", "right", turn="c1#a"), judged("c1", "wrong", turn="c1#b")]
    votes, left = badge_votes([*both, *tie], V_BAD)
    assert votes == {} and left == {"conflicting": 1, "tied_conversation": 1, "same_conversation": 1}


def test_the_drift_alarm_fires_on_wrong_badges_across_conversations_and_only_for_their_version():
    bad = [judged(f"c{i}", "right" if i % 2 else "wrong") for i in range(20)]
    good = [judged(f"g{i}", "right", version=V_GOOD) for i in range(20)]
    d = drift([*bad, *good], V_BAD, target=0.8, confidence=0.9)
    assert d["alarm"] and d["rows"]["SUPPORTS"] == {"right": 10, "wrong": 10, "upper": pytest.approx(0.698, abs=1e-3)}
    assert "SUPPORTS badges right 10 of 20 conversations" in d["why"]
    assert not drift([*bad, *good], V_GOOD, target=0.8, confidence=0.9)["alarm"]


def test_new_pairs_are_judged_after_the_build_of_the_live_models_verdicts_by_trusted_sources():
    before = judged("c0", "right", version=V_GOOD, at=1.0)
    again = judged("c0", "wrong", version=V_GOOD, source="moderator", at=5.0)  # judged before the build: not new
    fresh = [judged(f"n{i}", "wrong" if i % 2 else "right", version=V_GOOD, at=5.0 + i) for i in range(6)]
    other = judged("x0", "right", version=V_BAD, at=9.0)  # another version's verdict
    user = judged("u0", "right", version=V_GOOD, source="user", at=9.0)
    pairs = new_pairs([before, again, *fresh, other, user], since=2.0, version=V_GOOD)
    assert sorted(p.group for p in pairs) == [f"n{i}" for i in range(6)]
    assert [p.supported for p in sorted(pairs, key=lambda p: p.group)] == [True, False] * 3


def _pairs(groups: list[str], supported: list[bool]) -> list[JudgedPair]:
    return [JudgedPair("premise", f"reply {i}", "entailment" if s else "not_entailment", g)
            for i, (g, s) in enumerate(zip(groups, supported))]


def test_the_challenger_gate_promotes_a_better_model_and_refuses_a_poisoned_one():
    rng = np.random.default_rng(0)
    y = np.array([True, False] * 30)
    groups = [f"c{i}" for i in range(60)]
    champion = np.where(y, 0.9, 0.7) + rng.normal(0, 0.03, 60)  # ranks the replies, says the wrong ones loudly
    better = np.where(y, 0.88, 0.3) + rng.normal(0, 0.03, 60)
    poisoned = np.where(y, 0.2, 0.9) + rng.normal(0, 0.03, 60)  # trained on flipped judgements
    win = challenger_gate(_pairs(groups, list(y)), champion, better, min_new=30, confidence=0.95)
    assert win["promote"] and win["conversations"] == 60 and win["p_value"] < 0.05, win
    lose = challenger_gate(_pairs(groups, list(y)), champion, poisoned, min_new=30, confidence=0.95)
    assert not lose["promote"] and lose["losses"] == 60
    few = challenger_gate(_pairs(groups[:20], list(y[:20])), champion[:20], better[:20], min_new=30, confidence=0.95)
    assert not few["promote"] and few["why"] == "20 new judged conversations, 30 needed"


def test_one_flooded_conversation_cannot_carry_the_challenger_gate():
    """A poisoned scoring batch: 500 replies in one conversation where the poisoned challenger looks
    right, beside 40 honest conversations where it is wrong; per pair it would win, per conversation not."""
    y = [True, False] * 20 + [False] * 500
    groups = [f"c{i}" for i in range(40)] + ["flood"] * 500
    champion = np.array([0.9 if s else 0.4 for s in y[:40]] + [0.95] * 500)
    poisoned = np.array([0.5 if s else 0.8 for s in y[:40]] + [0.0] * 500)
    pooled = np.mean((champion - np.array(y)) ** 2) - np.mean((poisoned - np.array(y)) ** 2)
    assert pooled > 0  # pooled over replies the flood would make it look better
    gate = challenger_gate(_pairs(groups, y), champion, poisoned, min_new=30, confidence=0.95)
    assert not gate["promote"] and gate["conversations"] == 41 and gate["wins"] == 1, gate


def test_durations():
    assert [parse_duration(t) for t in ("90", "90s", "30m", "6h", "1d")] == [90, 90, 1800, 21600, 86400]
    with pytest.raises(ValueError):
        parse_duration("soon")


# --- a tick on a real store, real renames, a real signal ------------------------------------------

HUP_COUNTER = """import signal, sys, time
n = 0
def on(*_):
    global n
    n += 1
    open(sys.argv[1], "w").write(str(n))
signal.signal(signal.SIGHUP, on)
open(sys.argv[1], "w").write("0")
while True:
    time.sleep(0.05)
"""


def model_dir(path: Path, version: str) -> Path:
    """A model directory the worker accepts as `version` (the shipped weights, hard-linked, with a
    decision and display fitted for it): a switch checks it as the worker would."""
    from tests.test_model_switch import model_version

    path.parent.mkdir(parents=True, exist_ok=True)
    return model_version(path, version)


@pytest.mark.model
def test_a_tick_rolls_a_drifting_version_back_and_says_so(tmp_path):
    from prometheus_client import generate_latest

    from schemas.settings import load_settings
    from streams.observability import Observability

    lay = Layout(tmp_path / "models" / "nli")
    model_dir(lay.live, V_BAD)
    model_dir(lay.previous, V_GOOD)
    store_path = tmp_path / "feedback.sqlite3"
    with FeedbackStore(store_path) as st:
        st.add_verdicts([verdict(f"c{i}", V_BAD) for i in range(12)])
        st.add_feedback([Feedback(f"c{i}", f"c{i}#r", "SUPPORTS", "right" if i < 3 else "wrong", "annotator", 10.0 + i,
                                  claim_id=f"c{i}-c", shown=True, confidence_shown="medium") for i in range(12)])
        # users try to hold the bad version: 30 "right" clicks; they do not count
        st.add_feedback([Feedback(f"c{i % 12}", f"c{i % 12}#r", "SUPPORTS", "right", "user", 30.0 + i,
                                  claim_id=f"c{i % 12}-c", feedback_id=f"u{i}") for i in range(30)])
    hups = tmp_path / "hups"
    child = subprocess.Popen([sys.executable, "-c", HUP_COUNTER, str(hups)])
    try:
        deadline = time.monotonic() + 30
        while not hups.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = []
        loop = AdaptLoop(lay, str(store_path), LoopOptions(target=0.8, min_new=50), pids=lambda: [child.pid],
                         log=lines.append)
        loop.tick()
        assert json.loads((lay.live / "calibration.json").read_text())["version"] == V_GOOD
        assert not lay.previous.exists() and (lay.retired / V_BAD / "model.onnx").is_file() and lay.live.is_symlink()
        deadline = time.monotonic() + 30
        while hups.read_text() != "1" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert hups.read_text() == "1"
        loop.tick()  # nothing more to do: no previous to go back to, nothing waiting, nothing new to build on
        assert hups.read_text() == "1"
    finally:
        child.send_signal(signal.SIGTERM)
        child.wait(10)
    with FeedbackStore(store_path) as st:
        events = st.events()
        assert [(e.event, e.version, e.other) for e in events] == [("rolled_back", V_BAD, V_GOOD)]
        assert events[0].detail["signalled"] == [child.pid] and "SUPPORTS badges right 3 of 12" in events[0].reason
        obs = Observability(load_settings())
        obs.attach(None, None, checker=type("C", (), {"model_versions": lambda self: {"nli": V_GOOD}})())
        obs.attach_feedback(st, 0.8, 0.9)
        text = generate_latest(obs.registry).decode()
    assert 'dialcheck_model_events_total{event="rolled_back"} 1.0' in text
    assert 'dialcheck_model_events_total{event="promoted"} 0.0' in text
    assert f'dialcheck_model_info{{nli_version="{V_GOOD}"}} 1.0' in text
    assert any("rolled_back" in ln for ln in lines)


@pytest.mark.model
def test_promote_keeps_the_previous_and_retires_the_older(tmp_path):
    lay = Layout(tmp_path / "nli")
    model_dir(lay.live, "v1")
    model_dir(lay.previous, "v0")
    cand = model_dir(lay.candidates / "v2", "v2")
    with FeedbackStore(tmp_path / "fb.sqlite3") as st:
        loop = AdaptLoop(lay, str(tmp_path / "fb.sqlite3"), LoopOptions(), log=lambda m: None)
        assert loop.promote(st, cand, reason="test") == "v2"
        assert [json.loads((d / "calibration.json").read_text())["version"] for d in (lay.live, lay.previous)] == ["v2", "v1"]
        assert (lay.retired / "v0").is_dir() and not cand.exists() and lay.live.is_symlink() and lay.previous.is_symlink()
        e = st.events()[-1]
        assert (e.event, e.version, e.other, e.reason, e.detail["signalled"]) == ("promoted", "v2", "v1", "test", [])


@pytest.mark.parametrize("argv, says", [
    (["--model-dir", "SHIPPED"], "is the source tree's model"),
    (["--model-dir", "nowhere"], "no model.onnx"),
    (["--model-dir", "LIVE", "--every", "soon"], "--every / --check-every: 'soon' is not a duration"),
    (["--model-dir", "LIVE", "--min-new", "0"], "--min-new must be at least 1"),
    (["--model-dir", "LIVE", "--sources", "moderator,robot"], "--sources moderator,robot"),
    (["--model-dir", "LIVE", "--adapt", "--out elsewhere"], "the loop sets --from-feedback, --base, --out"),
    (["--model-dir", "LIVE", "--promote", "NOTAMODEL"], "no model.onnx (not a model directory)"),
])
def test_mistakes_are_one_line(tmp_path, capsys, argv, says):
    from dialcheck.cli import main
    from schemas.settings import load_settings

    live = model_dir(tmp_path / "nli", "v1")
    (tmp_path / "nli-junk").mkdir()
    subst = {"SHIPPED": load_settings().models.nli_model_dir, "LIVE": str(live), "nowhere": str(tmp_path / "nowhere"),
             "NOTAMODEL": str(tmp_path / "nli-junk")}
    rc = main(["adapt-loop", *[subst.get(a, a) for a in argv], "--store", str(tmp_path / "fb.sqlite3")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and says in err[0] and "Traceback" not in err[0], err


def test_sigterm_stops_the_loop_cleanly_even_with_sigint_ignored(tmp_path):
    """A supervisor stops the loop with SIGTERM; a loop started in the background has SIGINT ignored
    (inherited), so SIGTERM must be the clean stop: exit 0, the lock released (a second loop may start)."""
    live = model_dir(tmp_path / "nli", "v1")
    cmd = [sys.executable, "-m", "dialcheck.cli", "adapt-loop", "--model-dir", str(live), "--store",
           str(tmp_path / "fb.sqlite3"), "--check-every", "0.2"]
    loop = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        first = loop.stdout.readline()
        assert first.startswith("dialcheck adapt-loop on "), first
        time.sleep(0.5)  # a few ticks
        loop.terminate()
        assert loop.wait(30) == 0, loop.stdout.read()[-2000:]
    finally:
        if loop.poll() is None:
            loop.kill()
    once = subprocess.run([*cmd, "--once"], capture_output=True, text=True, timeout=60)
    assert once.returncode == 0, once.stderr[-2000:]  # the lock was released


def test_once_says_why_it_did_nothing_counting_as_adapt_does(tmp_path, capsys):
    """Three judged conversations, two of them REFUTES badges judged wrong (a pair adapt trains on,
    "not contradiction", that says nothing about support): the loop counts 3 as adapt does (it
    said 1), and `--once` says why nothing was built, rolled back or scored."""
    from dialcheck.cli import main
    from lab.nli.judged import dedupe, from_feedback

    live = model_dir(tmp_path / "nli", "v1")
    store = tmp_path / "fb.sqlite3"
    labels = {"c0": ("SUPPORTS", "right"), "c1": ("REFUTES", "wrong"), "c2": ("REFUTES", "wrong")}
    with FeedbackStore(store) as st:
        st.add_verdicts([verdict(c, "v1", label) for c, (label, _) in labels.items()])
        st.add_feedback([Feedback(c, f"{c}#r", label, j, "annotator", 10.0, claim_id=f"{c}-c", shown=True,
                                  confidence_shown="medium") for c, (label, j) in labels.items()])
        adapt_counts = len({p.group for p in dedupe(from_feedback(st.judged())[0])[0]})  # what adapt reads
    assert adapt_counts == 3
    assert main(["adapt-loop", "--model-dir", str(live), "--store", str(store), "--once", "--min-new", "5"]) == 0
    said = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("adapt-loop: ")]
    assert len(said) == 1 and "no rollback: no previous version kept" in said[0], said
    assert "no challenger waiting" in said[0]
    assert "no build: 3 new judged conversations (3 judged replies, as adapt counts them), 5 needed" in said[0]


def test_a_second_loop_is_refused_but_a_switch_by_hand_waits_its_turn(tmp_path):
    """The loop holds a lock for its life (a second loop: one line, exit 2) and one per tick; a
    `--promote` or `--rollback` by hand waits for the tick, as the tick waits for it."""
    from dialcheck.adapt_loop import LoopError

    lay = Layout(tmp_path / "nli")
    first = AdaptLoop(lay, str(tmp_path / "fb.sqlite3"), LoopOptions(), log=lambda m: None)
    second = AdaptLoop(lay, str(tmp_path / "fb.sqlite3"), LoopOptions(), log=lambda m: None)
    with first.only_loop():
        with pytest.raises(LoopError, match="another adapt-loop runs on"):
            with second.only_loop():
                pass
        with second.locked():  # a switch by hand is not a second loop
            pass
