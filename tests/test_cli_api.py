"""`POST /check` (dialcheck serve-api, dialcheck/api.py): one verdict without Kafka.

The request rules are the stream's for a turn (parse_turn's limits), tested on the pure parser;
then a real server (a `dialcheck serve-api` child on a free loopback port, the real NLI model)
answers a claim with a verdict that validates against the verdict schema, refuses hostile input in
one JSON error, binds 127.0.0.1 by default, and never shows a planted secret in a response: its
search backend is an OpenSearch URL with a password where nothing listens (the outage that once
leaked it into a status reason). `dialcheck check --server` prints what a local check prints."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from dialcheck.api import BadRequest, Limits, parse_request
from schemas.items import GivenPassage

LIMITS = Limits(max_text_chars=50, max_body_bytes=2000, max_context_turns=3)


def _bad(body, protocol="e2e") -> BadRequest:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    with pytest.raises(BadRequest) as e:
        parse_request(raw, LIMITS, protocol)
    return e.value


@pytest.mark.unit
def test_a_request_is_read_like_a_turn():
    item = parse_request(json.dumps({"claim": "Paris is\u200b the capital of ﬀrance.", "context": ["Where is Paris?"]}).encode(),
                         LIMITS, "e2e")
    assert item.claim == "Paris is the capital of ffrance." and item.context == ["Where is Paris?"]  # NFKC, invisibles out
    assert item.gold_evidence is None and item.conversation_id == "api"
    fv = parse_request(json.dumps({"claim": "x is y", "evidence": ["x is y."]}).encode(), LIMITS, "fv")
    assert fv.gold_evidence == [GivenPassage("x is y.")]


@pytest.mark.unit
@pytest.mark.parametrize("body, status, code, says", [
    (b"{not json", 400, "malformed_json", "malformed JSON"),
    (b'{"claim": "a", "claim": "b"}', 400, "malformed_json", "duplicate JSON key"),
    (b"[" * 100 + b"]" * 100, 400, "malformed_json", "nested too deep"),
    (b"\xff\xfe", 400, "invalid_utf8", "invalid UTF-8"),
    (["a claim"], 400, "schema", "expected a JSON object"),
    ({"claim": "x", "admin": True}, 400, "schema", "unknown field 'admin'"),
    ({"context": ["a"]}, 400, "schema", "no claim"),
    ({"claim": 42}, 400, "schema", "claim must be a string"),
    ({"claim": "\u200b\u2800 "}, 400, "empty_text", "claim: empty text"),
    ({"claim": "x" * 51}, 413, "too_large", "claim: text too long: 51 > 50"),
    ({"claim": "x" * 1990}, 413, "too_large", "body too large"),
    ({"claim": "x", "context": "a"}, 400, "schema", "context must be a list"),
    ({"claim": "x", "context": ["a", "b", "c", "d"]}, 413, "too_large", "context has 4 turns > 3"),
    ({"claim": "x", "context": ["a", None]}, 400, "schema", "context[1] must be a string"),
    ({"claim": "x", "evidence": "e"}, 400, "schema", "evidence must be a list of passages"),
    ({"claim": "x", "evidence": [{"text": "e", "colour": 1}]}, 400, "schema", "evidence[0]: unknown key 'colour'"),
    ({"claim": "x", "conversation_id": ""}, 400, "invalid_field", "conversation_id"),
])
def test_hostile_input_is_one_clear_error(body, status, code, says):
    e = _bad(body)
    assert (e.status, e.code) == (status, code) and says in e.message, e.message
    assert "\n" not in e.message and len(e.message) < 300


@pytest.mark.unit
def test_an_fv_server_asks_for_evidence():
    assert "add \"evidence\"" in _bad({"claim": "x"}, "fv").message


@pytest.mark.unit
def test_serve_api_binds_loopback_by_default():
    from dialcheck.cli import build_parser

    args = build_parser().parse_args(["serve-api"])
    assert args.host == "127.0.0.1" and args.protocol == "e2e"


# ---- a real server ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from tests.test_secrets import planted_env

    log = tmp_path_factory.mktemp("api") / "api.log"
    env = planted_env(DIALCHECK_SEARCH="opensearch", DIALCHECK_MODELS="local")  # local models, the search secret planted
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dialcheck.cli", "serve-api", "--port", "0"],
                                env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while "dialcheck api at" not in log.read_text():
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        line = next(ln for ln in log.read_text().splitlines() if ln.startswith("dialcheck api at"))
        yield line.split()[3], log
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.model
def test_a_real_server_answers_with_a_verdict_and_refuses_hostile_input_without_leaking(server):
    import requests

    from schemas.wire import validate
    from tests.test_secrets import leaks

    url, log = server
    assert url.startswith("http://127.0.0.1:")
    r = requests.post(f"{url}/check", json={"claim": "The Eiffel Tower was completed in 1889.",
                                            "context": ["When was the Eiffel Tower finished?"]}, timeout=600)
    assert r.status_code == 200, r.text
    verdict = r.json()
    validate("verdict", verdict)
    assert verdict["claim"] == "The Eiffel Tower was completed in 1889."
    assert verdict["status"]["state"] in ("degraded", "error")  # the search backend does not answer
    assert not leaks(r.text), leaks(r.text)
    for body in (b"{", b'{"claim": ""}', json.dumps({"claim": "x" * 5000}).encode(), b"x" * 300_000):
        bad = requests.post(f"{url}/check", data=body, headers={"Content-Type": "application/json"}, timeout=60)
        assert bad.status_code in (400, 413) and set(bad.json()) == {"error", "code"}, bad.text
        assert not leaks(bad.text)
    assert requests.get(f"{url}/check", timeout=10).status_code == 405
    assert requests.get(f"{url}/healthz", timeout=10).json()["ok"] is True
    assert not leaks(log.read_text())


@pytest.mark.model
def test_check_server_prints_what_a_local_check_prints(server, capsys):
    from dialcheck.cli import main
    from tests.test_secrets import leaks

    url, _ = server
    assert main(["check", "--server", url, "--claim", "Paris is the capital of France.", "--format", "json"]) == 0
    out = capsys.readouterr().out
    v = json.loads(out)
    assert v["claim"] == "Paris is the capital of France." and not leaks(out)
    assert main(["check", "--server", url, "--claim", "x" * 5000]) == 2
    assert "the server refused the claim (HTTP 413)" in capsys.readouterr().err


@pytest.mark.model
def test_a_grounded_request_and_check_evidence_objects_get_source_and_claim_span(server, capsys):
    """One contract everywhere (grounded turns): evidence objects through the CLI to the same server, checked
    against the passage given (its search backend is down: no retrieval), its url and source kept."""
    from dialcheck.cli import main

    url, _ = server
    passage = json.dumps({"text": "Elvis Presley was born on January 8, 1935, in Tupelo, Mississippi.",
                          "url": "https://help.example.com/elvis", "id": "kb-1"})
    assert main(["check", "--server", url, "--claim", "Elvis was born in 1942.", "--evidence", passage,
                 "--format", "json"]) == 0
    v = json.loads(capsys.readouterr().out)
    assert v["label"] == "REFUTES" and v["status"]["state"] == "ok"
    assert [(e["passage_id"], e["url"], e["source"]) for e in v["evidence"]][0] == ("kb-1", "https://help.example.com/elvis", "turn")
    assert v["claim_span"] == {"start": 0, "end": len("Elvis was born in 1942.")}
    assert main(["check", "--server", url, "--claim", "x", "--evidence", '{"title": "no text"}']) == 2
    assert "--evidence: evidence[0]: an object passage needs \"text\"" in capsys.readouterr().err


@pytest.mark.unit
def test_check_server_that_does_not_answer_is_one_line(capsys):
    from dialcheck.cli import main

    assert main(["check", "--server", "http://127.0.0.1:9", "--claim", "x is y"]) == 2
    err = capsys.readouterr().err
    assert err == ("dialcheck: no dialcheck api answers at http://127.0.0.1:9: 127.0.0.1 refused the connection "
                   "(start one with `dialcheck serve-api`)\n")


@pytest.mark.unit
def test_verdicts_all_answers_every_claims_verdict_as_the_stream_publishes():
    """POST /check?verdicts=all: each claim's verdict (with its claim_span) and then the reply's own, the
    same list `Checker.check_turn` gives and the stream publishes; the default stays the reply's verdict."""
    import asyncio
    from types import SimpleNamespace

    from aiohttp.test_utils import TestClient, TestServer

    from dialcheck.api import create_app
    from schemas.settings import load_settings
    from tests.test_python_api import _TwoClaims

    settings = load_settings()
    pipe = _TwoClaims(settings)
    pipe.scrub = SimpleNamespace(verdict=lambda v: v)
    reply = "The plan costs $10. It includes phone support."

    async def ask():
        async with TestClient(TestServer(create_app(pipe, settings, "e2e"))) as client:
            body = {"claim": reply, "evidence": ["The Basic plan costs $10 a month."]}
            every = await (await client.post("/check?verdicts=all", json=body)).json()
            own = await (await client.post("/check", json=body)).json()
            wrong = await client.post("/check?verdicts=some", json=body)
            return every, own, wrong.status

    every, own, status = asyncio.run(ask())
    assert [(v["claim_span"]["start"], v["claim_span"]["end"]) for v in every["verdicts"]] == [
        (0, 19), (20, len(reply)), (0, len(reply))]
    assert own["claim"] == reply and own["claim_span"] == {"start": 0, "end": len(reply)} and status == 400
