"""Figures of a run (PNG, with the plotted numbers as CSV next to each): confusion matrix per
surface, the gate sweep, a reliability diagram, SUPPORTS/REFUTES precision per display confidence
band, the produce→verdict latency distribution, and benchmark plots from bench/ JSON.

Why from run rows: every figure is recomputed from the per-claim rows `dialcheck eval --output`
writes (and `dialcheck score --plots` reads), so no model runs again. The gate sweep uses the
gate score stored on each r4g row and the r0 / r4 rows' outcomes: at threshold τ a claim takes
its candidate's outcome if score ≥ τ, else the original claim's (the pipeline's own rule)."""
from __future__ import annotations

import csv
from pathlib import Path
from typing import Sequence

from schemas import LABELS
from schemas.protocols import LABEL_PROTOCOLS

from .scoring import group_rows, ir_records, label_metrics, response_claim_id, retrieval_metrics

SHORT = {"SUPPORTS": "S", "REFUTES": "R", "NOT ENOUGH INFO": "NEI"}
TAUS = [round(i / 100, 2) for i in range(101)]
# Okabe–Ito: readable with the common colour-vision deficiencies; lines also differ by marker/style
OKABE_ITO = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000"]


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 100, "font.size": 9})
    return plt


def _write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence], note: str | None = None) -> Path:
    """`note` (e.g. "in-sample for the decision thresholds") goes first as a `# ...` line, so the
    caveat travels with the numbers (pandas: read_csv(..., comment="#"))."""
    with open(path, "w", newline="", encoding="utf-8") as f:
        if note:
            f.write("# " + " ".join(note.split()) + "\n")
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


def _title(title: str, note: str | None, width: int = 70) -> str:
    """The title, with the note below it, each line wrapped at `width` characters (fits the figure)."""
    import textwrap

    lines = title.split("\n") + ([note] if note else [])
    return "\n".join(w for line in lines for w in (textwrap.wrap(line, width) or [""]))


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})  # no version stamp: the same numbers give the same file
    _plt().close(fig)
    return path


# ---- confusion matrix ----------------------------------------------------------------------------
def confusion(by_claim: dict[str, dict], records: Sequence) -> list[list[int]]:
    from sklearn.metrics import confusion_matrix

    pairs = [(r.label, by_claim[response_claim_id(r)]["label"]) for r in records if response_claim_id(r) in by_claim]
    if not pairs:
        return [[0] * len(LABELS) for _ in LABELS]
    gold, pred = zip(*pairs)
    return confusion_matrix(gold, pred, labels=list(LABELS)).tolist()


def plot_confusion(by_claim: dict[str, dict], records: Sequence, out: Path, title: str,
                   note: str | None = None) -> list[Path]:
    cm = confusion(by_claim, records)
    csv_path = _write_csv(out.with_suffix(".csv"), ["gold \\ predicted", *LABELS],
                          [[g, *row] for g, row in zip(LABELS, cm)], note)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(3.6, 3.2) if not note else (4.6, 4.2))
    ax.imshow(cm, cmap="cividis")
    top = max(max(r) for r in cm) or 1
    for i, row in enumerate(cm):
        for j, v in enumerate(row):
            ax.text(j, i, str(v), ha="center", va="center", color="black" if v > top / 2 else "white", fontsize=11)
    ticks = [SHORT[lab] for lab in LABELS]
    ax.set_xticks(range(3), ticks)
    ax.set_yticks(range(3), ticks)
    ax.set_xlabel("predicted")
    ax.set_ylabel("gold")
    ax.set_title(_title(title, note), fontsize=9 if not note else 7)
    return [_save(fig, out.with_suffix(".png")), csv_path]


# ---- reliability ---------------------------------------------------------------------------------
def reliability(by_claim: dict[str, dict], records: Sequence, bins: int = 10) -> tuple[list[tuple], float]:
    """Per confidence bin: (low, high, claims, mean confidence, accuracy) of the verdict's
    probabilities' top class vs gold, and the expected calibration error (percent)."""
    pts = []
    for r in records:
        row = by_claim.get(response_claim_id(r))
        if row is None or not row.get("probabilities"):
            continue
        probs = row["probabilities"]
        top = max(LABELS, key=lambda lab: probs.get(lab, 0.0))
        pts.append((float(probs.get(top, 0.0)), top == r.label))
    table, ece = [], 0.0
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        inside = [(c, ok) for c, ok in pts if lo <= c < hi or (b == bins - 1 and c == 1.0)]
        if inside:
            conf = sum(c for c, _ in inside) / len(inside)
            acc = sum(ok for _, ok in inside) / len(inside)
            ece += len(inside) / len(pts) * abs(acc - conf)
            table.append((lo, hi, len(inside), round(conf, 4), round(acc, 4)))
        else:
            table.append((lo, hi, 0, None, None))
    return table, round(100 * ece, 2)


def plot_reliability(by_claim: dict[str, dict], records: Sequence, out: Path, title: str,
                     note: str | None = None) -> list[Path]:
    table, ece = reliability(by_claim, records)
    csv_path = _write_csv(out.with_suffix(".csv"), ["bin_low", "bin_high", "claims", "mean_confidence", "accuracy"],
                          table, note)
    plt = _plt()
    fig, (ax, axn) = plt.subplots(2, 1, figsize=(3.8, 4.2), height_ratios=[3, 1], sharex=True)
    full = [t for t in table if t[2]]
    ax.plot([0, 1], [0, 1], ls="--", color="#777777", lw=1, label="perfect calibration")
    ax.bar([t[0] + 0.05 for t in full], [t[4] for t in full], width=0.09, color=OKABE_ITO[0], alpha=0.85,
           label="accuracy in bin")
    ax.plot([t[3] for t in full], [t[4] for t in full], "o", color=OKABE_ITO[1], ms=4, label="(mean confidence, accuracy)")
    ax.set_ylabel("accuracy")
    ax.set_ylim(0, 1)
    ax.set_title(_title(f"{title}\nECE {ece:.2f}%", note, 52 if not note else 66), fontsize=9 if not note else 7)
    ax.legend(fontsize=7, loc="upper left")
    axn.bar([t[0] + 0.05 for t in table], [t[2] for t in table], width=0.09, color="#999999")
    axn.set_ylabel("claims")
    axn.set_xlabel("confidence of the top class")
    axn.set_xlim(0, 1)
    return [_save(fig, out.with_suffix(".png")), csv_path]


# ---- gate sweep ----------------------------------------------------------------------------------
def _gate_inputs(groups, protocol: str) -> tuple[dict, dict, dict] | None:
    r0, r4, r4g = (groups.get((protocol, s)) for s in ("r0", "r4", "r4g"))
    if not (r0 and r4 and r4g):
        return None
    return r0, r4, r4g


def _outcomes(r0: dict, r4: dict, r4g: dict, cid: str, key: str):
    """(gate score or None, outcome with the original claim, outcome with the candidate)."""
    g_row = r4g[cid]
    gate = g_row["surface"].get("gate")
    if gate is None:  # no candidate: the original claim at every τ
        return None, g_row[key], g_row[key]
    cand = g_row["surface"].get("candidate_text")
    if gate["accepted"]:
        with_cand = g_row[key]
        original = r0[cid][key] if cid in r0 else None
    else:
        original = g_row[key]
        with_cand = r4[cid][key] if cid in r4 and r4[cid]["surface"]["text"] == cand else None
    return gate["score"], original, with_cand


def gate_sweep(rows: Sequence[dict], records: Sequence) -> list[dict]:
    """Per τ in [0, 1]: gate acceptance (%), FV macro-F1 and IR dense R@10 with the gated surface,
    for whichever protocols the rows hold (fv, or e2e as a stand-in for FV; ir)."""
    groups = group_rows(rows)
    out = [{"tau": t} for t in TAUS]
    label_proto = next((p for p in LABEL_PROTOCOLS if _gate_inputs(groups, p)), None)
    if label_proto:
        r0, r4, r4g = _gate_inputs(groups, label_proto)
        recs = [r for r in records if response_claim_id(r) in r4g]
        per = [_outcomes(r0, r4, r4g, response_claim_id(r), "label") for r in recs]
        scores = [s for s, _, _ in per if s is not None]
        for pt in out:
            t = pt["tau"]
            pred = [(c if s is not None and s >= t else o) for s, o, c in per]
            known = [(r.label, p) for r, p in zip(recs, pred) if p is not None]
            pt["acceptance"] = round(100 * sum(s >= t for s in scores) / len(scores), 2) if scores else None
            pt[f"{label_proto}_macro_f1"] = label_metrics(*zip(*known))["macro_f1"] if known else None
            pt[f"{label_proto}_unknown"] = len(recs) - len(known)
    if _gate_inputs(groups, "ir"):
        r0, r4, r4g = _gate_inputs(groups, "ir")
        recs = [r for r in ir_records(records) if response_claim_id(r) in r4g]
        gold = [{t for t, _ in r.evidence} for r in recs]
        per = [_outcomes(r0, r4, r4g, response_claim_id(r), "dense_docs") for r in recs]
        scores = [s for s, _, _ in per if s is not None]
        for pt in out:
            t = pt["tau"]
            docs = [(c if s is not None and s >= t else o) for s, o, c in per]
            known = [(g, d) for g, d in zip(gold, docs) if d is not None]
            pt["ir_acceptance"] = round(100 * sum(s >= t for s in scores) / len(scores), 2) if scores else None
            pt["ir_dense_recall@10"] = (retrieval_metrics([g for g, _ in known], [d for _, d in known], [10])
                                        ["@10"]["macro_recall"] if known else None)
            pt["ir_unknown"] = len(recs) - len(known)
    return out if (label_proto or _gate_inputs(groups, "ir")) else []


def plot_gate_sweep(rows: Sequence[dict], records: Sequence, out: Path, taus: dict[str, float] | None = None,
                    note: str | None = None) -> list[Path]:
    sweep = gate_sweep(rows, records)
    if not sweep:
        return []
    cols = [k for k in sweep[0] if k != "tau"]
    csv_path = _write_csv(out.with_suffix(".csv"), ["tau", *cols], [[p["tau"], *(p.get(c) for c in cols)] for p in sweep],
                          note)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    styles = {"acceptance": ("gate acceptance, all claims (%)", OKABE_ITO[6], "-"),
              "ir_acceptance": ("gate acceptance, IR queries (%)", "#777777", ":"),
              "fv_macro_f1": ("FV macro-F1", OKABE_ITO[0], "-"), "e2e_macro_f1": ("E2E macro-F1", OKABE_ITO[0], "-"),
              "ir_dense_recall@10": ("IR recall@10 (dense)", OKABE_ITO[1], "--")}
    for key, (label, color, ls) in styles.items():
        if key in cols and any(p.get(key) is not None for p in sweep):
            ax.plot([p["tau"] for p in sweep], [p.get(key) for p in sweep], ls=ls, color=color, label=label, lw=1.6)
    for name, t in (taus or {}).items():
        ax.axvline(t, color="#999999", lw=0.8, ls="-.")
        ax.text(t, 2, f" {name}={t:.2f}", fontsize=7, color="#555555", rotation=90, va="bottom")
    ax.set_xlabel("gate threshold τ (accept the rewrite when s ≥ τ)")
    ax.set_ylabel("%")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 100)
    ax.set_title(_title("BiCon-Gate sweep (recomputed from per-claim gate scores)", note), fontsize=9 if not note else 7)
    ax.legend(fontsize=7, loc="center left")
    return [_save(fig, out.with_suffix(".png")), csv_path]


# ---- precision by display confidence band ----------------------------------------------------------
BANDS = ("high", "medium", "low")
SHOWN_LABELS = ("SUPPORTS", "REFUTES")  # the labels an app shows; NEI is never shown (workers/display/)


def row_confidence(row: dict) -> str:
    """The verdict's display confidence band: its `display.confidence` (schema 2.1), or, for a row
    written before 2.1, the same rule (workers/display.display_for) on its label, probabilities and status."""
    band = (row.get("display") or {}).get("confidence")
    if band in BANDS:
        return band
    from schemas import Status

    from workers.display import display_for

    st = row.get("status") or {}
    status = Status(state=st.get("state", "ok"), reason=st.get("reason"), evidence=st.get("evidence"))
    return display_for(row["label"], row.get("probabilities") or {}, status).confidence


def wilson(correct: int, n: int, z: float = 1.96) -> tuple[float, float] | tuple[None, None]:
    """95% Wilson score interval of a proportion (percent): honest for the small n of a band."""
    if not n:
        return None, None
    p = correct / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return round(100 * max(0.0, centre - half), 2), round(100 * min(1.0, centre + half), 2)


def precision_by_band(by_claim: dict[str, dict], records: Sequence) -> list[dict]:
    """Per shown label (SUPPORTS, REFUTES) and band (high, medium, low, then "all"): how many verdicts
    said that label in that band (n), how many of them the gold label agrees with, and precision (%)
    with its Wilson interval. Only claims of `records` count (a run may hold more)."""
    gold = {response_claim_id(r): r.label for r in records}
    rows = [(row, gold[cid]) for cid, row in by_claim.items() if cid in gold]
    out = []
    for label in SHOWN_LABELS:
        said = [(row_confidence(row), g) for row, g in rows if row["label"] == label]
        for band in (*BANDS, "all"):
            inside = [g for b, g in said if band in ("all", b)]
            n, ok = len(inside), sum(g == label for g in inside)
            lo, hi = wilson(ok, n)
            out.append({"label": label, "band": band, "n": n, "correct": ok,
                        "precision": round(100 * ok / n, 2) if n else None, "ci_low": lo, "ci_high": hi})
    return out


def plot_precision_by_band(runs: dict[str, dict[str, dict]], records: Sequence, out: Path, title: str,
                           note: str | None = None) -> list[Path]:
    """One panel per run (name → claim id → row): SUPPORTS and REFUTES precision in each confidence
    band, n on every bar, 95% Wilson intervals; the CSV holds every number (and the "all" band)."""
    tables = {name: precision_by_band(by_claim, records) for name, by_claim in runs.items()}
    header = ["run", "label", "band", "n", "correct", "precision", "ci_low", "ci_high"]
    csv_path = _write_csv(out.with_suffix(".csv"), header,
                          [[name, *(t[k] for k in header[1:])] for name, table in tables.items() for t in table], note)
    plt = _plt()
    fig, axes = plt.subplots(1, len(tables), figsize=(2.9 * len(tables) + 0.6, 3.6), sharey=True, squeeze=False)
    width = 0.38
    for ax, (name, table) in zip(axes[0], tables.items()):
        for i, (label, color, hatch) in enumerate((("SUPPORTS", OKABE_ITO[2], ""), ("REFUTES", OKABE_ITO[1], "//"))):
            pts = [next(t for t in table if t["label"] == label and t["band"] == b) for b in BANDS]
            xs = [j + (i - 0.5) * width for j in range(len(BANDS))]
            heights = [t["precision"] or 0.0 for t in pts]
            err = [[h - (t["ci_low"] if t["n"] else h) for h, t in zip(heights, pts)],
                   [(t["ci_high"] if t["n"] else h) - h for h, t in zip(heights, pts)]]
            ax.bar(xs, heights, width, color=color, hatch=hatch, edgecolor="#333333", linewidth=0.4,
                          label=label, yerr=err, error_kw={"elinewidth": 0.7, "capsize": 2, "ecolor": "#444444"})
            for x, t in zip(xs, pts):  # n above each bar's interval (an empty band shows n=0 at the foot)
                ax.text(x, (t["ci_high"] if t["n"] else 0) + 1.5, f"n={t['n']}", ha="center", va="bottom",
                        fontsize=6, color="black" if t["n"] else "#777777")
        ax.set_xticks(range(len(BANDS)), BANDS)
        ax.set_xlabel("display confidence")
        ax.set_ylim(0, 124)
        ax.set_yticks(range(0, 101, 20))
        ax.set_title(name, fontsize=8)
    axes[0][0].set_ylabel("precision (%): gold agrees with the label")
    axes[0][0].legend(fontsize=6, loc="upper center", ncol=2, frameon=False)  # above the 100% line
    fig.suptitle(_title(title, note, int(16 * fig.get_figwidth())), fontsize=8)
    return [_save(fig, out.with_suffix(".png")), csv_path]


# ---- latency distribution ------------------------------------------------------------------------
def latency_summary(latencies_s: Sequence[float]) -> dict:
    """n, p50, p95, min, max, mean (seconds; numpy's linear percentiles, as bench/bench_stream.py)."""
    import numpy as np

    xs = np.asarray(list(latencies_s), dtype=float)
    if not len(xs):
        return {"n": 0}
    return {"n": int(len(xs)), "p50_s": round(float(np.percentile(xs, 50)), 3),
            "p95_s": round(float(np.percentile(xs, 95)), 3), "min_s": round(float(xs.min()), 3),
            "max_s": round(float(xs.max()), 3), "mean_s": round(float(xs.mean()), 3)}


def plot_latency(latencies_s: Sequence[float], out: Path, title: str, note: str | None = None,
                 ids: Sequence[str] | None = None, extra: dict | None = None) -> list[Path]:
    """Histogram of produce→verdict latencies (seconds) with p50 and p95 lines. The CSV has the summary
    (and `extra` metrics, e.g. the consumer-side percentiles or the load average), then every claim's value."""
    summary = latency_summary(latencies_s)
    if not summary["n"]:
        raise ValueError("no latencies to plot")
    rows = [["claims", summary["n"], "claims"]]
    rows += [[k.removesuffix("_s"), v, "s"] for k, v in summary.items() if k != "n"]
    rows += [[k, v, u] for k, (v, u) in (extra or {}).items()]
    ids = list(ids) if ids is not None else [str(i) for i in range(len(latencies_s))]
    rows += [[f"latency[{c}]", round(float(x), 3), "s"] for c, x in zip(ids, latencies_s)]
    csv_path = _write_csv(out.with_suffix(".csv"), ["metric", "value", "unit"], rows, note)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.4, 3.4))
    ax.hist(list(latencies_s), bins="auto", color=OKABE_ITO[0], alpha=0.85, edgecolor="white", linewidth=0.5)
    for key, ls, color in (("p50_s", "--", OKABE_ITO[6]), ("p95_s", ":", OKABE_ITO[1])):
        ax.axvline(summary[key], ls=ls, color=color, lw=1.4, label=f"{key[:3]} {summary[key]:.2f} s")
    ax.set_xlabel("produce → verdict (s)")
    ax.set_ylabel("claims")
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlim(left=0)
    ax.legend(fontsize=7)
    ax.set_title(_title(f"{title} ({summary['n']} claims, max {summary['max_s']:.2f} s)", note), fontsize=8)
    return [_save(fig, out.with_suffix(".png")), csv_path]


# ---- all figures of a run ----------------------------------------------------------------------
def plot_run(rows: Sequence[dict], records: Sequence, out_dir: str | Path) -> list[Path]:
    """Confusion matrix per (label protocol, surface), reliability diagram and precision by
    confidence band per label protocol (reliability on r0 when present; the bands on every
    surface), and the gate sweep when r0, r4 and r4g rows are there."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    groups = group_rows(rows)
    written: list[Path] = []
    n_rec = len(records)
    for (proto, surface), by_claim in groups.items():
        if proto == "ir":
            continue
        written += plot_confusion(by_claim, records, out / f"confusion_{proto}_{surface}",
                                  f"{proto.upper()} {surface}: gold vs predicted ({n_rec} claims)")
    for proto in dict.fromkeys(p for p, _ in groups if p != "ir"):
        surface = "r0" if (proto, "r0") in groups else next(s for p, s in groups if p == proto)
        written += plot_reliability(groups[(proto, surface)], records, out / f"reliability_{proto}_{surface}",
                                    f"{proto.upper()} {surface}: verdict probabilities vs gold")
        written += plot_precision_by_band({f"{proto.upper()} {s}": groups[(p, s)] for p, s in groups if p == proto},
                                          records, out / f"precision_by_band_{proto}",
                                          f"{proto.upper()}: precision of shown labels by confidence band ({n_rec} claims)")
    taus = {}
    for (proto, s), by_claim in groups.items():
        if s == "r4g":
            g = next((r["surface"]["gate"] for r in by_claim.values() if r["surface"].get("gate")), None)
            if g:
                taus["τ_IR" if proto == "ir" else "τ_FV"] = g["threshold"]
    written += plot_gate_sweep(rows, records, out / "gate_sweep", taus)
    return written


# ---- benchmarks ----------------------------------------------------------------------------------
def plot_bench_stream(results: dict, out: Path, label: str = "") -> list[Path]:
    """bench/bench_stream.py --json output → throughput (batch vs Kafka) and latency percentiles."""
    b, k = results["batch_path"], results["kafka_path"]
    lats = results["latency"] if isinstance(results["latency"], list) else [results["latency"]]
    rows = [["batch_path_throughput", b["claims_per_s"], "claims/s"], ["kafka_path_throughput", k["claims_per_s"], "claims/s"],
            ["claims", results["records"], "claims"]]
    for lat in lats:
        at = f"@{lat['offered_claims_per_s']}"
        rows += [[f"latency_p50{at}", lat["p50_s"], "s"], [f"latency_p95{at}", lat["p95_s"], "s"],
                 [f"latency_p99{at}", lat["p99_s"], "s"]]
    csv_path = _write_csv(out.with_suffix(".csv"), ["metric", "value", "unit"], rows)
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(6.8, 3.1))
    bars = a1.bar(["batch path\n(no Kafka)", "Kafka\nend to end"], [b["claims_per_s"], k["claims_per_s"]],
                  color=[OKABE_ITO[0], OKABE_ITO[1]], hatch=["", "//"])
    a1.bar_label(bars, fmt="%.2f")
    a1.set_ylabel("claims / s")
    a1.set_title(f"throughput ({results['records']} claims)", fontsize=9)
    width = 0.8 / len(lats)
    for i, lat in enumerate(lats):
        xs = [j + (i - (len(lats) - 1) / 2) * width for j in range(3)]
        bars = a2.bar(xs, [lat["p50_s"], lat["p95_s"], lat["p99_s"]], width, color=OKABE_ITO[2 + i % 5],
                      hatch=["", "..", "xx"][i % 3], label=f"{lat['offered_claims_per_s']} claims/s")
        a2.bar_label(bars, fmt="%.2f", fontsize=6)
    a2.set_xticks(range(3), ["p50", "p95", "p99"])
    a2.legend(fontsize=6, title="offered", title_fontsize=6)
    a2.set_ylabel("seconds")
    a2.set_title("produce→verdict latency", fontsize=9)
    for ax in (a1, a2):
        ax.margins(y=0.15)
    if label:
        import textwrap

        fig.suptitle("\n".join(textwrap.wrap(label, 110)), fontsize=7)
    return [_save(fig, out.with_suffix(".png")), csv_path]


def plot_risk_coverage(curves: dict[str, dict], out: Path, target: float | None = None, title: str = "",
                       note: str | None = None, panels: dict[str, list[str]] | None = None) -> list[Path]:
    """Shown-badge precision against coverage, the badges ranked by badge score (one line per set,
    `curves[name]` = {"coverage": [...%], "precision": [...%], "shipped": {coverage, precision},
    "certified": {...} or None}), the shipped operating point (circle) and the certified one (star)
    marked on each line; `panels`: panel title → the sets drawn in it (default one panel). The
    numbers go to a CSV beside the PNG."""
    plt = _plt()
    panels = panels or {"": list(curves)}
    panels = {k: [n for n in v if n in curves] for k, v in panels.items()}
    panels = {k: v for k, v in panels.items() if v}
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 4.4), squeeze=False, sharey=True)
    rows = []
    for ax, (panel, names) in zip(axes[0], panels.items()):
        for i, name in enumerate(names):
            c = curves[name]
            colour = OKABE_ITO[i % len(OKABE_ITO)]
            style = ("-", "--", ":", "-.")[(i // len(OKABE_ITO)) % 4]
            ax.plot(c["coverage"], c["precision"], style, color=colour, lw=1.3, label=name)
            for kind, marker in (("shipped", "o"), ("certified", "*")):
                pt = c.get(kind)
                if pt and pt.get("precision") is not None:
                    ax.plot([pt["coverage"]], [pt["precision"]], marker, color=colour, ms=11 if marker == "*" else 6,
                            mec="black", mew=0.6)
                    rows.append([name, kind, pt["coverage"], pt["precision"]])
            rows += [[name, "curve", x, y] for x, y in zip(c["coverage"], c["precision"])]
        if target is not None:
            ax.axhline(100 * target, color="grey", lw=0.8, ls="--")
        ax.plot([], [], "o", color="white", mec="black", label="shipped thresholds")
        ax.plot([], [], "*", color="white", mec="black", ms=11, label="certified thresholds")
        ax.set_xlabel("coverage: badges shown (% of claims)")
        ax.set_ylim(40, 101)
        ax.set_xlim(0, None)
        ax.legend(fontsize=7, loc="lower left")
        if panel:
            ax.set_title(panel, fontsize=8)
    axes[0][0].set_ylabel("shown badges right (%)")
    fig.suptitle(_title(title, note, 60 + 50 * (len(panels) - 1)), fontsize=8)
    png = Path(out)
    return [_save(fig, png), _write_csv(png.with_suffix(".csv"), ["set", "kind", "coverage", "precision"], rows, note)]


# ---- adapting the verifier: learning curve ---------------------------------------------------------
def plot_adapt_curve(points: dict[str, list[tuple[int, int, float, float]]], shipped: dict[str, tuple[float, float]],
                     out: Path, title: str = "", note: str | None = None) -> list[Path]:
    """Hold-out ROC AUC of p(SUPPORTS) and certified coverage (%) against the number of judged replies
    adapted on: `points[set]` = [(n, seed, auc, coverage), ...] (each seed a dot, the line through the
    seed means), `shipped[set]` = (auc, coverage) of the shipped model on the same rows (dashed).
    The numbers go to a CSV beside the PNG."""
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(9.2, 3.8))
    rows = []
    for i, (name, pts) in enumerate(points.items()):
        colour = OKABE_ITO[i % len(OKABE_ITO)]
        for ax, k in ((axes[0], 2), (axes[1], 3)):
            ax.scatter([p[0] for p in pts], [p[k] for p in pts], s=14, color=colour)
            ns = sorted({p[0] for p in pts})
            ax.plot(ns, [sum(p[k] for p in pts if p[0] == n) / sum(1 for p in pts if p[0] == n) for n in ns],
                    "-", color=colour, lw=1.3, label=f"{name} adapted")
            if name in shipped:
                ax.axhline(shipped[name][k - 2], color=colour, lw=0.9, ls="--")
        rows += [[name, "adapted", *p] for p in pts]
        if name in shipped:
            rows.append([name, "shipped", "", "", *shipped[name]])
    axes[0].set_ylabel("hold-out ROC AUC of p(SUPPORTS)")
    axes[1].set_ylabel("certified coverage at 85 % (% of replies)")
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xlabel("judged replies adapted on")
    axes[0].plot([], [], "--", color="grey", label="shipped (same rows)")
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(_title(title, note, 110), fontsize=8)
    png = Path(out)
    return [_save(fig, png), _write_csv(png.with_suffix(".csv"), ["set", "model", "n", "seed", "auc", "coverage"], rows, note)]
