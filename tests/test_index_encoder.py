"""An index built with one encoder and loaded with another is refused with a clear error.

Why: E5 and MiniLM are both 384-d, so a mismatched index would load fine and give silently wrong
dense scores."""
import numpy as np
import pytest

from schemas.protocols import Passage
from workers.models.encoders import load_local_encoder
from workers.retrieval.bm25 import EmbeddedIndex
from workers.retrieval.build import IndexEncoderMismatch, ensure_index

pytestmark = pytest.mark.model

PASSAGES = [Passage("p1", "Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi.", doc_id="Elvis Presley"),
            Passage("p2", "Tupelo", "Tupelo is a city in Lee County, Mississippi.", doc_id="Tupelo")]


@pytest.fixture(scope="module")
def encoders():
    return load_local_encoder("minilm"), load_local_encoder("e5")


def _index(tmp_path, encoder):
    vectors = encoder.encode([f"{p.title}: {p.text}" for p in PASSAGES])
    EmbeddedIndex.build(PASSAGES, vectors=vectors, meta={"encoder": encoder.version}).save(tmp_path)


def test_index_from_another_encoder_is_refused(tmp_path, settings, encoders):
    minilm, e5 = encoders
    assert minilm.dim == e5.dim  # the reason a shape check would not catch it
    _index(tmp_path, minilm)
    with pytest.raises(IndexEncoderMismatch, match="built with encoder .*MiniLM.*dialcheck index build"):
        ensure_index(settings.updated(retrieval={"index_dir": str(tmp_path)}), e5)


def test_index_from_the_same_encoder_loads(tmp_path, settings, encoders):
    minilm, _ = encoders
    _index(tmp_path, minilm)
    index = ensure_index(settings.updated(retrieval={"index_dir": str(tmp_path)}), minilm)
    assert index.meta["encoder"] == minilm.version
    assert np.allclose(index.vectors(["p1"]), minilm.encode([f"{PASSAGES[0].title}: {PASSAGES[0].text}"]), atol=1e-5)
