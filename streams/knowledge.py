"""Conversation knowledge in the worker: chat.knowledge → a changelogged table beside the context,
read by every later turn of the conversation (docs/integration.md#grounded-turns).

Why a table of its own and not inside the context: knowledge arrives on its own topic, from its own
agent, and may come before a conversation's first turn; with one writer per table (this agent; the
turns' eviction only deletes) the two agents never overwrite each other's state. It is keyed like
the context (the conversation id's bytes, the key partitioner, the same partition count as
chat.turns: streams/topics.py `knowledge_mismatch`), so a conversation's knowledge lives, is restored
and is evicted on the worker that owns its turns, and no other conversation reads it (the key is the
only way in).

State per conversation (JSON, like the context):
  {"docs": [{"doc_id", "text", "title", "url"}, ...] (oldest first), "bytes": UTF-8 bytes of the
   texts, "dropped": documents dropped by the bounds so far, "last_seen": wall-clock seconds}.
Bounded: beyond `grounding.knowledge_docs` documents or `grounding.knowledge_bytes` bytes the oldest
go (counted: `knowledge_dropped`), and beyond `grounding.knowledge_total_bytes` over the worker's
partitions the least recently active conversations lose theirs (`KnowledgeWorker.shed`); one document larger than the byte bound alone is dead-lettered
(`too_large`). A record with a doc_id already kept replaces it (and becomes the newest); a delete of
a doc_id not kept is a no-op (redeliveries repeat deletes). Expired with the conversation: the sweep
drops a conversation's knowledge when both its context and its knowledge are idle (`conversation_idle`:
a turn keeps the knowledge alive), and the LRU bound drops both together (streams/turn_worker.py).

Ordering across the two topics (what is guaranteed): a knowledge record the broker acknowledged
before a turn was produced applies to that turn. The turns of a step wait (at most
`CATCH_UP_WAIT_S`) until this worker has applied chat.knowledge, on the turns' partitions, up to the
end offsets its consumer last fetched (`KnowledgeWorker.caught_up`): the fetch that brought the turn
reported an end offset past that knowledge record. Past the wait (a knowledge backlog) the turns are
checked with what is applied and `knowledge_waits_expired` counts it. A knowledge record produced
after a turn (or not yet acknowledged when the turn was produced) may or may not apply to it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass
from typing import Any

from schemas import ChatTurn, InvalidEvent, Reason
from schemas.evidence import EvidenceLimits, read_passages
from schemas.items import GivenPassage
from schemas.knowledge import KnowledgeRecord, parse_knowledge
from schemas.settings import Settings

from .checking import validate_keyed
from .context import is_idle
from .outbox import Outbox

log = logging.getLogger("dialcheck.stream")

KNOWLEDGE_TABLE = "knowledge"
CATCH_UP_WAIT_S = 2.0   # the longest a step's turns wait for chat.knowledge to be applied (see above)
CATCH_UP_POLL_S = 0.02

State = dict[str, Any]


# -- the state's rules (pure: tested without Kafka) -------------------------------------------------
def utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def add_doc(state: State | None, rec: KnowledgeRecord, now: float, max_docs: int, max_bytes: int) -> tuple[State, int]:
    """`rec`'s passage kept as the conversation's newest document (replacing one with its doc_id);
    the oldest dropped beyond `max_docs` / `max_bytes`. Returns the new state and how many were dropped."""
    p = rec.passage
    docs = [d for d in (state or {}).get("docs", []) if d["doc_id"] != rec.doc_id]
    docs.append({"doc_id": rec.doc_id, "text": p.text, "title": p.title, "url": p.url})
    size = sum(utf8_len(d["text"]) for d in docs)
    dropped = 0
    while len(docs) > max_docs or size > max_bytes:
        size -= utf8_len(docs.pop(0)["text"])
        dropped += 1
    return {"docs": docs, "bytes": size, "dropped": int((state or {}).get("dropped", 0)) + dropped,
            "last_seen": now}, dropped


def delete_doc(state: State | None, doc_id: str, now: float) -> State | None:
    """The state without `doc_id` (None when nothing is left)."""
    docs = [d for d in (state or {}).get("docs", []) if d["doc_id"] != doc_id]
    if not docs:
        return None
    return {**state, "docs": docs, "bytes": sum(utf8_len(d["text"]) for d in docs), "last_seen": now}


def passages_of(state: State | None) -> list[GivenPassage]:
    """The conversation's documents as passages (source "conversation"), oldest first."""
    return [GivenPassage(text=d["text"], title=d.get("title"), url=d.get("url"), id=d["doc_id"], source="conversation")
            for d in (state or {}).get("docs", [])]


def given_evidence(turn: ChatTurn, knowledge: list[GivenPassage], limits: EvidenceLimits,
                   dropped: int = 0) -> tuple[list[GivenPassage] | None, str | None]:
    """The passages a turn is checked against: its own `evidence` (already read to the limits by
    parse_turn), then its conversation's knowledge in what the limits leave (the same reading rule,
    schemas/evidence.py). `dropped`: the conversation's documents its bounds dropped so far. Returns
    (the passages, None when the turn is not grounded: no `evidence` field and no knowledge; an empty
    `evidence` list is a turn grounded on nothing; the note saying what was not read, None when all was).
    The knowledge was cleaned when it arrived: it is read to the limits, not parsed again."""
    own = list(turn.evidence or ())
    lost = (f"conversation knowledge: {dropped} older document(s) dropped by its bounds (grounding.knowledge_docs, "
            f"knowledge_bytes)") if dropped else None
    if not knowledge:  # a conversation whose documents were all dropped stays grounded (on what is left)
        grounded = turn.evidence is not None or dropped > 0
        return (own if grounded else None), "; ".join(n for n in (turn.evidence_note, lost) if n) or None
    left = EvidenceLimits(max(0, limits.max_passages - len(own)), limits.max_passage_chars,
                          max(0, limits.max_chars - sum(len(p.text) for p in own)))
    kept, note = read_passages(knowledge, left, name="conversation knowledge")
    return (own + kept) or None, "; ".join(n for n in (turn.evidence_note, note, lost) if n) or None


def conversation_idle(context: State | None, knowledge: State | None, now: float, idle_s: float) -> bool:
    """A conversation is idle when neither a turn nor a knowledge record came for `idle_s`: its
    knowledge expires then, however long ago the knowledge itself was sent."""
    return is_idle(context, now, idle_s) and is_idle(knowledge, now, idle_s)


def validate_knowledge(key: bytes | None, value: bytes | None, max_bytes: int, max_depth: int) -> KnowledgeRecord:
    """Wire bytes → KnowledgeRecord, or InvalidEvent(code, reason); keyed by conversation id like turns."""
    return validate_keyed(key, value, lambda raw: parse_knowledge(raw, max_bytes=max_bytes, max_depth=max_depth),
                          max_bytes, "knowledge record")


# -- the agent's work -------------------------------------------------------------------------------
class KnowledgeWorker:
    """The chat.knowledge agent's work on one step (`handle`), the turns' view of it (`passages`,
    `caught_up`) and its housekeeping (`forget`, `memory`). `table` is the knowledge table (bytes
    keys); outputs and acks go through the app's one `outbox`."""

    def __init__(self, app, settings: Settings, *, outbox: Outbox, table):
        self.app, self.settings, self.table, self.outbox = app, settings, table, outbox
        self.st, self.limits = settings.stream, settings.grounding
        self.counters = outbox.counters
        self.applied: dict[int, int] = {}  # chat.knowledge partition → the next offset this worker would apply

    async def handle(self, events) -> None:
        """Validate each record (dead letters), apply the good ones (one table write per conversation),
        deliver the dead letters; the step is acknowledged only after that (`acks.holding`)."""
        outbox, st, now = self.outbox, self.st, time.time()
        async with outbox.acks.holding(events):
            dead: list[tuple] = []
            states: dict[bytes, State | None] = {}
            for ev in events:
                msg = ev.message
                try:
                    rec = validate_knowledge(msg.key, msg.value, st.max_event_bytes, st.max_json_depth)
                    key = rec.conversation_id.encode("utf-8")
                    prior = states[key] if key in states else self.table.get(key)
                    states[key] = self._apply(prior, rec, now)
                except InvalidEvent as e:
                    dead.append(outbox.dead_letter(msg, e.code, e.reason))
            for key, state in states.items():
                if state is not None:
                    self.table[key] = state
                elif key in self.table:
                    del self.table[key]
            await outbox.deliver(dead)
            for ev in events:
                msg = ev.message
                self.applied[msg.partition] = max(self.applied.get(msg.partition, 0), msg.offset + 1)

    def _apply(self, prior: State | None, rec: KnowledgeRecord, now: float) -> State | None:
        lim = self.limits
        if rec.delete:
            self.counters.knowledge += 1
            return delete_doc(prior, rec.doc_id, now)
        size = utf8_len(rec.passage.text)
        if size > lim.knowledge_bytes:
            raise InvalidEvent(Reason.TOO_LARGE, f"knowledge document too large: {size} bytes > "
                               f"{lim.knowledge_bytes} kept per conversation (grounding.knowledge_bytes)")
        state, dropped = add_doc(prior, rec, now, lim.knowledge_docs, lim.knowledge_bytes)
        self.counters.knowledge += 1
        self.counters.knowledge_dropped += dropped
        return state

    # -- the turns' view ----------------------------------------------------------------------
    def passages(self, key: bytes, context: dict | None, now: float) -> tuple[list[GivenPassage], int]:
        """The conversation's knowledge for a turn and how many of its documents the bounds dropped;
        `context` is its context state before that turn. Nothing once the conversation is idle
        (`conversation_idle`): it expired with the conversation."""
        state = self.table.get(key)
        if state is None or conversation_idle(context, state, now, self.st.context_idle_s):
            return [], 0
        return passages_of(state), int(state.get("dropped", 0))

    def behind(self, partitions: set[int]) -> list[int]:
        """The partitions (of `partitions`) whose chat.knowledge this worker has not applied up to the
        end offset its consumer last fetched (what it applied, or what the group committed, whichever
        is further: a partition that was another worker's meanwhile)."""
        from faust.types import TP

        from .kafka.internals import end_and_committed

        topic, late = self.settings.kafka.topic_knowledge, []
        for p in sorted(partitions):
            high, committed = end_and_committed(self.app, TP(topic, p))
            position = max(self.applied.get(p, 0), committed or 0)  # committed: another owner's, too
            if high is None or position < high:
                late.append(p)
        return late

    async def caught_up(self, partitions: set[int], wait_s: float = CATCH_UP_WAIT_S) -> bool:
        """Wait (at most `wait_s`) until the knowledge of `partitions` is applied (see the module's
        docstring, "Ordering"); False, counted, when the wait ran out."""
        deadline = time.monotonic() + wait_s
        while self.behind(partitions):
            if time.monotonic() >= deadline:
                self.counters.knowledge_waits_expired += 1
                log.warning("chat.knowledge not applied within %.1f s on partitions %s: turns checked with the "
                            "knowledge applied so far", wait_s, self.behind(partitions))
                return False
            await asyncio.sleep(CATCH_UP_POLL_S)
        return True

    # -- housekeeping -------------------------------------------------------------------------
    def forget(self, key: bytes) -> bool:
        """Drop a conversation's knowledge (evicted with its conversation); True if it had some."""
        if key in self.table:
            del self.table[key]
            return True
        return False

    def shed(self, owned: dict[bytes, State], total_bytes: int) -> list[bytes]:
        """Keep the knowledge of the conversations in `owned` (key → state, this worker's partitions)
        within `total_bytes` in all: the least recently active lose their documents first (the state
        stays, empty, counting them as dropped, so their later turns are grounded on what is left and
        say why). Returns the keys shed."""
        held = sum(int((v or {}).get("bytes", 0)) for v in owned.values())
        shed = []
        for key in sorted(owned, key=lambda k: float((owned[k] or {}).get("last_seen", 0.0))):
            if held <= total_bytes:
                break
            state = owned[key] or {}
            if not state.get("docs"):
                continue
            held -= int(state.get("bytes", 0))
            self.table[key] = {**state, "docs": [], "bytes": 0,
                               "dropped": int(state.get("dropped", 0)) + len(state["docs"])}
            self.counters.knowledge_dropped += len(state["docs"])
            shed.append(key)
        if shed:
            log.warning("knowledge of %d conversations dropped: the worker's knowledge exceeded %d bytes "
                        "(DIALCHECK_KNOWLEDGE_MAX_TOTAL_BYTES)", len(shed), total_bytes)
        return shed

    def memory(self) -> Held:
        """What the table holds, for the status line and /metrics."""
        sizes = [(len(v.get("docs", [])), int(v.get("bytes", 0))) for v in list(self.table.values()) if isinstance(v, dict)]
        return Held(len(sizes), sum(d for d, _ in sizes), sum(b for _, b in sizes), max((b for _, b in sizes), default=0))


@dataclass(frozen=True)
class Held:
    """The knowledge table's size: conversations, documents, UTF-8 bytes of text, the largest conversation's bytes."""
    conversations: int
    documents: int
    bytes: int
    largest_bytes: int

    def line(self) -> str:
        return (f"knowledge_conversations={self.conversations} knowledge_docs={self.documents} "
                f"knowledge_bytes={self.bytes}")


class KnowledgeGauges:
    """/metrics (a collector on the worker's registry, read at scrape time in the metrics thread): the
    knowledge table's memory, in all and per conversation (the largest; the mean is bytes over
    conversations), so its bounds can be watched in production."""

    def __init__(self, knowledge: KnowledgeWorker):
        self.knowledge = knowledge

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily

        try:
            held = self.knowledge.memory()
        except Exception:  # noqa: BLE001 - the table changed under the scrape: no sample this time
            return
        for name, value, what in (
                ("dialcheck_knowledge_conversations", held.conversations, "Conversations with knowledge (chat.knowledge)."),
                ("dialcheck_knowledge_documents", held.documents, "Knowledge documents held, all conversations."),
                ("dialcheck_knowledge_bytes", held.bytes, "UTF-8 bytes of knowledge text held, all conversations."),
                ("dialcheck_knowledge_conversation_bytes_max", held.largest_bytes,
                 "UTF-8 bytes of knowledge text of the conversation that holds the most (its bound: "
                 "grounding.knowledge_bytes).")):
            gauge = GaugeMetricFamily(name, what)
            gauge.add_metric([], value)
            yield gauge
