"""Two leave-one-dataset-out reports side by side (not a test): badges per left-out set.

    python bench/compare_lodo.py A.json B.json [--method shipped] [--labels fp32,int8]

A and B are `dialcheck tune decision --lodo --json` outputs of the same code on the same sets, e.g.
the fp32 NLI artifact and `--model-dir artifacts/nli-int8-static` (a faster model that changes
verdicts is judged by the shown badges, not by identical labels). Prints a Markdown table: macro-F1, SUPPORTS / REFUTES precision
(predicted n), shown coverage and precision (n), and the binomial standard error of the shown
precision (sampling noise of that many badges; the LODO itself has no seed to vary), then B − A
per set. Why a script: the lead copies the table into docs/results.md."""
from __future__ import annotations

import argparse
import json
import math


def _se(precision: float | None, n: int) -> str:
    if precision is None or not n:
        return "–"
    p = precision / 100
    return f"{100 * math.sqrt(p * (1 - p) / n):.1f}"


def rows(a: dict, b: dict, method: str, labels: tuple[str, str]) -> list[str]:
    out = ["| set left out | NLI | macro-F1 | SUPPORTS prec. (n) | REFUTES prec. (n) | shown coverage | "
           "shown precision (n) | s.e. of shown prec. |", "|---|---|---|---|---|---|---|---|"]
    deltas = ["", "| set left out | Δ macro-F1 | Δ shown coverage | Δ shown precision |", "|---|---|---|---|"]
    for name in a["left_out"]:
        if name not in b["left_out"]:
            continue
        got = []
        for tag, report in zip(labels, (a, b)):
            r = report["left_out"][name][method]
            sh = r.get("shown") or {}
            p, n = sh.get("precision"), sh.get("n") or 0
            got.append((r["macro_f1"], sh.get("coverage"), p))
            out.append(f"| {name} | {tag} | {r['macro_f1']} | {r['supports_precision']} ({r['supports_predicted']}) | "
                       f"{r['refutes_precision'] if r['refutes_precision'] is not None else '–'} "
                       f"({r['refutes_predicted']}) | {sh.get('coverage')} % | "
                       f"{p if p is not None else '–'} % ({n}) | {_se(p, n)} |")
        d = [(y - x if x is not None and y is not None else None) for x, y in zip(*got)]
        deltas.append(f"| {name} | " + " | ".join("–" if v is None else f"{v:+.2f}" for v in d) + " |")
    return out + deltas


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--method", default="shipped", help="the report's method row (default: shipped)")
    ap.add_argument("--labels", default="A,B", help="names of the two reports (default A,B)")
    args = ap.parse_args()
    a, b = (json.load(open(p)) for p in (args.a, args.b))
    labels = tuple((args.labels.split(",") + ["A", "B"])[:2])
    print(f"{labels[0]}: {a.get('nli_model')}  {labels[1]}: {b.get('nli_model')}  method: {args.method}")
    print("\n".join(rows(a, b, args.method, labels)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
