"""Model-repository configs parse as Triton ModelConfig protobufs (CPU repo and GPU overlay),
use dynamic batching and instance groups, and client URLs parse as documented. No server."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CONFIGS = sorted((REPO / "triton_models").glob("*/config.pbtxt")) + sorted((REPO / "infra" / "triton_gpu").glob("*/config.pbtxt"))


def _parse(path: Path) -> model_config_pb2.ModelConfig:
    return text_format.Parse(path.read_text(), model_config_pb2.ModelConfig())


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_config_parses(path):
    cfg = _parse(path)
    assert cfg.name == path.parent.name and cfg.max_batch_size > 0
    if cfg.platform != "ensemble" and cfg.name != "nli_tokenize":
        assert list(cfg.dynamic_batching.preferred_batch_size) and cfg.dynamic_batching.max_queue_delay_microseconds > 0
        assert len(cfg.instance_group) >= 1


def test_cpu_repository_contract():
    nli, embed = _parse(REPO / "triton_models/nli/config.pbtxt"), _parse(REPO / "triton_models/embed/config.pbtxt")
    assert [i.name for i in nli.input] == ["PREMISE", "HYPOTHESIS"]
    assert [o.name for o in nli.output] == ["LOGITS", "TEMPERATURE", "VERSION"]
    assert [i.name for i in embed.input] == ["TEXT", "IS_QUERY"]
    assert nli.backend == embed.backend == "python"
    gpu = _parse(REPO / "infra/triton_gpu/nli/config.pbtxt")
    assert [o.name for o in gpu.output] == [o.name for o in nli.output]  # same client contract on GPU
    for d in ("nli", "embed"):
        assert (REPO / "triton_models" / d / "1" / "model.py").exists()
        assert (REPO / "triton_models" / d / "README.md").exists()


def test_url_parsing():
    from workers.models.triton import Endpoint

    e = Endpoint.parse("triton://10.0.0.5:9001")
    assert (e.protocol, e.host, e.port) == ("grpc", "10.0.0.5", 9001)
    e = Endpoint.parse("triton+http://localhost?timeout_s=2.5&max_in_flight=8")
    assert (e.protocol, e.port, e.options.timeout_s, e.options.max_in_flight) == ("http", 8000, 2.5, 8)
    for bad in ("http://x:1", "triton://x:1?nope=1"):
        with pytest.raises(ValueError):
            Endpoint.parse(bad)


def test_gpu_repository_assembles(tmp_path):
    from infra.make_gpu_repository import make

    out = make(tmp_path / "gpu")
    for p in ("nli/config.pbtxt", "nli_tokenize/1/tokenizer", "nli_tokenize/1/calibration.json",
              "nli_onnx/1/model.onnx", "embed/1/model.py"):
        assert (out / p).exists(), p
