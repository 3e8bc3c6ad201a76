"""The verdict contract explains itself: every field of verdict.schema.json has a description, the
schema and the Verdict dataclass name the same fields, a version-2 verdict with a rationale
round-trips, and `dialcheck check --verbose` shows the rule, its numbers and the window.

Why: consumers read verdicts in their apps; an undocumented or unversioned field is a guess, and
a label without its reason ("NOT ENOUGH INFO" — why?) cannot be acted on.
"""
from __future__ import annotations

import copy
import dataclasses
import json

import pytest

from schemas import SCHEMA_DIR, Evidence, GateDecision, InvalidEvent, Status, Surface, Verdict, parse_verdict, validate

pytestmark = pytest.mark.unit

SCHEMA = json.loads((SCHEMA_DIR / "verdict.schema.json").read_text())


def _undocumented(node: dict, path: str = "") -> list[str]:
    out = []
    for name, sub in node.get("properties", {}).items():
        where = f"{path}/{name}"
        if not sub.get("description"):
            out.append(where)
        out += _undocumented(sub, where)
        if isinstance(sub.get("items"), dict):
            out += _undocumented(sub["items"], where + "[]")
    return out


def test_every_field_is_documented():
    assert _undocumented(SCHEMA) == []


def test_documentation_check_has_teeth():
    broken = copy.deepcopy(SCHEMA)
    del broken["properties"]["evidence"]["items"]["properties"]["window"]["description"]
    assert _undocumented(broken) == ["/evidence[]/window"]


def test_schema_and_dataclass_name_the_same_fields():
    assert set(SCHEMA["properties"]) == {f.name for f in dataclasses.fields(Verdict)}


def verdict(rationale: dict | None) -> Verdict:
    ev = Evidence("p1", "Elvis Presley", "Elvis Presley was born in Tupelo, Mississippi. He sang.",
                  window="Elvis Presley was born in Tupelo, Mississippi.", retrieval_score=12.5, prescore=0.8,
                  entail=0.91, neutral=0.03, contradict=0.06)
    return Verdict("c1", "t1", "abc", "He was born in Tupelo",
                   Surface("r4g", "Elvis Presley was born in Tupelo.", "r4", "Elvis Presley was born in Tupelo.",
                           GateDecision(0.88, 0.9, 0.02, 0.8, 0.7, True)),
                   "SUPPORTS", {"SUPPORTS": 0.91, "REFUTES": 0.06, "NOT ENOUGH INFO": 0.03}, [ev],
                   {"nli": "v1"}, {"verify": 44.0}, Status("ok"), rationale=rationale)


RATIONALE = {"rule": "threshold", "numbers": {"entail": 0.91, "threshold": 0.55, "margin": 0.85, "win_gap": 0.15},
             "window": {"passage_id": "p1", "title": "Elvis Presley",
                        "text": "Elvis Presley was born in Tupelo, Mississippi."},
             "summary": "entailment 0.91 ≥ 0.55 and beats the other classes by 0.85 ≥ 0.15"}


def test_version_2_verdict_round_trips():
    v = verdict(RATIONALE)
    d = json.loads(v.to_json())
    assert d["schema_version"] == "2.4" and d["rationale"]["rule"] == "threshold"
    validate("verdict", d)
    assert parse_verdict(v.to_json()).rationale == RATIONALE


def test_version_2_2_uncovered_terms_round_trip_and_older_verdicts_still_read():
    """2.2 adds `uncovered` (optional): a list of the claim's words, or null; a 2.1 verdict without
    it still validates and reads back with None."""
    v = verdict(RATIONALE)
    v.uncovered = ["Gustave"]
    d = json.loads(v.to_json())
    validate("verdict", d)
    assert parse_verdict(v.to_json()).uncovered == ["Gustave"]
    old = {k: x for k, x in d.items() if k != "uncovered"} | {"schema_version": "2.1"}
    validate("verdict", old)
    assert parse_verdict(json.dumps(old).encode()).uncovered is None
    with pytest.raises(Exception):
        validate("verdict", d | {"uncovered": "Gustave"})  # a list, not a string


def test_rationale_must_name_its_rule():
    d = json.loads(verdict({"numbers": {}}).to_json())
    with pytest.raises(InvalidEvent, match="rule"):
        validate("verdict", d)


def test_text_format_explains_the_label():
    """Plain words for people; the rule, its numbers and the window with --verbose."""
    from dialcheck.commands.check import format_text

    text = format_text(verdict(RATIONALE))
    assert text.splitlines()[0].startswith("✔ supported (")
    assert "why:       The passage 'Elvis Presley' states this." in text
    assert "0.91" not in text and "threshold" not in text and "entail" not in text
    detail = format_text(verdict(RATIONALE), verbose=True)
    assert "rule:      threshold   [entail 0.91, threshold 0.55, margin 0.85, win_gap 0.15]" in detail
    assert "rationale: entailment 0.91 ≥ 0.55" in detail
    assert "read:      Elvis Presley: Elvis Presley was born in Tupelo, Mississippi." in detail
    assert "gate 0.88 ≥ τ 0.70: r4 used" in detail
    assert "no rationale" in format_text(verdict(None), verbose=True)
