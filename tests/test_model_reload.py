"""`Pipeline.reload` (the worker's SIGHUP) with two real model directories: the shipped NLI model and a
copy recalibrated (another temperature and version, with its own decision and display beside it, as
`dialcheck nli adopt` or `adapt` write them). The NLI model, decision and display are swapped together
(an operator writes the new directory beside the live one and moves it over); a batch running during
the reload reads the old set whole; a broken or mismatched directory is refused in one line and the
running model kept."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from schemas.protocols import Reload, ReloadRefused
from workers.pipeline import WARM_UP, Pipeline, PipelineHooks

pytestmark = pytest.mark.model

NEW_VERSION = "dialcheck-nli-test-recalibrated"


def model_dir(shipped: Path, at: Path, version: str | None = None, temperature: float | None = None,
              fitted_for: str | None = None) -> Path:
    """A model directory at `at`: the shipped weights and tokenizer (linked, not copied), its
    calibration.json with another `version` / `temperature`, and when `fitted_for` is given the
    shipped decision and display re-stamped as fitted for that NLI version, beside it."""
    at.mkdir(parents=True)
    for name in ("model.onnx", "tokenizer"):
        os.symlink(shipped / name, at / name)
    cal = json.loads((shipped / "calibration.json").read_text())
    cal.update({k: v for k, v in (("version", version), ("temperature", temperature)) if v is not None})
    (at / "calibration.json").write_text(json.dumps(cal))
    if fitted_for is not None:
        from schemas.settings import DecisionSettings
        from workers.display import SHIPPED

        shipped_decision = DecisionSettings.model_fields["decision_params"].default
        for src, name in ((shipped_decision, "decision.json"), (SHIPPED, "display.json")):
            doc = json.loads(Path(src).read_text())
            doc["meta"] = {**doc.get("meta", {}), "nli_model": {"version": fitted_for}, "date": f"for-{fitted_for}"}
            (at / name).write_text(json.dumps(doc))
    return at


def probabilities(pipe: Pipeline) -> tuple[str, dict, dict]:
    (r,) = pipe.check_turns([WARM_UP])
    v = r.verdict
    assert v.status.state == "ok", v
    return v.label, v.probabilities, v.model_versions


@pytest.fixture
def dirs(settings, tmp_path):
    shipped = Path(settings.models.nli_model_dir)
    live = model_dir(shipped, tmp_path / "live")
    new = model_dir(shipped, tmp_path / "new", NEW_VERSION, 3.0, fitted_for=NEW_VERSION)
    return shipped, live, new


def test_a_moved_over_directory_swaps_model_decision_and_display(settings, encoder, dirs, tmp_path):
    shipped, live, new = dirs
    s = settings.updated(models={"nli_model_dir": str(live)})
    from workers.models.factory import load_nli

    pipe = Pipeline(s, load_nli(s), encoder, None, protocol="fv", surface="r0")
    assert isinstance(pipe, Reload)
    label, before, versions = probabilities(pipe)
    shipped_version = versions["nli"]
    assert shipped_version != NEW_VERSION and "for-" not in versions.get("display", "")

    os.rename(live, tmp_path / "old")  # write beside, move over, SIGHUP
    os.rename(new, live)
    said = pipe.reload()
    assert f"NLI model {NEW_VERSION} from {live}" in said and "decision" in said and str(live / "display.json") in said
    _, after, versions = probabilities(pipe)
    assert versions["nli"] == NEW_VERSION and versions["display"] == f"policy@for-{NEW_VERSION}"
    assert after != before  # temperature 3.0: flatter probabilities from the same logits
    assert max(after.values()) < max(before.values())
    assert pipe.settings.decision.decision_params == str(live / "decision.json")

    # a directory fitted for another model (its decision names another version) is refused whole
    mismatched = model_dir(shipped, tmp_path / "mismatched", "dialcheck-nli-another", 2.0, fitted_for="someone-else")
    with pytest.raises(ReloadRefused, match=r"someone-else.*the running model dialcheck-nli-test-recalibrated kept"):
        pipe.reload_model(str(mismatched))
    # without a decision of its own, the shipped one (fitted for the shipped model) does not fit it either
    bare = model_dir(shipped, tmp_path / "bare", "dialcheck-nli-another", 2.0)
    with pytest.raises(ReloadRefused, match="dialcheck-nli-another"):
        pipe.reload_model(str(bare))
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "model.onnx").write_bytes(b"not a model")
    shutil.copytree(shipped / "tokenizer", broken / "tokenizer")
    with pytest.raises(ReloadRefused) as refused:
        pipe.reload_model(str(broken))
    assert str(broken) in str(refused.value) and "\n" not in str(refused.value)
    with pytest.raises(ReloadRefused, match="no such directory"):
        pipe.reload_model(str(tmp_path / "absent"))
    _, still, versions = probabilities(pipe)  # nothing of a refusal stays
    assert versions["nli"] == NEW_VERSION and still == after

    said = pipe.reload_model(str(shipped))  # and back
    _, back, versions = probabilities(pipe)
    assert versions["nli"] == shipped_version and back == before


def test_a_batch_running_during_a_reload_reads_one_set(settings, nli, encoder, dirs):
    """The reload happens inside a batch (in the NLI call): that batch's verdicts all name the old
    model, decision and display; the next batch the new ones."""
    _, live, new = dirs
    pipe: Pipeline | None = None
    said = []

    def forward(premises, hypotheses):
        if not said:
            said.append(pipe.reload_model(str(new)))
        return nli.predict(premises, hypotheses)

    s = settings.updated(models={"nli_model_dir": str(live)})
    pipe = Pipeline(s, nli, encoder, None, protocol="fv", surface="r0", hooks=PipelineHooks(verify_forward=forward))
    before = pipe.model_versions()
    results = pipe.check_turns([WARM_UP, WARM_UP])
    assert said and NEW_VERSION in said[0]
    assert before["nli"] == nli.version != NEW_VERSION
    assert all(r.verdict.model_versions == before for r in results)
    (r,) = pipe.check_turns([WARM_UP])
    assert r.verdict.model_versions == pipe.model_versions() != before
    assert r.verdict.model_versions["nli"] == NEW_VERSION and r.verdict.model_versions["display"] == f"policy@for-{NEW_VERSION}"
