"""Gate and pipeline with real models and real DialFact records."""

import pytest

from schemas import LABELS, parse_verdict
from workers.gate import BiConGate, GateInput, gate_decision
from schemas.protocols import ModelUnavailable, SearchUnavailable
from workers.pipeline import CheckItem, Pipeline
from schemas.protocols import turn_verdicts

pytestmark = pytest.mark.model

ELVIS = ["Do you like Elvis? I have loved Elvis since I was a kid.",
         "Yes! His songs are great. Do you know where he grew up?"]


@pytest.fixture(scope="module")
def gate(nli, encoder):
    return BiConGate(nli, encoder)


def test_gate_accepts_faithful_and_rejects_drifting_rewrite(gate):
    faithful = GateInput(ELVIS, "He was born in Tupelo Mississippi.", "Elvis was born in Tupelo Mississippi.")
    drifting = GateInput(ELVIS, "He was born in Tupelo Mississippi.", "Elvis died in Memphis in 1977 after a long tour.")
    (s_ok, e_ok, c_ok, sim_ok), (s_bad, e_bad, c_bad, sim_bad) = gate.score([faithful, drifting])
    assert s_ok > s_bad
    assert sim_ok > sim_bad
    assert not gate_decision((s_bad, e_bad, c_bad, sim_bad), 0.5).accepted
    for s, e, c, sim in [(s_ok, e_ok, c_ok, sim_ok), (s_bad, e_bad, c_bad, sim_bad)]:
        assert s == pytest.approx(0.4 * e + 0.2 * sim + 0.4 * (1 - c), abs=1e-6)


@pytest.fixture(scope="module")
def fv_pipeline(settings, nli, encoder):
    return Pipeline(settings, nli, encoder, None, protocol="fv", surface="r4g")


def test_fv_verdicts_on_dialfact(fv_pipeline, dialfact_records):
    records = dialfact_records[:12]
    verdicts = turn_verdicts(fv_pipeline.check_turns([r.to_check_item("fv") for r in records]))
    assert len(verdicts) == len(records)
    for r, v in zip(records, verdicts):
        parse_verdict(v.to_json())  # schema-valid
        assert v.label in LABELS and v.status.state == "ok"
        assert v.claim == r.response
        if v.surface.gate is not None:
            assert v.surface.gate.accepted == (v.surface.gate.score >= v.surface.gate.threshold)
            assert v.surface.text == (v.surface.candidate_text if v.surface.gate.accepted else r.response)
        assert v.evidence and v.evidence[0].text in [t for _, t in r.evidence]
        windows = [e.window for e in v.evidence]
        assert len(windows) == len(set(windows)), "the same window listed twice"
        # the rationale names what decided, on the window shown first, with its numbers
        why = v.rationale
        assert why["rule"] == fv_pipeline.decision_rule() and v.label in why["summary"]
        assert why["window"]["text"] == v.evidence[0].window
        assert why["numbers"]["entail"] == round(v.evidence[0].entail, 4)


def test_pronoun_claim_routed_through_gate(gate, settings, nli, encoder):
    """Under r4g the R4 rewrite is offered to the gate: its score is the gate's own for that rewrite in
    the claim's context, checked against τ_FV; an accepted rewrite is what the verifier reads (r4g),
    a rejected one leaves the claim as said (r0). The shipped τ_FV (0.8) rejects this one (the gate's
    entailment both ways is low); at τ_FV 0.5 it is accepted."""
    from workers.text import last_turns

    claim, rewrite = "He was born in Tupelo Mississippi", "Elvis was born in Tupelo Mississippi."
    item = CheckItem("c", "t", ELVIS, claim,
                     gold_evidence=[("Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi.")])
    s, e, c, sim = gate.score([GateInput(last_turns(ELVIS, settings.gate.context_turns), claim, rewrite)])[0]
    outcomes = []
    for tau in (settings.gate.tau_fv, 0.5):
        pipe = Pipeline(settings.updated(gate={"tau_fv": tau}), nli, encoder, None, protocol="fv", surface="r4g")
        result = pipe.check_turns([item])[0]
        v, st = result.verdicts[0], result.states[0]
        g = v.surface.gate
        assert (v.surface.candidate, v.surface.candidate_text) == ("r4", rewrite)
        assert (g.score, g.e, g.c, g.sim) == pytest.approx((s, e, c, sim), abs=1e-5)
        assert g.threshold == tau and g.accepted == (g.score >= tau)
        read = ("r4g", rewrite) if g.accepted else ("r0", claim)
        assert (v.surface.name, v.surface.text) == read and st.evidence.claim == read[1]  # what the verifier read
        outcomes.append(g.accepted)
    assert outcomes == [False, True]


def test_e2e_retrieves_and_verifies(settings, nli, encoder, index_dir, dialfact_records):
    from workers.retrieval.bm25 import EmbeddedIndex

    pipe = Pipeline(settings.updated(retrieval={"index_dir": str(index_dir)}), nli, encoder, EmbeddedIndex.load(index_dir), "e2e", "r4g")
    recs = [r for r in dialfact_records if r.type_label == "factual"][:8]
    verdicts = turn_verdicts(pipe.check_turns([r.to_check_item("e2e") for r in recs]))
    hits = sum(any(e.title in {t for t, _ in r.evidence} for e in v.evidence) for r, v in zip(recs, verdicts))
    assert hits >= len(recs) // 2  # retrieval finds the gold document for most factual claims
    assert all(v.timings_ms.get("retrieve") is not None for v in verdicts)


class _BrokenNLI:
    """A backend that declares an outage (what TritonNLI raises when the server is gone). Its
    version is unknown, like a Triton model never reached (the decision's model check skips it)."""
    version = "unknown"

    def predict(self, premises, hypotheses):
        raise ModelUnavailable("connection refused")


class _BuggyNLI:
    version = "unknown"

    def predict(self, premises, hypotheses):
        raise IndexError("a bug, not an outage")


def test_model_outage_gives_explicit_status(settings, encoder, dialfact_records):
    pipe = Pipeline(settings, _BrokenNLI(), encoder, None, protocol="fv", surface="r4g")
    verdicts = turn_verdicts(pipe.check_turns([r.to_check_item("fv") for r in dialfact_records[:3]]))
    assert len(verdicts) == 3
    for v in verdicts:
        assert v.status.state == "error" and "NLI model unavailable" in v.status.reason
        assert v.label == "NOT ENOUGH INFO"


def test_a_bug_is_not_relabelled_as_an_outage(settings, encoder, dialfact_records):
    """Only declared outages become degraded/error verdicts; a bug propagates (the stream turns it
    into error verdicts for the batch and logs it) instead of hiding behind 'degraded'."""
    pipe = Pipeline(settings, _BuggyNLI(), encoder, None, protocol="fv", surface="r0")
    with pytest.raises(IndexError):
        turn_verdicts(pipe.check_turns([r.to_check_item("fv") for r in dialfact_records[:2]]))


def test_search_outage_degrades(settings, nli, encoder, dialfact_records):
    class Down:
        name = "down"

        def search_many(self, queries, k):
            raise SearchUnavailable("index offline")

    pipe = Pipeline(settings, nli, encoder, Down(), protocol="e2e", surface="r0")
    v = turn_verdicts(pipe.check_turns([dialfact_records[0].to_check_item("e2e")]))[0]
    assert v.status.state == "degraded" and "search unavailable" in v.status.reason


def test_deciding_window_is_listed_first_even_when_others_rank_higher():
    """The deciding window (what the rationale names) comes first; a window text appears once.
    The decision layer may decide on a window that is not the most entailing or contradicting."""
    import numpy as np

    from workers.verdict import shown_windows
    from workers.decision import WindowDecision
    from workers.windows import Window

    def wd(text, e, c):
        return WindowDecision(Window(0, text), np.array([e, 1 - e - c, c]), "x")

    strong, best, dup_of_strong, weak = wd("A", 0.9, 0.0), wd("B", 0.5, 0.1), wd("A", 0.8, 0.0), wd("C", 0.2, 0.1)
    shown = shown_windows(best, [strong, best, dup_of_strong, weak])
    assert [d.window.text for d in shown] == ["B", "A", "C"]
    assert shown[1] is strong  # the higher-ranked of the two "A" windows
    assert [d.window.text for d in shown_windows(None, [weak, strong])] == ["A", "C"]
    # near-duplicate copies of one passage are shown once
    one, copy = wd("He was an African American singer.", 0.9, 0.0), wd("He was an African-American singer.", 0.8, 0.0)
    assert [d.window.text for d in shown_windows(None, [one, copy, weak])] == ["He was an African American singer.", "C"]
