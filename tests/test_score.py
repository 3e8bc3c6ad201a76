"""`dialcheck score` reproduces `dialcheck eval`'s metrics from eval's run file, and the
reference check fails when a run is below bench/reference.json.

Why: a run file is only worth keeping if scoring it later gives exactly the numbers the run
reported; and a regression check that cannot fail protects nothing."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from schemas.settings import REPO_ROOT

N = 8


def dialcheck(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))}
    return subprocess.run([sys.executable, "-m", "dialcheck.cli", *args], cwd=str(REPO_ROOT), env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def fv_run(tmp_path_factory, data_dir):
    """eval --output on the first N records (FV: gold evidence, no index needed)."""
    d = tmp_path_factory.mktemp("score")
    gold = d / "gold.jsonl"
    with open(data_dir / "dialfact" / "testsmall.jsonl", encoding="utf-8") as f:
        gold.write_text("".join(line for _, line in zip(range(N), f)), encoding="utf-8")
    run = d / "run.jsonl"
    proc = dialcheck("eval", "--protocol", "fv", "--surfaces", "r0,r4,r4g", "--data", str(gold),
                     "--output", str(run), "--plots", str(d / "plots"), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"dir": d, "gold": gold, "run": run, "eval": json.loads(proc.stdout)}


@pytest.mark.model
def test_score_of_the_run_file_equals_eval(fv_run):
    rows = [json.loads(line) for line in fv_run["run"].read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 3 * N
    assert {"claim_id", "record_id", "surface", "label", "probabilities", "evidence_ids", "rationale"} <= rows[0].keys()
    assert "timings_ms" not in rows[0]
    proc = dialcheck("score", str(fv_run["run"]), "--gold", str(fv_run["gold"]), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    scored = json.loads(proc.stdout)
    expected = json.loads(json.dumps(fv_run["eval"]))
    for m in expected["surfaces"].values():
        del m["claims_per_second"]  # the only timing in eval's JSON
    assert scored == expected
    assert scored["surfaces"]["r0"]["n"] == N and scored["surfaces"]["r0"]["missing"] == 0


@pytest.mark.model
def test_ir_run_file_scores_like_eval(fv_run, index_dir):
    """The IR rows (ranked document ids per stage) rescore to eval's recall / nDCG / zero-hit JSON."""
    run = fv_run["dir"] / "ir.jsonl"
    proc = dialcheck("eval", "--protocol", "ir", "--surfaces", "r0,r4g", "--data", str(fv_run["gold"]),
                     "--index", str(index_dir), "--output", str(run), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    expected = json.loads(proc.stdout)
    for m in expected["surfaces"].values():
        del m["queries_per_second"]
    scored = dialcheck("score", str(run), "--gold", str(fv_run["gold"]), "--json")
    assert scored.returncode == 0, scored.stderr[-3000:]
    assert json.loads(scored.stdout) == expected
    assert expected["surfaces"]["r0"]["n"] > 0 and "@10" in expected["surfaces"]["r0"]["dense"]


@pytest.mark.model
def test_plots_written_with_their_numbers(fv_run):
    plots = fv_run["dir"] / "plots"
    for stem in ("confusion_fv_r0", "confusion_fv_r4", "confusion_fv_r4g", "reliability_fv_r0", "gate_sweep"):
        assert (plots / f"{stem}.png").stat().st_size > 1000 and (plots / f"{stem}.csv").exists()
    cm = (plots / "confusion_fv_r0.csv").read_text().splitlines()[1:]
    assert sum(int(x) for line in cm for x in line.split(",")[1:]) == N
    # the sweep at the run's own threshold reproduces the r4g run (no model re-run)
    tau = next(r["surface"]["gate"]["threshold"] for r in map(json.loads, fv_run["run"].read_text().splitlines())
               if r["surface_mode"] == "r4g" and r["surface"].get("gate"))
    import csv
    with open(plots / "gate_sweep.csv") as f:
        at_tau = next(r for r in csv.DictReader(f) if float(r["tau"]) == tau)
    r4g = fv_run["eval"]["surfaces"]["r4g"]
    assert float(at_tau["fv_macro_f1"]) == r4g["macro_f1"] and int(at_tau["fv_unknown"]) == 0
    assert float(at_tau["acceptance"]) == r4g["gate_acceptance_rate"]


@pytest.mark.model
def test_reference_check_fails_below_and_passes_at_reference(fv_run, tmp_path):
    result = fv_run["eval"]
    ref = {"records": N, "tolerance_points": 1.0, "metrics": {"fv": {
        "r0": {"macro_f1": result["surfaces"]["r0"]["macro_f1"], "accuracy": result["surfaces"]["r0"]["accuracy"]}}}}
    at = tmp_path / "at.json"
    at.write_text(json.dumps(ref))
    ok = dialcheck("score", str(fv_run["run"]), "--gold", str(fv_run["gold"]), "--check", str(at))
    assert ok.returncode == 0, ok.stderr[-2000:]
    ref["metrics"]["fv"]["r0"]["macro_f1"] += 1.5  # the run is now 1.5 points below: beyond the 1.0 tolerance
    above = tmp_path / "above.json"
    above.write_text(json.dumps(ref))
    bad = dialcheck("score", str(fv_run["run"]), "--gold", str(fv_run["gold"]), "--check", str(above))
    assert bad.returncode == 1
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "fv r0 macro_f1" in lines[0]
    # the shipped reference is for the full sample: an 8-record run must not pass it silently
    shipped = dialcheck("score", str(fv_run["run"]), "--gold", str(fv_run["gold"]), "--check",
                        str(REPO_ROOT / "bench" / "reference.json"))
    assert shipped.returncode == 1 and "300 records" in shipped.stderr


@pytest.mark.unit
@pytest.mark.parametrize("fp, fn, published", [(1, 53, 15.63), (17, 37, 15.62)])
def test_label_metrics_round_like_the_published_tables(fp, fn, published):
    """scikit-learn counts, F1 as 2PR/(P+R): an F1 of exactly 5/32 rounds as the README's numbers did
    (sklearn's own 2TP/(2TP+FP+FN) would give 15.62 for both)."""
    from lab.evaluation.scoring import label_metrics

    nei, s, r = "NOT ENOUGH INFO", "SUPPORTS", "REFUTES"
    gold = [nei] * 5 + [s] * fp + [nei] * fn
    pred = [nei] * 5 + [nei] * fp + [r] * fn
    assert label_metrics(gold, pred)["f1"][nei] == published
