"""`dialcheck figures` and its two new plots: SUPPORTS/REFUTES precision per display confidence band,
and the produce→verdict latency distribution.

Why: the band figure answers "how often is a shown REFUTES wrong", so its counting must be exactly the
display rule's bands against gold (rows without `display` get the same rule); the latency figure's
percentiles are quoted in the README; the command must refuse nonsense in one line, and its quiet
stream run must go through a real broker and worker (a model-free stand-in checker keeps it fast)."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from schemas.items import load_dialfact, response_claim_id
from schemas.settings import REPO_ROOT

STANDIN = "tests.stream_standin:create"


def _records(tmp_path: Path, labels: list[str]) -> list:
    with open(tmp_path / "gold.jsonl", "w", encoding="utf-8") as f:
        for i, lab in enumerate(labels):
            f.write(json.dumps({"id": f"r{i}", "context": ["hi"], "response": f"claim {i}", "response_label": lab,
                                "evidence_list": []}) + "\n")
    return load_dialfact(tmp_path / "gold.jsonl")


def _row(label: str, band: str | None = None, p: float = 0.5, evidence: str = "strong", state: str = "ok") -> dict:
    others = [lab for lab in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO") if lab != label]
    row = {"label": label, "probabilities": {label: p, others[0]: (1 - p) / 2, others[1]: (1 - p) / 2},
           "status": {"state": state, "reason": None, "evidence": evidence}}
    if band:
        row["display"] = {"show": band != "low", "tone": "x", "confidence": band}
    return row


@pytest.fixture
def band_case(tmp_path):
    """12 gold records and one predicted row each; expected counts written out by hand below."""
    gold = ["SUPPORTS", "SUPPORTS", "REFUTES",            # S said, high: 2 of 3 right
            "SUPPORTS", "NOT ENOUGH INFO",                # R said, medium: 0 of 2 right
            "REFUTES", "REFUTES", "SUPPORTS",             # R said, no display: p 0.9 strong → high (2 of 2);
                                                          # p 0.7 weak → medium (0 of 1)
            "REFUTES",                                    # R said, p 0.95 strong but degraded → low (1 of 1)
            "SUPPORTS",                                   # S said, low (display says so): 1 of 1
            "NOT ENOUGH INFO", "SUPPORTS"]                # NEI said: in no band
    records = _records(tmp_path, gold)
    rows = [_row("SUPPORTS", "high"), _row("SUPPORTS", "high"), _row("SUPPORTS", "high"),
            _row("REFUTES", "medium"), _row("REFUTES", "medium"),
            _row("REFUTES", p=0.9), _row("REFUTES", p=0.9), _row("REFUTES", p=0.7, evidence="weak"),
            _row("REFUTES", p=0.95, state="degraded"),
            _row("SUPPORTS", "low", p=0.99),  # the published band wins over a recomputation (would be high)
            _row("NOT ENOUGH INFO", "low"), _row("NOT ENOUGH INFO", "high")]
    by_claim = {response_claim_id(r): row for r, row in zip(records, rows)}
    by_claim["not-a-gold-claim"] = _row("REFUTES", "high")  # a run may hold more claims: not counted
    return records, by_claim


@pytest.mark.unit
def test_precision_by_band_counts(band_case):
    from lab.evaluation.plots import precision_by_band

    records, by_claim = band_case
    got = {(t["label"], t["band"]): (t["n"], t["correct"], t["precision"]) for t in precision_by_band(by_claim, records)}
    assert got == {
        ("SUPPORTS", "high"): (3, 2, 66.67), ("SUPPORTS", "medium"): (0, 0, None), ("SUPPORTS", "low"): (1, 1, 100.0),
        ("SUPPORTS", "all"): (4, 3, 75.0),
        ("REFUTES", "high"): (2, 2, 100.0), ("REFUTES", "medium"): (3, 0, 0.0), ("REFUTES", "low"): (1, 1, 100.0),
        ("REFUTES", "all"): (6, 3, 50.0)}


@pytest.mark.unit
def test_wilson_interval():
    from lab.evaluation.plots import wilson

    assert wilson(0, 0) == (None, None)
    lo, hi = wilson(2, 3)
    assert lo == pytest.approx(20.77, abs=0.01) and hi == pytest.approx(93.85, abs=0.01)  # textbook values
    assert wilson(5, 5)[1] == 100.0 and wilson(0, 5)[0] == 0.0


@pytest.mark.unit
def test_precision_by_band_plot_writes_its_numbers(band_case, tmp_path, drawn):
    from lab.evaluation.plots import plot_precision_by_band

    records, by_claim = band_case
    png, csv_path = plot_precision_by_band({"E2E r4g": by_claim, "FV r0": by_claim}, records, tmp_path / "pb",
                                           "test", note="In-sample: fitted on these claims.")
    lines = csv_path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# In-sample: fitted on these claims."
    table = list(csv.DictReader(lines[1:]))
    assert len(table) == 2 * 2 * 4  # runs × labels × (3 bands + all)
    for ax in drawn[0].axes:  # each panel's bars are the CSV's precisions, SUPPORTS then REFUTES, band by band
        want = [float(t["precision"] or 0) for lab in ("SUPPORTS", "REFUTES") for t in table
                if t["run"] == ax.get_title() and t["label"] == lab and t["band"] != "all"]
        assert [bar.get_height() for bar in ax.patches] == pytest.approx(want), ax.get_title()
    r_med = next(t for t in table if t["run"] == "FV r0" and t["label"] == "REFUTES" and t["band"] == "medium")
    assert (r_med["n"], r_med["correct"], r_med["precision"]) == ("3", "0", "0.0")


@pytest.mark.unit
def test_latency_plot_percentiles(tmp_path, drawn):
    """What the README quotes: every claim in the histogram, p50 / p95 drawn where the CSV says."""
    from lab.evaluation.plots import plot_latency

    lat = [0.2 + 0.05 * i for i in range(40)] + [4.0]
    png, csv_path = plot_latency(lat, tmp_path / "lat", "test", note="quiet", ids=[f"c{i}" for i in range(41)],
                                 extra={"load_avg_1m_before": (0.5, "")})
    (ax,) = drawn[0].axes
    assert sum(bar.get_height() for bar in ax.patches) == len(lat)
    vlines = {k.split()[0]: x[0] for k, (x, _) in _lines(ax).items()}
    assert vlines == {"p50": pytest.approx(np.percentile(lat, 50), abs=1e-3),
                      "p95": pytest.approx(np.percentile(lat, 95), abs=1e-3)}
    assert "(41 claims, max 4.00 s)" in ax.get_title()
    lines = csv_path.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# quiet"
    vals = {r["metric"]: r["value"] for r in csv.DictReader(lines[1:])}
    assert vals["claims"] == "41" and float(vals["p50"]) == pytest.approx(np.percentile(lat, 50), abs=1e-3)
    assert float(vals["p95"]) == pytest.approx(np.percentile(lat, 95), abs=1e-3) and float(vals["max"]) == 4.0
    assert vals["latency[c40]"] == "4.0" and vals["load_avg_1m_before"] == "0.5"
    with pytest.raises(ValueError):
        plot_latency([], tmp_path / "none", "empty")


@pytest.fixture
def drawn(monkeypatch) -> list:
    """The matplotlib figures the plots save, kept open so a test reads back what was drawn."""
    import lab.evaluation.plots as plots

    figures = []

    def keep(fig, path):
        fig.tight_layout()
        fig.savefig(path)
        figures.append(fig)
        return path

    monkeypatch.setattr(plots, "_save", keep)
    yield figures
    import matplotlib.pyplot as plt

    for fig in figures:
        plt.close(fig)


def _lines(ax) -> dict[str, tuple[list, list]]:
    """label → (x, y) of the lines drawn with a label."""
    return {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.get_lines()
            if not ln.get_label().startswith("_")}


def _dialcheck(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DIALCHECK_KAFKA_BOOTSTRAP"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "dialcheck.cli", *args], cwd=str(REPO_ROOT), env=env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.unit
def test_figures_arguments(capsys, monkeypatch):
    """The same argv a user types, through `main()` in this process (argparse's --help ends in SystemExit)."""
    from dialcheck.cli import main

    monkeypatch.delenv("DIALCHECK_KAFKA_BOOTSTRAP", raising=False)
    with pytest.raises(SystemExit) as done:
        main(["figures", "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--out", "--limit", "--skip-stream", "--skip-eval", "--stream-records", "--hybridial-index", "--runs"):
        assert opt in out
    for bad, says in ((["--skip-eval", "--skip-stream"], "nothing to do"), (["--stream-records", "0"], "--stream-records"),
                      (["--limit", "0"], "--limit")):
        code = main(["figures", *bad, "--out", "/nonexistent/never-written"])
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.startswith("dialcheck: ") and says in err and len(err.splitlines()) == 1
        assert not Path("/nonexistent/never-written").exists()


@pytest.mark.broker
def test_quiet_stream_run_through_a_real_broker_and_worker(tmp_path):
    """The stream part end to end (embedded Tansu, a real worker process; the stand-in checker): one
    latency per record, and the figure's CSV says how it was run."""
    proc = _dialcheck("figures", "--skip-eval", "--stream-records", "3", "--out", str(tmp_path),
                      "--pipeline", STANDIN, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    from matplotlib.image import imread

    png = imread(tmp_path / "latency_stream.png")  # a real image of the figure's size with something drawn
    assert png.shape[:2] == (340, 540) and float(png[..., :3].std()) > 0.05
    lines = (tmp_path / "latency_stream.csv").read_text(encoding="utf-8").splitlines()
    assert "sent one at a time" in lines[0] and "load average" in lines[0]
    vals = {r["metric"]: float(r["value"]) for r in csv.DictReader(lines[1:])}
    per_claim = [v for k, v in vals.items() if k.startswith("latency[")]
    assert vals["claims"] == 3 and len(per_claim) == 3 and all(0 < v < 60 for v in per_claim)
    assert 0 < vals["p50"] <= vals["p95"] <= vals["max"] and vals["consumer_p50"] > 0


@pytest.mark.unit
def test_risk_coverage_figure_from_a_yardstick_report(tmp_path, drawn):
    """`dialcheck figures --risk-coverage`: one PNG and its CSV, each set's curve and both operating points."""
    from dialcheck.cli import main

    report = {"target": 0.85, "confidence": 0.9, "limit_per_set": 500, "curves": {
        "faithdial": {"coverage": [1.0, 10.0, 20.0], "precision": [100.0, 90.0, 80.0],
                      "shipped": {"coverage": 13.8, "precision": 82.6, "n": 69},
                      "certified": {"coverage": 8.0, "precision": 91.0, "n": 40}},
        "begin_wow": {"coverage": [2.0, 30.0], "precision": [100.0, 70.0],
                      "shipped": {"coverage": 25.0, "precision": 75.0, "n": 100}, "certified": None}}}
    (tmp_path / "report.json").write_text(json.dumps(report))
    rc = main(["figures", "--risk-coverage", str(tmp_path / "report.json"), "--out", str(tmp_path)])
    assert rc == 0
    drawn_lines = {name: xy for ax in drawn[0].axes for name, xy in _lines(ax).items()}
    for name, c in report["curves"].items():  # each set's curve as the report has it
        assert drawn_lines[name] == (c["coverage"], c["precision"]), name
    points = {(ln.get_xdata()[0], ln.get_ydata()[0], ln.get_marker()) for ax in drawn[0].axes for ln in ax.get_lines()
              if ln.get_label().startswith("_") and len(ln.get_xdata()) == 1}
    assert {(13.8, 82.6, "o"), (8.0, 91.0, "*"), (25.0, 75.0, "o")} <= points and not any(p[2] == "*" and p[0] == 25.0 for p in points)
    assert any(list(ln.get_ydata()) == [85.0, 85.0] for ax in drawn[0].axes for ln in ax.get_lines())  # the target
    rows = list(csv.reader(l for l in open(tmp_path / "risk_coverage.csv") if not l.startswith("#")))
    kinds = {(r[0], r[1]) for r in rows[1:]}
    assert ("faithdial", "certified") in kinds and ("begin_wow", "shipped") in kinds
    assert ("begin_wow", "certified") not in kinds
    assert sum(r[1] == "curve" for r in rows[1:]) == 5


@pytest.mark.unit
def test_risk_coverage_bad_report_is_one_line(tmp_path, capsys):
    from dialcheck.cli import main

    (tmp_path / "bad.json").write_text("{}")
    assert main(["figures", "--risk-coverage", str(tmp_path / "bad.json"), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.unit
def test_adapt_curve_figure_from_the_harness_cells(tmp_path, capsys):
    """`dialcheck figures --adapt-curve CELLS`: the learning curve drawn from the harness's cells alone
    (each adapted cell's own-set AUC and certified coverage, the shipped model's beside it); a directory
    without cells is one line and exit 2."""
    from dialcheck.cli import main

    cells = tmp_path / "cells"
    cells.mkdir()

    def score(auc, cov):
        return {"auc": auc, "certified": {"coverage": cov, "precision": None}}

    (cells / "shipped.json").write_text(json.dumps({"scores": {"begin_wow": score(0.8, 0.0)}}))
    for n, seed, auc, cov in ((50, 1, 0.83, 0.0), (200, 1, 0.9, 12.5), (200, 2, 0.88, 4.0)):
        (cells / f"begin_wow-n{n}-s{seed}.json").write_text(json.dumps(
            {"fit": "begin_wow", "n": str(n), "weight": 1.0, "pairs": n, "seed": seed, "scores": {"begin_wow": score(auc, cov)}}))
    (cells / "begin_wow-n200-s1-w0.5.json").write_text(json.dumps(  # a WiSE mix is not a curve point
        {"fit": "begin_wow", "n": "200", "weight": 0.5, "pairs": 200, "seed": 1, "scores": {"begin_wow": score(0.99, 50.0)}}))
    assert main(["figures", "--adapt-curve", str(tmp_path), "--out", str(tmp_path / "fig")]) == 0
    assert (tmp_path / "fig" / "adapt_curve.png").stat().st_size > 0
    rows = list(csv.reader(l for l in open(tmp_path / "fig" / "adapt_curve.csv") if not l.startswith("#")))
    got = {(r[1], r[2], r[3], r[4], r[5]) for r in rows[1:] if r[0] == "begin_wow"}
    assert ("adapted", "200", "1", "0.9", "12.5") in got and ("adapted", "50", "1", "0.83", "0.0") in got
    assert not any(r[4] == "0.99" for r in rows[1:])
    assert any(r[1] == "shipped" and r[4] == "0.8" for r in rows[1:])
    capsys.readouterr()
    assert main(["figures", "--adapt-curve", str(tmp_path / "empty"), "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.count("\n") == 1
