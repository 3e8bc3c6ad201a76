"""`dialcheck figures`: regenerate the figures in docs/figures from the shipped defaults, in one command.

What it runs (nothing tuned here; every setting is the shipped default unless DIALCHECK_* says otherwise,
and the command prints any DIALCHECK_* variable it sees):
- DialFact testsmall: FV r0, r4, r4g (gold evidence), IR r0, r4, r4g and E2E r4g on the default index →
  confusion_fv_r0, confusion_fv_r4g, confusion_e2e_r4g, reliability_fv_r0, gate_sweep (the FV and IR
  r0/r4/r4g rows: the gate's sweep needs both outcomes of each claim) and precision_by_band_dialfact.
- HybriDial dev: FV r4g, and E2E r4g on an index of its own passages (artifacts/index-hybridial, built
  from hybridial/dev_passages.tsv alone when missing, as `dialcheck index build --tsv ... --sources ""`)
  → confusion_hybridial_fv_r4g, confusion_hybridial_e2e_r4g, reliability_hybridial_fv_r4g and
  precision_by_band_hybridial.
- Unless --skip-stream: a quiet stream run (streams/sequential.py: embedded broker, a real worker, one
  record at a time) → latency_stream, the produce→verdict distribution.

Every figure made from a set the shipped decision layer was fitted on says so in its title and in a
`# ...` first line of its CSV (the sets come from the decision JSON's own `fitted_on`).
`--adapt-curve` draws adapt_curve.png alone, from the cells `python -m lab.nli.adapt_curve` left (no
model is run: the numbers are the harness's). bench_stream.png (bench/bench_stream.py +
bench/plot_bench.py) and ui.png (tests/test_ui_browser.py) are made by their own tools."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from dialcheck.errors import UsageError

from schemas.settings import REPO_ROOT

HYBRIDIAL_INDEX = str(REPO_ROOT / "artifacts" / "index-hybridial")
FIGURES = str(REPO_ROOT / "docs" / "figures")
ADAPT_CELLS = str(REPO_ROOT / "artifacts" / "adapt-curve")


def register(sub) -> None:
    p = sub.add_parser("figures", help="regenerate docs/figures from the shipped defaults (evals, then a quiet stream run)")
    p.add_argument("--out", default=FIGURES, help=f"figure directory (default {FIGURES})")
    p.add_argument("--limit", type=int, default=None, help="first N records of each set only (a quick look, not the figures)")
    p.add_argument("--skip-stream", action="store_true", help="no stream run (no latency figure)")
    p.add_argument("--skip-eval", action="store_true", help="only the stream run (latency figure)")
    p.add_argument("--stream-records", type=int, default=60,
                   help="DialFact records sent one at a time in the stream run (default 60)")
    p.add_argument("--hybridial-index", default=HYBRIDIAL_INDEX,
                   help=f"index of HybriDial's passages, built here when missing (default {HYBRIDIAL_INDEX})")
    p.add_argument("--runs", default=None, help="also keep the run files (JSONL, `dialcheck score` reads them) here")
    p.add_argument("--risk-coverage", default=None, metavar="REPORT.json",
                   help="only the risk-coverage figure (risk_coverage.png), from the yardstick report of "
                        "`dialcheck calibrate --yardstick --out REPORT.json`, plus the feedback store's judged "
                        "verdicts when there are any (--store)")
    p.add_argument("--store", default=None, help="--risk-coverage: the feedback store (default: DIALCHECK_FEEDBACK_STORE "
                                                   "or artifacts/feedback.sqlite3, when it exists)")
    p.add_argument("--adapt-curve", default=None, metavar="CELLS_DIR", nargs="?", const=ADAPT_CELLS,
                   help="only the adaptation learning curve (adapt_curve.png + .csv) from the cells of "
                        f"`python -m lab.nli.adapt_curve` (default {ADAPT_CELLS})")
    p.add_argument("--pipeline", default=None, help=argparse.SUPPRESS)  # the stream worker's checker (tests)
    p.set_defaults(func=run)


def _say(msg: str) -> None:
    print(f"[figures] {msg}", file=sys.stderr, flush=True)


def in_sample_note(settings, set_key: str, what: str) -> str | None:
    """The caveat for a figure of `set_key` when the shipped decision layer was fitted on it, with the
    decision card's leave-one-dataset-out REFUTES precision for that set as the out-of-sample reference."""
    if settings.decision.method != "layer":
        return None
    try:
        meta = json.loads(Path(settings.decision.decision_params).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    sets = (meta.get("meta", {}).get("fitted_on") or {}).get("sets") or {}
    if set_key not in sets:
        return None
    method = meta.get("method", "?")
    lodo = ((meta.get("meta", {}).get("lodo") or {}).get(set_key) or {}).get(method) or {}
    ref = (f" Out of sample (fitted without {set_key}, DECISION_CARD.md): REFUTES precision {lodo['refutes_precision']}%."
           if lodo.get("refutes_precision") is not None else "")
    return (f"In-sample: the shipped decision thresholds ({Path(settings.decision.decision_params).name}, {method}) "
            f"were fitted on {'+'.join(sets)}, which includes these {what}.{ref}")


def _label_rows(pipe, records, what: str) -> list[dict]:
    from tqdm import tqdm

    from lab.evaluation.runs import ir_rows, label_rows
    from lab.evaluation.scoring import ir_records

    make = ir_rows if pipe.protocol == "ir" else label_rows
    total = len(ir_records(records)) if pipe.protocol == "ir" else len(records)
    with tqdm(total=total, desc=f"[figures] {what}", unit="claim", file=sys.stderr, disable=None, leave=False) as bar:
        rows, secs = make(pipe, records, progress=bar.update)
    _say(f"{what}: {len(rows)} rows in {secs:.1f} s")
    return rows


def _hybridial_searcher(settings, index_dir: str, tsv: Path, encoder):
    """The searcher over HybriDial's own passages; the index is built from `tsv` alone when missing."""
    from workers.retrieval.build import ensure_index

    s = settings.updated(retrieval={"index_dir": index_dir, "backend": "embedded"})
    return ensure_index(s, encoder, sources=[], tsv=str(tsv))


def _write_runs(runs_dir: str | None, name: str, rows: list[dict]) -> None:
    from workers.jsonl import write_jsonl

    if runs_dir:
        Path(runs_dir).mkdir(parents=True, exist_ok=True)
        write_jsonl(Path(runs_dir) / f"{name}.jsonl", rows)


def eval_figures(settings, out: Path, limit: int | None, hybridial_index: str, runs_dir: str | None) -> list[Path]:
    """The evaluator's runs on both sets and their figures (module docstring)."""
    from schemas.items import load_dialfact
    from workers.models.factory import load_models
    from workers.pipeline import Pipeline
    from lab.evaluation.plots import plot_confusion, plot_gate_sweep, plot_precision_by_band, plot_reliability
    from workers.retrieval.build import ensure_index
    from workers.retrieval.factory import load_searcher
    from lab.evaluation.scoring import group_rows

    written: list[Path] = []
    t = time.perf_counter()
    nli, encoder = load_models(settings)
    ensure_index(settings, encoder)
    base = Pipeline(settings, nli, encoder, load_searcher(settings, encoder), "e2e", "r4g")
    base.warm_up()
    _say(f"models and default index loaded in {time.perf_counter() - t:.1f} s")

    # DialFact testsmall
    records = load_dialfact(settings.data.dialfact_sample, limit)
    rows = []
    for proto, surfaces in (("fv", ("r0", "r4", "r4g")), ("ir", ("r0", "r4", "r4g")), ("e2e", ("r4g",))):
        for s in surfaces:
            rows += _label_rows(base.with_options(protocol=proto, surface=s), records, f"testsmall {proto} {s}")
    _write_runs(runs_dir, "dialfact", rows)
    groups = group_rows(rows)
    n = len(records)
    note = in_sample_note(settings, "dialfact", f"{n} claims")
    for proto, s in (("fv", "r0"), ("fv", "r4g"), ("e2e", "r4g")):
        written += plot_confusion(groups[(proto, s)], records, out / f"confusion_{proto}_{s}",
                                  f"DialFact testsmall, {proto.upper()} {s}: gold vs predicted ({n} claims)", note)
    written += plot_reliability(groups[("fv", "r0")], records, out / "reliability_fv_r0",
                                f"DialFact testsmall, FV r0: verdict probabilities vs gold ({n} claims)")
    gate = next((r["surface"]["gate"] for r in groups[("fv", "r4g")].values() if r["surface"].get("gate")), None)
    ir_gate = next((r["surface"]["gate"] for r in groups[("ir", "r4g")].values() if r["surface"].get("gate")), None)
    taus = {**({"τ_FV": gate["threshold"]} if gate else {}), **({"τ_IR": ir_gate["threshold"]} if ir_gate else {})}
    gate_note = (note + f" τ_FV {settings.gate.tau_fv:.2f} was chosen by grouped CV on these claims (README)."
                 if note else None)
    written += plot_gate_sweep(rows, records, out / "gate_sweep", taus, gate_note)
    written += plot_precision_by_band({"FV r0 (gold evidence)": groups[("fv", "r0")],
                                       "FV r4g (gold evidence)": groups[("fv", "r4g")],
                                       "E2E r4g (default index)": groups[("e2e", "r4g")]},
                                      records, out / "precision_by_band_dialfact",
                                      f"DialFact testsmall ({n} claims): precision of SUPPORTS / REFUTES verdicts "
                                      f"by display confidence (95% Wilson intervals)", note)

    # HybriDial dev
    hdir = Path(settings.data.dir) / "hybridial"
    if not (hdir / "dev.jsonl").exists():
        _say(f"no {hdir / 'dev.jsonl'}: HybriDial figures skipped")
        return written
    hrecords = load_dialfact(str(hdir / "dev.jsonl"), limit)
    hrows = _label_rows(base.with_options(protocol="fv", surface="r4g"), hrecords, "hybridial fv r4g")
    panels = {"FV r4g (gold evidence)": "fv"}
    if (hdir / "dev_passages.tsv").exists():
        searcher = _hybridial_searcher(settings, hybridial_index, hdir / "dev_passages.tsv", encoder)
        hs = settings.updated(retrieval={"index_dir": hybridial_index, "backend": "embedded"})
        pipe = Pipeline(hs, nli, encoder, searcher, "e2e", "r4g")
        hrows += _label_rows(pipe, hrecords, "hybridial e2e r4g")
        panels["E2E r4g (HybriDial passages)"] = "e2e"
    else:
        _say(f"no {hdir / 'dev_passages.tsv'}: HybriDial E2E skipped")
    _write_runs(runs_dir, "hybridial", hrows)
    hgroups = group_rows(hrows)
    hn = len(hrecords)
    hnote = in_sample_note(settings, "hybridial", f"{hn} claims")
    for proto in panels.values():
        written += plot_confusion(hgroups[(proto, "r4g")], hrecords, out / f"confusion_hybridial_{proto}_r4g",
                                  f"HybriDial dev, {proto.upper()} r4g: gold vs predicted ({hn} claims)", hnote)
    written += plot_reliability(hgroups[("fv", "r4g")], hrecords, out / "reliability_hybridial_fv_r4g",
                                f"HybriDial dev, FV r4g: verdict probabilities vs gold ({hn} claims)")
    written += plot_precision_by_band({name: hgroups[(proto, "r4g")] for name, proto in panels.items()},
                                      hrecords, out / "precision_by_band_hybridial",
                                      f"HybriDial dev ({hn} claims): precision of SUPPORTS / REFUTES verdicts "
                                      f"by display confidence (95% Wilson intervals)", hnote)
    return written


def stream_figure(settings, out: Path, n_records: int, pipeline: str | None) -> list[Path]:
    """One record at a time through an embedded broker and a real worker (E2E r4g, the worker's
    default); the verdicts' own latency_ms as the distribution, the consumer-side numbers in the CSV."""
    from schemas.items import load_dialfact
    from streams.sequential import run_sequential
    from lab.evaluation.plots import latency_summary, plot_latency

    if pipeline is None:
        from workers.retrieval.build import ensure_index

        ensure_index(settings)
    everything = load_dialfact(settings.data.dialfact_sample)
    records = everything[:n_records]
    warm = [r for r in everything[-2:] if r not in records]  # other claims than the measured ones
    _say(f"stream: {len(records)} records one at a time (+{len(warm)} warm-up), embedded broker and a real worker")
    done = 0

    def tick(i: int) -> None:
        nonlocal done
        done = i + 1
        if done % 10 == 0 or done == len(records):
            _say(f"stream: {done}/{len(records)} verdicts")

    run = run_sequential(settings, records, warm, pipeline=pipeline, progress=tick)
    ids = [c for c in run.claim_ids if c in run.latency_ms]
    lat = [run.latency_ms[c] / 1000 for c in ids]
    arrival = latency_summary([run.arrival_s[c] for c in run.claim_ids])
    cores = os.cpu_count()
    load = f"load average {run.load_before[0]:.2f} → {run.load_after[0]:.2f} on {cores} cores"
    note = (f"E2E r4g, DialFact testsmall records 1-{len(records)} sent one at a time (each verdict awaited "
            f"before the next record: no queueing), embedded Tansu broker, 1 worker; {load}.")
    extra = {"consumer_p50": (arrival.get("p50_s"), "s"), "consumer_p95": (arrival.get("p95_s"), "s"),
             "worker_ready": (run.worker_ready_s, "s"), "load_avg_1m_before": (round(run.load_before[0], 2), ""),
             "load_avg_1m_after": (round(run.load_after[0], 2), ""), "cpu_cores": (cores, "")}
    written = plot_latency(lat, out / "latency_stream", "produce→verdict latency (verdict.latency_ms)", note, ids, extra)
    s = latency_summary(lat)
    _say(f"stream: latency_ms p50 {s['p50_s']} s, p95 {s['p95_s']} s, max {s['max_s']} s "
         f"(consumer-side p50 {arrival.get('p50_s')} s, p95 {arrival.get('p95_s')} s); {load}; {run.seconds} s")
    return written


def risk_coverage_figure(report_path: str, out: Path, store: str | None) -> list[Path]:
    """Shown-badge precision against coverage per yardstick set (and for the feedback store's judged
    verdicts, when it has any), the shipped and certified operating points marked."""
    from lab.evaluation.plots import plot_risk_coverage

    try:
        report = json.loads(Path(report_path).read_text(encoding="utf-8"))
        curves = dict(report["curves"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"--risk-coverage {report_path}: not a report of `dialcheck calibrate --yardstick`") from None
    fb = _feedback_curve(store)
    if fb is not None:
        curves["feedback"] = fb
    note = (f"FV, gold evidence, at most {report.get('limit_per_set')} claims per set; badges ranked by the shipped "
            f"badge score (its scorer was fitted on the six older sets: in-sample there; BEGIN never fitted on). "
            f"Star: thresholds certified at {report['target']} / confidence {report['confidence']} on the "
            f"chat-response sets without the set drawn.")
    chat = [n for n in report.get("chat_sets", []) if n in curves] + (["feedback"] if fb is not None else [])
    panels = {"chat responses (attribution) and feedback": chat, "the other yardstick sets": [n for n in curves if n not in chat]}
    return plot_risk_coverage(curves, out / "risk_coverage.png", report["target"],
                              "Shown badges right vs coverage (claims ranked by badge score)", note, panels)


def _feedback_curve(store: str | None) -> dict | None:
    from schemas.settings import load_settings
    from schemas.settings.stream import feedback_off

    settings = load_settings()
    where = store or settings.stream.feedback_store  # the one default: DIALCHECK_FEEDBACK_STORE
    if feedback_off(where) or ("://" not in where and not Path(where).is_file()):
        if store:
            raise UsageError(f"--store {store}: no feedback store there")
        return None
    try:
        from streams.feedback_store import FeedbackStore
    except ModuleNotFoundError:
        return None
    from lab.tuning.calibrate import curve, from_feedback, shown_stats
    from workers.display import load_display

    policy = load_display(settings.decision)
    if policy is None:
        return None
    rows, _ = from_feedback(policy, FeedbackStore(where))
    if not len(rows.label):
        return None
    st = shown_stats(rows, policy, 0.9)
    return {**curve(rows, policy), "shipped": {k: st[k] for k in ("coverage", "precision", "n")}, "certified": None}


def run(args) -> int:
    from schemas.settings import load_settings

    if args.risk_coverage:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        for p in risk_coverage_figure(args.risk_coverage, out, args.store):
            print(p)
        return 0
    if args.adapt_curve:
        from lab.nli.adapt_report import figure

        if not any((Path(args.adapt_curve) / "cells").glob("*.json")):
            raise UsageError(f"no adaptation cells in {args.adapt_curve}/cells (run `python -m lab.nli.adapt_curve curve ...` first)")
        for p in figure(Path(args.out) / "adapt_curve.png", out=Path(args.adapt_curve)):
            print(p)
        return 0
    if args.limit is not None and args.limit < 1:
        raise UsageError(f"--limit must be at least 1 (got {args.limit})")
    if args.stream_records < 1:
        raise UsageError(f"--stream-records must be at least 1 (got {args.stream_records})")
    if args.skip_eval and args.skip_stream:
        raise UsageError("--skip-eval and --skip-stream together leave nothing to do")
    settings = load_settings()
    if not Path(settings.data.dialfact_sample).exists():
        raise UsageError(f"no DialFact sample at {settings.data.dialfact_sample} (DIALCHECK_DATA_DIR)")
    overrides = sorted(k for k in os.environ if k.startswith("DIALCHECK_"))
    if overrides:
        _say(f"not only shipped defaults: {', '.join(overrides)} set in the environment")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    written: list[Path] = []
    if not args.skip_eval:
        written += eval_figures(settings, out, args.limit, args.hybridial_index, args.runs)
    if not args.skip_stream:
        n = min(args.stream_records, args.limit) if args.limit else args.stream_records
        written += stream_figure(settings, out, n, args.pipeline)
    for p in written:
        print(p)
    _say(f"{len(written)} files in {out} in {time.perf_counter() - t0:.0f} s")
    return 0
