"""The product path on the shipped defaults: `dialcheck check` on chat replies that
restate an evidence sentence and add one detail the evidence does not give answers not SUPPORTS,
and its verdict names the uncovered term, so an app can grey it out. The plain restatement stays
SUPPORTS (the guard must not cost the reply that only says what the evidence says)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = "The Eiffel Tower was completed in 1889 as the entrance arch to the World's Fair in Paris."


def check(claim: str, context: str = "When was the Eiffel Tower built?") -> dict:
    out = subprocess.run([sys.executable, "-m", "dialcheck.cli", "check", "--protocol", "fv", "--evidence", EVIDENCE,
                          "--context", context, "--claim", claim, "--format", "json"],
                         cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("claim,term", [
    ("Oh yeah, the Eiffel Tower was completed in 1889 by Gustave Eiffel himself.", "Gustave"),
    ("I think the Eiffel Tower was completed in 1889, and it has 108 floors.", "108"),
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Lyon.", "Lyon"),
])
def test_a_reply_that_adds_a_detail_gets_no_supports_badge(claim, term):
    v = check(claim)
    assert v["label"] != "SUPPORTS", v["rationale"]
    assert term in (v.get("uncovered") or []), v.get("uncovered")
    assert v["schema_version"] == "2.3"


def test_the_plain_restatement_is_still_supported():
    v = check("Yeah, the Eiffel Tower was completed in 1889.")
    assert v["label"] == "SUPPORTS" and not v.get("uncovered"), v["rationale"]


def test_the_plain_restatement_shows_its_badge_and_an_adjective_of_its_own_hides_it():
    """A SUPPORTS whose reply keeps a word of its own (under half its content words: still SUPPORTS)
    names that word and shows no badge: the shipped policy never shows "supported" over a part the
    app greys out (`complete`)."""
    plain = check("Yeah, the Eiffel Tower was completed in 1889.")
    assert plain["display"]["show"] is True, plain["display"]
    added = check("Yeah, the Eiffel Tower was completed in 1889 as a stunning entrance arch.")
    assert added["label"] == "SUPPORTS" and added["uncovered"] == ["stunning"], (added["label"], added.get("uncovered"))
    assert added["display"]["show"] is False
