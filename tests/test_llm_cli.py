"""`dialcheck eval --surfaces r0,r4g,r5g` end to end against the local LLM stand-in
(tests/llm_standin.py: a protocol stand-in, not a model), and `dialcheck config` listing the LLM
settings with the key masked."""
from __future__ import annotations

import json

import pytest

from dialcheck.cli import main
from tests.llm_standin import LLMStandIn

KEY = "sk-cli-Secret-51a2b3"


@pytest.mark.model
def test_eval_with_r5g_writes_a_run_file(tmp_path, monkeypatch, capsys, data_dir):
    out = tmp_path / "run.jsonl"
    with LLMStandIn(api_key=KEY) as llm:
        monkeypatch.setenv("DIALCHECK_LLM_URL", llm.url)
        monkeypatch.setenv("DIALCHECK_LLM_API_KEY", KEY)
        assert main(["eval", "--protocol", "fv", "--surfaces", "r0,r4g,r5g", "--limit", "4", "--output", str(out),
                     "--json"]) == 0
        asked = [r for r in llm.requests if r["path"] == "/v1/chat/completions"]
    result = json.loads(capsys.readouterr().out)
    assert set(result["surfaces"]) == {"r0", "r4g", "r5g"} and result["records"] == 4
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12 and KEY not in out.read_text()
    r5g = [r for r in rows if r["surface_mode"] == "r5g"]
    assert len(asked) == 4 and all(r["status"]["state"] == "ok" for r in r5g)
    # every r5g claim was sent to the LLM; where the gate accepted the rewrite it is the surface, elsewhere the
    # r5g row is the r4g row (the R4 path)
    replies = {r["body"]["messages"][-1]["content"].split("Reply: ")[1].rsplit("\nRewrite:")[0] for r in asked}
    assert replies == {r["claim"] for r in r5g}
    r4g = {r["record_id"]: r for r in rows if r["surface_mode"] == "r4g"}
    for r in r5g:
        s = r["surface"]
        if s["candidate"] == "r5":
            assert s["name"] == "r5g" and s["gate"]["accepted"] and s["text"].startswith("Elvis Aaron Presley's")
        else:
            assert (s, r["label"]) == (r4g[r["record_id"]]["surface"], r4g[r["record_id"]]["label"])

@pytest.mark.model
def test_eval_with_the_llm_down_still_scores_every_record(tmp_path, monkeypatch, capsys, data_dir):
    from streams.processes import free_port

    monkeypatch.setenv("DIALCHECK_LLM_URL", f"http://127.0.0.1:{free_port()}/v1")
    monkeypatch.setenv("DIALCHECK_LLM_RETRIES", "0")
    out = tmp_path / "run.jsonl"
    assert main(["eval", "--protocol", "fv", "--surfaces", "r5g", "--limit", "3", "--output", str(out), "--json"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 3 and all(r["status"]["state"] == "degraded" for r in rows)
    assert all("R5 rewrite unavailable, R4 path used" in r["status"]["reason"] for r in rows)


@pytest.mark.unit
def test_config_lists_the_llm_settings_with_the_key_masked(monkeypatch, capsys):
    monkeypatch.setenv("DIALCHECK_LLM_API_KEY", KEY)
    monkeypatch.setenv("DIALCHECK_LLM_URL", "https://user:url-Secret-9@llm.example:8000/v1")
    assert main(["config"]) == 0
    text = capsys.readouterr().out
    for field in ("llm.url", "llm.model", "llm.api_key", "llm.timeout_s", "llm.retries", "llm.max_tokens",
                  "llm.concurrency", "llm.edit", "DIALCHECK_LLM_API_KEY"):
        assert field in text, field
    assert KEY not in text and "url-Secret-9" not in text and "https://***@llm.example:8000/v1" in text


@pytest.mark.unit
@pytest.mark.parametrize("argv, says", [
    (["llm"], "llm: the following arguments are required: {serve,yardstick}"),
    (["llm", "yardstick", "--claims", "0", "--judge-claims", "0"], "--claims and --judge-claims must be 0 or more"),
    (["llm", "yardstick", "--data", "/nonexistent/dialfact.jsonl"], "/nonexistent/dialfact.jsonl: "),
    (["llm", "serve", "--port", "{busy}"], "is in use: pass --port"),
])
def test_llm_command_mistakes_are_one_line(argv, says, capsys):
    """`dialcheck llm` mistakes: one `dialcheck: …` line, exit 2, before any model loads."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen(1)
        argv = [a.replace("{busy}", str(held.getsockname()[1])) for a in argv]
        try:
            code = main(argv)
        except SystemExit as e:  # argparse's own errors exit
            code = e.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("dialcheck: ") and says in err[0], err
