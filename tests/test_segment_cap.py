"""Segmentation caps the claims of one turn (DIALCHECK_MAX_CLAIMS_PER_TURN, default 16): a
4,000-character turn costs at most 16 claims, says in its turn verdict what was left unchecked,
and another conversation's turn in the same batch gets its real verdict.

Why: one 4,000-character turn once became 666 claims; checked in the same batch as another
conversation's turn, it made that turn miss the worker's batch deadline (an error verdict instead
of its real one). Counting the claims that reach the stages is the deterministic measure of that
cost (no timed assertion): without the cap all ~235 would."""
from __future__ import annotations

from functools import lru_cache

import pytest

from schemas import parse_verdict
from workers.pipeline import CheckItem, Pipeline
from workers.segment import segment

pytestmark = pytest.mark.model

LONG = " ".join(f"Tower number {i} stands in town {i % 7}." for i in range(140))[:4000]


@lru_cache(maxsize=1)
def uncapped() -> list:
    return list(segment(LONG))


EVIDENCE = [("Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was completed in 1889.")]


def test_segment_keeps_the_first_claims_and_counts_the_rest():
    assert len(LONG) > 3900
    assert len(uncapped()) > 100  # uncapped: one claim per sentence
    segs = segment(LONG, max_claims=16)
    assert [s.text for s in segs] == [s.text for s in uncapped()[:16]]
    assert segs.unchecked == len(uncapped()) - 16
    assert f"from character {segs[16 - 1].end + 1} on" in segs.note and "were not checked" in segs.note
    short = segment("Paris is in France. Berlin is in Germany.", max_claims=16)
    assert len(short) == 2 and short.note is None and short.unchecked == 0


@pytest.fixture(scope="module")
def pipeline(settings, nli, encoder):
    s = settings.updated(claims={"segment": True})
    assert s.claims.max_claims_per_turn == 16  # the default
    return Pipeline(s, nli, encoder, None, protocol="fv", surface="r0")


def test_a_long_turn_beside_another_conversations_turn(pipeline):
    other = CheckItem("bob", "b1", ["When was the Eiffel Tower built?"], "The Eiffel Tower was completed in 1889.",
                      EVIDENCE)
    long_turn = CheckItem("alice", "a1", ["Tell me about towers."], LONG, EVIDENCE)
    alone = pipeline.check_turns([other])[0].verdict

    seen: list[int] = []
    run = pipeline._run
    pipeline._run = lambda items, shown: seen.append(len(items)) or run(items, shown)
    try:
        long_turn_result, other_result = pipeline.check_turns([long_turn, other])
    finally:
        del pipeline._run
    long_verdicts, other_verdicts = long_turn_result.verdicts, other_result.verdicts
    assert sum(seen) == 16 + 1  # the cap's claims and the other turn: the batch's whole model cost

    (got,) = other_verdicts  # the other conversation's real verdict, the same as checked alone
    assert got.status.state == "ok" and got.rationale["rule"] != "error"
    assert (got.claim_id, got.label, got.probabilities) == (alone.claim_id, alone.label, alone.probabilities)

    claims, summary = long_verdicts[:-1], long_verdicts[-1]
    assert len(claims) == 16 and summary.claim == LONG and summary.rationale["rule"] == "turn-summary"
    assert "only the first 16 claims of this turn were checked" in summary.status.reason
    assert summary.rationale["numbers"]["unchecked_claims"] == len(uncapped()) - 16
    assert "Not all of the turn was checked" in summary.rationale["summary"]
    parse_verdict(summary.to_json())  # still schema-valid
