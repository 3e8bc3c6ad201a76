"""The feedback store: judgements of verdicts, joined to the verdicts they judge.

Why verdicts are stored too: a judgement names a verdict (claim id, or turn and claim index); the
display is refitted from the verdict's own numbers (`BadgeFacts.of_verdict` reads them back from
the full published verdict dict), so each verdict is kept as published and the join is made when
read (`judged`), whichever arrived first.

Why SQLite by default: one file (artifacts/feedback.sqlite3, setting DIALCHECK_FEEDBACK_STORE), the
standard library, WAL (the worker writes while /metrics and `dialcheck feedback stats` read) and
`synchronous=FULL` (a committed judgement survives a crash of the machine, not only of the process).
A `postgresql://` URL uses psycopg 3 (in the `stream` extra; docs/operations.md): several workers and
readers on other machines share one store. Both are tested by the same suite (tests/pg.py starts a
real server). A PostgreSQL server that goes away is `StoreUnavailable` on every call until it is
back (the next call connects again); the caller keeps the batch unacknowledged and retries. No
error names the password: libpq's reason is quoted with the URL's userinfo and password removed.

Idempotent: each judgement has a natural key (source, conversation, turn, claim, feedback id or time:
`Feedback.key`), written with an UPSERT, so a redelivered record lands on its own row; a later
record with the same key replaces it only if it is not older (a changed mind, never a stale replay).
A verdict is kept as first stored (its claim id is the key).

Model events (`add_event`, `events`): what the adaptation loop (`dialcheck adapt-loop`) did — a
challenger built or not, scored, promoted, refused, a version rolled back — one row each, append
only, kept beside the judgements that decided them so /metrics and the live page read one place."""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

import orjson

from schemas.errors import DialcheckError
from schemas.feedback import Feedback
from schemas.secrets import mask_urls
from schemas.settings import REPO_ROOT

from .precision import (ALL_VERSIONS, DEFAULT_CONFIDENCE, UNKNOWN_VERSION, Precision, buckets_of, nli_version_of,
                        rows_by_version)

DEFAULT_PATH = REPO_ROOT / "artifacts" / "feedback.sqlite3"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")
SETTING = "DIALCHECK_FEEDBACK_STORE"
# libpq options the URL does not set: a connect never hangs on an unreachable host, and a server that
# vanishes without closing the connection (a partition) is noticed within about a minute
PG_DEFAULTS = {"connect_timeout": "10", "keepalives_idle": "30", "keepalives_interval": "10",
               "keepalives_count": "3"}
# what the adaptation loop records (model_events.event): a challenger built (or adapt refused to write
# one), scored against the live model, promoted or refused, and a promoted version rolled back
MODEL_EVENTS = ("built", "not_built", "scored", "promoted", "refused", "rolled_back")
_TABLES = ("feedback", "verdicts", "model_events")
_TABLE_LIST = ", ".join(f"'{t}'" for t in _TABLES)  # constants of ours, never input
_SCHEMA_LOCK = 720_365_001  # pg_advisory_xact_lock key: two processes creating the tables at once wait

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS verdicts (
        claim_id TEXT PRIMARY KEY, conversation_id TEXT NOT NULL, turn_id TEXT NOT NULL, claim_index INTEGER NOT NULL,
        label TEXT NOT NULL, shown INTEGER, confidence TEXT, verdict TEXT NOT NULL, stored_at DOUBLE PRECISION NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS verdicts_turn ON verdicts (conversation_id, turn_id, claim_index)",
    """CREATE TABLE IF NOT EXISTS model_events (
        ts DOUBLE PRECISION NOT NULL, event TEXT NOT NULL, version TEXT NOT NULL, other TEXT, reason TEXT,
        detail TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS feedback (
        source TEXT NOT NULL, conversation_id TEXT NOT NULL, turn_id TEXT NOT NULL, claim_ref TEXT NOT NULL,
        fkey TEXT NOT NULL, claim_id TEXT, claim_index INTEGER, label_shown TEXT NOT NULL, confidence_shown TEXT,
        shown INTEGER, judgement TEXT NOT NULL, ts DOUBLE PRECISION NOT NULL, note TEXT, record TEXT NOT NULL,
        received_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (source, conversation_id, turn_id, claim_ref, fkey))""",
]
_UPSERT_FEEDBACK = """INSERT INTO feedback (source, conversation_id, turn_id, claim_ref, fkey, claim_id, claim_index,
        label_shown, confidence_shown, shown, judgement, ts, note, record, received_at)
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (source, conversation_id, turn_id, claim_ref, fkey) DO UPDATE SET
        claim_id = excluded.claim_id, claim_index = excluded.claim_index, label_shown = excluded.label_shown,
        confidence_shown = excluded.confidence_shown, shown = excluded.shown, judgement = excluded.judgement,
        ts = excluded.ts, note = excluded.note, record = excluded.record, received_at = excluded.received_at
    WHERE excluded.ts >= feedback.ts"""
_INSERT_VERDICT = """INSERT INTO verdicts (claim_id, conversation_id, turn_id, claim_index, label, shown, confidence,
        verdict, stored_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (claim_id) DO NOTHING"""
# each judgement with the verdict it names: by claim id, else by turn and claim index
# (two verdicts at one index, e.g. a turn checked again by another model: the first stored, on both backends)
_JOIN = """FROM feedback f LEFT JOIN verdicts v ON v.claim_id = COALESCE(f.claim_id,
        (SELECT w.claim_id FROM verdicts w WHERE w.conversation_id = f.conversation_id AND w.turn_id = f.turn_id
         AND w.claim_index = f.claim_index ORDER BY w.stored_at, w.claim_id LIMIT 1))"""
_JUDGED = """SELECT f.source, f.conversation_id, f.turn_id, f.claim_id, f.claim_index, f.label_shown, f.confidence_shown,
        f.shown, f.judgement, f.ts, f.received_at, v.claim_id, v.claim_index, v.shown, v.confidence, v.verdict, f.note,
        f.record
    """ + _JOIN
# per (label, confidence, shown, judgement, NLI version): the record's own confidence and shown, else the
# stored verdict's; the version is the judged verdict's ({nli}: `_nli_version`'s SQL, NULL when not stored)
_EFFECTIVE = """SELECT f.label_shown, COALESCE(f.confidence_shown, v.confidence), COALESCE(f.shown, v.shown),
        f.judgement, {nli}, COUNT(*) """ + _JOIN + """
    GROUP BY f.label_shown, COALESCE(f.confidence_shown, v.confidence), COALESCE(f.shown, v.shown), f.judgement, {nli}"""
_SHOWN_BY_VERSION = """SELECT v.label, v.confidence, {nli}, COUNT(*) FROM verdicts v WHERE v.shown = 1
    GROUP BY v.label, v.confidence, {nli}"""
_VERDICTS_BY_VERSION = "SELECT {nli}, COUNT(*) FROM verdicts v GROUP BY {nli}"


class StoreUnavailable(DialcheckError, RuntimeError):
    """The store cannot be opened or reached (a bad path or URL, bad credentials, a missing driver, a
    PostgreSQL server down): one line naming the setting, never the password."""


def public_url(url: str) -> str:
    """The store's URL as it may be shown: userinfo masked (even a password holding '/'), query
    (which may hold password=) dropped."""
    text = url.split("?", 1)[0]
    scheme, sep, rest = text.partition("://")
    if sep and "@" in rest:
        text = f"{scheme}://***@{rest.rpartition('@')[2]}"
    return mask_urls(text)


def _secrets_of(url: str) -> list[str]:
    """Every form of the URL's credentials an error message might quote: userinfo, password (as
    written and percent-decoded) and a password= query parameter."""
    from urllib.parse import parse_qsl, unquote

    rest = url.split("://", 1)[-1]
    netloc, _, query = rest.partition("?")
    userinfo = netloc.split("/", 1)[0].rpartition("@")[0] if "@" in netloc.split("/", 1)[0] else ""
    if not userinfo and "@" in netloc:  # a password holding '/': everything up to the last '@'
        userinfo = netloc.rpartition("@")[0]
    found = [userinfo, userinfo.partition(":")[2]]
    found += [v for k, v in parse_qsl(query, keep_blank_values=False) if k == "password"]
    found += [unquote(x) for x in found]
    return sorted({x for x in found if x}, key=len, reverse=True)


def _reason(e: BaseException, url: str) -> str:
    """libpq's reason on one line, without the URL's credentials."""
    text = " ".join(str(e).split()) or type(e).__name__
    for secret in _secrets_of(url):
        text = text.replace(secret, "***")
    return mask_urls(text)[:300]


def _pg_connect(url: str):
    try:
        import psycopg
    except ImportError:
        raise StoreUnavailable("a postgresql:// feedback store needs psycopg 3: pip install \"psycopg[binary]\" "
                               f"({SETTING}; docs/operations.md)") from None
    options = {k: v for k, v in PG_DEFAULTS.items() if k not in url}
    try:
        return psycopg.connect(url, autocommit=False, **options)
    except Exception as e:  # noqa: BLE001 - a bad URL is a ProgrammingError, a refused login an OperationalError
        raise StoreUnavailable(f"cannot connect to the feedback store {public_url(url)} ({SETTING}): "
                               f"{_reason(e, url)}") from None


@dataclass(frozen=True)
class ModelEvent:
    """One step of the adaptation loop: `event` (MODEL_EVENTS) about model `version`; `other` the
    version it was measured against or replaced (the live one), `reason` one line, `detail` numbers."""
    ts: float
    event: str
    version: str
    other: str | None = None
    reason: str | None = None
    detail: dict | None = None

    def to_dict(self) -> dict:
        return {"ts": self.ts, "event": self.event, "version": self.version, "other": self.other,
                "reason": self.reason, "detail": self.detail or {}}


@dataclass(frozen=True)
class JudgedVerdict:
    """One judgement with the verdict it judges (the full published verdict dict; None when that
    verdict was never stored)."""
    verdict: dict | None
    judgement: str  # right | wrong | unsure
    source: str  # user | moderator | annotator
    conversation_id: str
    turn_id: str
    claim_index: int | None
    label_shown: str
    received_at: float
    claim_id: str | None = None
    confidence_shown: str | None = None  # the record's, else the stored verdict's display.confidence
    shown: bool | None = None  # the record's, else the stored verdict's display.show
    ts: float | None = None
    note: str | None = None
    corrected_label: str | None = None  # the label the judge would give (feedback schema 1.1), when given

    @property
    def nli_version(self) -> str:
        """The NLI model version of the judged verdict: feedback on an adapted model is told apart
        from feedback on its base (UNKNOWN_VERSION when the verdict is not stored)."""
        return nli_version_of(self.verdict)

    @property
    def claim_key(self) -> tuple:
        """The claim judged: (conversation, turn, claim id, else its index). What "a claim counts once"
        counts by, wherever judgements are counted (adapt's pairs, the adaptation loop's votes)."""
        return (self.conversation_id, self.turn_id, self.claim_id or self.claim_index)


def _display(v: dict) -> tuple[int | None, str | None]:
    d = v.get("display") if isinstance(v.get("display"), dict) else None
    if not d:
        return None, None
    show = d.get("show")
    return (None if not isinstance(show, bool) else int(show)), d.get("confidence")


def _as_dict(v) -> dict:
    if isinstance(v, dict):
        return v
    return orjson.loads(v.to_json())  # a schemas.Verdict: its published form


class FeedbackStore:
    """SQLite file (default) or PostgreSQL URL. Thread-safe (one connection behind a lock): the worker
    writes from its store thread while the metrics thread reads."""

    def __init__(self, url_or_path: str | Path | None = None, busy_timeout_s: float = 30.0):
        target = str(url_or_path) if url_or_path not in (None, "") else str(DEFAULT_PATH)
        self.url = target
        self.postgres = target.startswith(POSTGRES_SCHEMES)
        self._lock = threading.Lock()
        if self.postgres:
            self._conn = _pg_connect(target)
        else:
            import sqlite3

            path = Path(target[len("sqlite:///"):] if target.startswith("sqlite:///") else target).expanduser()
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._conn = sqlite3.connect(str(path), timeout=busy_timeout_s, check_same_thread=False, isolation_level=None)
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")
                self._conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
            except (OSError, sqlite3.Error) as e:
                raise StoreUnavailable(f"cannot open the feedback store {path} ({SETTING}): {e}") from None
            self.path = path
        if not self._has_tables():  # readers (stats, calibrate) never need the write lock
            with self._tx() as tx:
                if self.postgres:
                    tx.execute(f"SELECT pg_advisory_xact_lock({_SCHEMA_LOCK})")
                for stmt in _SCHEMA:
                    tx.execute(stmt)

    # -- plumbing --------------------------------------------------------------------------------
    def _has_tables(self) -> bool:
        if self.postgres:
            rows = self._query("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                               f"AND table_name IN ({_TABLE_LIST})")
        else:
            rows = self._query(f"SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ({_TABLE_LIST})")
        return len(rows) == len(_TABLES)

    def _sql(self, stmt: str) -> str:
        return stmt.replace("?", "%s") if self.postgres else stmt

    @property
    def public_url(self) -> str:
        return public_url(self.url)

    def _connection(self):
        """The open connection; a PostgreSQL one lost (server restarted, network) is opened again."""
        if self.postgres and (self._conn.closed or self._conn.broken):
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = _pg_connect(self.url)
        return self._conn

    @contextlib.contextmanager
    def _reachable(self):
        """A PostgreSQL connection error as StoreUnavailable (the server is down or gone), its reason scrubbed."""
        if not self.postgres:
            yield
            return
        import psycopg

        try:
            yield
        except (psycopg.OperationalError, psycopg.InterfaceError) as e:
            raise StoreUnavailable(f"the feedback store {self.public_url} is unreachable ({SETTING}): "
                                   f"{_reason(e, self.url)}") from None

    class _Tx:
        def __init__(self, store: "FeedbackStore", cur):
            self.store, self.cur = store, cur

        def execute(self, stmt: str, params=()):
            return self.cur.execute(self.store._sql(stmt), params)

        def executemany(self, stmt: str, rows):
            return self.cur.executemany(self.store._sql(stmt), rows)

    @contextlib.contextmanager
    def _tx(self):
        """One write transaction: committed when the block ends, rolled back on any error."""
        with self._lock, self._reachable():
            conn = self._connection()
            cur = conn.cursor()
            try:
                if not self.postgres:
                    cur.execute("BEGIN IMMEDIATE")
                yield FeedbackStore._Tx(self, cur)
                conn.commit() if self.postgres else cur.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):  # a lost connection cannot roll back: the server did
                    conn.rollback() if self.postgres else cur.execute("ROLLBACK")
                raise
            finally:
                cur.close()

    def _query(self, stmt: str, params=()) -> list[tuple]:
        with self._lock, self._reachable():
            conn = self._connection()
            cur = conn.cursor()
            try:
                cur.execute(self._sql(stmt), params)
                return cur.fetchall()
            finally:
                cur.close()
                if self.postgres:
                    with contextlib.suppress(Exception):
                        conn.rollback()  # end the read transaction (or the failed one)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> "FeedbackStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writing ---------------------------------------------------------------------------------
    def add_feedback(self, records: Iterable[Feedback], received_at: float | None = None) -> int:
        """Upsert judgements in one transaction, committed when this returns (the caller acks after)."""
        now = time.time() if received_at is None else received_at
        rows = [(*f.key, f.claim_id, f.claim_index, f.label_shown, f.confidence_shown,
                 None if f.shown is None else int(f.shown), f.judgement, f.ts, f.note, f.to_json().decode(), now)
                for f in records]
        if rows:
            with self._tx() as tx:
                tx.executemany(_UPSERT_FEEDBACK, rows)
        return len(rows)

    def add_verdicts(self, verdicts: Iterable, claim_indexes: Iterable[int] | None = None) -> int:
        """Store published verdicts (dicts or schemas.Verdict), first copy kept. Without
        `claim_indexes`, a verdict's index is its position among the same turn's verdicts in this call
        (pass a TurnResult's verdicts in order: each claim's, then the turn's own)."""
        now, rows, seen = time.time(), [], {}
        idx = iter(claim_indexes) if claim_indexes is not None else None
        for v in verdicts:
            d = _as_dict(v)
            turn = (d["conversation_id"], d["turn_id"])
            i = next(idx) if idx is not None else seen.get(turn, 0)
            seen[turn] = i + 1
            shown, conf = _display(d)
            rows.append((d["claim_id"], d["conversation_id"], d["turn_id"], int(i), d["label"], shown, conf,
                         orjson.dumps(d, option=orjson.OPT_SERIALIZE_NUMPY).decode(), now))
        if rows:
            with self._tx() as tx:
                tx.executemany(_INSERT_VERDICT, rows)
        return len(rows)

    def add_event(self, event: str, version: str, other: str | None = None, reason: str | None = None,
                  detail: dict | None = None, ts: float | None = None) -> ModelEvent:
        """Record one step of the adaptation loop (committed when this returns)."""
        if event not in MODEL_EVENTS:
            raise ValueError(f"unknown model event {event!r}: one of {', '.join(MODEL_EVENTS)}")
        e = ModelEvent(time.time() if ts is None else float(ts), event, str(version), other, reason, detail or {})
        with self._tx() as tx:
            tx.execute("INSERT INTO model_events (ts, event, version, other, reason, detail) VALUES (?, ?, ?, ?, ?, ?)",
                       (e.ts, e.event, e.version, e.other, e.reason,
                        orjson.dumps(e.detail, option=orjson.OPT_SERIALIZE_NUMPY).decode()))
        return e

    # -- reading ---------------------------------------------------------------------------------
    def events(self, last: int | None = None) -> list[ModelEvent]:
        """The adaptation loop's events, oldest first (the `last` ones only, when given)."""
        stmt = "SELECT ts, event, version, other, reason, detail FROM model_events ORDER BY ts DESC"
        rows = self._query(stmt + (f" LIMIT {int(last)}" if last else ""))
        return [ModelEvent(float(ts), ev, ver, other, reason, orjson.loads(detail) if detail else {})
                for ts, ev, ver, other, reason, detail in reversed(rows)]

    def event_counts(self) -> dict[str, int]:
        """Events recorded so far, by kind (every kind, 0 when none): /metrics' dialcheck_model_events_total."""
        got = dict(self._query("SELECT event, COUNT(*) FROM model_events GROUP BY event"))
        return {e: int(got.get(e, 0)) for e in MODEL_EVENTS}

    def judged(self, joined_only: bool = True) -> list[JudgedVerdict]:
        """Every stored judgement with the verdict it judges, oldest first; `joined_only=False` also
        returns those whose verdict was never stored (verdict None)."""
        out = []
        for (source, conv, turn, cid, cidx, label, conf, shown, judgement, ts, received, vcid, vidx, vshown, vconf,
             vjson, note, record) in self._query(_JUDGED + " ORDER BY f.received_at, f.ts"):
            if vjson is None and joined_only:
                continue
            eff_shown = shown if shown is not None else vshown
            out.append(JudgedVerdict(verdict=orjson.loads(vjson) if vjson is not None else None, judgement=judgement,
                                     source=source, conversation_id=conv, turn_id=turn,
                                     claim_index=cidx if cidx is not None else vidx, label_shown=label,
                                     received_at=float(received), claim_id=cid or vcid,
                                     confidence_shown=conf or vconf,
                                     shown=None if eff_shown is None else bool(eff_shown), ts=float(ts), note=note,
                                     corrected_label=orjson.loads(record).get("corrected_label") or None))
        return out

    def counts(self) -> dict:
        """Totals for stats and metrics: judgements by judgement and by source, verdicts stored, and
        judgements whose verdict is not stored (yet)."""
        by_j = dict(self._query("SELECT judgement, COUNT(*) FROM feedback GROUP BY judgement"))
        by_s = dict(self._query("SELECT source, COUNT(*) FROM feedback GROUP BY source"))
        (verdicts,), = self._query("SELECT COUNT(*) FROM verdicts")
        (unjoined,), = self._query("SELECT COUNT(*) " + _JOIN + " WHERE v.claim_id IS NULL")
        return {"feedback": sum(by_j.values()), "judgement": {j: int(by_j.get(j, 0)) for j in ("right", "wrong", "unsure")},
                "source": {k: int(n) for k, n in by_s.items()}, "verdicts": int(verdicts), "unjoined": int(unjoined)}

    def _nli_version(self) -> str:
        """SQL for the NLI model version a stored verdict (alias v) names: its model_versions.nli."""
        if self.postgres:
            return "(v.verdict::json #>> '{model_versions,nli}')"
        return "json_extract(v.verdict, '$.model_versions.nli')"

    def precision(self, target: float = 0.85, confidence: float = DEFAULT_CONFIDENCE) -> list[Precision]:
        """Per bucket (SUPPORTS, REFUTES, high): shown-badge precision from the judgements so far (right
        and wrong; unsure left out), its interval, and the coverage of the stored verdicts."""
        return self.precision_by_version(target, confidence)[ALL_VERSIONS]

    def precision_by_version(self, target: float = 0.85,
                             confidence: float = DEFAULT_CONFIDENCE) -> dict[str, list[Precision]]:
        """`precision` per NLI model version of the judged verdicts (first stored first), and under
        ALL_VERSIONS over all of them: a rollout judged before and after. A judgement whose verdict is
        not stored counts under UNKNOWN_VERSION (and in ALL_VERSIONS), as the coverage of verdicts
        that name no version."""
        nli = self._nli_version()
        judged: dict[str, dict[str, list[int]]] = {}
        for label, conf, shown, judgement, version, n in self._query(_EFFECTIVE.format(nli=nli)):
            if judgement == "unsure":
                continue
            for b in buckets_of(label, conf, None if shown is None else bool(shown)):
                pair = judged.setdefault(_version(version), {}).setdefault(b, [0, 0])
                pair[0 if judgement == "right" else 1] += int(n)
        shown_by: dict[str, dict[str, int]] = {}
        for label, conf, version, n in self._query(_SHOWN_BY_VERSION.format(nli=nli)):
            for b in buckets_of(label, conf, True):
                per = shown_by.setdefault(_version(version), {})
                per[b] = per.get(b, 0) + int(n)
        verdicts: dict[str, int] = {}
        for version, n in self._query(_VERDICTS_BY_VERSION.format(nli=nli) + " ORDER BY MIN(v.stored_at), 1"):
            verdicts[_version(version)] = verdicts.get(_version(version), 0) + int(n)
        return rows_by_version({v: {b: (r, w) for b, (r, w) in per.items()} for v, per in judged.items()},
                               shown_by, verdicts, target, confidence)


def _version(v) -> str:
    """A version as SQL returned it (NULL: the verdict is not stored or names none)."""
    return str(v) if v not in (None, "") else UNKNOWN_VERSION
