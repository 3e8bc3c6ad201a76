"""What real models return, each case its fallback (workers/llm/replies.py): an echo of the prompt,
an explanation around the answer, an empty or truncated answer, an answer in the wrong format. Each
is refused (R5: the R4 path; editing: the first retrieval; the judge: no verdict of its own), says
what it was in the rationale (`reply`), is counted in `COUNTS`, and leaves the status ok: it is the
model's failure, not the endpoint's. Through the real client and the protocol stand-in
(tests/llm_standin.py) where the reply's transport matters (finish_reason, null content); the
replies themselves are the shapes SmolLM2-135M-Instruct was seen to give (tests/test_llm_real.py)."""
from __future__ import annotations

import pytest

from schemas.items import CheckItem
from schemas.settings import load_settings
from schemas import Surface
from tests.llm_standin import LLMStandIn
from workers.llm import judge, r5
from workers.llm.client import OpenAICompatibleLLM
from workers.llm.replies import COUNTS, KINDS, Reply, is_echo, judge_kind
from workers.llm.stages import R5Stage
from workers.state import ClaimState

pytestmark = pytest.mark.unit

CONTEXT = ["Do you like Elvis Presley?", "I love his music."]
CLAIM = "he was born in tupelo"
SOURCES = [*CONTEXT, CLAIM]
PROMPT = r5.prompt(CONTEXT, CLAIM)
WINDOWS = [("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi, in 1935."),
           ("Elvis Presley", "He moved to Memphis, Tennessee with his family when he was 13.")]
JUDGE_PROMPT = judge.prompt(CONTEXT, "he moved to tennessee at 12", WINDOWS)


@pytest.mark.model  # parses with spaCy
@pytest.mark.parametrize("reply, kind", [
    ("Elvis Presley was born in Tupelo.", "ok"),
    ('Rewrite: "Elvis Presley was born in Tupelo."', "ok"),  # a label and quotes around it are cleaned off
    (CLAIM, "ok"),  # the claim itself: R5 "unchanged", not an echo
    ("Elvis Presley was born in Tupelo in 1935.", "echo"),  # the one-shot example's answer (SmolLM2 did this)
    ("I love his music.", "echo"),  # a dialogue turn
    ("Dialogue:\n- Do you like Elvis Presley?", "echo"),  # the prompt's scaffolding
    ("You rewrite the last reply of a dialogue into one sentence.", "echo"),  # the instructions
    ("Sure! Here is the rewritten sentence:\nElvis Presley was born in Tupelo.", "explanation"),
    ("Elvis Presley was born in Tupelo. This resolves the pronoun he.", "explanation"),
    ("", "empty"),
    ("  \n ", "empty"),
    ('""', "empty"),
    (Reply("Elvis Presley was born in", "length"), "truncated"),
    ("Elvis Presley was born in Memphis.", "drift"),
])
def test_each_r5_reply_has_its_kind_and_only_ok_is_used(reply, kind):
    got = r5.check_rewrite(reply, SOURCES, CLAIM, PROMPT)
    assert got.kind == kind and kind in KINDS
    assert (got.text is not None) == (kind == "ok") and (got.reason == "") == (kind == "ok")


@pytest.mark.parametrize("answer, kind", [
    ("Window 2 says he moved at 13.\nLABEL: REFUTES\nWINDOW: 2", "ok"),
    ("", "empty"),
    (Reply("The claim says he moved to Tennessee at 12. Window 2 says", "length"), "truncated"),
    ("Claim to judge: he moved to tennessee at 12\nEvidence windows:", "echo"),
    ("He moved to Memphis, Tennessee with his family when he was 13.", "echo"),  # a window, word for word
    ("LABEL: REFUTES\nWINDOW: 2\nI hope this helps!", "explanation"),
    ("The answer is LABEL: refutes, window 2.", "explanation"),
    ("The claim is false because he was 13.", "wrong-format"),
    ("REFUTES", "wrong-format"),
])
def test_each_judge_answer_has_its_kind(answer, kind):
    parsed = judge.parse_answer(answer)
    assert (parsed is not None) == (kind == "ok")
    if parsed is None:
        assert judge_kind(answer, JUDGE_PROMPT) == kind


def test_echo_needs_more_than_shared_words():
    # a faithful rewrite shares words with the example and the dialogue: no echo
    assert not is_echo("Elvis Presley was born in Tupelo.", PROMPT, [CLAIM])
    assert not is_echo("Elvis Presley loved Tupelo.", PROMPT, [CLAIM])
    assert is_echo("yeah he was born in tupelo in 1935 i think", PROMPT, [CLAIM])  # the example's claim


# ---- through the client and the R5 stage: what reaches the verdict ---------------------------------------
@pytest.fixture(scope="module")
def standin():
    with LLMStandIn() as s:
        yield s


@pytest.fixture(autouse=True)
def _reset(standin):
    standin.reset()
    standin.rewrites.pop(CLAIM, None)
    COUNTS.clear()


def client(standin) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(load_settings(llm={"url": standin.url, "retries": 0, "timeout_s": 5}).llm)


def test_the_client_keeps_the_finish_reason_and_reads_null_content_as_empty(standin):
    standin.rewrites[CLAIM] = "Elvis Presley was"
    standin.finish_reason = "length"
    (got,) = client(standin).complete_many([PROMPT])
    assert got == "Elvis Presley was" and isinstance(got, Reply) and got.finish_reason == "length"
    standin.rewrites[CLAIM] = None  # "content": null
    standin.finish_reason = "stop"
    (got,) = client(standin).complete_many([PROMPT])
    assert got == "" and got.finish_reason == "stop"


def _r5_states():
    states = [ClaimState(CheckItem("conv", str(i), list(CONTEXT), CLAIM)) for i in range(1)]
    for s in states:
        s.fv_surface = s.ir_surface = Surface("r4", "Elvis was born in tupelo")  # the R4 path's surface
    return states


@pytest.mark.parametrize("reply, finish, kind", [
    ("Elvis Presley was born in Tupelo in 1935.", "stop", "echo"),
    ("Here you go:\nElvis Presley was born in Tupelo.", "stop", "explanation"),
    (None, "stop", "empty"),
    ("Elvis Presley was born in Tupelo", "length", "truncated"),
])
def test_a_bad_reply_keeps_the_r4_path_says_why_and_is_counted(standin, reply, finish, kind):
    standin.rewrites[CLAIM] = reply
    standin.finish_reason = finish
    from workers.llm.r5 import RewriteCache

    (s,) = states = _r5_states()
    R5Stage(client(standin), None, load_settings().gate, False, RewriteCache(0)).run(states)
    note = s.notes["r5"]
    assert note["outcome"] == "refused" and note["reply"] == kind and note["text"] is None
    assert "R4 path used" in note["reason"]
    assert (s.fv_surface.name, s.fv_surface.text) == ("r4", "Elvis was born in tupelo")  # the fallback
    assert s.problems == []  # the model's failure, not an outage: status stays ok
    assert COUNTS.snapshot() == {"r5": {kind: 1}}


@pytest.mark.model  # parses with spaCy
def test_a_good_reply_is_used_and_counted_ok(standin):
    standin.rewrites[CLAIM] = "Elvis Presley was born in Tupelo."
    from workers.llm.r5 import RewriteCache

    (s,) = states = _r5_states()
    R5Stage(client(standin), None, load_settings().gate, False, RewriteCache(0)).run(states)
    assert s.notes["r5"]["outcome"] == "used" and s.notes["r5"]["reply"] == "ok"
    assert s.fv_surface.text == "Elvis Presley was born in Tupelo."
    assert COUNTS.snapshot() == {"r5": {"ok": 1}}
