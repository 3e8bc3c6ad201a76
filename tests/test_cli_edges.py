"""Edges a new user meets before any model loads: a misspelt command is named (not its first
option), a misspelt DIALCHECK_* variable is warned about with the setting meant, and the worker
says that its /metrics port is taken before it spends ~15 s loading the checker."""
from __future__ import annotations

import io
import socket

import pytest

from dialcheck.cli import main
from schemas.settings import SECTIONS, load_settings
from schemas.settings.base import variable_names, warn_unknown_variables

pytestmark = pytest.mark.unit

SETTINGS = [n for cls in SECTIONS.values() for n in variable_names(cls)]


def _main(argv) -> int:
    try:
        return main(list(argv))
    except SystemExit as e:
        return e.code


@pytest.mark.parametrize("argv, line", [
    (["chek", "--claim", "x"], "dialcheck: unknown command 'chek' (did you mean 'check'?)"),
    (["--debug", "wroker"], "dialcheck: unknown command 'wroker' (did you mean 'worker'?)"),
    (["tune", "fitt"], "dialcheck: tune: unknown command 'fitt' (did you mean 'fit'?)"),
    (["zzzz"], "dialcheck: unknown command 'zzzz' (--help lists them)"),
])
def test_a_misspelt_command_is_named_not_its_options(argv, line, capsys):
    assert _main(argv) == 2
    assert capsys.readouterr().err == line + "\n"


def test_a_known_command_with_a_misspelt_option_still_names_the_option(capsys):
    assert _main(["check", "--claimm", "x"]) == 2
    assert capsys.readouterr().err.startswith("dialcheck: check: unknown option --claimm (did you mean --claim?)")


def test_a_misspelt_variable_is_warned_once_with_the_setting_meant():
    env = {"DIALCHECK_METRICS_PROT": "9999", "DIALCHECK_SURFACE": "r0", "PATH": "/bin",
           "DIALCHECK_TEST_STREAM_PIPELINE": "x", "DIALCHECK_ZQXV": "1"}
    out, warned = io.StringIO(), set()
    lines = warn_unknown_variables(SETTINGS, env, out, warned)
    assert out.getvalue().splitlines() == lines == [
        "dialcheck: warning: DIALCHECK_METRICS_PROT is not a setting and is ignored "
        "(did you mean DIALCHECK_METRICS_PORT?)",
        "dialcheck: warning: DIALCHECK_ZQXV is not a setting and is ignored (`dialcheck config` lists the settings)"]
    assert warn_unknown_variables(SETTINGS, env, out, warned) == []  # once per process


def test_load_settings_warns_on_stderr_and_keeps_going(monkeypatch, capsys):
    monkeypatch.setenv("DIALCHECK_NLI_MODEL_DIRR", "/nowhere")
    settings = load_settings()
    err = capsys.readouterr().err
    assert "DIALCHECK_NLI_MODEL_DIRR is not a setting and is ignored (did you mean DIALCHECK_NLI_MODEL_DIR?)" in err
    assert settings.models.nli_model_dir != "/nowhere"


def test_the_worker_says_its_metrics_port_is_taken_before_loading(monkeypatch, capsys):
    """A real listening socket holds the port; the worker must stop before load_checker."""
    import dialcheck.wiring

    def no_loading(*args, **kwargs):
        raise AssertionError("the checker was loaded before the port was checked")

    monkeypatch.setattr(dialcheck.wiring, "load_checker", no_loading)
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        monkeypatch.setenv("DIALCHECK_METRICS_PORT", str(port))
        assert _main(["worker"]) == 2
    assert capsys.readouterr().err == (f"dialcheck: port 127.0.0.1:{port} is in use: set DIALCHECK_METRICS_PORT "
                                       "to another port (0: any free one) or stop what holds it\n")


@pytest.mark.parametrize("value, line", [
    ("{tmp}/nope.sqlite3", "dialcheck: --from-feedback: no feedback store at {tmp}/nope.sqlite3 "
                           "(import labels with `dialcheck feedback import`)"),
    ("off", "dialcheck: --from-feedback: the feedback store is off (DIALCHECK_FEEDBACK_STORE=off): name one with --store"),
])
def test_calibrate_reads_the_feedback_store_from_the_settings(value, line, tmp_path, monkeypatch, capsys):
    """The store's one default is the stream settings' `feedback_store` (DIALCHECK_FEEDBACK_STORE)."""
    monkeypatch.setenv("DIALCHECK_FEEDBACK_STORE", value.format(tmp=tmp_path))
    assert _main(["calibrate", "--from-feedback", "--out", str(tmp_path / "display.json")]) == 2
    assert capsys.readouterr().err == line.format(tmp=tmp_path) + "\n"
