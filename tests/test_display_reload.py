"""`Pipeline.reload_display` with the real models (fv protocol, gold evidence): a claim's display
follows the display file after a reload, a batch running during a reload keeps the policy it started
with, and a missing, broken or mismatched file is refused with the old policy kept."""
from dataclasses import replace

import pytest

from schemas.protocols import DisplayReload, ReloadRefused
from workers.display import SHIPPED, DisplayPolicy
from workers.pipeline import WARM_UP, Pipeline, PipelineHooks

pytestmark = pytest.mark.model

ANY = ("strong", "weak", "none")


def policy(show: float, **meta) -> DisplayPolicy:
    """The shipped policy's fit (its NLI fingerprint) with thresholds on p(label): 0 shows every ok
    S/R badge, 2 none."""
    shipped = DisplayPolicy.load(SHIPPED)
    return replace(shipped, show={"SUPPORTS": show, "REFUTES": show}, high={"SUPPORTS": 2.0, "REFUTES": 2.0},
                   evidence=ANY, scorer=None, complete=False, meta={**shipped.meta, **meta})


def shown(pipe: Pipeline) -> bool:
    (result,) = pipe.check_turns([WARM_UP])
    v = result.verdict
    assert v.status.state == "ok" and v.label in ("SUPPORTS", "REFUTES"), v  # a badge label, so the policy decides
    return v.display.show


@pytest.fixture
def files(tmp_path):
    always, never = tmp_path / "always.json", tmp_path / "display.json"
    policy(0.0, date="always").save(always)
    policy(2.0, date="never").save(never)
    return always, never


def test_reload_follows_the_file_and_refuses_bad_ones(settings, nli, encoder, files, tmp_path):
    always, path = files
    policy(0.0, date="first").save(path)  # the worker's file, overwritten in place below
    pipe = Pipeline(settings.updated(decision={"display_params": str(path)}), nli, encoder, None, protocol="fv",
                    surface="r0")
    assert isinstance(pipe, DisplayReload)
    assert shown(pipe) and pipe.model_versions()["display"] == "policy@first"

    policy(2.0, date="never").save(path)  # an operator overwrites the file, then SIGHUP
    said = pipe.reload_display()
    assert str(path) in said and "policy@never" in said
    assert not shown(pipe)
    assert pipe.model_versions()["display"] == "policy@never"
    (r,) = pipe.check_turns([WARM_UP])
    assert r.verdict.model_versions["display"] == "policy@never"

    assert "policy@always" in pipe.reload_display(str(always))  # pointed at another file
    assert shown(pipe) and pipe.settings.decision.display_params == str(always)

    always.write_text("{not json")
    with pytest.raises(ReloadRefused, match="missing or broken"):
        pipe.reload_display()
    assert shown(pipe) and pipe.model_versions()["display"] == "policy@always"  # the old policy kept

    mismatched = tmp_path / "other-model.json"
    policy(2.0, date="other", nli_model={"version": "some-other-nli"}).save(mismatched)
    with pytest.raises(ReloadRefused, match="some-other-nli"):
        pipe.reload_display(str(mismatched))
    with pytest.raises(ReloadRefused, match="missing or broken"):
        pipe.reload_display(str(tmp_path / "absent.json"))
    assert shown(pipe) and pipe.settings.decision.display_params == str(always)  # nothing of a refusal stays


def test_a_batch_running_during_a_reload_keeps_its_policy(settings, nli, encoder, files):
    """The reload happens inside the batch (in the NLI call, between the verify stage and the verdict):
    that batch's verdicts all use the old policy, the next batch the new one."""
    always, never = files
    pipe: Pipeline | None = None
    reloads = []

    def forward(premises, hypotheses):
        if not reloads:
            reloads.append(pipe.reload_display(str(never)))
        return nli.predict(premises, hypotheses)

    pipe = Pipeline(settings.updated(decision={"display_params": str(always)}), nli, encoder, None, protocol="fv",
                    surface="r0", hooks=PipelineHooks(verify_forward=forward))
    results = pipe.check_turns([WARM_UP, WARM_UP])
    assert reloads and "policy@never" in reloads[0]
    assert all(r.verdict.display.show and r.verdict.model_versions["display"] == "policy@always" for r in results)
    assert not shown(pipe)
