"""`dialcheck eval`: FV-only, end-to-end or IR-only evaluation per claim surface.

`--output RUN.jsonl` keeps one row per claim and surface; `dialcheck score RUN.jsonl --gold FILE`
prints the same metrics from it (the eval's metrics are computed from those rows)."""
from __future__ import annotations

import json
import sys

from dialcheck.errors import UsageError
from schemas.protocols import PROTOCOLS, SURFACES


def register(sub) -> None:
    p = sub.add_parser("eval", help="evaluate the pipeline on a DialFact-format JSONL file")
    p.add_argument("--protocol", choices=PROTOCOLS, default="fv",
                   help="fv: the records' gold evidence (default); e2e: retrieved from the index; ir: retrieval only")
    p.add_argument("--surfaces", default="r0,r4,r4g", help=f"comma list of {','.join(SURFACES)} (r5, r5g: the LLM rewrite, DIALCHECK_LLM_URL)")
    p.add_argument("--data", default=None, help="DialFact JSONL (default: <data-dir>/dialfact/testsmall.jsonl)")
    p.add_argument("--index", default=None, help="embedded index directory (e2e, ir)")
    p.add_argument("--limit", type=int, default=None, help="first N records only")
    p.add_argument("--models", default=None, help="'local' or triton://HOST:PORT")
    p.add_argument("--output", default=None, help="write the run file: one JSON line per claim and surface")
    p.add_argument("--plots", default=None, help="write figures (PNG) and their numbers (CSV) to this directory")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--llm-judge", action="store_true", help="the cascade LLM judge on (DIALCHECK_LLM_URL, "
                   "docs/llm-judge.md): run-file rows get nli_label (before the judge) and judge (its parsed answer)")
    p.set_defaults(func=run)


def run(args) -> int:
    from schemas.items import load_dialfact
    from schemas.settings import load_settings
    from lab.evaluation.scoring import ir_records, score_run
    from lab.evaluation.runs import ir_rows, label_rows
    from workers.pipeline import Pipeline

    settings = load_settings(retrieval={"index_dir": args.index}, models={"backend": args.models},
                             llm={"judge": True if getattr(args, "llm_judge", False) else None})
    if getattr(args, "llm_judge", False) and not settings.llm.url:
        raise UsageError("--llm-judge needs an LLM endpoint: set DIALCHECK_LLM_URL (docs/llm-judge.md)")
    surfaces = [s.strip() for s in args.surfaces.split(",") if s.strip()]
    bad = [s for s in surfaces if s not in SURFACES]
    if bad or not surfaces:
        raise UsageError(f"unknown --surfaces {','.join(bad) or '(none)'}: choose from {','.join(SURFACES)}")
    from dialcheck.commands.data import require, require_index_sources

    if not args.data:  # missing data: one line naming `dialcheck data fetch` (dialcheck/commands/data.py)
        require(settings, "dialfact/testsmall.jsonl")
    if args.protocol != "fv":
        require_index_sources(settings)
    data = args.data or settings.data.dialfact_sample
    records = load_dialfact(data, args.limit)
    base = Pipeline.from_settings(settings, protocol=args.protocol, surface=surfaces[0])
    rows: list[dict] = []
    rates: dict[str, float] = {}
    from tqdm import tqdm

    for name in surfaces:
        pipe = base.with_options(surface=name)
        run_rows = ir_rows if args.protocol == "ir" else label_rows
        total = len(ir_records(records)) if args.protocol == "ir" else len(records)
        # a bar on a terminal (tqdm leaves it off when stderr is a file or pipe); the done line always
        with tqdm(total=total, desc=f"[eval] {args.protocol} {name}", unit="claim", file=sys.stderr,
                  disable=None, leave=False, dynamic_ncols=True) as bar:
            got, secs = run_rows(pipe, records, progress=bar.update)
        rows.extend(got)
        rates[name] = round(len(got) / secs, 2) if secs > 0 else 0.0
        print(f"[eval] {args.protocol} {name}: {len(got)} {'queries' if args.protocol == 'ir' else 'claims'} "
              f"in {secs:.1f} s ({rates[name]}/s)", file=sys.stderr)
    if settings.llm.judge and args.protocol != "ir":  # every row says both labels (claims the judge never saw: the same)
        for r in rows:
            r.setdefault("nli_label", r.get("label"))
            r.setdefault("judge", None)
    result = score_run(rows, records, data, protocol=args.protocol)
    rate_key = "queries_per_second" if args.protocol == "ir" else "claims_per_second"
    for name, m in result["surfaces"].items():
        m[rate_key] = rates[name]
    if args.output:
        from workers.jsonl import write_jsonl

        write_jsonl(args.output, rows)
        print(f"[eval] run file: {args.output} ({len(rows)} rows)", file=sys.stderr)
    if args.plots:
        from lab.evaluation.plots import plot_run

        for path in plot_run(rows, records, args.plots):
            print(f"[eval] figure: {path}", file=sys.stderr)
    print_result(result, args.json)
    return 0


def print_result(result: dict, as_json: bool) -> None:
    """The metrics JSON (`--json`) or a table: eval, score and verdicts --gold print alike."""
    if as_json:
        print(json.dumps(result, indent=1))
    else:
        print_table(result)


def print_table(result: dict) -> None:
    print(f"protocol {result['protocol']} on {result['data']} ({result['records']} records)")
    for name, m in result["surfaces"].items():
        if result["protocol"] == "ir":
            print(f"  {name:4s} BM25 R@180 {m['bm25']['@180']['macro_recall']:6.2f}  dense R@10 "
                  f"{m['dense']['@10']['macro_recall']:6.2f}  top1 R@1 {m['top1']['@1']['macro_recall']:6.2f}  "
                  f"ZHR@180 {m['bm25']['@180']['zero_hit_rate']:5.2f}  rewritten {m['rewritten_share']}%")
        else:
            f1 = m["f1"]
            print(f"  {name:4s} acc {m['accuracy']:6.2f}  macro-F1 {m['macro_f1']:6.2f}  F1 S {f1['SUPPORTS']:6.2f} "
                  f"R {f1['REFUTES']:6.2f} NEI {f1['NOT ENOUGH INFO']:6.2f}  rewritten {m['rewritten_share']}%  "
                  f"gate acc. {m['gate_acceptance_rate']}")
