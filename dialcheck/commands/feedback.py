"""`dialcheck feedback import FILE | stats`: judgements from files into the feedback store, and what
the store says about the badges.

`import` reads JSONL or CSV (by extension; `--format` to say) of either kind, row by row:
- an annotation export in the feedback schema (schemas/feedback.schema.json; a JSONL row may also
  carry the judged verdict whole under `verdict`, which is stored for the join);
- a DialFact-format file with gold `response_label` and `id`: each record is judged against the
  verdict a run file (`dialcheck eval --output`, `--run`) gave it: right when the labels agree. The
  label may be three-way or binary attribution (SUPPORTS / NOT SUPPORTS, "supported" / "not
  supported", 1 / 0): against a binary NOT SUPPORTS a REFUTES or NOT ENOUGH INFO verdict is not
  counted wrong (`gold_judgement`); the gold label is kept as the judgement's `corrected_label`.
A bad row is one line (its row number and why) and is skipped; the command fails (exit 2) only
when no row was usable. Importing the same file again changes nothing (each row's feedback id is
stable, the store upserts on it).

`stats` prints judgements by kind and source, and per badge bucket the shown-badge precision with
its interval, n and coverage, and whether the drift alarm fires (streams/precision.py); when the
store holds verdicts of more than one NLI model version (an adapted model rolled out), the same per
version, so a rollout is judged before and after (`--json`: `by_nli_version`). It exits 1 when the
drift alarm fires on the store's shown badges (any bucket), so cron or CI can act on it."""
from __future__ import annotations

import csv
import json
import sys
import time
from pathlib import Path

from dialcheck.errors import UsageError

ALARM_EXIT = 1  # `feedback stats` when the drift alarm fires: a cron job or CI step fails on it (2 is a mistake)
MAX_ROW_LINES = 20  # bad rows quoted one per line; beyond this, a count


def register(sub) -> None:
    p = sub.add_parser("feedback", help="feedback on verdicts: import judgements, show live precision")
    fsub = p.add_subparsers(dest="feedback_command", required=True)
    i = fsub.add_parser("import", help="import a labelled JSONL/CSV (feedback schema, or DialFact + --run)")
    i.add_argument("file", help="JSONL or CSV: rows in the feedback schema, or DialFact records with response_label")
    i.add_argument("--run", default=None, help="run file (dialcheck eval --output) whose verdicts DialFact rows judge")
    i.add_argument("--surface", default=None, help="the run's surface to judge when it holds several (e.g. r4g)")
    i.add_argument("--source", choices=("annotator", "moderator", "user"), default="annotator",
                   help="who judged, for DialFact rows (default annotator)")
    i.add_argument("--format", choices=("jsonl", "csv"), default=None, help="default: from the file's extension")
    i.add_argument("--store", default=None, help="feedback store (default DIALCHECK_FEEDBACK_STORE, "
                   "artifacts/feedback.sqlite3)")
    i.set_defaults(func=cmd_import)
    s = fsub.add_parser("stats", help="judgements stored, and per badge the shown precision with its interval")
    s.add_argument("--store", default=None, help="feedback store (default DIALCHECK_FEEDBACK_STORE)")
    s.add_argument("--target", type=float, default=None, help="precision target of the alarm (default "
                   "DIALCHECK_PRECISION_TARGET)")
    s.add_argument("--confidence", type=float, default=None, help="interval confidence (default "
                   "DIALCHECK_PRECISION_CONFIDENCE)")
    s.add_argument("--json", action="store_true", help="one JSON object")
    s.set_defaults(func=cmd_stats)


def open_store(arg: str | None, settings):
    from schemas.settings.stream import feedback_off
    from streams.feedback_store import FeedbackStore

    target = arg or settings.stream.feedback_store
    if feedback_off(target):
        raise UsageError("the feedback store is off (DIALCHECK_FEEDBACK_STORE=off): name one with --store")
    return FeedbackStore(target)  # StoreUnavailable: one line (dialcheck/errors.py)


# -- reading the file ------------------------------------------------------------------------------
def _rows(path: Path, fmt: str):
    """(row number, dict or an error string) per data row: JSONL line numbers, CSV line numbers
    (the header is line 1)."""
    if fmt == "csv":
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            for row in reader:
                yield reader.line_num, {k: v for k, v in row.items() if k is not None and v not in (None, "")}
        return
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                yield n, f"not JSON ({e.msg})"
                continue
            yield n, obj if isinstance(obj, dict) else "not a JSON object"


def _csv_typed(row: dict) -> dict:
    """CSV cells are text: the feedback schema's numbers and booleans back to their types."""
    out = dict(row)
    for k, conv in (("claim_index", int), ("ts", float)):
        if k in out:
            try:
                out[k] = conv(out[k])
            except ValueError:
                pass  # the schema says what is wrong
    if "shown" in out:
        out["shown"] = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(
            str(out["shown"]).strip().lower(), out["shown"])
    return out


def _run_verdicts(path: str, surface: str | None) -> dict[str, dict]:
    """record id → the run's verdict row for it (one surface)."""
    from workers.jsonl import read_jsonl

    p = Path(path)
    if not p.is_file():
        raise UsageError(f"no such file: {path} (--run)")
    by_surface: dict[str, dict[str, dict]] = {}
    try:
        for n, row in enumerate(read_jsonl(p), 1):
            if not isinstance(row, dict) or "claim_id" not in row or "label" not in row:
                raise UsageError(f"{path}:{n}: not a verdict row of a run file (dialcheck eval --output)")
            rid = row.get("record_id")
            if rid is None:
                continue
            by_surface.setdefault(str(row.get("surface_mode") or "?"), {}).setdefault(str(rid), row)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{path}: not a JSONL run file ({type(e).__name__})") from None
    if not by_surface:
        raise UsageError(f"{path}: no verdict rows with a record_id (a run file of dialcheck eval --output)")
    if surface is None:
        if len(by_surface) > 1:
            raise UsageError(f"{path} holds the surfaces {', '.join(sorted(by_surface))}: choose one with --surface")
        surface = next(iter(by_surface))
    if surface not in by_surface:
        raise UsageError(f"{path} has no rows of surface {surface} (it has {', '.join(sorted(by_surface))})")
    return by_surface[surface]


def gold_judgement(gold: str, label: str) -> str:
    """A verdict's label judged against a gold label, three-way or binary (docs/operations.md):
    right when they agree; a REFUTES or NOT ENOUGH INFO verdict against a binary NOT SUPPORTS is
    right too (a binary judge cannot tell refuted from not enough info, so it is not counted wrong)."""
    if gold == "NOT SUPPORTS":
        return "wrong" if label == "SUPPORTS" else "right"
    return "right" if label == gold else "wrong"


def _gold_judgement(row: dict, run: dict[str, dict] | None, source: str, now: float):
    """A DialFact record → (Feedback, the verdict it judges), an error string, or None when the run
    has no verdict for it. The gold label goes along as `corrected_label` (schema 1.1)."""
    from lab.tuning.calibrate import gold_label
    from schemas import LABELS
    from schemas.feedback import feedback_from_dict

    if run is None:
        return "a DialFact row (response_label) needs the verdicts it judges: --run RUN.jsonl"
    gold = gold_label(row.get("response_label"))
    if gold is None:
        return (f"response_label {str(row.get('response_label'))[:40]!r} is neither three-way ({', '.join(LABELS)}) "
                "nor binary (SUPPORTS / NOT SUPPORTS, supported / not supported)")
    v = run.get(str(row["id"]))
    if v is None:
        return None  # not in the run (a run of --limit N records): counted, not judged
    d = v.get("display") if isinstance(v.get("display"), dict) else {}
    rec = {"conversation_id": v["conversation_id"], "turn_id": v["turn_id"], "claim_id": v["claim_id"],
           "label_shown": v["label"], "judgement": gold_judgement(gold, v["label"]), "source": source,
           "ts": now, "feedback_id": f"gold:{row['id']}", "corrected_label": gold}
    if isinstance(d.get("show"), bool):
        rec["shown"] = d["show"]
    if d.get("confidence") in ("high", "medium", "low"):
        rec["confidence_shown"] = d["confidence"]
    return feedback_from_dict(rec), v


def cmd_import(args) -> int:
    from schemas import InvalidEvent
    from schemas.feedback import feedback_from_dict
    from schemas.settings import load_settings

    path = Path(args.file)
    if not path.is_file():
        raise UsageError(f"no such file: {args.file}")
    fmt = args.format or ("csv" if path.suffix.lower() == ".csv" else "jsonl")
    settings = load_settings()
    run = _run_verdicts(args.run, args.surface) if args.run else None
    now = time.time()
    good, verdicts, bad, unmatched = [], [], [], 0
    try:
        for n, row in _rows(path, fmt):
            if isinstance(row, str):
                bad.append((n, row))
                continue
            if "response_label" in row and "id" in row and "judgement" not in row:
                got = _gold_judgement(row, run, args.source, now)
                if got is None:
                    unmatched += 1
                elif isinstance(got, str):
                    bad.append((n, got))
                else:
                    good.append(got[0])
                    verdicts.append(got[1])
                continue
            row = _csv_typed(row) if fmt == "csv" else row
            verdict = row.pop("verdict", None)
            try:
                good.append(feedback_from_dict(row))
            except InvalidEvent as e:
                bad.append((n, e.reason))
                continue
            if isinstance(verdict, dict) and {"conversation_id", "turn_id", "claim_id", "label"} <= verdict.keys():
                verdicts.append(verdict)
    except UnicodeDecodeError:
        raise UsageError(f"{args.file}: not UTF-8 text") from None
    except csv.Error as e:
        raise UsageError(f"{args.file}: not a CSV file ({e})") from None
    for n, why in bad[:MAX_ROW_LINES]:
        print(f"dialcheck: feedback import: {args.file}:{n}: {why}; skipped", file=sys.stderr)
    if len(bad) > MAX_ROW_LINES:
        print(f"dialcheck: feedback import: {len(bad) - MAX_ROW_LINES} more bad rows skipped", file=sys.stderr)
    if unmatched:
        print(f"dialcheck: feedback import: {unmatched} DialFact records have no verdict in {args.run}; not judged",
              file=sys.stderr)
    if not good:
        detail = f"{len(bad)} bad" + (f", {unmatched} without a verdict in the run" if unmatched else "")
        raise UsageError(f"{args.file}: no usable row ({detail}): "
                         "rows in the feedback schema (schemas/feedback.schema.json), or DialFact records with --run")
    with open_store(args.store, settings) as store:
        store.add_verdicts(_published(v) for v in verdicts)
        store.add_feedback(good)
        counts = store.counts()
    right = sum(f.judgement == "right" for f in good)
    wrong = sum(f.judgement == "wrong" for f in good)
    print(f"imported {len(good)} judgements ({right} right, {wrong} wrong, {len(good) - right - wrong} unsure) "
          f"from {args.file}{f', {len(bad)} bad rows skipped' if bad else ''}; the store holds {counts['feedback']} "
          f"judgements, {counts['verdicts']} verdicts ({counts['unjoined']} judgements without their verdict)")
    return 0


def _published(row: dict) -> dict:
    """A run-file row back to the verdict's own fields (the run's extra columns dropped). A run row
    keeps the rationale's window text as `rationale` and its numbers as `rationale_numbers`: put
    back as a rationale object, so `BadgeFacts.of_verdict` reads the badge facts from it."""
    extra = {"protocol", "surface_mode", "evidence_ids", "record_id", "nli_label", "judge", "rationale_numbers"}
    out = {k: v for k, v in row.items() if k not in extra}
    out.setdefault("timings_ms", {})  # a run file leaves the timings out; the verdict schema requires them
    if "rationale_numbers" in row and not isinstance(row.get("rationale"), dict):
        out["rationale"] = {"rule": "run-file", "numbers": row["rationale_numbers"] or {},
                            "window": None, "summary": row.get("rationale") or ""}
    return out


def cmd_stats(args) -> int:
    from schemas.settings import load_settings

    settings = load_settings()
    target = settings.stream.precision_target if args.target is None else args.target
    confidence = settings.stream.precision_confidence if args.confidence is None else args.confidence
    if not (0 < target <= 1 and 0 < confidence < 1):
        raise UsageError("--target must be in (0, 1] and --confidence in (0, 1)")
    from streams.precision import ALL_VERSIONS

    with open_store(args.store, settings) as store:
        counts, by_version = store.counts(), store.precision_by_version(target, confidence)
    rows = by_version.pop(ALL_VERSIONS)
    alarmed = ALARM_EXIT if any(r.alarm for r in rows) else 0
    if args.json:
        print(json.dumps({"store": _where(store), **counts, "precision": [r.to_dict() for r in rows],
                          "by_nli_version": {v: [r.to_dict() for r in rs] for v, rs in by_version.items()}}))
        return alarmed
    j = counts["judgement"]
    print(f"feedback store {_where(store)}: {counts['feedback']} judgements ({j['right']} right, {j['wrong']} wrong, "
          f"{j['unsure']} unsure; by source {', '.join(f'{k} {v}' for k, v in sorted(counts['source'].items())) or '-'}), "
          f"{counts['verdicts']} verdicts, {counts['unjoined']} judgements without their verdict")
    print(f"shown-badge precision ({confidence:.0%} Clopper-Pearson interval; alarm when its upper end < {target:.2f}):")
    _print_rows(rows, "  ")
    if len(by_version) > 1:  # a rollout: each NLI model version's badges judged on their own
        for version, vrows in by_version.items():
            print(f"  NLI model {version}:")
            _print_rows(vrows, "    ")
    if alarmed:
        print(f"drift alarm: {', '.join(r.label for r in rows if r.alarm)} (exit {ALARM_EXIT})")
    return alarmed


def _print_rows(rows, indent: str) -> None:
    for r in rows:
        prec = "no judgements yet" if r.precision is None else (
            f"{r.precision:.3f} [{r.lower:.3f}, {r.upper:.3f}] n={r.n}")
        cov = "-" if r.coverage is None else f"{r.coverage:.1%} ({r.shown}/{r.verdicts})"
        print(f"{indent}{r.label:<9} {prec:<34} coverage {cov}{'  ALARM' if r.alarm else ''}")


def _where(store) -> str:
    from schemas.settings import redact

    return redact(store.url)
