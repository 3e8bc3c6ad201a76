"""`dialcheck score RUN --gold FILE`: score a run file the way pyserini scores a run with a
separate command. A run is `dialcheck eval --output` or `dialcheck verdicts --json` output (one
verdict per line); the JSON equals `dialcheck eval --json` minus its timing fields.

Hostile files are one line and exit 2 (`dialcheck: FILE:LINE: reason`): a missing file, a line
that is not UTF-8, not JSON, too deep or not an object, a row without claim_id or protocol, an
unknown label, `model_versions` or `surface.gate.accepted` of the wrong type, an empty run, a gold
file with an unknown response_label, a run none of whose claims is in the gold file. A claim id
that repeats (at-least-once topics) is scored by its first row; the count goes to stderr.
The protocol is the one most rows declare (`--protocol` to choose another).

`--check bench/reference.json` compares against reference numbers and exits 1 with one line
when a metric is below its reference by more than the stated tolerance."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from schemas.protocols import PROTOCOLS


def register(sub) -> None:
    p = sub.add_parser("score", help="score a run file (eval --output, or verdicts --json) against gold labels")
    p.add_argument("runs", nargs="+", help="run file(s), JSON lines")
    p.add_argument("--gold", default=None, help="DialFact JSONL with gold labels (default: the DialFact sample)")
    p.add_argument("--limit", type=int, default=None, help="first N gold records only (as eval --limit)")
    p.add_argument("--protocol", choices=PROTOCOLS, default=None,
                   help="score this protocol's rows (default: the one most rows declare)")
    p.add_argument("--check", default=None, metavar="REFERENCE_JSON",
                   help="fail (exit 1, one line) when a metric falls below the reference by more than its tolerance")
    p.add_argument("--plots", default=None, help="write figures (PNG + CSV) for these runs to this directory")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def _readable(path: str, what: str) -> None:
    from dialcheck.errors import UsageError

    if not Path(path).exists():
        raise UsageError(f"no such file: {path} ({what})")
    if not Path(path).is_file():
        raise UsageError(f"not a file: {path} ({what})")


def read_rows(paths) -> list[dict]:
    """Every row of every run file, checked; a bad line is a RunFileError naming FILE:LINE."""
    from lab.evaluation.scoring import read_run_file

    rows = []
    for p in paths:
        _readable(p, "run file")
        rows += read_run_file(p)
    return rows


def load_gold(path: str, limit: int | None = None) -> list:
    """The gold records, each line checked first (unknown labels, deep or binary lines: RunFileError)."""
    from schemas.items import load_dialfact
    from lab.evaluation.scoring import check_gold_file

    _readable(path, "--gold")
    check_gold_file(path)
    return load_dialfact(path, limit)


def score_rows(rows: list[dict], records: list, gold: str, protocols: list[str | None], source: str) -> list[dict]:
    """score_run per protocol; a run that matches no gold claim, or lacks the protocol, is a UsageError."""
    from dialcheck.errors import UsageError
    from lab.evaluation.scoring import duplicate_ids, score_run

    try:
        results = [score_run(rows, records, gold, protocol=p) for p in protocols]
    except ValueError as e:
        raise UsageError(f"{source}: {e}") from None
    for r in results:
        if not any(m.get("n") for m in r["surfaces"].values()):
            raise UsageError(f"{source}: none of its {r['protocol']} claims is a record of {gold} "
                             f"(another gold file or --limit?)")
    dup, conflicting = duplicate_ids(rows)
    if dup:
        print(f"[score] {dup} rows repeat an earlier claim id ({conflicting} with another label): "
              "the first row of each is scored", file=sys.stderr)
    return results


def print_scored(result: dict, as_json: bool) -> None:
    """The metrics (JSON or table) and, as text, how many claims were scored: '5 of 300 scored, 295 missing'."""
    from dialcheck.commands.eval import print_result
    from lab.evaluation.scoring import coverage_lines

    print_result(result, as_json)
    if not as_json:
        print("\n".join(coverage_lines(result)))


def run(args) -> int:
    from schemas.settings import load_settings
    gold = args.gold or load_settings().data.dialfact_sample
    records = load_gold(gold, args.limit)
    rows = read_rows(args.runs)
    wanted = [args.protocol] if args.protocol else [None]
    results = score_rows(rows, records, gold, wanted, ", ".join(args.runs))
    if args.plots:
        from lab.evaluation.plots import plot_run

        for path in plot_run(rows, records, args.plots):
            print(f"[score] figure: {path}", file=sys.stderr)
    status = 0
    if args.check:
        from lab.evaluation.scoring import check_reference

        with open(args.check, encoding="utf-8") as f:
            reference = json.load(f)
        failures = [msg for r in results for msg in check_reference(r, reference)]
        if failures:
            print(f"score --check: {len(failures)} below reference: " + "; ".join(failures), file=sys.stderr)
            status = 1
    for result in results:
        print_scored(result, args.json)
    return status


def usable_rows(rows: list[dict], source: str) -> list[dict]:
    """Rows read from a topic (`dialcheck verdicts --gold`): one that the metrics cannot read is
    left out and counted on stderr (a shared topic may hold anyone's records); none left: UsageError."""
    from dialcheck.errors import UsageError
    from lab.evaluation.scoring import row_problem

    problems = [(r, row_problem(r)) for r in rows]
    bad = [p for _, p in problems if p]
    if bad:
        print(f"[score] {len(bad)} of {len(rows)} verdicts on {source} cannot be scored and are left out "
              f"(first: {bad[0]})", file=sys.stderr)
    good = [r for r, p in problems if not p]
    if not good:
        raise UsageError(f"{source}: no verdict that can be scored ({len(rows)} read)")
    return good
