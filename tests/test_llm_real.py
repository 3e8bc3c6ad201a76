"""R5, R5 behind the gate and the cascade judge against a real language model: SmolLM2-135M-Instruct
(tests/llm_real.py: the local OpenAI-compatible server, greedy, answers capped at 32 tokens), with
the real NLI model and encoder. A 135M model rarely answers as asked — it echoes the one-shot
example, wanders, runs out of tokens — so what must hold is what the steps do with whatever it
says: a rewrite is used only when it passed the checks (r5) or the gate (r5g), otherwise the claim
is checked exactly as r4 / r4g would check it; the judge's label counts only from a well-formed
answer citing a shown window, otherwise the NLI verdict stands; every reply's kind is in the
rationale and counted; nothing is degraded (the endpoint answered). What the model's answers are
worth is measured by `dialcheck llm yardstick` (docs/llm-steps.md), not here. SuCEA editing on the
real model is in tests/test_llm_editing.py (it needs that module's index)."""
from __future__ import annotations

import pytest

from schemas import validate
from schemas.items import CheckItem
from schemas.protocols import turn_verdicts
from tests.llm_real import real_llm
from workers.llm.local_server import MODEL_ID
from workers.llm.replies import COUNTS, KINDS
from workers.pipeline import Pipeline

pytestmark = pytest.mark.model

CONTEXT = ["Do you like Elvis Presley?", "I love Elvis Presley, his early records are the best."]
EVIDENCE = [("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi, in 1935. He moved to Memphis, Tennessee "
                              "with his family when he was 13."),
            ("Elvis Presley", "Presley began his music career in 1954, recording at Sun Records with producer Sam "
                              "Phillips.")]
R5_CLAIMS = ("He was born in Tupelo", "he moved to memphis when he was 13")
# NEI on on-topic evidence for the shipped NLI + decision, so the judge is asked (tests/test_llm_judge.py
# checks it with the same context and evidence)
JUDGE_CONTEXT = ["I love Elvis Presley."]
JUDGED = ("He moved to Tennessee in his twenties",)  # tests/test_llm_judge.py NEI_ON_TOPIC


@pytest.fixture(scope="module")
def llm():
    return real_llm()


def items(*claims, context=CONTEXT):
    return [CheckItem("conv", str(i), list(context), c, list(EVIDENCE)) for i, c in enumerate(claims)]


# a small model on shared CI cores answers in seconds, queued answers later: the tests wait for answers,
# they do not test timeouts (the stand-in does)
PATIENT = {"timeout_s": 300, "judge_timeout_s": 300, "retries": 0, "batch_timeout_s": 900}


def verdicts(settings, nli, encoder, surface, claims, context=CONTEXT, **llm):
    if llm:
        llm = {**PATIENT, **llm}
    return turn_verdicts(Pipeline(settings.updated(llm=llm), nli, encoder, None, "fv", surface).check_turns(
        items(*claims, context=context)))


def test_r5_and_r5g_use_a_checked_rewrite_or_the_r4_path(settings, nli, encoder, llm):
    from workers.llm import stages

    stages._R5_CACHES.clear()
    COUNTS.clear()
    r4 = verdicts(settings, nli, encoder, "r4", R5_CLAIMS)
    r4g = verdicts(settings, nli, encoder, "r4g", R5_CLAIMS)
    before = llm.served
    r5 = verdicts(settings, nli, encoder, "r5", R5_CLAIMS, url=llm.url)
    assert llm.served - before == len(R5_CLAIMS)  # one real completion per claim
    r5g = verdicts(settings, nli, encoder, "r5g", R5_CLAIMS, url=llm.url)
    assert llm.served - before == len(R5_CLAIMS)  # r5g reads the same checked rewrites (the cache)
    for a4, a4g, v, g in zip(r4, r4g, r5, r5g):
        n, gn = v.rationale["r5"], g.rationale["r5"]
        assert n["model"] == MODEL_ID and n["reply"] in KINDS and gn["text"] == n["text"]
        if n["outcome"] == "used":
            assert n["reply"] == "ok" and (v.surface.name, v.surface.text) == ("r5", n["text"])
        else:
            assert n["outcome"] in ("refused", "unchanged")
            assert (v.surface.name, v.surface.text, v.label) == (a4.surface.name, a4.surface.text, a4.label)
            assert (n["reply"] != "ok") == (n["outcome"] == "refused") and (n["text"] is None) == (n["reply"] != "ok")
        if gn["outcome"] == "accepted":
            assert (g.surface.name, g.surface.text, g.surface.candidate) == ("r5g", n["text"], "r5")
            assert g.surface.gate.accepted and gn["gate_score"] >= gn["tau_fv"]
        else:
            assert gn["outcome"] in ("rejected", "accepted-for-retrieval", "refused", "unchanged")
            assert (g.surface.name, g.surface.text, g.label) == (a4g.surface.name, a4g.surface.text, a4g.label)
            if gn["outcome"] == "rejected":
                assert gn["gate_score"] < gn["tau_fv"]
        for x in (v, g):
            assert x.status.state == "ok"  # whatever the model said, the endpoint answered
            validate("verdict", x.to_dict())
    assert sum(COUNTS.snapshot()["r5"].values()) == len(R5_CLAIMS)


def test_the_judge_counts_only_a_well_formed_answer(settings, nli, encoder, llm):
    COUNTS.clear()
    plain = verdicts(settings, nli, encoder, "r0", JUDGED, JUDGE_CONTEXT)
    before = llm.served
    got = verdicts(settings, nli, encoder, "r0", JUDGED, JUDGE_CONTEXT, url=llm.url, judge=True, judge_max_tokens=32)
    asked = llm.served - before
    assert asked >= 1
    for a, v in zip(plain, got):
        note = v.rationale["judge"]
        assert v.status.state == "ok" and note["nli_label"] == a.label
        if note.get("model") is None:  # not asked: untouched
            assert (v.label, v.evidence) == (a.label, a.evidence)
            continue
        assert note["model"] == MODEL_ID and note["reply"] in KINDS
        if note["used"]:
            assert note["reply"] == "ok" and v.label == note["label"]
            assert any(v.evidence[0].window in text for _, text in EVIDENCE)  # the cited window, from the evidence
        else:
            assert note["reply"] != "ok" and note["reason"].startswith("answer ignored")
            assert (v.label, v.probabilities, v.evidence) == (a.label, a.probabilities, a.evidence)
        assert v.probabilities == a.probabilities  # the judge never sets a probability
        validate("verdict", v.to_dict())
    assert sum(COUNTS.snapshot()["judge"].values()) == asked
