"""R5 (the one-shot LLM rewrite offered to BiCon-Gate) and the OpenAI-compatible client, against
the local protocol stand-in (tests/llm_standin.py: a server, not a model) and the real NLI model
and encoder. What must hold: the rewrite is used when the gate accepts it, the R4 path stands when
the gate or the checks reject it or the LLM is down/slow/broken (with the outage in the verdict's
status), nothing is dropped, and the API key appears in no verdict and no log line."""
from __future__ import annotations

import json
import logging

import pytest

from schemas import validate
from schemas.items import CheckItem
from schemas.protocols import LLM, LLMUnavailable
from streams.processes import free_port
from tests.llm_standin import LLMStandIn
from workers.llm import r5
from workers.llm.client import OpenAICompatibleLLM
from workers.pipeline import Pipeline
from schemas.protocols import turn_verdicts

KEY = "sk-standin-Secret-7f3a9c"
CONTEXT = ["I love Elvis Presley."]
EVIDENCE = [("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi.")]
ACCEPTED = "He was born in Tupelo"  # fixture: a faithful rewrite
REJECTED = "He grew up in Tupelo"  # fixture: a rewrite that contradicts the claim (passes the checks)
REFUSED = "He moved to Memphis later"  # fixture: a rewrite naming Tennessee and 1948 (in neither text)
UNKNOWN = "He had a twin brother"  # no fixture: the stand-in echoes it (R5 unchanged)


@pytest.fixture(scope="module")
def standin():
    with LLMStandIn(api_key=KEY) as s:
        yield s


@pytest.fixture(autouse=True)
def _reset(standin):
    standin.reset()
    r5_caches_clear()


def r5_caches_clear():
    from workers.llm import stages

    stages._R5_CACHES.clear()


def items(*claims):
    return [CheckItem("conv", str(i), list(CONTEXT), c, list(EVIDENCE)) for i, c in enumerate(claims)]


# These tests are about routing (accepted → the rewrite, rejected → the R4 path), not about where τ_FV
# sits for a given NLI model: they pin the paper's τ_FV 0.70. With NLI v3 the faithful rewrite below
# scores 0.79 (0.88 with the model before), under the shipped 0.80, and the contradicting one ~0.2.
TAU_FV = 0.70


def pipe(settings, nli, encoder, surface, **llm):
    return Pipeline(settings.updated(llm=llm, gate={"tau_fv": TAU_FV}), nli, encoder, None, "fv", surface)


def chats(standin):
    return [r for r in standin.requests if r["path"] == "/v1/chat/completions"]


# ---- the client ---------------------------------------------------------------------------------
@pytest.mark.unit
def test_client_speaks_the_openai_protocol(settings, standin):
    llm = OpenAICompatibleLLM(settings.updated(llm={"url": standin.url, "api_key": KEY, "concurrency": 3}).llm)
    assert isinstance(llm, LLM)
    assert llm.model == "dialcheck-standin-rewriter"  # no model configured: the first of /v1/models
    replies = llm.complete_many([r5.prompt(CONTEXT, c) for c in (ACCEPTED, REJECTED, UNKNOWN)])
    assert replies == ["Elvis Presley was born in Tupelo.", "Elvis Presley never lived in Tupelo.", UNKNOWN]
    sent = chats(standin)
    assert len(sent) == 3 and all(r["authorization"] == f"Bearer {KEY}" for r in sent)
    body = sent[0]["body"]
    assert body["model"] == "dialcheck-standin-rewriter" and body["temperature"] == 0
    assert body["max_tokens"] == settings.llm.max_tokens and [m["role"] for m in body["messages"]] == \
        ["system", "user", "assistant", "user"]


@pytest.mark.unit
def test_client_declares_each_failure_and_retries_a_bounded_number_of_times(settings, standin):
    base = {"url": standin.url, "api_key": KEY, "model": "dialcheck-standin-rewriter", "timeout_s": 0.5}
    standin.mode = "error"  # HTTP 503: retried
    got = OpenAICompatibleLLM(settings.updated(llm={**base, "retries": 2}).llm).complete_many([r5.prompt([], "x")])
    assert isinstance(got[0], LLMUnavailable) and "HTTP 503 (3 attempts)" in str(got[0])
    assert len(chats(standin)) == 3
    standin.requests.clear()
    standin.mode = "garbage"  # 200 without choices: not retried, declared
    got = OpenAICompatibleLLM(settings.updated(llm={**base, "retries": 2}).llm).complete_many([r5.prompt([], "x")])
    assert isinstance(got[0], LLMUnavailable) and "choices" in str(got[0]) and len(chats(standin)) == 1
    standin.mode = "ok"  # a wrong model name: 404, not retried, the server's message kept
    got = OpenAICompatibleLLM(settings.updated(llm={**base, "model": "nope"}).llm).complete_many([r5.prompt([], "x")])
    assert isinstance(got[0], LLMUnavailable) and "HTTP 404" in str(got[0]) and "does not exist" in str(got[0])


# ---- R5 through the gate --------------------------------------------------------------------------
@pytest.mark.model
def test_r5g_uses_the_rewrite_the_gate_accepts(settings, nli, encoder, standin):
    v = turn_verdicts(pipe(settings, nli, encoder, "r5g", url=standin.url, api_key=KEY).check_turns(items(ACCEPTED)))[0]
    assert v.surface.name == "r5g" and v.surface.text == "Elvis Presley was born in Tupelo."
    assert v.surface.candidate == "r5" and v.surface.gate.accepted and v.surface.gate.score >= v.surface.gate.threshold
    assert v.status.state == "ok" and v.rationale["r5"]["outcome"] == "accepted"
    assert v.rationale["r5"]["model"] == "dialcheck-standin-rewriter"
    validate("verdict", v.to_dict())


@pytest.mark.model
def test_rejected_or_refused_rewrites_leave_the_r4_path(settings, nli, encoder, standin):
    claims = items(REJECTED, REFUSED, UNKNOWN)
    r4g = turn_verdicts(pipe(settings, nli, encoder, "r4g").check_turns(claims))
    got = turn_verdicts(pipe(settings, nli, encoder, "r5g", url=standin.url, api_key=KEY).check_turns(claims))
    assert len(got) == 3
    for a, b in zip(r4g, got):  # exactly what r4g checks and decides
        assert (b.surface.name, b.surface.text, b.label, b.status.state) == \
            (a.surface.name, a.surface.text, a.label, "ok")
    rejected, refused, unchanged = (v.rationale["r5"] for v in got)
    assert rejected["outcome"] == "rejected" and rejected["text"] == "Elvis Presley never lived in Tupelo."
    assert rejected["gate_score"] < rejected["tau_fv"]
    assert refused["outcome"] == "refused" and "Tennessee" in refused["reason"] and "1948" in refused["reason"]
    assert unchanged["outcome"] == "unchanged"


@pytest.mark.model
def test_ungated_r5_uses_any_rewrite_that_passes_the_checks(settings, nli, encoder, standin):
    r4 = turn_verdicts(pipe(settings, nli, encoder, "r4").check_turns(items(REFUSED)))[0]
    a, b = turn_verdicts(pipe(settings, nli, encoder, "r5", url=standin.url, api_key=KEY).check_turns(items(REJECTED, REFUSED)))
    assert (a.surface.name, a.surface.text) == ("r5", "Elvis Presley never lived in Tupelo.")  # why R5 needs the gate
    assert (b.surface.name, b.surface.text) == (r4.surface.name, r4.surface.text)


@pytest.mark.model
@pytest.mark.parametrize("how", ["down", "slow", "error", "unconfigured"])
def test_llm_outage_takes_the_r4_path_with_a_degraded_status(settings, nli, encoder, standin, how):
    llm = {"url": standin.url, "api_key": KEY, "model": "dialcheck-standin-rewriter", "timeout_s": 0.5, "retries": 1}
    if how == "down":
        llm["url"] = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    elif how == "slow":
        standin.mode, standin.delay_s = "slow", 5.0
    elif how == "error":
        standin.mode = "error"
    else:
        llm = {"url": ""}
    claims = items(ACCEPTED, REJECTED)
    r4g = turn_verdicts(pipe(settings, nli, encoder, "r4g").check_turns(claims))
    got = turn_verdicts(pipe(settings, nli, encoder, "r5g", **llm).check_turns(claims))
    assert len(got) == len(claims)  # nothing dropped
    for a, b in zip(r4g, got):
        assert (b.surface.name, b.surface.text, b.label) == (a.surface.name, a.surface.text, a.label)
        assert b.status.state == "degraded" and b.status.reason.startswith("R5 rewrite unavailable, R4 path used")
        assert b.rationale["r5"]["outcome"] == "llm-unavailable"
        assert {"down": "unreachable", "slow": "timed out", "error": "HTTP 503",
                "unconfigured": "no LLM configured"}[how] in b.status.reason
        validate("verdict", b.to_dict())


@pytest.mark.model
def test_api_key_is_in_no_verdict_and_no_log_line(settings, nli, encoder, standin, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "sk-wrong-Secret-c0ffee"  # the server answers 401 and its error names no key
    url_with_password = standin.url.replace("http://", "http://user:url-Secret-pw@")
    verdicts = []
    for key, url in ((KEY, standin.url), (wrong, standin.url), (KEY, url_with_password)):
        verdicts += turn_verdicts(pipe(settings, nli, encoder, "r5g", url=url, api_key=key, retries=0).check_turns(items(ACCEPTED)))
    assert verdicts[0].status.state == "ok"
    assert verdicts[1].status.state == "degraded" and "HTTP 401" in verdicts[1].status.reason
    text = json.dumps([v.to_dict() for v in verdicts]) + caplog.text
    for secret in (KEY, wrong, "url-Secret-pw"):
        assert secret not in text


@pytest.mark.model
def test_rewrites_are_cached_by_context_claim_and_model(settings, nli, encoder, standin):
    p = pipe(settings, nli, encoder, "r5g", url=standin.url, api_key=KEY)
    first = turn_verdicts(p.check_turns(items(ACCEPTED, REJECTED)))
    assert len(chats(standin)) == 2
    again = turn_verdicts(p.with_options(surface="r5").check_turns(items(ACCEPTED, REJECTED)))  # eval's surface loop
    assert len(chats(standin)) == 2 and again[0].surface.text == first[0].surface.text
    other = [CheckItem("conv", "9", ["I love Elvis Costello."], ACCEPTED, list(EVIDENCE))]
    turn_verdicts(p.check_turns(other))  # another context: asked again
    assert len(chats(standin)) == 3


@pytest.mark.unit
def test_checks_refuse_drift(standin):
    sources = [*CONTEXT, ACCEPTED]
    assert r5.check_rewrite('Rewrite: "Elvis Presley was born in Tupelo."', sources, ACCEPTED).text == \
        "Elvis Presley was born in Tupelo."
    assert "sentences" in r5.check_rewrite("Elvis Presley was born in Tupelo. He sang.", sources, ACCEPTED).reason
    assert "Memphis" in r5.check_rewrite("Elvis Presley was born in Memphis.", sources, ACCEPTED).reason
    assert "too long" in r5.check_rewrite("Elvis Presley was born in Tupelo " + "and so on " * 12, sources,
                                          ACCEPTED).reason
    assert r5.check_rewrite("  ", sources, ACCEPTED).text is None


@pytest.mark.unit
def test_a_batch_waits_no_longer_than_its_llm_budget(settings, standin):
    """One request in flight at a time (concurrency 1), a 1 s batch budget, a stand-in that holds its
    answer until released: the batch returns when its budget is spent, while its one request is still
    unanswered; the two requests still queued then are cancelled (never sent, even after the first
    one's answer: a later request, sent after anything still queued, is the second and last one the
    stand-in sees), and every item says why. Ordered by events, not timed."""
    standin.mode = "held"
    llm = OpenAICompatibleLLM(settings.updated(llm={"url": standin.url, "api_key": KEY, "timeout_s": 30,
                                                    "model": "dialcheck-standin-rewriter", "concurrency": 1,
                                                    "batch_timeout_s": 1.0}).llm)
    try:
        got = llm.complete_many([r5.prompt(CONTEXT, ACCEPTED), r5.prompt(CONTEXT, REJECTED),
                                 r5.prompt(CONTEXT, ACCEPTED + " Really.")])
        assert all(isinstance(g, LLMUnavailable) and "no answer within the batch's 1 s" in str(g) for g in got), got
        assert standin.holding == 1 and len(chats(standin)) == 1  # returned before its one request was answered
        standin.mode = "ok"
        standin.release()
        after = llm.complete_many([r5.prompt(CONTEXT, UNKNOWN)])  # one slot: waits for the first, then the queue
        assert after == [UNKNOWN], after
        assert len(chats(standin)) == 2                      # the queued two were cancelled, not delayed
    finally:
        llm.close()


class _NLIDown:
    """The real model's name (the decision layer checks it), but every call declares an outage."""

    def __init__(self, version):
        self.version = version

    def predict(self, premises, hypotheses):
        from schemas.protocols import ModelUnavailable

        raise ModelUnavailable("nli server gone")


@pytest.mark.model
def test_gate_outage_on_the_r5_rewrite_is_declared(settings, nli, encoder, standin):
    v = turn_verdicts(pipe(settings, _NLIDown(nli.version), encoder, "r5g", url=standin.url, api_key=KEY).check_turns(items(ACCEPTED)))[0]
    assert v.rationale["r5"]["outcome"] == "gate-unavailable" and v.surface.name == "r0"
    assert "gate unavailable for the R5 rewrite, R4 path used: nli server gone" in v.status.reason
