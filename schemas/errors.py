"""dialcheck's errors: the one base (`DialcheckError`), the dead-letter reason codes and the errors
that carry them, and the stage a pipeline failure came from.

One base, so the CLI maps by type (dialcheck/errors.py: an instance is one `dialcheck: ...` line and
its `exit_code`; anything else is a bug and keeps its traceback). One list of machine codes
(`Reason`), so a dead letter's header, its metric label and the code that raised it never disagree;
`DataMissing` is the one missing-data error the CLI turns into a line that says what to fetch."""
from __future__ import annotations

from enum import StrEnum


class DialcheckError(Exception):
    """A mistake the user can fix or a service that does not answer: the CLI prints `line()` (after
    `prefix`, secrets redacted) and exits with `exit_code`. Subclasses keep their other base
    (ValueError, RuntimeError, OSError) so existing `except` clauses still hold."""

    exit_code: int = 2
    prefix: str = ""

    def line(self) -> str:
        text = str(self).strip()
        return self.prefix + (text.splitlines()[0] if text else type(self).__name__)


def in_stage(error: BaseException, stage: str) -> None:
    """Name the stage `error` came out of, once (the innermost), as a note: its type stays, so every
    `except` and `pytest.raises` still holds; `stage_failure` reads it."""
    if not any(n.startswith(STAGE_NOTE) for n in getattr(error, "__notes__", ())):
        error.add_note(STAGE_NOTE + stage)


def stage_failure(error: BaseException) -> str:
    """How a pipeline failure reads in an error verdict: the stage it came from (the note the stage
    runner adds, workers/chain.py `degrading`) and the exception."""
    stages = [n[len(STAGE_NOTE):] for n in getattr(error, "__notes__", ()) if n.startswith(STAGE_NOTE)]
    return f"pipeline failure in stage {stages[0]}: {error!r}" if stages else f"pipeline failure: {error!r}"


STAGE_NOTE = "dialcheck stage: "  # the note (PEP 678) that names the stage an exception came out of


class Reason(StrEnum):
    """Why a record went to the dead-letter topic (or a batch got error verdicts): the one list of
    machine codes. A code rides with every dead letter (header `dialcheck.reason.code`, next to the
    short human reason) and is the `reason` label of `dialcheck_dead_letters_total`; it is never
    parsed back out of the human text. A new reason is a member here, raised where it is detected."""

    TOMBSTONE = "tombstone"            # null value (a Kafka delete marker)
    KEY = "key"                        # key missing, too large, or not the conversation_id
    INVALID_UTF8 = "invalid_utf8"      # value is not UTF-8
    MALFORMED_JSON = "malformed_json"  # not JSON, a duplicate key, or nested too deep
    SCHEMA = "schema"                  # JSON that breaks the JSON Schema (chat_turn, verdict)
    TOO_LARGE = "too_large"            # event bytes or text characters over the limit
    EMPTY_TEXT = "empty_text"          # nothing visible left after NFKC and invisibles removed
    INVALID_FIELD = "invalid_field"    # an id, speaker or ts the schema allows but the rules do not
    UNREADABLE = "unreadable"          # validation itself failed on the input (never seen; guarded)
    UNDECODABLE = "undecodable"        # a record batch the consumer could not decode (unknown codec, bad CRC)
    POISON = "poison"                  # the pipeline call crashed the worker `poison_attempts` times
    DEADLINE = "deadline"              # a pipeline batch ran past `batch_deadline_s` (error verdicts, no dead letter)
    INTERNAL = "internal"              # handling the step raised (a bug, not the input's fault): dead letter, then ack


class InvalidEvent(ValueError):
    """Input that must go to the dead-letter topic: `code` (a Reason) for machines, `reason` (short,
    may quote the input) for people."""

    def __init__(self, code: Reason, reason: str):
        super().__init__(reason)
        self.code = Reason(code)
        self.reason = reason


class DataMissing(DialcheckError, FileNotFoundError):
    """A data file a command needs is not in the data dir. `dataset` is the set's name in the data
    manifest (`dialcheck data fetch <dataset>`), `title` its readable name, `looked_in` the data dirs
    tried; the CLI turns it into one line that says what to run (dialcheck/errors.py)."""

    def __init__(self, dataset: str, title: str, path: str, looked_in: tuple[str, ...] = ()):
        super().__init__(2, f"{title} data not found", path)
        self.dataset, self.title, self.path, self.looked_in = dataset, title, path, tuple(looked_in)

    def __str__(self) -> str:
        where = ", ".join(self.looked_in) or self.path
        return (f"{self.title} data not found (looked in {where}): run `dialcheck data fetch {self.dataset}` "
                "or set DIALCHECK_DATA_DIR")

