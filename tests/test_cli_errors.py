"""Everyday mistakes give one line on stderr and a non-zero exit; bugs keep their traceback.

Each case really runs (`main()` in this process): a file that is not there, malformed input, a
broker and a Triton that do not answer (port 9 on loopback: nothing listens there), no broker
at all, a bad setting, a misspelt source, surface or choice, a zero count. One style for all: one `dialcheck: ...` line on stderr, exit 2. docs/cli.md's "Everyday mistakes" table is generated
from these cases (`python tests/test_cli_errors.py`), and a test checks that it still matches.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dialcheck.cli import main  # noqa: E402

FILES = {
    "bad.jsonl": '{"id": "1", "context": ["a"], "response": "b", "response_label": "SUPPORTS"}\n{"id": 2, "context": [\n',
    "bad.json": '{"claim": "x",}',
}
# (what the user did, argv, environment, exit code)
CASES = [
    ("`--data` file missing", ["eval", "--data", "missing.jsonl"], {}, 2),
    ("malformed JSONL", ["eval", "--data", "bad.jsonl"], {}, 2),
    ("malformed `--file`", ["check", "--file", "bad.json"], {}, 2),
    ("broker does not answer", ["replay", "--broker", "127.0.0.1:9"], {"DIALCHECK_BROKER_WAIT_S": "1"}, 2),
    ("no broker configured", ["verdicts"], {}, 2),
    ("no broker configured (replay)", ["replay"], {}, 2),
    ("no broker configured (page)", ["ui"], {}, 2),
    ("`--limit` without `--gold`", ["verdicts", "--limit", "5"], {}, 2),
    ("Triton does not answer", ["check", "--models", "triton://127.0.0.1:9", "--protocol", "fv", "--evidence",
                                "Paris is the capital of France.", "--claim", "Paris is in France."], {}, 2),
    ("unknown model backend", ["check", "--models", "bogus", "--claim", "x"], {}, 2),
    ("unknown surface", ["check", "--surface", "r9", "--claim", "x"], {}, 2),
    ("unknown eval surface", ["eval", "--surfaces", "r0,r9"], {}, 2),
    ("fv without evidence", ["check", "--protocol", "fv", "--claim", "He was born in Tupelo."], {}, 2),
    ("misspelt choice", ["check", "--protocol", "fw", "--claim", "x"], {}, 2),
    ("not a number", ["eval", "--limit", "ten"], {}, 2),
    ("misspelt source", ["index", "build", "--sources", "dialfct"], {}, 2),
    ("own corpus, no file", ["index", "build", "--sources", ""], {}, 2),
    ("`--data-dir` missing", ["nli", "quantize", "--data-dir", "missing-dir"], {}, 2),
    ("`--limit 0`", ["eval", "--limit", "0"], {}, 2),
    ("`--records 0`", ["replay", "--records", "0", "--broker", "127.0.0.1:9"], {}, 2),
    ("no claim", ["check"], {}, 2),
    ("misspelt option", ["check", "--claimm", "x is y"], {}, 2),
    ("misspelt command", ["chek", "--claim", "x is y"], {}, 2),
    ("NLI model dir missing", ["check", "--claim", "x is y"], {"DIALCHECK_NLI_MODEL_DIR": "/nonexistent"}, 2),
    ("index dir is a file", ["check", "--claim", "x is y"], {"DIALCHECK_INDEX_DIR": "bad.json"}, 2),
    ("decision file missing", ["check", "--claim", "x is y"], {"DIALCHECK_DECISION_PARAMS": "decision.json"}, 2),
    ("data mirror down", ["data", "fetch", "dialfact", "--dir", "fetched"],
     {"DIALCHECK_DATA_BASE_URL": "http://127.0.0.1:9"}, 2),
]


def _main(argv) -> int:
    """main() as the console script sees it: argparse's own errors end in SystemExit."""
    try:
        return main(list(argv))
    except SystemExit as e:
        return e.code


def run_case(argv, env, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.delenv("DIALCHECK_KAFKA_BOOTSTRAP", raising=False)  # "no broker configured" means none
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    code = _main(argv)
    return code, capsys.readouterr().err


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("what,argv,env,code", CASES, ids=[c[0] for c in CASES])
def test_everyday_mistake_is_one_line(what, argv, env, code, workdir, monkeypatch, capsys):
    got, err = run_case(argv, env, monkeypatch, capsys)
    assert got == code, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dialcheck: "), err
    assert "Traceback" not in err


def test_broker_message_names_the_address(workdir, monkeypatch, capsys):
    _, err = run_case(["replay", "--broker", "127.0.0.1:9"], {"DIALCHECK_BROKER_WAIT_S": "1"}, monkeypatch, capsys)
    assert "127.0.0.1:9" in err and "waited 1 s" in err


def test_broker_credentials_are_masked(workdir, monkeypatch, capsys):
    _, err = run_case(["replay", "--broker", "kafka://user:s3cret@127.0.0.1:9"], {"DIALCHECK_BROKER_WAIT_S": "1"},
                      monkeypatch, capsys)
    assert "s3cret" not in err and "127.0.0.1:9" in err


def test_a_misspelt_option_is_named_with_the_one_meant(workdir, monkeypatch, capsys):
    """argparse alone hands "x is y" to the positional and says "invalid choice: 'x is y'"."""
    for argv in (["check", "--claimm", "x is y"], ["check", "--claimm"], ["check", "--claim", "x", "--jsno"]):
        _, err = run_case(argv, {}, monkeypatch, capsys)
        assert err.startswith(f"dialcheck: check: unknown option {argv[-1] if argv[-1] != 'x is y' else argv[1]}"), err
    _, err = run_case(["check", "--claimm", "x is y"], {}, monkeypatch, capsys)
    assert "(did you mean --claim?)" in err and "invalid choice" not in err
    _, err = run_case(["data", "fetch", "--bas-url", "http://x"], {}, monkeypatch, capsys)
    assert err.startswith("dialcheck: data fetch: unknown option --bas-url (did you mean --base-url?)"), err


@pytest.mark.parametrize("variable, value, says", [
    ("DIALCHECK_NLI_MODEL_DIR", "/nonexistent", "no such directory"),
    ("DIALCHECK_NLI_TORCH_DIR", "/nonexistent", "no such directory"),
    ("DIALCHECK_INDEX_DIR", "bad.json", "not a directory"),
    ("DIALCHECK_DECISION_PARAMS", "decision.json", "no such file"),
    ("DIALCHECK_DISPLAY_PARAMS", ".", "not a file"),
])
def test_a_path_setting_is_checked_when_the_settings_load(variable, value, says, workdir, monkeypatch, capsys):
    """Before: a missing NLI dir was a 60-line traceback from the Hugging Face hub's repo-id check."""
    code, err = run_case(["config"], {variable: value}, monkeypatch, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"dialcheck: invalid setting {variable}: {says}") and f"(got {value!r})" in err, err


def test_a_fetch_that_cannot_connect_is_whole_and_names_the_mirror_setting(workdir, monkeypatch, capsys):
    """The line used to end mid-word at 200 characters of urllib3's pool repr."""
    code, err = run_case(["data", "fetch", "dialfact", "--dir", "fetched"], {"DIALCHECK_DATA_BASE_URL": "http://127.0.0.1:9"},
                         monkeypatch, capsys)
    assert code == 2 and err.count("\n") == 1, err
    assert "127.0.0.1 refused the connection" in err and "DIALCHECK_DATA_BASE_URL" in err
    assert err.rstrip().endswith("or copy the files into fetched"), err
    from dialcheck.commands.data import download_reason
    import requests

    try:
        requests.get("http://no-such-host.invalid/x", timeout=5)
    except requests.RequestException as e:
        assert download_reason(e) == "no-such-host.invalid could not be resolved (no network or DNS)"


def test_debug_shows_the_traceback(workdir):
    with pytest.raises(FileNotFoundError):
        main(["--debug", "eval", "--data", "missing.jsonl"])


def test_a_bug_keeps_its_traceback(workdir, monkeypatch):
    """A FileNotFoundError for a file the user did not name is not their mistake."""
    import dialcheck.commands.index as index_cmd

    def broken(args):
        open("some-internal-file-that-is-not-there.bin")

    monkeypatch.setattr(index_cmd, "run_build", broken)
    with pytest.raises(FileNotFoundError):
        main(["index", "build"])


def readme_rows(cases=CASES) -> list[str]:
    """Markdown rows: what → command → the line the user sees (run for real)."""
    import contextlib
    import io
    import os
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as d:
        for name, text in FILES.items():
            Path(d, name).write_text(text)
        cwd = os.getcwd()
        os.chdir(d)
        try:
            for what, argv, env, _ in cases:
                old = {k: os.environ.get(k) for k in env}
                os.environ.update(env)
                err = io.StringIO()
                with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                    code = _main(argv)
                for k, v in old.items():
                    os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
                prefix = " ".join(f"{k}={v}" for k, v in env.items())
                cmd = " ".join(["dialcheck", *[a if a and " " not in a else repr(a) for a in argv]])
                line = err.getvalue().strip().replace("|", "\\|")
                rows.append(f"| {what} | `{(prefix + ' ' if prefix else '') + cmd}` | `{line}` | {code} |")
        finally:
            os.chdir(cwd)
    return rows


def test_readme_table_matches_what_users_see():
    readme = (REPO / "docs" / "cli.md").read_text()  # the table moved from README.md (the README is an entry point)
    missing = [r for r in readme_rows([c for c in CASES if c[0] != "Triton does not answer"]) if r not in readme]
    assert not missing, "docs/cli.md 'Everyday mistakes' is stale; regenerate with python tests/test_cli_errors.py:\n" + "\n".join(missing)


if __name__ == "__main__":
    print("| mistake | command | what the user sees (stderr) | exit |\n|---|---|---|---|")
    print("\n".join(readme_rows()))


@pytest.mark.parametrize("argv, option", [
    (["ui", "--broker", "127.0.0.1:9", "--port", "{port}"], "--port"),
    (["demo", "--ui", "--ui-port", "{port}", "--records", "1"], "--ui-port"),
    (["serve-models", "--http-port", "{port}"], "--http-port"),
])
def test_a_busy_port_is_one_line(argv, option, capsys):
    """A real listening socket holds the port; each command says so in one line before it waits
    for a broker, loads a model or starts tritonserver."""
    import socket

    from dialcheck.cli import main

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert main([a.format(port=port) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err == (f"dialcheck: port 127.0.0.1:{port} is in use: pass {option} with another port "
                   "(0: any free one) or stop what holds it\n")
