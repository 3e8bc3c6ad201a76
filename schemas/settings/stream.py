"""The stream worker: context, batching, bounds, deadlines, quarantine, metrics endpoint."""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from schemas.limits import MAX_JSON_DEPTH, MAX_REASON_BYTES, MAX_TEXT_CHARS
from schemas.retry import ATTEMPTS, BACKOFF_S, MAX_BACKOFF_S
from pydantic import field_validator

from schemas.settings.base import REPO_ROOT, Section, creatable_path, env


DEFAULT_FEEDBACK_STORE = str(REPO_ROOT / "artifacts" / "feedback.sqlite3")


def feedback_off(where: str) -> bool:
    """True for the feedback store setting (or a --store) that turns the store off: 'off', any case."""
    return where.strip().lower() == "off"


class StreamSettings(Section):
    app_id: str = env("STREAM_APP_ID", "dialcheck", "Faust app id: consumer group and changelog topic prefix.",
                       pattern=r"^[A-Za-z0-9._-]+$")
    state_dir: str = env("STATE_DIR", "",
                          "Worker state directory (Faust's data dir; the tables live in Kafka changelogs). Empty: "
                          "$XDG_STATE_HOME/dialcheck/<app id>, else ~/.local/state/dialcheck/<app id>; never the "
                          "current directory.")

    @property
    def state_path(self) -> Path:
        """The state directory this worker uses (the setting, or the XDG default)."""
        import os

        if self.state_dir:
            return Path(self.state_dir).expanduser()
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        return Path(base) / "dialcheck" / self.app_id

    context_turns: int = env("CONTEXT_TURNS", 10, "Turns kept per conversation.", ge=1, le=1000)
    context_idle_s: float = env("CONTEXT_IDLE_S", 3600.0, "Evict a conversation idle this long (0: never).", ge=0)
    check_roles: str = env("CHECK_ROLES", "assistant,bot", "Speaker roles whose turns are checked (comma list).")
    max_text_chars: int = env("MAX_TEXT_CHARS", MAX_TEXT_CHARS, "Longer turns are rejected to the dead-letter topic.", ge=1)
    batch_size: int = env("BATCH_SIZE", 16, "Claims per model batch (eval, benchmarks, the stream's batch path).",
                           ge=1, le=10000)
    take_events: int = env("TAKE_EVENTS", 1024,
                            "Records the worker takes per step at most (context turns included); the checked turns among "
                            "them (at most TAKE_CHECKED) are checked BATCH_SIZE at a time (a pipeline call each, its "
                            "verdicts delivered before the next), and the step is acknowledged when all are delivered. "
                            "Fewer records per step means fewer to redeliver after a crash.",
                            ge=1, le=10000)
    take_checked: int = env("TAKE_CHECKED", 64,
                             "Turns to check per step at most: a step ends when the turns it holds to check fill this "
                             "(best a multiple of BATCH_SIZE, so a busy step's last pipeline call is full) or it holds "
                             "TAKE_EVENTS records, whichever comes first.", ge=1, le=10000)
    batch_within_s: float = env("BATCH_WITHIN_S", 0.2, "Max wait to fill a step, from its first record.", gt=0, le=60)
    batch_idle_ms: float = env("BATCH_IDLE_MS", 20.0,
                               "A step that is not full ends when no record arrived for this long (the records already "
                               "fetched arrive within a few ms of each other); 0: it waits BATCH_WITHIN_S.", ge=0, le=60000)
    status_interval_s: float = env("STREAM_STATUS_S", 5.0,
                                    "Idle-eviction sweep period; the worker's status line is printed then, when it changed.",
                                    gt=0, le=3600)
    recovery_timeout_s: float = env("RECOVERY_TIMEOUT_S", 300.0,
                                    "Longest the worker waits for its tables to be restored from their changelogs "
                                    "before it says why in one line and exits 3 (a broker that lost its data leaves "
                                    "recovery waiting forever: docs/operations.md#the-broker-lost-its-data).",
                                    gt=0, le=86400)
    pid_file: str = env("PID_FILE", "",
                         "A file the worker writes its pid to once it is ready and takes SIGHUP (a reload: "
                         "`dialcheck adapt-loop --pid-file`), removed when it stops. Empty: none.")
    fetch_wait_ms: int = env("FETCH_WAIT_MS", 100,
                              "Longest a worker's fetch waits for records (Faust's own is 1,500 ms; with a broker "
                              "that holds fetches for the full wait it is the latency floor).", ge=1, le=30000)
    metrics_host: str = env("METRICS_HOST", "127.0.0.1",
                             "Address of the worker's /metrics, /healthz, /readyz (loopback by default; 0.0.0.0 in compose).",
                             min_length=1)
    metrics_port: int = env("METRICS_PORT", 9464, "Port of the worker's /metrics, /healthz, /readyz (0: any free port).",
                             ge=0, le=65535)
    log_format: Literal["text", "json"] = env("LOG_FORMAT", "text", "Worker log lines: 'text' or 'json' (one object a line).")
    broker_wait_s: float = env("BROKER_WAIT_S", 10.0,
                                "How long commands wait for a configured Kafka broker to answer before giving up.",
                                gt=0, le=600)
    # bounds, deadlines and quarantine: one oversized or poisonous record must not stall or crash the worker
    max_event_bytes: int = env("MAX_EVENT_BYTES", 262144,
                                "Larger chat.turns records are dead-lettered before parsing.", ge=1024, le=16777216)
    max_json_depth: int = env("MAX_JSON_DEPTH", MAX_JSON_DEPTH, "Deeper JSON nesting in a turn is dead-lettered.", ge=2, le=256)
    max_reason_bytes: int = env("MAX_REASON_BYTES", MAX_REASON_BYTES,
                                 "Dead-letter reasons, error-verdict reasons and their log lines are cut to this.",
                                 ge=64, le=1024)
    deadletter_max_bytes: int = env("DEADLETTER_MAX_BYTES", 65536,
                                     "Dead letters keep at most this prefix of the key and of the value (the "
                                     "original stays in chat.turns at the source offset; key and value together "
                                     "stay under the 1 MB default request size).", ge=256, le=400000)
    send_retries: int = env("SEND_RETRIES", ATTEMPTS, "Attempts to deliver a verdict or dead letter before the worker "
                             "stops without committing.", ge=1, le=100)
    send_backoff_s: float = env("SEND_BACKOFF_S", BACKOFF_S,
                                  f"First retry wait (doubles, capped at {MAX_BACKOFF_S:g} s).", gt=0, le=60)
    batch_deadline_s: float = env("BATCH_DEADLINE_S", 120.0,
                                   "A pipeline batch still running after this gets error verdicts; the worker goes on.",
                                   gt=0, le=3600)
    poison_attempts: int = env("POISON_ATTEMPTS", 3,
                                "A turn whose pipeline call crashed the worker this many times is dead-lettered.",
                                ge=1, le=100)
    max_conversations: int = env("MAX_CONVERSATIONS", 100000,
                                  "Conversations a worker keeps (least recently active evicted first).", ge=1,
                                  le=10000000)
    trace_records: bool = env("TRACE_RECORDS", False,
                               "Log every turn read (partition@offset), verdict delivered and ack (debugging delivery).")
    verdicts_dedup_window: int = env("VERDICTS_DEDUP_WINDOW", 100000,
                                      "Claim ids `dialcheck verdicts --follow` remembers for dedup.", ge=1,
                                      le=100000000)
    # feedback on verdicts: users' right / wrong judgements, the evidence for the live precision of the badges
    feedback_store: str = env("FEEDBACK_STORE", DEFAULT_FEEDBACK_STORE,
                              "Where the worker keeps chat.feedback judgements and the verdicts they judge: a SQLite "
                              "file, a postgresql:// URL (needs psycopg 3), or 'off' (no feedback agent).", min_length=1)
    feedback_busy_timeout_s: float = env("FEEDBACK_BUSY_TIMEOUT_S", 30.0,
                                         "A SQLite feedback store locked by another writer for this long is an "
                                         "outage (retried with backoff, shown on /readyz).", gt=0, le=600)
    precision_target: float = env("PRECISION_TARGET", 0.85, "Shown-badge precision the drift alarm guards: it fires "
                                  "when the interval's upper end falls below this.", gt=0, le=1)
    precision_confidence: float = env("PRECISION_CONFIDENCE", 0.9, "Confidence of the live precision's "
                                      "Clopper-Pearson interval.", gt=0, lt=1)

    @field_validator("feedback_store")
    @classmethod
    def _feedback_store_can_be_made(cls, v: str) -> str:
        """A SQLite path's folder must exist (the default's artifacts/ is made by the store)."""
        if feedback_off(v) or "://" in v or v == DEFAULT_FEEDBACK_STORE:
            return v
        return creatable_path(v, "file", "the feedback store's SQLite file (DIALCHECK_FEEDBACK_STORE)")

    @field_validator("pid_file")
    @classmethod
    def _pid_file_can_be_made(cls, v: str) -> str:
        return creatable_path(v, "file", "the worker's pid file (DIALCHECK_PID_FILE)") if v else v

    @field_validator("state_dir")
    @classmethod
    def _state_dir_can_be_made(cls, v: str) -> str:
        return creatable_path(v, "directory", "the worker's state directory (DIALCHECK_STATE_DIR)") if v else v
