"""One error base (schemas/errors.py `DialcheckError`): the CLI maps by type, each error says its one
line and exit code; and a stage's exception reaches its error verdict with the stage's name."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from dialcheck.commands.data import DataError
from dialcheck.errors import ServiceUnreachable, UsageError, one_line
from schemas import DataMissing
from schemas.errors import DialcheckError
from schemas.items import CheckItem
from schemas.protocols import LLMUnavailable, ModelUnavailable, SearchUnavailable
from schemas.settings import SettingsInvalid
from streams.checking import check_safely
from streams.feedback_store import StoreUnavailable
from streams.observability import MetricsBindError
from streams.outbox import StoreDown
from streams.replay import UndeliveredTurns
from workers.chain import run_stages
from workers.retrieval.build import IndexEncoderMismatch

pytestmark = pytest.mark.unit

URL = "postgresql://app:s3cret-pw@db:5432/x"


@pytest.mark.parametrize("error,line", [
    (UsageError(f"bad --store {URL}"), "bad --store postgresql://***@db:5432/x"),
    (ServiceUnreachable("no Kafka broker answers at h:1\nsecond line"), "no Kafka broker answers at h:1"),
    (DataError("unknown data set 'x'"), "unknown data set 'x'"),
    (ModelUnavailable(f"nli at {URL} timed out"), "model server unavailable: nli at postgresql://***@db:5432/x timed out"),
    (LLMUnavailable("LLM at h: HTTP 500"), "model server unavailable: LLM at h: HTTP 500"),
    (SearchUnavailable("index gone"), "search backend unavailable: index gone"),
    (StoreUnavailable(f"cannot open DIALCHECK_FEEDBACK_STORE {URL}"),
     "cannot open DIALCHECK_FEEDBACK_STORE postgresql://***@db:5432/x"),
    (MetricsBindError("127.0.0.1:9464 is in use"), "127.0.0.1:9464 is in use"),
    (UndeliveredTurns("3 of 9 turns not acknowledged"), "3 of 9 turns not acknowledged"),
    (IndexEncoderMismatch("index built with e5, configured minilm"), "index built with e5, configured minilm"),
    (DataMissing("dialfact", "DialFact", "/d/dialfact/test.jsonl", ("/d",)),
     "DialFact data not found (looked in /d): run `dialcheck data fetch dialfact` or set DIALCHECK_DATA_DIR"),
])
def test_each_error_of_ours_is_one_line_with_its_exit_code(error, line):
    assert isinstance(error, DialcheckError)
    assert one_line(error, SimpleNamespace()) == (2, line)


def test_the_other_bases_still_hold():
    """Re-based, not re-typed: existing `except ValueError` / `RuntimeError` / `FileNotFoundError` catch them."""
    assert isinstance(SettingsInvalid("x"), ValueError) and isinstance(StoreDown("x"), RuntimeError)
    assert isinstance(DataMissing("d", "D", "/p"), FileNotFoundError)


def test_a_bug_keeps_its_traceback():
    assert one_line(KeyError("x"), SimpleNamespace()) is None


class _Broken:
    """A stage whose run raises what a bug raises (not a declared outage)."""
    name, batched = "verify", True

    def run(self, states):
        raise KeyError("window")

    def on_outage(self, states, error):
        raise AssertionError("a KeyError is not an outage")


def test_a_stage_exception_reaches_the_error_verdict_with_the_stages_name():
    def check_turns(items):
        run_stages([_Broken()], [SimpleNamespace(skip_reason=None, timings={}) for _ in items], {})

    item = CheckItem("c1", "t1", [], "Paris is in France.")
    [result] = check_safely(check_turns, [item])
    assert [v.status.reason for v in result.verdicts] == ["pipeline failure in stage verify: KeyError('window')"]
    with pytest.raises(KeyError):  # the type stays: callers' `except` clauses are unchanged
        check_turns([item])
