"""`dialcheck data convert begin|faithdial` writes DialFact-format JSONL that `load_dialfact` (eval,
replay, demo) reads back with each reply's knowledge as its evidence and its attribution label.

Why: the grounded-turn equality check replays these files through the stream and scores
them with eval; a converter that lost the knowledge, the previous turn or the label would make both
sides agree on the wrong question."""
from __future__ import annotations

import subprocess
import sys

import pytest

from lab.evaluation.dialfact_format import chat_sets, dialfact_lines, spread
from schemas.items import load_dialfact
from schemas.settings import REPO_ROOT

pytestmark = pytest.mark.data


def test_spread_covers_the_whole_set_and_keeps_all_without_a_limit():
    assert spread(10, 4) == [0, 2, 5, 7]
    assert spread(3, None) == [0, 1, 2] and spread(3, 9) == [0, 1, 2]


def test_begin_converts_to_records_eval_reads_with_knowledge_context_and_label(data_dir, tmp_path):
    sets = chat_sets("begin", data_dir)
    out = tmp_path / "begin.jsonl"
    proc = subprocess.run([sys.executable, "-m", "dialcheck.cli", "data", "convert", "begin", "--out", str(out),
                           "--limit", "30"], cwd=str(REPO_ROOT), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    records = load_dialfact(out)
    assert len(records) == 30 and len({r.id for r in records}) == 30
    assert {r.id.rsplit("-", 1)[0] for r in records} == {"begin-wow", "begin-cmu", "begin-tc"}  # spread, not a head
    by_id = {it.conversation_id: (it, label) for s in sets for it, label in zip(s.items, s.labels)}
    for r in records:
        item, label = by_id[r.id]
        assert r.response == item.claim and r.context == item.context
        assert r.evidence == [(t, x) for t, x in item.gold_evidence]  # the knowledge the reply was judged on
        assert r.label == ("SUPPORTS" if label == "SUPPORTS" else "NOT ENOUGH INFO")


def test_faithdial_converts_and_a_bad_out_path_is_one_line(data_dir, tmp_path):
    lines = list(dialfact_lines(chat_sets("faithdial", data_dir), limit=5))
    assert len(lines) == 5 and all(l["evidence_list"][0][2] for l in lines)
    proc = subprocess.run([sys.executable, "-m", "dialcheck.cli", "data", "convert", "begin", "--out",
                           str(tmp_path / "no" / "such" / "dir.jsonl")], cwd=str(REPO_ROOT), capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("dialcheck: cannot write") and "Traceback" not in proc.stderr
