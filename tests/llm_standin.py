"""A local stand-in for an OpenAI-compatible LLM server — NOT a language model.

No model weights can be installed where dialcheck's tests run, so the tests talk to this aiohttp
server instead: it speaks the same protocol as vLLM, llama.cpp's server, Ollama and LM Studio
(`GET /v1/models`, `POST /v1/chat/completions` with OpenAI's request and response shapes, Bearer
auth, OpenAI-style error bodies) and answers deterministically from a fixture file
(tests/fixtures/llm_rewrites.json): the R5 rewrite of a reply, the edited query of a sub-claim.
A prompt it has no fixture for is answered with the text unchanged (a conservative model).
A cascade-judge prompt (workers/llm/judge.py, its "Claim to judge:" line) is answered from `judges`
(claim → the whole answer text, set by a test or the fixture's "judge" section), else with
`judge_default` (a short reasoning ending "LABEL: NOT ENOUGH INFO" / "WINDOW: 1").

Misbehaviour on demand (`mode`): "ok", "error" (HTTP 503 on every call), "slow" (answers after
`delay_s`), "held" (answers only when the test calls `release()`, at the latest after HOLD_CAP_S;
`holding` counts the requests held now, so a test can see that its client gave up on an answer that
had not come, without timing anything), "garbage" (200 with no choices). `finish_reason` is what
every answer says ("stop"; "length" plays an answer cut off at max_tokens), and an answer set to
None is sent as `"content": null`. Every request is recorded in `requests`, with the
`time.monotonic()` of its arrival under "t".

The real model the LLM steps are measured on is tests/llm_real.py (SmolLM2-135M-Instruct behind
workers/llm/local_server.py); this stand-in is for what a model cannot be made to do on demand.

Run by hand:  .venv/bin/python -m tests.llm_standin --port 8011
then          DIALCHECK_LLM_URL=http://127.0.0.1:8011/v1 dialcheck eval --surfaces r0,r4g,r5g --limit 8
"""
from __future__ import annotations

import argparse
import asyncio
import json
import re
import time
from pathlib import Path

from aiohttp import web

from workers.llm.local_server import ThreadedAppServer

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "llm_rewrites.json"
_REPLY = re.compile(r"^Reply: (.*)$", re.MULTILINE)
_CLAIM = re.compile(r"^Claim: (.*)$", re.MULTILINE)
_JUDGED = re.compile(r"^Claim to judge: (.*)$", re.MULTILINE)
JUDGE_DEFAULT = "The windows do not settle the claim.\nLABEL: NOT ENOUGH INFO\nWINDOW: 1"
ROLES = {"system", "user", "assistant", "tool", "developer"}
HOLD_CAP_S = 60.0  # "held": a safety cap so a client that waits for ever still ends; never a measured limit


def _error(status: int, message: str, kind: str, code: str | None = None) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": code}}, status=status)


class LLMStandIn(ThreadedAppServer):
    def __init__(self, fixture: str | Path = FIXTURE, api_key: str | None = None, model: str | None = None):
        spec = json.loads(Path(fixture).read_text(encoding="utf-8"))
        self.model = model or spec["model"]
        self.rewrites: dict[str, str] = spec.get("r5", {})
        self.edits: dict[str, str] = spec.get("edit", {})
        self.judges: dict[str, str] = dict(spec.get("judge", {}))  # claim → the judge's whole answer
        self.judge_default = JUDGE_DEFAULT
        self.api_key = api_key
        self.mode, self.delay_s = "ok", 0.0
        self.finish_reason = "stop"
        self.requests: list[dict] = []
        self.holding = 0  # "held" requests not answered yet
        self._released = asyncio.Event()

    def reset(self) -> None:
        """Between tests: answer normally and at once, with no request recorded (and none held)."""
        self.release()
        self.mode, self.delay_s = "ok", 0.0
        self.finish_reason = "stop"
        self.requests.clear()

    def release(self) -> None:
        """Answer every request "held" now; later ones are held again (while the mode is "held")."""
        if self._loop is not None:
            old, self._released = self._released, asyncio.Event()
            self._loop.call_soon_threadsafe(old.set)

    # ---- the protocol ---------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    def _unauthorised(self, request: web.Request) -> web.Response | None:
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided.", "invalid_request_error", "invalid_api_key")
        return None

    async def _models(self, request: web.Request) -> web.Response:
        self.requests.append({"path": "/v1/models", "authorization": request.headers.get("Authorization"),
                              "t": time.monotonic()})
        if (bad := self._unauthorised(request)) is not None:
            return bad
        if self.mode == "error":
            return _error(503, "stand-in is down (mode=error)", "server_error")
        return web.json_response({"object": "list", "data": [
            {"id": self.model, "object": "model", "created": 0, "owned_by": "dialcheck-standin"}]})

    async def _chat(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request_error")
        self.requests.append({"path": "/v1/chat/completions", "authorization": request.headers.get("Authorization"),
                              "body": body, "t": time.monotonic()})
        if (bad := self._unauthorised(request)) is not None:
            return bad
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str) for m in messages):
            return _error(400, "'messages' must be a non-empty list of {role, content}", "invalid_request_error")
        if body.get("model") != self.model:
            return _error(404, f"The model `{body.get('model')}` does not exist.", "invalid_request_error",
                          "model_not_found")
        if self.mode == "error":
            return _error(503, "stand-in is down (mode=error)", "server_error")
        if self.mode == "slow":
            await asyncio.sleep(self.delay_s)
        if self.mode == "held":
            self.holding += 1
            try:
                await asyncio.wait_for(self._released.wait(), HOLD_CAP_S)
            except asyncio.TimeoutError:
                pass
            finally:
                self.holding -= 1
        if self.mode == "garbage":
            return web.json_response({"id": "x", "object": "chat.completion", "choices": []})
        content = self.answer(messages[-1]["content"])
        words = sum(len(m["content"].split()) for m in messages)
        said = len((content or "").split())
        return web.json_response({
            "id": f"chatcmpl-standin-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model, "system_fingerprint": "dialcheck-standin",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "logprobs": None,
                         "finish_reason": self.finish_reason}],
            "usage": {"prompt_tokens": words, "completion_tokens": said, "total_tokens": words + said}})

    def answer(self, prompt: str) -> str | None:
        """The judge's answer for a judged claim; the fixture's answer for the prompt's reply (R5) or
        claim (editing); else the text unchanged."""
        if m := _JUDGED.search(prompt):
            return self.judges.get(m.group(1).strip(), self.judge_default)
        if (m := _CLAIM.search(prompt)) and "Evidence:" in prompt:
            return self.edits.get(m.group(1).strip(), m.group(1).strip())
        if m := _REPLY.search(prompt):
            return self.rewrites.get(m.group(1).strip(), m.group(1).strip())
        return prompt.strip().splitlines()[-1]

    # ---- start / stop: ThreadedAppServer ---------------------------------------------------------
    thread_name = "llm-standin"

    def start(self, port: int | None = None, ready_s: float = 10) -> str:
        """Serve on 127.0.0.1 (a free port unless given) in a thread; returns the base URL (…/v1)."""
        return super().start(port or 0, ready_s)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=8011)
    p.add_argument("--fixture", default=str(FIXTURE))
    p.add_argument("--api-key", default=None)
    args = p.parse_args()
    web.run_app(LLMStandIn(args.fixture, args.api_key).app(), host="127.0.0.1", port=args.port)


if __name__ == "__main__":
    main()
