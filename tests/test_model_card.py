"""The NLI model card matches the files it describes.

Why: the hand-written card claimed int8 and a context + claim hypothesis while the artifact was
fp32 and the default hypothesis is the claim alone. The card is now generated from the artifact
(lab/nli/model_card.py); these tests check the committed card against the files, and that
the generator follows the files (a changed calibration.json, an int8 graph, a record of another
version) instead of repeating numbers.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from huggingface_hub import ModelCard

from schemas.settings import REPO_ROOT
from lab.nli.model_card import (NOTES_MARKER, RELEASE_RECORD, card_path, default_hypothesis_turns, onnx_facts,
                                    render)

pytestmark = pytest.mark.unit

MODEL_DIR = REPO_ROOT / "triton_models" / "nli" / "1"


def test_committed_card_is_what_the_artifact_gives():
    committed = card_path(MODEL_DIR).read_text()
    assert committed == render(MODEL_DIR), (
        "triton_models/nli/MODEL_CARD.md does not match the artifact: run python -m lab.nli.model_card")


def test_front_matter_and_facts_come_from_the_files():
    card = ModelCard.load(card_path(MODEL_DIR))
    meta = card.data.to_dict()
    cal = json.loads((MODEL_DIR / "calibration.json").read_text())
    facts = onnx_facts(MODEL_DIR / "model.onnx")
    assert meta["license"] and meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert meta["datasets"] and {"accuracy", "roc_auc"} <= set(meta["metrics"])
    assert meta["model-index"][0]["name"] == cal["version"]
    assert f"**{facts['precision']}**" in card.text and facts["precision"] in meta["tags"]
    assert f"T = {cal['temperature']}" in card.text
    if default_hypothesis_turns() == 0:
        assert "hypothesis = the claim surface alone" in card.text
    assert "int8 dynamic" not in card.text  # the old false claim
    record = json.loads((MODEL_DIR / RELEASE_RECORD).read_text())
    if record["version"] == cal["version"]:
        values = {m["metrics"][0]["type"] + ":" + m["dataset"]["type"]: m["metrics"][0]["value"]
                  for m in meta["model-index"][0]["results"]}
        assert values["accuracy:snli"] == record["evaluation"]["snli_test_accuracy"]


@pytest.fixture
def artifact_copy(tmp_path) -> Path:
    """The artifact's small files copied, model.onnx linked (87 MB need not be copied)."""
    d = tmp_path / "nli" / "1"
    d.mkdir(parents=True)
    for p in MODEL_DIR.iterdir():
        if p.name == "model.onnx":
            (d / p.name).symlink_to(p)
        elif p.is_dir():
            shutil.copytree(p, d / p.name)
        else:
            shutil.copy(p, d / p.name)
    return d


def test_a_new_release_is_described_by_its_own_files(artifact_copy):
    cal = json.loads((artifact_copy / "calibration.json").read_text())
    cal.update(version="dialcheck-nli-next", temperature=1.5, validation_ece_after=0.01)
    (artifact_copy / "calibration.json").write_text(json.dumps(cal))
    text = render(artifact_copy)
    assert "dialcheck-nli-next" in text and "T = 1.5" in text and "→ 0.01" in text
    # the release record belongs to the previous version: its numbers must not be reused
    assert "model-index" not in text.split("\n---\n", 1)[0]
    assert "Not recorded for this artifact" in text and "0.6683" not in text


def test_precision_is_read_from_the_graph(artifact_copy, tmp_path):
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])], "q",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [1])])
    (artifact_copy / "model.onnx").unlink()
    onnx.save(helper.make_model(graph), str(artifact_copy / "model.onnx"))
    assert onnx_facts(artifact_copy / "model.onnx")["precision"] == "int8"
    assert "**int8**" in render(artifact_copy)


def test_hand_written_notes_survive_regeneration(artifact_copy):
    notes = f"{NOTES_MARKER}\n\n## History\nA GPU candidate was evaluated and not shipped.\n"
    card_path(artifact_copy).write_text(render(artifact_copy, notes="") + "\n" + notes)
    again = render(artifact_copy)
    assert again.endswith(notes) and again.count(NOTES_MARKER) == 1
    assert again.split(NOTES_MARKER)[0] == render(artifact_copy, notes="").rstrip("\n") + "\n\n"
