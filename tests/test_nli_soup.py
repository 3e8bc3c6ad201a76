"""`dialcheck nli soup`'s averaging: float tensors are weighted, other tensors must agree, and two
graphs that are not the same export are refused (tiny hand-built ONNX graphs; the release path
with real models is `dialcheck nli soup`, measured in the README)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from lab.nli.soup import average_onnx

pytestmark = pytest.mark.unit


def _graph(path, weight: np.ndarray, op: str = "MatMul", shape_ids=(1, 2)):
    w = numpy_helper.from_array(weight.astype(np.float32), "w")
    ids = numpy_helper.from_array(np.array(shape_ids, dtype=np.int64), "ids")
    node = helper.make_node(op, ["x", "w"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2])], [w, ids])
    onnx.save(helper.make_model(g), str(path))
    return path


def _tensor(path, name):
    return next(numpy_helper.to_array(t) for t in onnx.load(str(path)).graph.initializer if t.name == name)


def test_soup_weights_float_tensors_and_keeps_the_rest(tmp_path):
    a = _graph(tmp_path / "a.onnx", np.array([[1.0, 0.0], [0.0, 1.0]]))
    b = _graph(tmp_path / "b.onnx", np.array([[3.0, 2.0], [2.0, 3.0]]))
    assert average_onnx(a, b, 0.75, tmp_path / "s.onnx") == 1
    assert np.allclose(_tensor(tmp_path / "s.onnx", "w"), [[1.5, 0.5], [0.5, 1.5]])
    assert _tensor(tmp_path / "s.onnx", "ids").tolist() == [1, 2]
    average_onnx(a, b, 1.0, tmp_path / "a_again.onnx")
    assert np.array_equal(_tensor(tmp_path / "a_again.onnx", "w"), _tensor(a, "w"))


def test_soup_refuses_models_that_are_not_the_same_export(tmp_path):
    a = _graph(tmp_path / "a.onnx", np.eye(2))
    with pytest.raises(ValueError, match="not the same export"):
        average_onnx(a, _graph(tmp_path / "b.onnx", np.eye(2), op="Add"), 0.5, tmp_path / "s.onnx")
    with pytest.raises(ValueError, match="non-float tensor ids differs"):
        average_onnx(a, _graph(tmp_path / "c.onnx", np.eye(2), shape_ids=(1, 3)), 0.5, tmp_path / "s.onnx")
