"""The shipped NLI artifact through the interface the pipeline uses (no training here)."""
import json
import os
from pathlib import Path

import numpy as np

import pytest

from schemas.protocols import NLIModel
from lab.nli.labels import CONTRADICTION, ENTAILMENT, NEUTRAL


@pytest.mark.unit
def test_artifact_layout(settings):
    d = Path(settings.models.nli_model_dir)
    assert (d / "model.onnx").stat().st_size < 100 * 2**20
    assert (d / "tokenizer" / "tokenizer.json").exists()
    cal = json.loads((d / "calibration.json").read_text())
    assert cal["label_order"] == ["entailment", "neutral", "contradiction"]
    assert 0.05 < cal["temperature"] < 20
    assert (d.parent / "config.pbtxt").exists()


@pytest.mark.model
def test_obvious_pairs(nli):
    assert isinstance(nli, NLIModel)
    premise = "A man is playing a guitar on a stage in front of a crowd."
    probs = nli.predict([premise] * 3, ["A man is playing an instrument.",
                                        "The man is asleep in his bed.",
                                        "The man is a famous musician from Spain."])
    assert probs.shape == (3, 3)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert probs[0].argmax() == ENTAILMENT
    assert probs[1].argmax() == CONTRADICTION
    assert probs[2, NEUTRAL] > probs[0, NEUTRAL]


@pytest.mark.model
def test_fact_pairs(nli):
    ev = "Elvis Presley was born in Tupelo, Mississippi, and moved to Memphis, Tennessee, at age 13."
    p = nli.predict([ev, ev], ["Elvis was born in Tupelo.", "Elvis was born in Chicago."])
    assert p[0, ENTAILMENT] > p[1, ENTAILMENT]
    assert p[1, CONTRADICTION] > p[0, CONTRADICTION]


@pytest.mark.model
def test_empty_batch(nli):
    assert nli.predict([], []).shape == (0, 3)


@pytest.mark.model
def test_chunking_and_sort_order_leave_the_logits_unchanged(settings, dialfact_records):
    """settings models.ort_nli_chunk / ort_nli_sort / ort_nli_workers only change how much padding
    each ONNX call carries and how many run at once: the attention mask hides the padding, so 4 pairs
    sorted by tokens on parallel single-threaded runs (the default) must give the logits 32 sorted by
    characters one call at a time (the previous release) gave, on pairs of mixed lengths."""
    from workers.models.onnx_nli import OnnxNLI

    d = settings.models.nli_model_dir
    premises = [" ".join(r.context[-2:]) or r.response for r in dialfact_records[:48]]
    hypotheses = [r.response for r in dialfact_records[:48]]
    previous = OnnxNLI(d, batch_size=32, sort_by="chars", workers=1)
    default = OnnxNLI(d)
    assert (default.batch_size, default.sort_by, default.workers) == (4, "tokens", len(os.sched_getaffinity(0)))
    lengths = default.pair_lengths(premises, hypotheses)
    assert max(lengths) > 2 * min(lengths), "the sample must mix short and long pairs"
    np.testing.assert_allclose(default.logits(premises, hypotheses), previous.logits(premises, hypotheses),
                               rtol=0, atol=1e-4)
    tokens = default.tokenizer(premises[:3], hypotheses[:3], truncation="longest_first",
                               max_length=default.max_length)["input_ids"]
    assert lengths[:3] == [len(t) for t in tokens]
