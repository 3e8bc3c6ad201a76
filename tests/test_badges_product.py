"""The product path on the shipped defaults: `dialcheck check` on chat replies that
restate an evidence sentence and add one detail the evidence does not give answers not SUPPORTS,
and its verdict names the uncovered term, so an app can grey it out. The plain restatement stays
SUPPORTS (the guard must not cost the reply that only says what the evidence says).

One `dialcheck check --file` run (JSON lines, the models loaded once) gives every verdict these
tests read: each reply with the same context and evidence a `--claim` run would give it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parent.parent
EVIDENCE = "The Eiffel Tower was completed in 1889 as the entrance arch to the World's Fair in Paris."
CONTEXT = "When was the Eiffel Tower built?"
ADDED = [
    ("Oh yeah, the Eiffel Tower was completed in 1889 by Gustave Eiffel himself.", "Gustave"),
    ("I think the Eiffel Tower was completed in 1889, and it has 108 floors.", "108"),
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Lyon.", "Lyon"),
]
PLAIN = "Yeah, the Eiffel Tower was completed in 1889."
ADJECTIVE = "Yeah, the Eiffel Tower was completed in 1889 as a stunning entrance arch."


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory) -> dict[str, dict]:
    """claim → its verdict, from one `dialcheck check --file claims.jsonl --format json` process."""
    claims = [c for c, _ in ADDED] + [PLAIN, ADJECTIVE]
    f = tmp_path_factory.mktemp("badges") / "claims.jsonl"
    f.write_text("".join(json.dumps({"context": [CONTEXT], "claim": c, "evidence": [EVIDENCE]}) + "\n" for c in claims))
    out = subprocess.run([sys.executable, "-m", "dialcheck.cli", "check", "--protocol", "fv", "--file", str(f),
                          "--format", "json"], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    got = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert [v["claim"] for v in got] == claims, [v.get("claim") for v in got]
    return dict(zip(claims, got))


@pytest.mark.parametrize("claim,term", ADDED)
def test_a_reply_that_adds_a_detail_gets_no_supports_badge(verdicts, claim, term):
    v = verdicts[claim]
    assert v["label"] != "SUPPORTS", v["rationale"]
    assert term in (v.get("uncovered") or []), v.get("uncovered")
    assert v["schema_version"] == "2.4"


def test_the_plain_restatement_is_still_supported(verdicts):
    v = verdicts[PLAIN]
    assert v["label"] == "SUPPORTS" and not v.get("uncovered"), v["rationale"]


def test_the_plain_restatement_shows_its_badge_and_an_adjective_of_its_own_hides_it(verdicts):
    """A SUPPORTS whose reply keeps a word of its own (under half its content words: still SUPPORTS)
    names that word and shows no badge: the shipped policy never shows "supported" over a part the
    app greys out (`complete`)."""
    plain = verdicts[PLAIN]
    assert plain["display"]["show"] is True, plain["display"]
    added = verdicts[ADJECTIVE]
    assert added["label"] == "SUPPORTS" and added["uncovered"] == ["stunning"], (added["label"], added.get("uncovered"))
    assert added["display"]["show"] is False
