"""Triton clients behind the NLIModel / Encoder interfaces.

The served models (triton_models/nli, triton_models/embed) take raw text, so these clients only
split work into batches, bound the requests in flight (backpressure), time out, retry with
backoff, and turn an outage into ModelUnavailable (the pipeline degrades on it, never drops).
Only an outage is retried (`is_outage`: refused or dropped connections, timeouts, "unavailable"
statuses); anything else, a bug in the request or here included, propagates as it is.

URLs: `triton://HOST:PORT` (gRPC, default), `triton+grpc://HOST:PORT`, `triton+http://HOST:PORT`.
Optional query: `?timeout_s=10&retries=3&batch_size=32&max_in_flight=4`.
"""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Sequence
from urllib.parse import parse_qsl, urlsplit

import numpy as np
import tenacity

from schemas.protocols import ModelUnavailable

from .nli_base import NLIClassifier

NLI_MODEL = "nli"
EMBED_MODEL = "embed"

# statuses that say "not serving right now", not "your request is wrong": gRPC codes as tritonclient
# writes them, and HTTP codes (Triton answers 400 for a bad request, 500 for a model that raised)
OUTAGE_STATUSES = frozenset({
    "StatusCode.UNAVAILABLE", "StatusCode.DEADLINE_EXCEEDED", "StatusCode.RESOURCE_EXHAUSTED",
    "StatusCode.ABORTED", "429", "502", "503", "504",
})


def is_outage(e: BaseException) -> bool:
    """True for what a retry may cure and ModelUnavailable declares: the server unreachable,
    overloaded, or still loading the model; a connection refused, reset or timed out. False for
    everything else: a request the server rejects (INVALID_ARGUMENT, 400), a client-side error
    (tritonclient raises those without a status), a TypeError in our code."""
    from tritonclient.utils import InferenceServerException

    if isinstance(e, InferenceServerException):
        return e.status() in OUTAGE_STATUSES
    return isinstance(e, OSError)  # ConnectionError (refused, reset), TimeoutError, socket errors


@dataclass(frozen=True)
class ClientOptions:
    """Transport knobs; each can be set in the URL query string."""

    timeout_s: float = 10.0       # per request (gRPC deadline / HTTP network timeout)
    retries: int = 3              # extra attempts per batch after the first
    backoff_s: float = 0.2        # first retry delay, doubled per attempt
    batch_size: int = 32          # rows per request (<= the model's max_batch_size, 64)
    max_in_flight: int = 4        # concurrent requests per client (backpressure bound)


@dataclass(frozen=True)
class Endpoint:
    protocol: str  # "grpc" | "http"
    host: str
    port: int
    options: ClientOptions

    @classmethod
    def parse(cls, url: str) -> "Endpoint":
        parts = urlsplit(url)
        scheme = parts.scheme.lower()
        protocol = {"triton": "grpc", "triton+grpc": "grpc", "triton+http": "http"}.get(scheme)
        if protocol is None or not parts.hostname:
            raise ValueError(f"not a Triton URL: {url!r} (triton://HOST:PORT or triton+http://HOST:PORT)")
        port = parts.port or (8001 if protocol == "grpc" else 8000)
        types = {f.name: f.type for f in fields(ClientOptions)}
        opts = ClientOptions()
        for key, value in parse_qsl(parts.query):
            if key not in types:
                raise ValueError(f"unknown Triton URL option {key!r} (one of {sorted(types)})")
            opts = replace(opts, **{key: (float if types[key] in (float, "float") else int)(value)})
        return cls(protocol, parts.hostname, port, opts)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class TritonTransport:
    """One model on one server: thread-local clients, bounded concurrency, retries."""

    def __init__(self, endpoint: Endpoint, model: str):
        self.endpoint = endpoint
        self.model = model
        self.opts = endpoint.options
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(max_workers=max(1, self.opts.max_in_flight),
                                        thread_name_prefix=f"triton-{model}")
        if endpoint.protocol == "grpc":
            import tritonclient.grpc as tc
        else:
            import tritonclient.http as tc
        self._tc = tc

    # -- clients ---------------------------------------------------------------------------
    def _client(self) -> Any:
        client = getattr(self._local, "client", None)
        if client is None:
            t = self.opts.timeout_s
            if self.endpoint.protocol == "grpc":
                client = self._tc.InferenceServerClient(self.endpoint.address)
            else:
                client = self._tc.InferenceServerClient(self.endpoint.address, connection_timeout=t,
                                                         network_timeout=t)
            self._local.client = client
        return client

    def _drop_client(self) -> None:
        """After a failure: a fresh channel reconnects at once instead of waiting out gRPC's
        reconnect backoff, so recovery after a server restart is prompt."""
        client = getattr(self._local, "client", None)
        self._local.client = None
        if client is not None:
            try:
                client.close()
            except Exception:
                pass

    # -- health ------------------------------------------------------------------------------
    def ready(self) -> bool:
        """Server live and this model ready (one round trip each); never raises."""
        try:
            c = self._client()
            return bool(c.is_server_live() and c.is_model_ready(self.model))
        except Exception:
            self._drop_client()
            return False

    def model_config(self) -> dict:
        c = self._client()
        if self.endpoint.protocol == "grpc":
            return c.get_model_config(self.model, as_json=True)["config"]
        return c.get_model_config(self.model)

    def parameters(self) -> dict[str, str]:
        try:
            params = self.model_config().get("parameters", {})
        except Exception as e:
            self._drop_client()
            if not is_outage(e):
                raise
            raise ModelUnavailable(f"triton {self.endpoint.address}/{self.model}: {e}") from e
        return {k: v.get("string_value", "") for k, v in params.items()}

    # -- inference ---------------------------------------------------------------------------
    def _infer_once(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        tc = self._tc
        reqs = []
        for name, arr in inputs.items():
            dtype = "BYTES" if arr.dtype == np.object_ else ("BOOL" if arr.dtype == np.bool_ else "FP32")
            inp = tc.InferInput(name, list(arr.shape), dtype)
            if self.endpoint.protocol == "http":
                inp.set_data_from_numpy(arr, binary_data=True)
            else:
                inp.set_data_from_numpy(arr)
            reqs.append(inp)
        if self.endpoint.protocol == "grpc":
            outs = [tc.InferRequestedOutput(n) for n in outputs]
            res = self._client().infer(self.model, reqs, outputs=outs, client_timeout=self.opts.timeout_s)
        else:
            outs = [tc.InferRequestedOutput(n, binary_data=True) for n in outputs]
            res = self._client().infer(self.model, reqs, outputs=outs)
        return {n: res.as_numpy(n) for n in outputs}

    def infer(self, inputs: dict[str, np.ndarray], outputs: Sequence[str]) -> dict[str, np.ndarray]:
        """One request; an outage (`is_outage`) is retried with exponential backoff and becomes
        ModelUnavailable when the retries are spent; any other exception propagates at once."""
        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(is_outage),
            stop=tenacity.stop_after_attempt(self.opts.retries + 1),
            wait=tenacity.wait_exponential(multiplier=self.opts.backoff_s, exp_base=2),
            before_sleep=lambda _: self._drop_client(), reraise=False)
        try:
            return retrying(self._infer_once, inputs, outputs)
        except tenacity.RetryError as e:  # outages only: connection, deadline, unavailable, overloaded
            self._drop_client()
            last = e.last_attempt.exception()
            raise ModelUnavailable(f"triton {self.endpoint.address}/{self.model} failed after "
                                   f"{self.opts.retries + 1} attempts: {last}") from last

    def map_batches(self, n: int, make_inputs: Callable[[int, int], dict[str, np.ndarray]],
                    outputs: Sequence[str]) -> list[dict[str, np.ndarray]]:
        """Split rows [0, n) into batches, at most max_in_flight requests at a time, in order."""
        bounds = [(s, min(s + self.opts.batch_size, n)) for s in range(0, n, self.opts.batch_size)]
        if len(bounds) <= 1:
            return [self.infer(make_inputs(s, e), outputs) for s, e in bounds]
        futures = [self._pool.submit(self.infer, make_inputs(s, e), outputs) for s, e in bounds]
        return [f.result() for f in futures]

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._drop_client()


def _bytes_column(texts: Sequence[str]) -> np.ndarray:
    return np.array([t.encode("utf-8") for t in texts], dtype=np.object_).reshape(-1, 1)


def _decode(v: Any) -> str:
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


class TritonNLI(NLIClassifier):
    """NLIModel served by Triton model `nli` (server-side tokenisation): raw logits from the server,
    label order and temperature here (the temperature the server returns alongside, i.e. that
    artifact's calibration). Sorting and columns are the base class's, so numbers match OnnxNLI."""

    def __init__(self, transport: TritonTransport):
        self.transport = transport
        self.version = "unknown"
        self.temperature = 1.0
        self.batch_size = transport.opts.batch_size

    @classmethod
    def from_url(cls, url: str, *, model: str = NLI_MODEL, probe: bool = True) -> "TritonNLI":
        """probe: one tiny request now, to fail fast and learn version/temperature."""
        self = cls(TritonTransport(Endpoint.parse(url), model))
        if probe:
            self.predict(["A man plays a guitar."], ["Someone makes music."])
        return self

    def ready(self) -> bool:
        return self.transport.ready()

    def forward_sorted(self, premises: list[str], hypotheses: list[str]) -> np.ndarray:
        """Chunks of `batch_size` (the same chunks OnnxNLI forms), up to max_in_flight at once."""
        results = self.transport.map_batches(
            len(premises),
            lambda s, e: {"PREMISE": _bytes_column(premises[s:e]), "HYPOTHESIS": _bytes_column(hypotheses[s:e])},
            ["LOGITS", "TEMPERATURE", "VERSION"])
        self.temperature = float(results[0]["TEMPERATURE"].reshape(-1)[0])
        self.version = _decode(results[0]["VERSION"].reshape(-1)[0])
        return np.concatenate([r["LOGITS"] for r in results]).astype(np.float32)

    def close(self) -> None:
        self.transport.close()


class TritonEncoder:
    """Encoder served by Triton model `embed`; the server checks nothing about which encoder the
    client wants, so from_url compares the model's `encoder` parameter with encoder_name."""

    def __init__(self, transport: TritonTransport, dim: int, version: str):
        self.transport = transport
        self.dim = dim
        self.version = version

    @classmethod
    def from_url(cls, url: str, encoder_name: str = "e5-onnx", *, model: str = EMBED_MODEL) -> "TritonEncoder":
        transport = TritonTransport(Endpoint.parse(url), model)
        served = transport.parameters().get("encoder", "")
        if served and served != encoder_name:
            transport.close()
            raise ModelUnavailable(f"triton model {model!r} serves encoder {served!r}, not {encoder_name!r}")
        self = cls(transport, dim=0, version="unknown")
        probe = self._encode(["dialcheck health probe"], False)
        self.dim = int(probe.shape[1])
        return self

    def ready(self) -> bool:
        return self.transport.ready()

    def _encode(self, texts: Sequence[str], is_query: bool) -> np.ndarray:
        results = self.transport.map_batches(
            len(texts), lambda s, e: {"TEXT": _bytes_column(texts[s:e]),
                                      "IS_QUERY": np.full((e - s, 1), is_query, dtype=np.bool_)},
            ["EMBEDDING", "VERSION"])
        self.version = _decode(results[0]["VERSION"].reshape(-1)[0])
        return np.concatenate([r["EMBEDDING"] for r in results]).astype(np.float32)

    def encode(self, texts: Sequence[str], *, is_query: bool = False) -> np.ndarray:
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._encode(list(texts), is_query)

    def close(self) -> None:
        self.transport.close()
