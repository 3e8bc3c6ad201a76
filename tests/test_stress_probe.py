"""The stress probe's fixture and its counts (lab/probes/stress.py). The checker here is a
stand-in that answers fixed labels: what is tested is the counting, not a model (the real
Checker runs in `python -m lab.probes.stress`, measured in docs/stress.md)."""
from __future__ import annotations

from collections import Counter
from types import SimpleNamespace

import pytest

from lab.probes.stress import GOLD, load_pairs, main, measure

pytestmark = pytest.mark.unit


def test_fixture_pairs_each_wrong_twin_with_its_entailed_twin():
    rows = load_pairs()
    groups = {}
    for r in rows:
        assert r["label"] in GOLD and r["evidence"] and r["claim"]
        groups.setdefault(r["group"], []).append(r)
    assert len(rows) >= 400
    assert all(sorted(t["twin"] for t in g) == ["entailed", "wrong"] for g in groups.values())
    assert all({t["evidence"] for t in g} == {g[0]["evidence"]} for g in groups.values())
    assert all(t["label"] == "entailment" for g in groups.values() for t in g if t["twin"] == "entailed")
    kinds = Counter(r["kind"] for r in rows)
    assert set(kinds) == {"swap", "passive", "recombine", "entity", "number"} and min(kinds.values()) >= 60
    # a changed number is a contradiction; the claim differs from its twin
    assert all(r["label"] == "contradiction" for r in rows if r["kind"] == "number" and r["twin"] == "wrong")
    assert all(g[0]["claim"] != g[1]["claim"] for g in groups.values())


class _Answers:
    """Stand-in checker: a fixed verdict per claim, shown unless the label is NOT ENOUGH INFO."""

    def __init__(self, labels):
        self.labels = labels

    def check_many(self, items):
        out = []
        for it in items:
            label = self.labels[it["claim"]]
            out.append(SimpleNamespace(label=label, probabilities={label: 0.9},
                                       display=SimpleNamespace(show=label != "NOT ENOUGH INFO")))
        return out


def test_counts_per_kind():
    rows = [{"evidence": "e", "claim": "a", "label": "entailment", "kind": "swap", "group": "1", "twin": "entailed"},
            {"evidence": "e", "claim": "b", "label": "neutral", "kind": "swap", "group": "1", "twin": "wrong"},
            {"evidence": "e", "claim": "c", "label": "entailment", "kind": "number", "group": "2", "twin": "entailed"},
            {"evidence": "e", "claim": "d", "label": "contradiction", "kind": "number", "group": "2", "twin": "wrong"},
            {"evidence": "e", "claim": "f", "label": "contradiction", "kind": "number", "group": "3", "twin": "wrong"}]
    checker = _Answers({"a": "SUPPORTS", "b": "SUPPORTS", "c": "REFUTES", "d": "REFUTES", "f": "SUPPORTS"})
    report, per_row = measure(rows, checker)
    assert report["swap"]["false_supports_rate"] == 1.0 and report["swap"]["entailed_supports_rate"] == 1.0
    assert report["swap"]["shown_wrong"] == 1 and report["swap"]["shown"] == 2
    n = report["number"]
    assert (n["refutes"], n["contradiction_gold"], n["supports_count"]) == (1, 2, 1)
    assert n["entailed_supports_rate"] == 0.0 and n["shown_wrong"] == 2  # REFUTES on the entailed twin, SUPPORTS on f
    assert report["all"]["pairs"] == 5 and [r["gold"] for r in per_row][:2] == ["SUPPORTS", "NOT ENOUGH INFO"]


def test_a_missing_model_dir_is_one_line_and_exit_2(capsys, tmp_path):
    assert main(["--model-dir", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dialcheck: ") and err.count("\n") == 1
