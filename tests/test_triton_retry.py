"""Triton clients retry an outage and declare it (ModelUnavailable → degraded verdicts); a bug
propagates at once, unretried, instead of hiding as a degraded verdict.

Real tritonclient transports (gRPC and HTTP) against a port nobody listens on: a refused
connection is a real outage. The rejected-request case against a real tritonserver is in
tests/test_triton_serving.py (it needs the server)."""
from __future__ import annotations

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from schemas.protocols import ModelUnavailable
from streams.processes import free_port
from workers.models.triton import Endpoint, TritonTransport, is_outage

pytestmark = pytest.mark.unit

FAST = "?retries=2&backoff_s=0.01&timeout_s=5"
ROW = {"PREMISE": np.array([[b"a"]], dtype=np.object_), "HYPOTHESIS": np.array([[b"b"]], dtype=np.object_)}


class CountingTransport(TritonTransport):
    """The real transport, counting request attempts."""

    attempts = 0

    def _infer_once(self, inputs, outputs):
        self.attempts += 1
        return super()._infer_once(inputs, outputs)


@pytest.fixture(params=["triton", "triton+http"])
def closed(request):
    t = CountingTransport(Endpoint.parse(f"{request.param}://127.0.0.1:{free_port()}{FAST}"), "nli")
    yield t
    t.close()


def test_refused_connection_is_retried_then_declared_unavailable(closed):
    with pytest.raises(ModelUnavailable, match="failed after 3 attempts"):
        closed.infer(ROW, ["LOGITS"])
    assert closed.attempts == 3


def test_a_bug_propagates_unretried(closed):
    """A TypeError in building the request (here: outputs=None) is our bug, not an outage: it
    reached the caller as ModelUnavailable after 3 attempts before retries were limited to outages."""
    with pytest.raises(TypeError):
        closed.infer(ROW, None)
    assert closed.attempts == 1


def test_a_client_side_rejection_propagates_unretried(closed):
    """tritonclient raises InferenceServerException without a status for a request it will not send
    (an int64 array for an FP32 input): not an outage either."""
    with pytest.raises(InferenceServerException, match="unexpected datatype"):
        closed.infer({"PREMISE": np.array([[1, 2]], dtype=np.int64)}, ["LOGITS"])
    assert closed.attempts == 1


@pytest.mark.parametrize("error,outage", [
    (InferenceServerException("connect failed", status="StatusCode.UNAVAILABLE"), True),
    (InferenceServerException("deadline", status="StatusCode.DEADLINE_EXCEEDED"), True),
    (InferenceServerException("queue full", status="StatusCode.RESOURCE_EXHAUSTED"), True),
    (InferenceServerException("model not ready", status="503"), True),
    (InferenceServerException("unexpected shape", status="StatusCode.INVALID_ARGUMENT"), False),
    (InferenceServerException("unexpected shape", status="400"), False),
    (InferenceServerException("got unexpected datatype"), False),
    (ConnectionResetError(104, "reset"), True), (TimeoutError("timed out"), True),
    (TypeError("bad"), False), (KeyError("LOGITS"), False), (ValueError("x"), False),
])
def test_what_counts_as_an_outage(error, outage):
    assert is_outage(error) is outage
