"""`dialcheck ui`, the live page: its address and every bound (README "Security: the live page")."""
from __future__ import annotations

from schemas.settings.base import Section, env


class UISettings(Section):
    host: str = env("UI_HOST", "127.0.0.1", "Address `dialcheck ui` binds (loopback by default).", min_length=1)
    port: int = env("UI_PORT", 8765, "Port of `dialcheck ui` (0: any free port).", ge=0, le=65535)
    max_conversations: int = env("UI_MAX_CONVERSATIONS", 200,
                                  "Conversations the ui keeps in memory (least recently active dropped first).",
                                  ge=1, le=100000)
    # every bound of the live page: a hostile or runaway producer must not grow its memory without end
    # (README "Security: the live page")
    max_turns: int = env("UI_MAX_TURNS", 100, "Turns the ui keeps per conversation (oldest dropped first, with "
                          "their verdicts).", ge=1, le=100000)
    max_verdicts: int = env("UI_MAX_VERDICTS", 100, "Verdicts the ui keeps per conversation, turns it never saw "
                             "included (oldest dropped first).", ge=1, le=100000)
    max_snapshot_bytes: int = env("UI_MAX_SNAPSHOT_BYTES", 16 << 20,
                                   "Serialised size of everything the ui keeps (= a page's snapshot); least recently "
                                   "active conversations are dropped beyond it.", ge=65536, le=1 << 32)
    max_verdict_bytes: int = env("UI_MAX_VERDICT_BYTES", 1 << 20, "Larger chat.verdicts records are rejected "
                                  "(counted in /api/state; turns use DIALCHECK_MAX_EVENT_BYTES).", ge=1024, le=1 << 28)
    max_clients: int = env("UI_MAX_CLIENTS", 16, "Live pages (SSE streams) served at once; more get 503.",
                            ge=1, le=10000)
    client_queue_bytes: int = env("UI_CLIENT_QUEUE_BYTES", 4 << 20, "Events queued for one page; a page that reads "
                                   "slower is dropped (its EventSource reconnects to a fresh snapshot).",
                                   ge=4096, le=1 << 32)
    send_timeout_s: float = env("UI_SEND_TIMEOUT_S", 30.0, "A page that takes longer to accept one write "
                                 "(snapshot or event) is disconnected.", gt=0, le=3600)
    allowed_hosts: str = env("UI_ALLOWED_HOSTS", "", "Host header names the ui answers besides localhost, "
                              "127.0.0.1 and [::1] (comma list; others get 421, against DNS rebinding).")
