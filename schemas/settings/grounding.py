"""Grounded turns: a reply checked against the passages its assistant was given (a turn's `evidence`,
a conversation's knowledge on chat.knowledge) instead of the index. docs/integration.md#grounded-turns."""
from __future__ import annotations

from schemas.limits import (MAX_EVIDENCE_CHARS, MAX_EVIDENCE_PASSAGES, MAX_KNOWLEDGE_BYTES, MAX_KNOWLEDGE_DOCS,
                            MAX_KNOWLEDGE_TOTAL_BYTES, MAX_PASSAGE_CHARS)
from schemas.settings.base import Section, env


class GroundingSettings(Section):
    only: bool = env("GROUNDED_ONLY", False,
                     "A worker for grounded traffic only: no index is built or loaded; a turn with no evidence and no "
                     "conversation knowledge gets NOT ENOUGH INFO with its reason.")
    fallback: bool = env("GROUNDED_FALLBACK", False,
                         "A claim the given passages do not decide is checked against the index (the verdict says so); "
                         "off (the default, attribution): it is NOT ENOUGH INFO with status.reason saying so.")
    max_passages: int = env("EVIDENCE_MAX_PASSAGES", MAX_EVIDENCE_PASSAGES,
                            "Passages read per turn (its evidence first, then its conversation's knowledge); the rest "
                            "are not read and the verdict's status says how many were.", ge=1, le=10_000)
    max_passage_chars: int = env("EVIDENCE_MAX_PASSAGE_CHARS", MAX_PASSAGE_CHARS,
                                 "Characters read per passage (in windows, to this point); the status says when a "
                                 "passage was cut.", ge=100, le=10_000_000)
    max_chars: int = env("EVIDENCE_MAX_CHARS", MAX_EVIDENCE_CHARS,
                         "Characters read per turn over all its passages; the status says how much was read.",
                         ge=100, le=100_000_000)
    knowledge_docs: int = env("KNOWLEDGE_MAX_DOCS", MAX_KNOWLEDGE_DOCS,
                              "Documents kept per conversation from chat.knowledge; beyond it the oldest are dropped "
                              "(counted, and said on the next verdict's status).", ge=1, le=100_000)
    knowledge_bytes: int = env("KNOWLEDGE_MAX_BYTES", MAX_KNOWLEDGE_BYTES,
                               "UTF-8 bytes of knowledge text kept per conversation; beyond it the oldest documents are "
                               "dropped.", ge=1000, le=1_000_000_000)
    knowledge_total_bytes: int = env("KNOWLEDGE_MAX_TOTAL_BYTES", MAX_KNOWLEDGE_TOTAL_BYTES,
                                     "UTF-8 bytes of knowledge text one worker keeps over all the conversations of the "
                                     "partitions it owns (the per-conversation bounds times max_conversations would be "
                                     "gigabytes); beyond it the least recently active conversations lose their "
                                     "knowledge, and their later turns are checked against nothing, saying so.",
                                     ge=1000, le=1_000_000_000_000)
