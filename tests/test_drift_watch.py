"""The drift alarm in the worker's log (streams/drift_watch.py): one line when it starts, none while
it holds, one when it ends; read from a real feedback store, the same pooled rows as /metrics."""
from __future__ import annotations

import pytest

from schemas.feedback import Feedback
from streams.drift_watch import DriftWatch
from streams.feedback_store import FeedbackStore

pytestmark = pytest.mark.unit


def judge(st: FeedbackStore, start: int, n: int, judgement: str) -> None:
    st.add_feedback([Feedback(f"c{i}", f"c{i}#r", "SUPPORTS", judgement, "annotator", 10.0 + i, claim_id=f"c{i}-c",
                              shown=True, confidence_shown="medium") for i in range(start, start + n)])


def test_one_line_when_the_alarm_starts_and_one_when_it_ends(tmp_path):
    now = [0.0]
    with FeedbackStore(tmp_path / "fb.sqlite3") as st:
        watch = DriftWatch(st, target=0.8, confidence=0.9, every_s=60, clock=lambda: now[0])
        assert watch.line() is None  # nothing judged: no alarm
        judge(st, 0, 12, "wrong")
        assert watch.line() is None  # looked less than a minute ago: no store read
        now[0] += 60
        started = watch.line()
        assert started.startswith("drift alarm started: ") and "SUPPORTS right 0 of 12" in started, started
        now[0] += 60
        assert watch.line() is None  # still alarming: said once
        judge(st, 12, 200, "right")
        now[0] += 60
        assert watch.line().startswith("drift alarm ended: shown-badge precision of SUPPORTS back within target 0.8")
        now[0] += 60
        assert watch.line() is None
