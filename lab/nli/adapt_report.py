"""The tables and the figure of the adaptation harness (lab/nli/adapt_curve.py), read from its cells
(artifacts/adapt-curve/cells/*.json) alone: no model, no torch, so `dialcheck figures --adapt-curve`
and the docs' tables come from the same numbers without loading the lab's training stack."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from lab.nli.judged_sets import CHAT_SETS

OUT = Path("artifacts/adapt-curve")


def cells(out: Path = OUT) -> list[dict]:
    return [dict(json.loads(p.read_text()), key=p.stem) for p in sorted((out / "cells").glob("*.json"))]


def _fmt(x, digits=3) -> str:
    return "—" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def _seeds(items: list[dict], get, digits: int) -> str:
    return " / ".join(_fmt(get(c), digits) for c in sorted(items, key=lambda c: c.get("seed", 0)))


def _model_groups(rows: list[dict]) -> dict:
    """(fit set, n, weight) → the cells of its seeds."""
    out: dict = {}
    for c in rows:
        if c["key"] == "shipped" or "seed" not in c:
            continue
        out.setdefault((c.get("fit"), str(c.get("n")), float(c.get("weight", 1.0))), []).append(c)
    return out


def table(out: Path = OUT) -> str:
    """Markdown: the learning curve (each set scored on its own scored part), cross-deployment (scored
    on the other sets' scored parts) and forgetting (yardstick sets, probes); seeds side by side."""
    rows = cells(out)
    shipped = next((c for c in rows if c["key"] == "shipped"), {"scores": {}})
    ship = shipped.get("scores", {})
    groups = _model_groups(rows)
    order = sorted(groups, key=lambda k: (str(k[0]), _nkey(k[1]), k[2]))
    curve = ["| set | adapted on n (pairs) | ROC AUC (seeds) | Δ AUC (mean) | certified coverage % (seeds) | "
             "shown precision % (seeds) | fine-tune CPU s (seeds) |", "|---|---|---|---|---|---|---|"]
    for s, sc in ship.items():
        curve.append(f"| {s} | shipped | {sc['auc']:.3f} | — | {_fmt(sc['certified']['coverage'], 1)} | "
                     f"{_fmt(sc['certified']['precision'], 1)} | — |")
    for fit, n, w in order:
        items = [c for c in groups[(fit, n, w)] if fit in c.get("scores", {})]
        if w < 1.0 or not items or fit not in ship:
            continue
        sc = lambda c: c["scores"][fit]  # noqa: E731
        curve.append(f"| {fit} | {n} ({items[0]['pairs']}) | {_seeds(items, lambda c: sc(c)['auc'], 3)} | "
                     f"{np.mean([sc(c)['auc'] for c in items]) - ship[fit]['auc']:+.3f} | "
                     f"{_seeds(items, lambda c: sc(c)['certified']['coverage'], 1)} | "
                     f"{_seeds(items, lambda c: sc(c)['certified']['precision'], 1)} | "
                     f"{_seeds(items, lambda c: c.get('train_cpu_s'), 0)} |")
    cross = ["| adapted on (n) | WiSE mix | scored on | shipped AUC | adapted AUC (seeds) | Δ AUC (mean) | "
             "certified coverage %: shipped → adapted (seeds) |", "|---|---|---|---|---|---|---|"]
    for fit, n, w in order:
        items = groups[(fit, n, w)]
        for s in sorted({s for c in items for s in c.get("scores", {})}, key=lambda x: (x != fit, x)):
            got = [c for c in items if s in c.get("scores", {})]
            if s not in ship or (s == fit and w == 1.0 and len(got) and n != "all"):
                continue
            cross.append(f"| {fit} ({n}) | {w:g} | {s} | {ship[s]['auc']:.3f} | "
                         f"{_seeds(got, lambda c: c['scores'][s]['auc'], 3)} | "
                         f"{np.mean([c['scores'][s]['auc'] for c in got]) - ship[s]['auc']:+.3f} | "
                         f"{_fmt(ship[s]['certified']['coverage'], 1)} → "
                         f"{_seeds(got, lambda c: c['scores'][s]['certified']['coverage'], 1)} |")
    forget_rows = [c for c in rows if "forgetting" in c]
    names = sorted({n for c in forget_rows for n in c["forgetting"]["sets"]})
    forget = ["| model | " + " | ".join(names) + " | unrelated probe: SUPPORTS / REFUTES % | silent probe: SUPPORTS / REFUTES % |",
              "|---|" + "---|" * (len(names) + 2)]
    for c in sorted(forget_rows, key=lambda c: (c["key"] != "shipped", c["key"])):
        f = c["forgetting"]
        probes = " | ".join(f"{100 * pr['supports']:.1f} / {100 * pr['refutes']:.1f}" if pr else "—"
                            for pr in (f["probes"].get("unrelated"), f["probes"].get("silent")))
        forget.append(f"| {c['key']} | " + " | ".join(_fmt((f["sets"].get(n) or {}).get("auc"), 3) for n in names) +
                      f" | {probes} |")
    sections = ["### Learning curve", *curve, "", "### Cross-deployment", *cross, "", "### Forgetting", *forget]
    lodo = lodo_rows(rows)
    return "\n".join(sections + (["", "### Leave one dataset out", *lodo] if lodo else []))


# a yardstick set built from another set's records: out of a fit only when that set is out too
DERIVED_FROM = {"true_dialfact": "dialfact"}


def out_of_fit(name: str, fit: set[str]) -> bool:
    return name not in fit and DERIVED_FROM.get(name) not in fit


def lodo_rows(rows: list[dict]) -> list[str]:
    """Markdown rows: each yardstick set scored by the models adapted without it (`lodo` cells with a
    forgetting check), beside the shipped model on the same records; the seeds' spread is the noise
    a change has to exceed."""
    ship = next((c for c in rows if c["key"] == "shipped"), {}).get("forgetting", {})
    groups: dict = {}
    for c in rows:
        if c.get("left_out") and "forgetting" in c and c["forgetting"].get("limit") == ship.get("limit"):
            groups.setdefault((c["left_out"], float(c.get("weight", 1.0))), []).append(c)
    out = []
    for (_, w), items in sorted(groups.items()):
        fit = set(items[0]["fit"].split("+"))
        for name in sorted(n for n in ship.get("sets", {}) if out_of_fit(n, fit)):
            base = (ship["sets"].get(name) or {}).get("auc")
            got = [(c["forgetting"]["sets"].get(name) or {}).get("auc") for c in sorted(items, key=lambda c: c["seed"])]
            if base is None or None in got:
                continue
            out.append(f"| {items[0]['fit']} | {w:g} | {name} | {base:.3f} | {' / '.join(f'{a:.3f}' for a in got)} | "
                       f"{np.mean(got) - base:+.3f} | {max(got) - min(got):.3f} |")
    if not out:
        return []
    return [f"(each set's even spread of {ship.get('limit')} records, p(SUPPORTS) ROC AUC with gold evidence)", "",
            "| adapted on (none of them the set scored) | WiSE mix | scored on | shipped AUC | adapted AUC (seeds) | "
            "Δ AUC (mean) | seed spread |", "|---|---|---|---|---|---|---|", *out]


def _nkey(n) -> int:
    return 10 ** 9 if n == "all" else int(n) if str(n).isdigit() else 10 ** 9 + 1


def figure(path: Path, fit_sets: Sequence[str] = CHAT_SETS, out: Path = OUT) -> list[Path]:
    """Learning curves: each set's scored part against n adapted on from its own fit part."""
    from lab.evaluation.plots import plot_adapt_curve

    rows = cells(out)
    shipped_scores = next((c for c in rows if c["key"] == "shipped"), {"scores": {}})["scores"]
    points: dict = {}
    for c in rows:
        s = c.get("fit")
        if s in fit_sets and c.get("weight", 1.0) == 1.0 and s in c.get("scores", {}) and not c["key"].startswith("lodo"):
            sc = c["scores"][s]
            points.setdefault(s, []).append((c["pairs"], c["seed"], sc["auc"], sc["certified"]["coverage"]))
    shipped = {s: (v["auc"], v["certified"]["coverage"]) for s, v in shipped_scores.items() if s in points}
    path.parent.mkdir(parents=True, exist_ok=True)
    return plot_adapt_curve({s: sorted(p) for s, p in points.items()}, shipped, path,
                            "Adapting the verifier on n judged replies of a set's fit conversations",
                            "scored on the set's other conversations (never adapted on); certified: threshold "
                            "certified on one half of them, coverage read on the other, both ways")
