"""The cascade LLM judge (workers/llm/judge.py) with the real NLI model and encoder
against tests/llm_standin.py — a local HTTP server that speaks the OpenAI chat-completions protocol
and answers from what the test tells it, so each kind of answer and failure can be asked for; it
judges nothing (the judge on a real, small model: tests/test_llm_real.py). What these tests can show is the wiring: which claims are asked, what
they are shown, how strictly the answer is read, when it replaces the NLI label, and that every
failure leaves the NLI verdict standing (degraded when the endpoint failed) with nothing lost.
They say nothing about how good an LLM judge is (docs/llm-judge.md)."""
from __future__ import annotations

import json
import logging
import re
from dataclasses import replace

import pytest

from schemas import ChatTurn, claim_id, validate
from schemas.items import CheckItem
from streams.processes import free_port
from tests.llm_standin import LLMStandIn
from workers.llm.judge import JudgeStage, parse_answer
from workers.pipeline import Pipeline
from schemas.protocols import turn_verdicts

pytestmark = pytest.mark.model

KEY = "sk-judge-Secret-4b9e1d"
MODEL = "dialcheck-standin-rewriter"
CONTEXT = ["I love Elvis Presley."]
EVIDENCE = [("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi, in 1935. He moved to Memphis, Tennessee "
                              "with his family when he was 13."),
            ("Elvis Presley", "Presley began his music career in 1954, recording at Sun Records with producer Sam "
                              "Phillips.")]
# what the shipped NLI + decision say on EVIDENCE (measured with NLI v3; the tests re-check it first)
SHOWN = "He was born in Tupelo"  # SUPPORTS, high confidence, shown: never asked
NEI_ON_TOPIC = "He moved to Tennessee in his twenties"  # NEI on on-topic evidence (he moved at 13): asked
# ("at 12" was NEI until the slot-clash REFUTES: the window states the age as 13, so it is REFUTES now)
NEI_ON_TOPIC_2 = "He had a twin brother"  # NEI on on-topic evidence: asked
LOW_SUPPORTS = "He was a teenager in Memphis"  # SUPPORTS with p ≈ 0.5: not shown, asked
REASONING = "The claim says Elvis moved to Tennessee in his twenties. Window {n} says he moved to Memphis at 13.\n"


@pytest.fixture(scope="module")
def standin():
    with LLMStandIn(api_key=KEY) as s:
        yield s


@pytest.fixture(autouse=True)
def _reset(standin):
    standin.reset()
    standin.judges.clear()


def items(*claims):
    return [CheckItem("conv", str(i), list(CONTEXT), c, list(EVIDENCE)) for i, c in enumerate(claims)]


def pipe(settings, nli, encoder, **llm):
    return Pipeline(settings.updated(llm=llm), nli, encoder, None, "fv", "r0")


def judged(settings, nli, encoder, standin, **llm):
    return pipe(settings, nli, encoder, judge=True, url=standin.url, api_key=KEY, model=MODEL, **llm)


def chats(standin):
    return [r for r in standin.requests if r["path"] == "/v1/chat/completions"]


@pytest.fixture(scope="module")
def nli_only(settings, nli, encoder):
    """The NLI verdicts without the judge, per claim (what every failure must leave standing)."""
    claims = (SHOWN, NEI_ON_TOPIC, NEI_ON_TOPIC_2, LOW_SUPPORTS)
    return {v.claim: v for v in turn_verdicts(pipe(settings, nli, encoder).check_turns(items(*claims)))}


def test_the_claims_are_what_the_tests_assume(nli_only):
    assert nli_only[SHOWN].label == "SUPPORTS" and nli_only[SHOWN].display.show
    for c in (NEI_ON_TOPIC, NEI_ON_TOPIC_2):
        assert nli_only[c].label == "NOT ENOUGH INFO" and nli_only[c].status.evidence == "strong"
    assert nli_only[LOW_SUPPORTS].label == "SUPPORTS" and not nli_only[LOW_SUPPORTS].display.show
    assert all("judge" not in v.rationale for v in nli_only.values())


def test_off_by_default_and_after_verification_when_on(settings, nli, encoder, standin):
    assert settings.llm.judge is False
    assert "judge" not in [s.name for s in pipe(settings, nli, encoder).stages]
    names = [s.name for s in judged(settings, nli, encoder, standin).stages]
    assert names[-2:] == ["verify", "judge"]


# ---- the answer parser -------------------------------------------------------------------------------
@pytest.mark.parametrize("text, want", [
    ("Reasoning...\nLABEL: REFUTES\nWINDOW: 2", ("REFUTES", 2)),
    ("LABEL: NOT ENOUGH INFO\nWINDOW: 1\n\n  ", ("NOT ENOUGH INFO", 1)),
    ("  LABEL: SUPPORTS  \n  WINDOW: 3", ("SUPPORTS", 3)),
    ("LABEL: supports\nWINDOW: 1", None),  # case matters
    ("LABEL: SUPPORTS\nWINDOW: 1\nHope this helps!", None),  # not the last lines
    ("WINDOW: 1\nLABEL: SUPPORTS", None),  # wrong order
    ("LABEL: SUPPORTS (mostly)\nWINDOW: 1", None),
    ("LABEL: SUPPORTS\nWINDOW: [1]", None),
    ("LABEL: TRUE\nWINDOW: 1", None),
    ("The claim is supported by window 1.", None),
    ("", None),
])
def test_parse_answer_is_strict(text, want):
    assert parse_answer(text) == want


# ---- what the judge is asked, and what its answer does ---------------------------------------------------
def test_agreeing_judge_keeps_the_label_and_cites_its_window(settings, nli, encoder, standin, nli_only):
    standin.judges[NEI_ON_TOPIC] = REASONING.format(n=2) + "LABEL: NOT ENOUGH INFO\nWINDOW: 2"
    v = turn_verdicts(judged(settings, nli, encoder, standin).check_turns(items(NEI_ON_TOPIC)))[0]
    (sent,) = chats(standin)
    user = sent["body"]["messages"][-1]["content"]
    shown = re.findall(r"^\[(\d)\] \(Elvis Presley\) (.*)$", user, re.MULTILINE)
    assert [n for n, _ in shown] == [str(i) for i in range(1, len(shown) + 1)] and 2 <= len(shown) <= 5
    assert "Claim to judge: " + NEI_ON_TOPIC in user and "- I love Elvis Presley." in user
    assert user.rstrip().endswith("WINDOW: <the number of the window your label rests on (for NOT ENOUGH INFO, "
                                  "the one closest to settling it)>")
    # [1]..[k] are the verifier's windows, most decided first
    probs = {e.window: max(e.entail, e.contradict) for e in nli_only[NEI_ON_TOPIC].evidence}
    known = [probs[t] for _, t in shown if t in probs]
    assert known == sorted(known, reverse=True)
    note = v.rationale["judge"]
    assert (v.label, v.status.state) == ("NOT ENOUGH INFO", "ok")
    assert note["used"] and (note["label"], note["window"], note["nli_label"]) == ("NOT ENOUGH INFO", 2,
                                                                                   "NOT ENOUGH INFO")
    assert note["model"] == MODEL and note["answer"].endswith("WINDOW: 2")
    assert v.evidence[0].window == shown[1][1]  # the cited window is the deciding one
    validate("verdict", v.to_dict())


def test_disagreeing_judge_replaces_the_label_and_the_deciding_window(settings, nli, encoder, standin, nli_only):
    # the window saying "moved ... when he was 13": find its number from a first look at the prompt
    turn_verdicts(judged(settings, nli, encoder, standin).check_turns(items(NEI_ON_TOPIC)))
    user = chats(standin)[0]["body"]["messages"][-1]["content"]
    n = next(int(m.group(1)) for m in re.finditer(r"^\[(\d)\] .*$", user, re.MULTILINE) if "13" in m.group(0))
    window = re.search(rf"^\[{n}\] \(Elvis Presley\) (.*)$", user, re.MULTILINE).group(1)
    standin.judges[NEI_ON_TOPIC] = REASONING.format(n=n) + f"LABEL: REFUTES\nWINDOW: {n}"
    v = turn_verdicts(judged(settings, nli, encoder, standin).check_turns(items(NEI_ON_TOPIC)))[0]
    before = nli_only[NEI_ON_TOPIC]
    assert v.label == "REFUTES" and before.label == "NOT ENOUGH INFO"
    assert v.rationale["judge"]["nli_label"] == "NOT ENOUGH INFO" and v.rationale["judge"]["used"]
    assert "label replaced by the LLM judge (NLI said NOT ENOUGH INFO)" in v.rationale["judge"]["reason"]
    assert v.evidence[0].window == window and v.rationale["window"]["text"] == window
    assert v.probabilities == before.probabilities  # the NLI's: the judge gives no calibrated number
    assert v.status.state == "ok"
    validate("verdict", v.to_dict())


def test_a_low_confidence_supports_is_asked_and_a_shown_verdict_is_not(settings, nli, encoder, standin, nli_only):
    standin.judges[LOW_SUPPORTS] = "Window 1 says he moved to Memphis at 13.\nLABEL: SUPPORTS\nWINDOW: 1"
    shown, low = turn_verdicts(judged(settings, nli, encoder, standin).check_turns(items(SHOWN, LOW_SUPPORTS)))
    asked = [r["body"]["messages"][-1]["content"] for r in chats(standin)]
    assert len(asked) == 1 and "Claim to judge: " + LOW_SUPPORTS in asked[0]
    assert shown.rationale["judge"]["used"] is False and shown.rationale["judge"]["reason"].startswith("not asked")
    assert (shown.label, shown.evidence, shown.status) == (nli_only[SHOWN].label, nli_only[SHOWN].evidence,
                                                           nli_only[SHOWN].status)
    assert low.rationale["judge"]["used"] and low.label == "SUPPORTS"


@pytest.mark.parametrize("answer, why, kind", [
    ("It is probably false.", "does not end with the LABEL and WINDOW lines", "wrong-format"),
    ("LABEL: REFUTES\nWINDOW: 1\nLet me know if you need more.", "does not end with the LABEL and WINDOW lines",
     "explanation"),
    ("LABEL: Refutes\nWINDOW: 1", "does not end with the LABEL and WINDOW lines", "explanation"),
    ("LABEL: REFUTES\nWINDOW: 9", "cites window 9, not one of 1..", "wrong-format"),
    ("LABEL: REFUTES\nWINDOW: 0", "cites window 0, not one of 1..", "wrong-format"),
])
def test_garbage_or_a_window_that_does_not_exist_is_ignored(settings, nli, encoder, standin, nli_only, answer, why,
                                                           kind):
    standin.judges[NEI_ON_TOPIC] = answer
    v = turn_verdicts(judged(settings, nli, encoder, standin).check_turns(items(NEI_ON_TOPIC)))[0]
    before = nli_only[NEI_ON_TOPIC]
    assert len(chats(standin)) == 1
    assert (v.label, v.probabilities, v.evidence, v.status) == (before.label, before.probabilities, before.evidence,
                                                                before.status)
    note = v.rationale["judge"]
    assert note["used"] is False and why in note["reason"] and note["answer"] == answer.strip()
    assert note["reply"] == kind  # what the answer was, for the counts (workers/llm/replies.py)


@pytest.mark.parametrize("how", ["slow", "down", "error", "no-choices", "unconfigured"])
def test_an_outage_leaves_the_nli_verdict_degraded(settings, nli, encoder, standin, nli_only, how):
    llm = {"judge_timeout_s": 0.5, "retries": 0}
    standin.judges[NEI_ON_TOPIC] = "LABEL: REFUTES\nWINDOW: 1"
    if how == "slow":
        standin.mode = "held"  # answers only when released: after the judge's 0.5 s timeout, whenever that is
    elif how == "error":
        standin.mode = "error"
    elif how == "no-choices":
        standin.mode = "garbage"
    p = judged(settings, nli, encoder, standin, **llm)
    if how == "down":
        p = pipe(settings, nli, encoder, judge=True, url=f"http://127.0.0.1:{free_port()}/v1", model=MODEL, **llm)
    elif how == "unconfigured":
        p = pipe(settings, nli, encoder, judge=True, url="")
    got = turn_verdicts(p.check_turns(items(SHOWN, NEI_ON_TOPIC)))
    if how == "slow":
        assert standin.holding == 1  # the verdicts came while the judge's request was still unanswered
    assert len(got) == 2  # nothing lost
    shown, asked = got
    assert shown.status.state == "ok" and shown.label == nli_only[SHOWN].label  # never asked: untouched
    before = nli_only[NEI_ON_TOPIC]
    assert (asked.label, asked.probabilities, asked.evidence) == (before.label, before.probabilities, before.evidence)
    assert asked.status.state == "degraded" and asked.status.reason.startswith("LLM judge unavailable, NLI verdict kept")
    assert {"slow": "timed out after 0.5 s", "down": "unreachable", "error": "HTTP 503",
            "no-choices": "without choices", "unconfigured": "no LLM configured"}[how] in asked.status.reason
    assert asked.rationale["judge"]["used"] is False and asked.rationale["judge"]["nli_label"] == before.label
    validate("verdict", asked.to_dict())


def test_over_budget_claims_keep_the_nli_label(settings, nli, encoder, standin, nli_only):
    for c in (NEI_ON_TOPIC, NEI_ON_TOPIC_2, LOW_SUPPORTS):
        standin.judges[c] = "LABEL: REFUTES\nWINDOW: 1"
    got = turn_verdicts(judged(settings, nli, encoder, standin, judge_max_calls_per_batch=2).check_turns(
        items(NEI_ON_TOPIC, SHOWN, NEI_ON_TOPIC_2, LOW_SUPPORTS)))
    assert len(chats(standin)) == 2
    first, shown, second, third = got
    assert first.label == second.label == "REFUTES" and first.rationale["judge"]["used"]
    assert third.label == nli_only[LOW_SUPPORTS].label == "SUPPORTS" and third.status.state == "ok"
    assert third.rationale["judge"]["used"] is False and "over the judge's budget (2 calls" in \
        third.rationale["judge"]["reason"]
    assert shown.rationale["judge"]["reason"].startswith("not asked: the NLI verdict is shown")
    none = turn_verdicts(judged(settings, nli, encoder, standin, judge_max_calls_per_batch=0).check_turns(items(NEI_ON_TOPIC)))[0]
    assert len(chats(standin)) == 2 and none.label == "NOT ENOUGH INFO"


def test_api_key_is_in_no_verdict_and_no_log_line(settings, nli, encoder, standin, caplog):
    caplog.set_level(logging.DEBUG)
    standin.judges[NEI_ON_TOPIC] = f"My key is {KEY}? No.\nLABEL: REFUTES\nWINDOW: 1"  # a model echoing the key
    wrong = "sk-wrong-Secret-feed42"
    ok = turn_verdicts(judged(settings, nli, encoder, standin).check_turns(items(NEI_ON_TOPIC)))[0]
    bad = turn_verdicts(pipe(settings, nli, encoder, judge=True, url=standin.url, api_key=wrong, model=MODEL,
               retries=0).check_turns(items(NEI_ON_TOPIC)))[0]
    assert ok.rationale["judge"]["used"] and bad.status.state == "degraded" and "HTTP 401" in bad.status.reason
    text = json.dumps([ok.to_dict(), bad.to_dict()]) + caplog.text
    assert KEY not in text and wrong not in text


def test_stage_outage_hook_degrades_without_touching_the_label(settings):
    """`on_outage` (a declared model/search outage raised inside the stage) keeps the NLI label."""
    from schemas.protocols import ModelUnavailable
    from workers.state import ClaimState

    from workers.decision import NO_EVIDENCE, Decision

    decided = Decision("NOT ENOUGH INFO", dict(NO_EVIDENCE), None)
    s = ClaimState(items(NEI_ON_TOPIC)[0], decision=decided)
    s.notes["judge"] = {"used": False}
    JudgeStage(None, settings.llm).on_outage([s], ModelUnavailable("gone"))
    assert s.decision is decided and s.problems == [("degraded", "LLM judge unavailable, NLI verdict kept: gone")]


# ---- dialcheck eval --llm-judge ---------------------------------------------------------------------------
def test_eval_llm_judge_writes_both_labels_per_claim(tmp_path, monkeypatch, capsys, data_dir):
    from dialcheck.cli import main

    out = tmp_path / "run.jsonl"
    with LLMStandIn(api_key=KEY) as llm:
        llm.judge_default = "Window 1 contradicts it.\nLABEL: REFUTES\nWINDOW: 1"
        monkeypatch.setenv("DIALCHECK_LLM_URL", llm.url)
        monkeypatch.setenv("DIALCHECK_LLM_API_KEY", KEY)
        assert main(["eval", "--llm-judge", "--protocol", "fv", "--surfaces", "r0", "--limit", "12",
                     "--output", str(out), "--json"]) == 0
        asked = [r for r in llm.requests if r["path"] == "/v1/chat/completions"]
    result = json.loads(capsys.readouterr().out)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 12 == result["records"] and KEY not in out.read_text()
    assert all({"label", "nli_label", "judge"} <= r.keys() for r in rows)
    judged_rows = [r for r in rows if r["judge"] is not None]
    assert len(judged_rows) == len(asked) > 0  # one request per judged claim, and some were judged
    for r in rows:
        if r["judge"] is None:
            assert r["label"] == r["nli_label"]
        else:
            assert r["judge"] == {"label": "REFUTES", "window": 1, "used": True} and r["label"] == "REFUTES"
    assert any(r["nli_label"] != r["label"] for r in judged_rows)  # the run file keeps what the NLI said
    # the metrics are the final labels'
    from schemas.items import load_dialfact

    gold = {r.id: r.label for r in load_dialfact(str(data_dir / "dialfact" / "testsmall.jsonl"), 12)}
    acc = 100 * sum(r["label"] == gold[r["record_id"]] for r in rows) / len(rows)
    assert result["surfaces"]["r0"]["accuracy"] == pytest.approx(acc, abs=0.01)


def test_eval_llm_judge_without_an_endpoint_is_a_usage_error(monkeypatch, capsys):
    from dialcheck.cli import main

    monkeypatch.setenv("DIALCHECK_LLM_URL", "")
    assert main(["eval", "--llm-judge", "--protocol", "fv", "--surfaces", "r0", "--limit", "1"]) != 0
    assert "--llm-judge needs an LLM endpoint" in capsys.readouterr().err


def test_config_lists_the_judge_settings(capsys):
    from dialcheck.cli import main

    assert main(["config"]) == 0
    text = capsys.readouterr().out
    for field in ("llm.judge", "llm.judge_max_calls_per_batch", "llm.judge_top_windows", "llm.judge_timeout_s",
                  "llm.judge_max_tokens", "DIALCHECK_LLM_JUDGE"):
        assert field in text, field


# ---- the stream, with the judge on and its endpoint down ---------------------------------------------------
class EvidenceChecker:
    """The real fv Pipeline (judge on, from the worker's settings), handing every turn the two Elvis
    passages as its gold evidence: chat turns carry no evidence, and fv reads gold evidence, so this is
    what makes the verifier read windows (and the judge be asked) without building the passage index."""

    def __init__(self, pipeline):
        self.pipeline = pipeline

    def check_turns(self, items):
        return self.pipeline.check_turns([replace(it, gold_evidence=list(EVIDENCE)) for it in items])


def create(settings, protocol: str = "fv", surface: str = "r0"):
    return EvidenceChecker(Pipeline.from_settings(settings, protocol="fv", surface=surface))


@pytest.mark.broker
@pytest.mark.timeout(600)
def test_stream_with_the_judge_on_and_its_endpoint_down_delivers_every_verdict(broker, tmp_path):
    from streams.replay import TurnProducer
    from streams.verdicts import collect_verdicts, end_offsets
    from streams.worker import WorkerProcess
    from tests.test_stream_resilience import stream_settings

    s = stream_settings(broker, "judge-down").updated(
        llm={"url": f"http://127.0.0.1:{free_port()}/v1", "judge": True, "judge_timeout_s": 1.0, "retries": 0,
             "model": MODEL})
    start = end_offsets(s, s.kafka.topic_verdicts)
    claims = {f"judge-{i}": c for i, c in enumerate((SHOWN, NEI_ON_TOPIC, NEI_ON_TOPIC_2, LOW_SUPPORTS))}
    turns = [(ChatTurn(conv, f"{conv}#c0", "user", CONTEXT[0], check=False),
              ChatTurn(conv, f"{conv}#r", "assistant", c, check=True)) for conv, c in claims.items()]
    want = {claim_id(r.conversation_id, r.turn_id, r.text): r.text for _, r in turns}
    w = WorkerProcess(s, tmp_path / "worker.log", extra_args=["--pipeline", "tests.test_llm_judge:create",
                                                              "--protocol", "fv", "--surface", "r0"])
    try:
        w.start().wait_ready(300)
        with TurnProducer(s) as producer:
            for ctx, _ in turns:
                producer.send_turn(ctx)
            for _, reply in turns:
                producer.send_turn(reply)
        vlog = collect_verdicts(s, set(want), 300, start=start, alive=w.alive)
    finally:
        w.stop()
    assert set(want) <= vlog.verdicts.keys() and not vlog.schema_errors
    by_claim = {want[cid]: vlog.verdicts[cid] for cid in want}
    assert by_claim[SHOWN].status.state == "ok" and by_claim[SHOWN].rationale["judge"]["used"] is False
    for c in (NEI_ON_TOPIC, NEI_ON_TOPIC_2, LOW_SUPPORTS):
        v = by_claim[c]
        assert v.status.state == "degraded" and v.status.reason.startswith("LLM judge unavailable, NLI verdict kept")
        assert "unreachable" in v.status.reason and v.rationale["judge"]["nli_label"] == v.label
