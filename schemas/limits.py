"""The bounds on what comes over the wire, one home each: the settings default to them
(schemas/settings/stream.py), and every parser, reader and store that takes no setting uses them."""
from __future__ import annotations

MAX_JSON_DEPTH = 16      # deeper JSON nesting in a turn, a feedback record or a /check body is refused
MAX_TEXT_CHARS = 4000    # a longer turn's text is refused (dead-lettered in the stream)
MAX_REASON_BYTES = 1024  # dead-letter reasons, error-verdict reasons and their log lines are cut to this
