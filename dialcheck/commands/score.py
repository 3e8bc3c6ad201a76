"""`dialcheck score RUN --gold FILE`: score a run file the way pyserini scores a run with a
separate command. A run is `dialcheck eval --output` or `dialcheck verdicts --json` output (one
verdict per line); the JSON equals `dialcheck eval --json` minus its timing fields.

`--check bench/reference.json` compares against reference numbers and exits 1 with one line
when a metric is below its reference by more than the stated tolerance."""
from __future__ import annotations

import json
import sys


def register(sub) -> None:
    p = sub.add_parser("score", help="score a run file (eval --output, or verdicts --json) against gold labels")
    p.add_argument("runs", nargs="+", help="run file(s), JSON lines")
    p.add_argument("--gold", default=None, help="DialFact JSONL with gold labels (default: the DialFact sample)")
    p.add_argument("--limit", type=int, default=None, help="first N gold records only (as eval --limit)")
    p.add_argument("--protocol", choices=["fv", "e2e", "ir"], default=None,
                   help="score this protocol's rows (default: the first row's)")
    p.add_argument("--check", default=None, metavar="REFERENCE_JSON",
                   help="fail (exit 1, one line) when a metric falls below the reference by more than its tolerance")
    p.add_argument("--plots", default=None, help="write figures (PNG + CSV) for these runs to this directory")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def read_rows(paths) -> list[dict]:
    from workers.jsonl import read_jsonl

    return [row for p in paths for row in read_jsonl(p)]


def run(args) -> int:
    from schemas.items import load_dialfact
    from schemas.settings import load_settings
    from workers.scoring import group_rows, score_run

    gold = args.gold or load_settings().data.dialfact_sample
    records = load_dialfact(gold, args.limit)
    rows = read_rows(args.runs)
    protocols = list(dict.fromkeys(p for p, _ in group_rows(rows)))
    wanted = [args.protocol] if args.protocol else protocols[:1]
    results = [score_run(rows, records, gold, protocol=p) for p in wanted]
    if args.plots:
        from workers.plots import plot_run

        for path in plot_run(rows, records, args.plots):
            print(f"[score] figure: {path}", file=sys.stderr)
    status = 0
    if args.check:
        from workers.scoring import check_reference

        with open(args.check, encoding="utf-8") as f:
            reference = json.load(f)
        failures = [msg for r in results for msg in check_reference(r, reference)]
        if failures:
            print(f"score --check: {len(failures)} below reference: " + "; ".join(failures), file=sys.stderr)
            status = 1
    from dialcheck.commands.eval import print_result

    for result in results:
        print_result(result, args.json)
    return status
