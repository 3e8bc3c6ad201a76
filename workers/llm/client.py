"""An OpenAI-compatible chat-completions client (`schemas.protocols.LLM`).

Why httpx and not the `openai` package: two endpoints (/v1/chat/completions, /v1/models) are all
we use, httpx is already installed, and owning the request lets us bound every call (per-request
timeout, bounded retries on timeouts / connection errors / 429 / 5xx, one overall deadline per
batch) and keep the API key out of every message. Requests of one pipeline batch run concurrently
(`llm.concurrency` threads: the pipeline is synchronous and may run inside the worker's event
loop thread, where `asyncio.run` is not allowed). Retries follow the runtime's one rule
(`schemas.retry`, over tenacity). A reply is a `Reply`: the text, with the server's `finish_reason`
beside it, so a step can tell an answer cut off at `max_tokens` from a finished one
(workers/llm/replies.py reads what real models return)."""
from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Sequence

import httpx

from schemas.protocols import LLMUnavailable
from schemas.retry import BACKOFF_S, retry_call, total_wait
from schemas.settings import LLMSettings, redact

from .replies import Reply

# httpx logs every request at INFO: one worker log line per claim; failures reach the verdicts instead
logging.getLogger("httpx").setLevel(logging.WARNING)
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}
MAX_BACKOFF_S = 4.0  # the LLM's cap on the retry wait (schemas.retry.BACKOFF_S first, doubling)


class _Retryable(Exception):
    """One attempt failed in a way another attempt may not (timeout, connection, 429, 5xx)."""


class OpenAICompatibleLLM:
    """`complete_many` sends one chat-completions request per conversation (temperature 0) and
    returns the reply texts in order; a failed slot holds the LLMUnavailable saying why."""

    def __init__(self, settings: LLMSettings, transport: httpx.BaseTransport | None = None):
        if not settings.url:
            raise LLMUnavailable("no LLM endpoint configured (DIALCHECK_LLM_URL)")
        self.settings = settings
        url = httpx.URL(settings.url.rstrip("/"))
        # credentials in the URL become Basic auth (the API key's Bearer header wins) and leave the
        # URL, so no request line httpx logs can carry them
        user, password = url.username, url.password
        self.base_url = str(url.copy_with(username=None, password=None))
        self._where = redact(self.base_url)
        self._key = settings.api_key.get_secret_value()
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        auth = httpx.BasicAuth(user, password) if (user or password) and not self._key else None
        self._http = httpx.Client(base_url=self.base_url, headers=headers, transport=transport, auth=auth,
                                  timeout=httpx.Timeout(settings.timeout_s),
                                  limits=httpx.Limits(max_connections=settings.concurrency))
        self._pool = ThreadPoolExecutor(settings.concurrency, thread_name_prefix="dialcheck-llm")
        self._model = settings.model
        self._lock = threading.Lock()

    # ---- the protocol ---------------------------------------------------------------------------
    @property
    def model(self) -> str:
        """The configured model, else the first the server lists (llama.cpp and LM Studio serve one)."""
        with self._lock:
            if not self._model:
                body = self._request("GET", "/models", None)
                try:
                    self._model = str(body["data"][0]["id"])
                except (KeyError, IndexError, TypeError):
                    raise LLMUnavailable(f"LLM at {self._where}: /models lists no model") from None
            return self._model

    def complete_many(self, conversations: Sequence[Sequence[dict]]) -> list[str | LLMUnavailable]:
        if not conversations:
            return []
        try:
            model = self.model
        except LLMUnavailable as e:
            return [e] * len(conversations)
        futures = [self._pool.submit(self._complete, model, list(c)) for c in conversations]
        waves = -(-len(conversations) // self.settings.concurrency)
        budget = min(self.settings.batch_timeout_s, waves * self.deadline_s())
        done, _ = wait(futures, timeout=budget)
        out: list[str | LLMUnavailable] = []
        for f in futures:
            if f not in done:
                f.cancel()  # a queued request never starts; a running one ends by its own timeout
                out.append(LLMUnavailable(f"LLM at {self._where}: no answer within the batch's {budget:.0f} s"))
            else:
                out.append(f.result())
        return out

    def deadline_s(self) -> float:
        """The longest one request may take with its retries (the batch waits no longer)."""
        s = self.settings
        waits = total_wait(s.retries + 1, backoff_s=BACKOFF_S, max_backoff_s=MAX_BACKOFF_S)
        return (s.retries + 1) * s.timeout_s + waits + 1.0

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._http.close()

    # ---- one request ----------------------------------------------------------------------------
    def _complete(self, model: str, messages: list[dict]) -> Reply | LLMUnavailable:
        payload = {"model": model, "messages": messages, "temperature": 0,
                   "max_tokens": self.settings.max_tokens, "n": 1, "stream": False}
        try:
            body = self._request("POST", "/chat/completions", payload)
            choice = body["choices"][0]
            content = choice["message"]["content"]
            if content is None:  # some servers send null for an empty completion: an answer, empty
                content = ""
            if not isinstance(content, str):
                raise TypeError
            finish = choice.get("finish_reason") if isinstance(choice, dict) else None
            return Reply(content, finish if isinstance(finish, str) else None)
        except LLMUnavailable as e:
            return e
        except (KeyError, IndexError, TypeError, AttributeError):
            return LLMUnavailable(f"LLM at {self._where}: answer without choices[0].message.content")

    def _request(self, method: str, path: str, payload: dict | None) -> dict:
        """One call with bounded retries (`schemas.retry`); raises LLMUnavailable with a message free of secrets."""
        attempts = self.settings.retries + 1
        try:
            return retry_call(lambda: self._attempt(method, path, payload), attempts=attempts, backoff_s=BACKOFF_S,
                              max_backoff_s=MAX_BACKOFF_S, retry_if=lambda e: isinstance(e, _Retryable))
        except _Retryable as e:
            raise LLMUnavailable(self._scrub(f"LLM at {self._where}: {e} ({attempts} attempts)")) from None

    def _attempt(self, method: str, path: str, payload: dict | None) -> dict:
        try:
            r = self._http.request(method, path, json=payload)
        except httpx.TimeoutException:
            raise _Retryable(f"timed out after {self.settings.timeout_s:g} s") from None
        except httpx.TransportError as e:
            raise _Retryable(f"unreachable ({type(e).__name__})") from None
        if r.status_code in RETRY_STATUS:
            raise _Retryable(f"HTTP {r.status_code}")
        if r.status_code >= 400:  # 401, 404 (wrong model or path), 400: retrying cannot help
            raise LLMUnavailable(self._scrub(f"LLM at {self._where}: HTTP {r.status_code} on {path}{_error_text(r)}"))
        try:
            return r.json()
        except ValueError:
            raise LLMUnavailable(f"LLM at {self._where}: {path} answered non-JSON") from None

    def _scrub(self, text: str) -> str:
        return text.replace(self._key, "***") if self._key else text


def _error_text(r: httpx.Response) -> str:
    """The server's own error message, short (OpenAI-style {"error": {"message": ...}})."""
    try:
        msg = r.json().get("error", {})
        msg = msg.get("message", "") if isinstance(msg, dict) else str(msg)
    except (ValueError, AttributeError):
        return ""
    return f": {str(msg)[:160]}" if msg else ""


_CLIENTS: dict[tuple, OpenAICompatibleLLM] = {}
_CLIENTS_LOCK = threading.Lock()


def client_for(settings: LLMSettings) -> OpenAICompatibleLLM | None:
    """One client per endpoint configuration in this process (eval builds a pipeline per surface;
    they share the connection pool and the resolved model). None when no URL is configured."""
    if not settings.url:
        return None
    key = tuple((k, v.get_secret_value() if hasattr(v, "get_secret_value") else v)
                for k, v in sorted(settings.__dict__.items()))
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            _CLIENTS[key] = OpenAICompatibleLLM(settings)
        return _CLIENTS[key]
