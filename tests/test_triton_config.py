"""Model-repository configs parse as Triton ModelConfig protobufs (CPU repo and GPU overlay),
use dynamic batching and instance groups, and client URLs parse as documented. No server."""
from __future__ import annotations

import re
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
    for d, cfg in (("nli", nli), ("embed", embed)):  # the python model reads and writes what its config declares
        source = (REPO / "triton_models" / d / "1" / "model.py").read_text()
        read = set(re.findall(r'(?:get_input_tensor_by_name\(r|_strings\(r), "(\w+)"', source))
        written = set(re.findall(r'pb_utils\.Tensor\("(\w+)"', source))
        assert (read, written) == ({i.name for i in cfg.input}, {o.name for o in cfg.output}), d


def test_url_parsing():
    from workers.models.triton import Endpoint

    e = Endpoint.parse("triton://10.0.0.5:9001")
    assert (e.protocol, e.host, e.port) == ("grpc", "10.0.0.5", 9001)
    e = Endpoint.parse("triton+http://localhost?timeout_s=2.5&max_in_flight=8")
    assert (e.protocol, e.port, e.options.timeout_s, e.options.max_in_flight) == ("http", 8000, 2.5, 8)
    for bad in ("http://x:1", "triton://x:1?nope=1"):
        with pytest.raises(ValueError):
            Endpoint.parse(bad)


def _onnx_signature(values) -> list[tuple[str, int, list[int]]]:
    """(name, ONNX element type, dims after the batch dim, -1 for a named one) per graph input/output."""
    return [(v.name, v.type.tensor_type.elem_type, [d.dim_value or -1 for d in v.type.tensor_type.shape.dim[1:]])
            for v in values]


def test_gpu_repository_assembles(tmp_path):
    """The assembled repository serves the artifact it was made from: nli_onnx's config declares the
    ONNX graph's own inputs and outputs (names, types, shapes), the tokenizer step produces every
    input the graph takes, and the ensemble wires each one through."""
    import json

    import onnx
    from transformers import AutoTokenizer

    from infra.make_gpu_repository import make

    out = make(tmp_path / "gpu")
    graph = onnx.load(str(out / "nli_onnx/1/model.onnx"), load_external_data=False).graph
    cfg = _parse(out / "nli_onnx/config.pbtxt")
    onnx_type = {model_config_pb2.TYPE_INT64: onnx.TensorProto.INT64, model_config_pb2.TYPE_FP32: onnx.TensorProto.FLOAT}
    declared = lambda ts: [(t.name, onnx_type[t.data_type], list(t.dims)) for t in ts]  # noqa: E731
    assert declared(cfg.input) == _onnx_signature(graph.input)
    assert declared(cfg.output) == _onnx_signature(graph.output) == [("logits", onnx.TensorProto.FLOAT, [3])]

    tokenize = _parse(out / "nli_tokenize/config.pbtxt")
    graph_inputs = [i.name for i in graph.input]
    assert [o.name for o in tokenize.output][:len(graph_inputs)] == graph_inputs
    encoded = AutoTokenizer.from_pretrained(str(out / "nli_tokenize/1/tokenizer"))("A premise.", "A hypothesis.")
    assert set(graph_inputs) <= set(encoded)  # the tokenizer step can fill every input
    steps = _parse(out / "nli/config.pbtxt").ensemble_scheduling.step
    wired = {steps[0].output_map[k]: k for k in steps[0].output_map}  # ensemble tensor → tokenizer output
    assert {k: wired[v] for k, v in steps[1].input_map.items()} == {n: n for n in graph_inputs}
    assert json.loads((out / "nli_tokenize/1/calibration.json").read_text()) == \
        json.loads((REPO / "triton_models/nli/1/calibration.json").read_text())
    assert (out / "embed/1/model.py").read_bytes() == (REPO / "triton_models/embed/1/model.py").read_bytes()
