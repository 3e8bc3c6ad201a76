"""Settings: checked at load, one line naming the variable, nothing read at import, secrets masked."""
import os
import subprocess
import sys

import pytest

from schemas.settings import SettingsInvalid, load_settings

pytestmark = pytest.mark.unit

CLI = [sys.executable, "-m", "dialcheck.cli"]


def _run(args, **env):
    return subprocess.run(CLI + args, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def test_help_works_whatever_the_environment_says():
    out = _run(["--help"], DIALCHECK_TAU_FV="abc")
    assert out.returncode == 0 and "usage: dialcheck" in out.stdout


def test_bad_value_is_one_line_naming_the_variable():
    out = _run(["check", "--claim", "x"], DIALCHECK_TAU_FV="abc")
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "DIALCHECK_TAU_FV" in lines[0] and "Traceback" not in out.stderr


@pytest.mark.parametrize("var,value", [("DIALCHECK_TAU_FV", "7"), ("DIALCHECK_BATCH_SIZE", "-1"),
                                       ("DIALCHECK_SEARCH", "opensarch"), ("DIALCHECK_MODELS", "bogus"),
                                       ("DIALCHECK_BM25_B", "1.5"), ("DIALCHECK_GATE_WEIGHTS", "0.4,x,0.4"),
                                       ("DIALCHECK_KAFKA_SECURITY_PROTOCOL", "TLS")])
def test_out_of_range_or_unknown_choice_is_refused(monkeypatch, var, value):
    monkeypatch.setenv(var, value)
    with pytest.raises(SettingsInvalid, match=var):
        load_settings()


def test_overrides_are_validated_like_the_environment():
    with pytest.raises(SettingsInvalid, match="DIALCHECK_TAU_FV"):
        load_settings(gate={"tau_fv": 1.5})
    assert load_settings(gate={"tau_fv": 0.6}).gate.tau_fv == 0.6


def test_environment_is_read_per_load_not_at_import(monkeypatch):
    monkeypatch.setenv("DIALCHECK_TAU_FV", "0.61")
    monkeypatch.setenv("DIALCHECK_GATE_WEIGHTS", "0.5,0.1,0.4")
    s = load_settings()
    assert s.gate.tau_fv == 0.61 and s.gate.weights == (0.5, 0.1, 0.4)


def test_config_masks_secrets():
    out = _run(["config"], DIALCHECK_KAFKA_SASL_PASSWORD="hunter2-secret",
               DIALCHECK_OPENSEARCH_URL="https://admin:hunter2-secret@os:9200")
    assert out.returncode == 0 and "kafka.sasl_password" in out.stdout
    assert "hunter2" not in out.stdout + out.stderr
    assert "https://***@os:9200" in out.stdout


def test_settings_repr_masks_secrets(monkeypatch):
    monkeypatch.setenv("DIALCHECK_KAFKA_SASL_PASSWORD", "hunter2-secret")
    monkeypatch.setenv("DIALCHECK_OPENSEARCH_URL", "https://admin:hunter2-secret@os:9200")
    s = load_settings()
    assert "hunter2" not in repr(s) and "hunter2" not in str(s)
    assert s.kafka.sasl_password.get_secret_value() == "hunter2-secret"  # still usable by the clients
