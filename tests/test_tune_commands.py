"""Every `dialcheck tune` command runs end to end on a small slice (issue 17: `tune bm25` had
crashed on an import nobody ran). Real models and the real Pipeline; a small slice of DialFact
testsmall (60 records, 19 conversations), 2 folds, caches in a temporary directory."""
from __future__ import annotations

import json

import pytest

from dialcheck.cli import main


@pytest.fixture(scope="module")
def slice_file(tmp_path_factory, data_dir):
    lines = (data_dir / "dialfact" / "testsmall.jsonl").read_text(encoding="utf-8").splitlines()[:60]
    path = tmp_path_factory.mktemp("tune") / "slice.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def in_tmp(tmp_path, monkeypatch, index_dir):
    monkeypatch.chdir(tmp_path)  # artifacts/tune (the caches) land here
    monkeypatch.setenv("DIALCHECK_INDEX_DIR", str(index_dir))
    return tmp_path


def run(capsys, *argv) -> dict:
    assert main(["tune", *argv]) == 0
    return json.loads(capsys.readouterr().out)


def test_tune_decision_gate_fit_checkworthy_segment_windows(in_tmp, slice_file, capsys):
    common = ["--data", str(slice_file), "--folds", "2", "--json"]
    report = run(capsys, "decision", *common, "--methods", "threshold,logreg")
    assert report["records"] == 60 and set(report["results"]["r0/hyp0"]) == {"threshold", "logreg"}
    gate = run(capsys, "gate", *common, "--method", "perclass")
    assert "nested" in gate and gate["cv_mean_by_tau"]
    assert run(capsys, "checkworthy", *common)["positives_personal"] >= 0
    assert run(capsys, "segment", *common)["records"] == 60
    assert len(run(capsys, "windows", *common)) == 4
    out = in_tmp / "decision.json"
    meta = run(capsys, "fit", *common, "--out", str(out))
    assert out.exists() and meta["nli_model"]["fingerprint"]


def test_tune_bm25_runs(in_tmp, slice_file, capsys):
    report = run(capsys, "bm25", "--data", str(slice_file))
    assert report["queries"] > 0 and any("recall" in json.dumps(v) for v in report.values() if isinstance(v, dict))


def test_tune_decision_lodo_on_two_small_sets(in_tmp, capsys):
    report = run(capsys, "decision", "--lodo", "--sets", "dialfact,hybridial", "--limit-per-set", "20",
                 "--folds", "2", "--json")
    assert set(report["left_out"]) == {"dialfact", "hybridial"}
    row = report["left_out"]["hybridial"]
    assert {"threshold", "argmax", "guarded", "logreg"} <= set(row)
    assert row["guarded"]["n"] == 20 and "params" in row["guarded"]
    assert "dialfact_grouped_cv" in report
