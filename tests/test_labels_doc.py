"""docs/cli.md "The `--labels` file": the documented line is what `eval --data`, `calibrate --labels` and
`adapt --labels` read (a newcomer had to guess the `evidence_list` layout)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

DOC = Path(__file__).resolve().parent.parent / "docs" / "cli.md"


def documented_line() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index("```json", text.index("### The `--labels` file")) + len("```json")
    return text[start:text.index("```", start)].strip()


def test_the_documented_labels_line_is_read_by_eval_calibrate_and_adapt(tmp_path):
    from lab.nli.judged import from_dialfact
    from lab.tuning.calibrate import gold_label
    from schemas.items import load_dialfact

    path = tmp_path / "labels.jsonl"
    path.write_text(documented_line() + "\n", encoding="utf-8")
    (rec,) = load_dialfact(path)  # eval --data
    assert rec.evidence == [("Elvis Presley", "He was born on January 8, 1935, in Tupelo, Mississippi.")]
    assert gold_label(json.loads(documented_line())["response_label"]) == "SUPPORTS"  # calibrate --labels
    (pair,) = from_dialfact(path)  # adapt --labels: premise = the evidence texts, hypothesis = the response
    assert pair.premise.startswith("He was born on January 8, 1935") and pair.hypothesis == rec.response
