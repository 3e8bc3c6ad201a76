"""`dialcheck nli quantize`: the static int8 variant is batch-independent (the property dynamic
int8 lacked), stays close to the fp32 artifact, and is usable as an NLI model directory."""
import json
import subprocess
import sys

import numpy as np
import pytest

from workers.models.onnx_nli import OnnxNLI

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def quantized(tmp_path_factory, settings, data_dir):
    out = tmp_path_factory.mktemp("int8")
    run = subprocess.run([sys.executable, "-m", "dialcheck", "nli", "quantize", "--out", str(out),
                          "--data-dir", str(data_dir), "--calibration-pairs", "64", "--report-pairs", "300"],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    report = json.loads(run.stdout[:run.stdout.rindex("}") + 1])
    return out, report, run.stdout.strip().splitlines()[-1]


def test_static_int8_is_batch_independent_and_close_to_fp32(quantized, nli):
    out, report, _ = quantized
    int8 = OnnxNLI(out)
    premises = ["A man is playing a guitar on a stage in front of a large and cheering crowd tonight.",
                "Elvis Presley was born in Tupelo, Mississippi.", "It rained.",
                "The Eiffel Tower is in Paris, France, and was finished in 1889."]
    hyps = ["A man plays music.", "Elvis was born in Chicago.", "The ground is dry.", "The tower is in Paris."]
    together = int8.predict(premises, hyps)
    alone = np.concatenate([int8.predict([p], [h]) for p, h in zip(premises, hyps)])
    np.testing.assert_array_equal(together, alone)  # dynamic int8 differs here by ~1e-2
    assert (together.argmax(1) == nli.predict(premises, hyps).argmax(1)).all()
    cal = json.loads((out / "calibration.json").read_text())
    assert cal["version"].endswith("-int8-static") and cal["quantization"]["calibration_pairs"] == 64
    assert report["batch_independence_max_diff"] == 0.0 and report["kept_fp32"] == 6  # the 6 FFN outputs
    assert report["label_agreement_with_fp32"] >= 0.8
    assert report["fp32"]["validation_accuracy"] - report["int8_static"]["validation_accuracy"] <= 0.03


def test_quantize_ends_with_the_command_that_makes_the_worker_accept_it(quantized, settings):
    """The int8 model names another version than the fp32 decision and display were fitted for, so
    the worker refuses it; quantize's last line names `dialcheck nli stamp`, and after it the
    worker's own check (dialcheck/model_switch.py `acceptable`) accepts the directory."""
    from dialcheck.model_switch import SwitchRefused, acceptable

    out, _, line = quantized
    with pytest.raises(SwitchRefused, match="fitted for NLI model"):
        acceptable(out, settings)
    command = line[line.index("`dialcheck nli stamp") + 1:line.index("`)")].split()
    run = subprocess.run([sys.executable, "-m", *command], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert acceptable(out, settings).startswith(f"NLI model {json.loads((out / 'calibration.json').read_text())['version']}")
    stamped = json.loads((out / "decision.json").read_text())["meta"]
    assert stamped["stamped_from"]["nli_model"]["version"] != stamped["nli_model"]["version"]
