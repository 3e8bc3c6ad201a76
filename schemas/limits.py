"""The bounds on what comes over the wire, one home each: the settings default to them
(schemas/settings/stream.py), and every parser, reader and store that takes no setting uses them."""
from __future__ import annotations

MAX_JSON_DEPTH = 16      # deeper JSON nesting in a turn, a feedback record or a /check body is refused
MAX_TEXT_CHARS = 4000    # a longer turn's text is refused (dead-lettered in the stream)
MAX_REASON_BYTES = 1024  # dead-letter reasons, error-verdict reasons and their log lines are cut to this

# Grounded turns (a turn's `evidence`, a conversation's knowledge): schemas/settings/grounding.py
MAX_EVIDENCE_PASSAGES = 32        # passages read per turn (given + the conversation's knowledge); more: cut, status says
MAX_PASSAGE_CHARS = 20_000        # characters read per passage; a longer one is read to this, status says
MAX_EVIDENCE_CHARS = 100_000      # characters read per turn over all its passages
MAX_KNOWLEDGE_DOCS = 64           # documents kept per conversation on chat.knowledge (more: the oldest go)
MAX_KNOWLEDGE_BYTES = 1_000_000   # UTF-8 bytes of knowledge text kept per conversation (more: the oldest go)
MAX_KNOWLEDGE_TOTAL_BYTES = 256 * 2**20  # knowledge text one worker keeps in all (more: the least recently active go)
