"""The real tritonserver (bundled with nvidia-pytriton) on triton_models/ gives the in-process
numbers: NLI probabilities and encoder vectors within 1e-4 on 50 DialFact records, the same
pipeline verdicts, and an outage turns into degraded verdicts that recover after a restart."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas.settings import load_settings  # noqa: E402
from infra.triton_server import TritonServer  # noqa: E402
from schemas.protocols import ModelUnavailable  # noqa: E402
from schemas.protocols import turn_verdicts

DIALFACT = load_settings().data.dialfact_sample
NLI_DIR = REPO / "triton_models" / "nli" / "1"
N = 50
TOL = 1e-4



@pytest.fixture(scope="module")
def server():
    with TritonServer(REPO / "triton_models") as s:
        yield s


@pytest.fixture(scope="module")
def records():
    from schemas.items import load_dialfact

    return load_dialfact(DIALFACT, limit=N)


@pytest.fixture(scope="module")
def local_nli():
    from workers.models.onnx_nli import OnnxNLI

    return OnnxNLI(NLI_DIR)


@pytest.fixture(scope="module")
def local_encoder():
    from workers.models.encoders import load_local_encoder

    return load_local_encoder(load_settings().models.encoder)  # the one the embed model serves (config.pbtxt)


def _pairs(records) -> tuple[list[str], list[str]]:
    premises = [" ".join(text for _, text in r.evidence) or r.response for r in records]
    return premises, [r.response for r in records]


@pytest.mark.parametrize("scheme", ["grpc", "http"])
def test_nli_matches_in_process(server, records, local_nli, scheme):
    from workers.models.triton import TritonNLI

    url = server.grpc_url if scheme == "grpc" else server.http_url
    remote = TritonNLI.from_url(url)
    premises, hyps = _pairs(records)
    want = local_nli.predict(premises, hyps)
    got = remote.predict(premises, hyps)
    assert got.shape == (N, 3)
    assert np.abs(got - want).max() < TOL
    assert (got.argmax(1) == want.argmax(1)).all()
    assert remote.version == local_nli.version
    remote.close()


def test_encoder_matches_in_process(server, records, local_encoder):
    from workers.models.triton import TritonEncoder

    remote = TritonEncoder.from_url(server.grpc_url, load_settings().models.encoder)
    assert (remote.dim, remote.version) == (local_encoder.dim, local_encoder.version)
    texts = [r.response for r in records]
    for is_query in (False, True):
        got = remote.encode(texts, is_query=is_query)
        want = local_encoder.encode(texts, is_query=is_query)
        assert np.abs(got - want).max() < TOL
    with pytest.raises(ModelUnavailable):
        TritonEncoder.from_url(server.grpc_url, "minilm")  # served encoder is checked
    remote.close()


def _assert_same(local, remote):
    assert len(remote) == len(local)
    for a, b in zip(local, remote):
        assert a.label == b.label and a.status.state == b.status.state == "ok", b.status.reason
        assert a.surface == b.surface
        for k in a.probabilities:
            assert abs(a.probabilities[k] - b.probabilities[k]) < TOL


def test_pipeline_same_verdicts_and_outage_recovery(server, records, local_nli, local_encoder):
    """Pipeline-level: same labels/probabilities through Triton; kill the server mid-run →
    ModelUnavailable → degraded verdicts (none dropped); restart on the same ports → recovery."""
    from workers.models.triton import TritonEncoder, TritonNLI
    from workers.pipeline import Pipeline

    settings = load_settings()
    items = [r.to_check_item("fv") for r in records]
    in_process = Pipeline(settings, local_nli, local_encoder, None, protocol="fv", surface="r4g")
    local = turn_verdicts(in_process.check_turns(items))

    fast = "?retries=1&backoff_s=0.05&timeout_s=60"  # outage = refused connection: fails fast anyway
    nli, enc = TritonNLI.from_url(server.grpc_url + fast), TritonEncoder.from_url(server.grpc_url + fast, settings.models.encoder)
    pipe = Pipeline(settings, nli, enc, None, protocol="fv", surface="r4g")
    _assert_same(local, turn_verdicts(pipe.check_turns(items)))

    server.kill()
    assert not nli.ready()
    with pytest.raises(ModelUnavailable):
        nli.predict(["a"], ["b"])
    degraded = turn_verdicts(pipe.check_turns(items[:5]))
    assert len(degraded) == 5
    for v in degraded:
        assert v.status.state in ("degraded", "error")
        assert "unavailable" in v.status.reason.lower()

    server.start()
    assert nli.ready()
    _assert_same(turn_verdicts(in_process.check_turns(items[:5])), turn_verdicts(pipe.check_turns(items[:5])))


def test_a_request_the_server_rejects_propagates(server):
    """A real tritonserver's INVALID_ARGUMENT (an input the model does not have) is a bug in the
    request, not an outage: raised as it is, once, never turned into ModelUnavailable."""
    from tritonclient.utils import InferenceServerException
    from workers.models.triton import Endpoint, TritonTransport

    for url in (server.grpc_url, server.http_url):
        t = TritonTransport(Endpoint.parse(url + "?retries=2&backoff_s=0.01"), "nli")
        with pytest.raises(InferenceServerException) as e:
            t.infer({"NO_SUCH_INPUT": np.array([[b"a"]], dtype=np.object_)}, ["LOGITS"])
        assert not isinstance(e.value, ModelUnavailable) and e.value.status() in ("StatusCode.INVALID_ARGUMENT", "400")
        t.close()
