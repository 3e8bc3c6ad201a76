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


def test_config_lists_the_sections_that_say_what_they_hold():
    """The verifier's settings are in windows, decision, claims and stages (no catch-all `verify`),
    each still read from its DIALCHECK_* name."""
    out = _run(["config"], DIALCHECK_MAX_WINDOWS="12", DIALCHECK_DECISION="threshold", DIALCHECK_SURFACE="r4g")
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line for line in out.stdout.splitlines() if line.strip()}
    assert "DIALCHECK_MAX_WINDOWS" in rows["windows.max_windows"] and "12" in rows["windows.max_windows"]
    assert "threshold" in rows["decision.method"] and "DIALCHECK_DECISION " in rows["decision.method"] + " "
    assert "r4g" in rows["claims.surface"] and "DIALCHECK_CHECK_CONTRACTS" in rows["stages.check_contracts"]
    assert not [k for k in rows if k.startswith("verify.")]
    s = load_settings()
    assert (s.windows.max_windows, s.decision.method, s.claims.surface) == (24, "layer", "r0")


def test_settings_repr_masks_secrets(monkeypatch):
    monkeypatch.setenv("DIALCHECK_KAFKA_SASL_PASSWORD", "hunter2-secret")
    monkeypatch.setenv("DIALCHECK_OPENSEARCH_URL", "https://admin:hunter2-secret@os:9200")
    s = load_settings()
    assert "hunter2" not in repr(s) and "hunter2" not in str(s)
    assert s.kafka.sasl_password.get_secret_value() == "hunter2-secret"  # still usable by the clients


def _model_folder(tmp_path, display: bool = True):
    """A folder as `dialcheck nli adopt` leaves it, as far as settings read it: decision.json (and
    display.json) beside the model files; settings never load the model, but check its files are
    there (config.json: a Hugging Face checkpoint's)."""
    d = tmp_path / "adopted-nli"
    d.mkdir()
    (tmp_path / "config.json").write_text("{}")  # the test uses tmp_path as a model dir without a decision
    (d / "config.json").write_text("{}")
    (d / "decision.json").write_text("{}")
    if display:
        (d / "display.json").write_text("{}")
    return d


def test_the_decision_beside_the_nli_model_is_used_unless_one_is_named(monkeypatch, tmp_path):
    """DIALCHECK_NLI_MODEL_DIR=DIR alone: DIR/decision.json is the decision (its display beside it
    follows, workers/display/loader.py load_display); a named decision always wins."""
    shipped = load_settings().decision.decision_params
    d = _model_folder(tmp_path)
    monkeypatch.setenv("DIALCHECK_NLI_MODEL_DIR", str(d))
    monkeypatch.delenv("DIALCHECK_DECISION_PARAMS", raising=False)
    s = load_settings()
    assert s.decision.decision_params == str(d / "decision.json") != shipped
    assert "DIALCHECK_DECISION_PARAMS" not in s.env()  # a child given env() resolves it the same way
    # another model dir given later: its own decision, or the shipped one when it has none
    assert s.updated(models={"nli_model_dir": str(tmp_path)}).decision.decision_params == shipped
    assert load_settings(models={"nli_model_dir": str(tmp_path)}).decision.decision_params == shipped
    # named, in the environment or passed in: kept, even the shipped path beside an adopted model
    named = s.updated(decision={"decision_params": shipped})
    assert named.decision.decision_params == shipped
    assert named.updated(models={"nli_model_dir": str(d)}).decision.decision_params == shipped
    monkeypatch.setenv("DIALCHECK_DECISION_PARAMS", shipped)
    assert load_settings().decision.decision_params == shipped
    # a child process given env() decides the same
    assert load_settings().env()["DIALCHECK_DECISION_PARAMS"] == shipped


def test_the_shipped_model_dir_keeps_the_shipped_decision(monkeypatch):
    monkeypatch.delenv("DIALCHECK_NLI_MODEL_DIR", raising=False)
    monkeypatch.delenv("DIALCHECK_DECISION_PARAMS", raising=False)
    s = load_settings()
    assert s.decision.decision_params.endswith("workers/decision/params/decision.json")


BROKER_LISTS = [
    ("h1:9092", None), ("h1:9092, kafka://h2:9093;kafkas://h3", None), ("kafka://u:p%40ss@h:1/", None),
    ("kafkas://u:p@h1,kafkas://u:p@h2", None), ("", None),
    ("http://h:1", "expected host:port"), ("u:secret-pw@h:1", "credentials need the scheme"),
    ("kafka://u@h:1", "both a user and a password"), ("kafka://", "expected host:port"),
    ("kafka://u:secret-pw@h1,kafka://v:q@h2", "different credentials"), ("kafkas://h1,kafka://u:p@h2", "different"),
]


@pytest.mark.parametrize("value,error", BROKER_LISTS)
def test_a_bad_broker_url_is_refused_at_load_as_the_streams_parser_refuses_it(value, error):
    """The form KafkaSettings checks at load (schemas/settings/kafka.py) and the parser the clients'
    options come from (streams/kafka_config.py) accept and refuse the same lists; the refusal is one
    line naming the variable, without the password."""
    from streams.kafka_config import parse_bootstrap

    if error is None:
        assert load_settings(kafka={"bootstrap": value}).kafka.bootstrap == value
        parse_bootstrap(value)
        return
    with pytest.raises(SettingsInvalid) as e:
        load_settings(kafka={"bootstrap": value})
    msg = str(e.value)
    assert "DIALCHECK_KAFKA_BOOTSTRAP" in msg and error in msg and "secret-pw" not in msg and "\n" not in msg
    with pytest.raises(ValueError):
        parse_bootstrap(value)
