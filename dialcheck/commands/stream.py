"""Streaming commands: `dialcheck worker | replay | verdicts | demo` (the Kafka side lives in streams/)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from schemas.settings import Settings, load_settings

def _settings(args) -> Settings:
    return load_settings(kafka={"bootstrap": getattr(args, "broker", None) or None})


def _need_broker(s: Settings) -> Settings:
    if not s.kafka.bootstrap:
        from dialcheck.errors import UsageError

        raise UsageError("no broker: pass --broker HOST:PORT or set DIALCHECK_KAFKA_BOOTSTRAP "
                         "('dialcheck worker' without one starts an embedded broker and prints its address)")
    return s


def cmd_worker(args) -> int:
    from streams.broker import kafka_for
    from dialcheck.errors import check_port_free
    from dialcheck.wiring import check_surface, load_checker
    from streams.worker import run_worker

    settings = _settings(args)
    if args.pid_file:
        settings = settings.updated(stream={"pid_file": args.pid_file})
    if args.reset_state:
        return _reset_state(settings)
    if args.pipeline is None:
        check_surface(args.surface)
    # the /metrics port is bound after the models load (~15 s): a taken one is said before that
    check_port_free(settings.stream.metrics_host, settings.stream.metrics_port, "DIALCHECK_METRICS_PORT")
    # load models before joining the group: a 20 s load inside the worker would stall a rebalance
    checker = load_checker(settings, args.pipeline, protocol=args.protocol, surface=args.surface)
    report = getattr(checker, "load_report", None)
    if callable(report) and report():
        print(report(), flush=True)  # loading is reported here, never inside a verdict's timings_ms
    with kafka_for(settings) as s:
        if not settings.kafka.bootstrap:
            print(f"embedded broker at {s.kafka.bootstrap} (memory storage; gone when this worker stops)", flush=True)
        s.stream.state_path.mkdir(parents=True, exist_ok=True)
        print(f"worker state dir: {s.stream.state_path} (DIALCHECK_STATE_DIR)", flush=True)
        return run_worker(s, checker, loglevel=_loglevel(args, s))


def _reset_state(settings: Settings) -> int:
    """`worker --reset-state`: the documented step after a broker lost its data (streams/recovery.py)."""
    from streams.app import WORKER_TABLES
    from streams.recovery import reset_state

    if not settings.kafka.bootstrap:
        print("nothing to reset: the embedded broker keeps no state between runs", flush=True)
        return 0
    for line in reset_state(settings, list(WORKER_TABLES)):
        print(line, flush=True)
    print("the worker's state is reset: start it again (its context and knowledge start empty)", flush=True)
    return 0


def _loglevel(args, settings: Settings) -> str:
    """warning unless asked: Faust's ~70 INFO lines at start-up tell an operator nothing the ready and
    status lines do not. Trace records (DIALCHECK_TRACE_RECORDS) are INFO lines, so asking for them
    means info."""
    if args.loglevel:
        return args.loglevel
    return "info" if args.verbose or settings.stream.trace_records else "warning"


def cmd_replay(args) -> int:
    from streams.replay import load_records, replay
    from streams.topics import ensure_topics

    s = _need_broker(_settings(args))
    if not args.data:
        from dialcheck.commands.data import require

        require(s, "dialfact/testsmall.jsonl")
    records = load_records(args.data or s.data.dialfact_sample, args.records)
    ensure_topics(s)
    stats = replay(s, records, rate=args.rate, prefix=args.prefix, progress=not args.quiet, protocol=args.protocol)
    print(json.dumps({"records": stats.records, "turns": stats.turns, "seconds": round(stats.seconds, 2),
                      "topic": s.kafka.topic_turns, "protocol": args.protocol}))
    return 0


def cmd_verdicts(args) -> int:
    from streams.verdicts import TopicReader, VerdictLog, read_dead_letters

    if (args.limit or args.wait is not None) and not args.gold:
        from dialcheck.errors import UsageError

        raise UsageError("--limit and --wait go with --gold (score the first N records once their verdicts are in)")
    s = _need_broker(_settings(args))
    if args.deadletter:
        for d in read_dead_letters(s):
            print(json.dumps(d.to_dict(), ensure_ascii=False))
        return 0
    if args.gold:  # a bad gold file is one line before anything is read (commands/score.py)
        from dialcheck.commands.score import load_gold

        gold_records = load_gold(args.gold, args.limit)
    vlog = VerdictLog(window=s.stream.verdicts_dedup_window if args.follow and not args.gold else None)
    if args.gold and args.wait is not None:  # until the gold records' verdicts are all in, or --wait s
        from streams.replay import iter_claim_ids
        from streams.verdicts import collect_verdicts

        expected = set(iter_claim_ids(gold_records))
        bar = _progress_bar(len(expected), "verdicts")
        try:
            collect_verdicts(s, expected, args.wait, log=vlog,
                             alive=lambda: bar.update(len(expected & vlog.verdicts.keys()) - bar.n) or True)
        finally:
            bar.close()
    with TopicReader(s, s.kafka.topic_verdicts) as reader:
        records_iter = iter(()) if args.follow or (args.gold and args.wait is not None) else reader.drain()
        try:
            while True:
                recs = reader.poll(0.5) if args.follow else list(records_iter)
                for rec in recs:
                    v = vlog.add_raw(rec.value)
                    if v is not None and not args.gold:
                        print(json.dumps(v.to_dict(), ensure_ascii=False) if args.json else
                              f"{v.claim_id}\t{v.label}\t{v.status.state}\t{v.conversation_id}\t{v.claim[:80]}",
                              flush=True)
                if not args.follow:
                    break
        except KeyboardInterrupt:
            pass
    if args.gold:  # the evaluator's scoring, as `dialcheck score` runs it on `verdicts --json` lines
        if not vlog.verdicts:
            from dialcheck.errors import UsageError

            raise UsageError(f"no verdicts on {s.kafka.topic_verdicts} to score (is a worker running on this broker?)")
        from dialcheck.commands.score import print_scored, score_rows, usable_rows

        topic = s.kafka.topic_verdicts  # hostile rows and gold lines: one line, exit 2 (commands/score.py)
        rows = usable_rows([v.to_dict() for v in vlog.verdicts.values()], topic)
        (result,) = score_rows(rows, gold_records, args.gold, [None], topic)
        print(f"[verdicts] {len(vlog.verdicts)} verdicts, {vlog.duplicates} duplicates dropped", file=sys.stderr)
        print_scored(result, args.json)
    return 0


def _progress_bar(total: int, desc: str):
    """A bar on a terminal's stderr; nothing when stderr is a file or a pipe."""
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="claim", file=sys.stderr, disable=None, dynamic_ncols=True)


def _demo_metrics(verdicts: dict, records: list) -> dict:
    """The evaluator's metrics of the demo's one surface (flat: accuracy, macro_f1, ...)."""
    from lab.evaluation.scoring import score_run

    if not verdicts:
        return {}
    if not any((v.model_versions or {}).get("protocol") for v in verdicts.values()):
        return {}  # a stand-in checker (tests) says no protocol: nothing to score against
    result = score_run([v.to_dict() for v in verdicts.values()], records, "")
    return next(iter(result["surfaces"].values()))


def demo_text(summary: dict) -> str:
    """The demo summary for people: verdicts, accuracy, latency, and what the dead letters are."""
    m = summary["metrics"]
    status = ", ".join(f"{n} {state}" for state, n in summary["status"].items()) or "none"
    lines = [f"demo: {summary['verdicts']}/{summary['claims']} verdicts ({status}; "
             f"{summary['duplicates_dropped']} duplicates dropped) in {summary['elapsed_s']} s "
             f"(worker start {summary.get('worker_ready_s')} s), broker {summary['broker_address']}"]
    if m:
        how = (", each reply checked against its record's evidence as `dialcheck eval --protocol fv` checks it"
               if summary.get("protocol") == "fv" else "")
        lines.append(f"  accuracy {m.get('accuracy')}  macro-F1 {m.get('macro_f1')} (against the records' gold labels{how})")
    if summary.get("latency_p50_s") is not None:
        lines.append(f"  produce→verdict latency p50 {summary['latency_p50_s']} s, p95 {summary['latency_p95_s']} s, "
                     f"max {summary['latency_max_s']} s; {summary['claims_per_second']} claims/s "
                     f"({summary['claims']} claims sent at once: later ones wait for the batches before them, "
                     f"and the first batch also warms the models up)")
    if summary["deadletter_expected"]:
        reasons = "; ".join(r.split(":")[0] for r in summary["deadletter_reasons"])
        lines.append(f"  {summary['deadletter']}/{summary['deadletter_expected']} dead letters ({reasons}): "
                     f"{summary['deadletter_note']}")
    elif summary["deadletter"]:
        lines.append(f"  {summary['deadletter']} dead letters: {'; '.join(summary['deadletter_reasons'])}")
    if summary["missing"]:
        lines.append(f"  {summary['missing']} claims got no verdict (worker alive: {summary.get('worker_alive')}); "
                     f"worker log tail:\n{summary.get('worker_log_tail', '')}")
    return "\n".join(lines)


def cmd_demo(args) -> int:
    from streams.demo import run_demo

    from dialcheck.commands.data import SOURCE_FILES, ensure_data, require_index_sources
    from dialcheck.errors import UsageError, check_port_free

    if args.timeout is not None and args.timeout <= 0:  # before any data is fetched or model loaded
        raise UsageError(f"--timeout must be above 0 seconds (got {args.timeout:g}; left out: 180 s + 10 s a record)")
    settings = _settings(args)
    needed = [] if args.data else ["dialfact/testsmall.jsonl"]  # the records replayed
    if (args.pipeline is None and settings.retrieval.backend == "embedded"
            and not (Path(settings.retrieval.index_dir) / "meta.json").exists()):
        from workers.retrieval.collection import default_sources

        needed += [SOURCE_FILES[s] for s in default_sources(settings) if s in SOURCE_FILES]  # the first index
    if args.ui:  # a taken page port: one line before the broker and the worker start
        args.port_option = "--ui-port"
        check_port_free(settings.ui.host, settings.ui.port if args.ui_port is None else args.ui_port, "--ui-port")
    ensure_data(settings, dict.fromkeys(needed), who="demo")  # fetched when missing: the README's command runs as written
    if args.pipeline is None:
        from workers.retrieval.build import ensure_index  # e2e needs the embedded passage index
        require_index_sources(settings)
        ensure_index(settings)
    summary = run_demo(settings, args.data or settings.data.dialfact_sample, args.records, pipeline=args.pipeline,
                       protocol=args.protocol, progress=not args.json,
                       timeout_s=args.timeout, score=_demo_metrics, ui_port=(settings.ui.port if args.ui_port is None else args.ui_port) if args.ui else None)
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(demo_text(summary))
    return 0 if summary["ok"] else 1


def register(sub) -> None:

    def replay_protocol(p):
        p.add_argument("--protocol", choices=("e2e", "fv"), default="e2e",
                       help="fv: each response turn carries its record's evidence (a grounded turn, checked against "
                            "it as `dialcheck eval --protocol fv` checks); e2e: no evidence, the worker retrieves (default)")

    def broker(p):
        p.add_argument("--broker", help="Kafka bootstrap HOST:PORT[,...] (default: DIALCHECK_KAFKA_BOOTSTRAP; "
                                        "empty: embedded Tansu where the command supports it)")

    p = sub.add_parser("worker", help="Run the stream worker: chat.turns → verdicts (Faust).")
    broker(p)
    p.add_argument("--protocol", default="e2e", help="e2e: retrieve evidence for each claim (default)")
    p.add_argument("--surface", default=None, help="the claim surface checked (default: DIALCHECK_SURFACE)")
    p.add_argument("--pipeline", default=None, help=argparse.SUPPRESS)
    p.add_argument("--loglevel", default=None, choices=("debug", "info", "warning", "error"),
                   help="the worker's log level (default warning: its ready line, status lines and warnings only)")
    p.add_argument("-v", "--verbose", action="store_true", help="the same as --loglevel info (Faust's start-up and partition lines)")
    p.add_argument("--pid-file", default=None, help="write the worker's pid here once it is ready and takes SIGHUP; "
                   "removed when it stops (default: DIALCHECK_PID_FILE; `dialcheck adapt-loop --pid-file` reads it)")
    p.add_argument("--reset-state", action="store_true",
                   help="delete this app's changelog topics and local state dir, then exit: the step after a broker "
                        "lost its data (refused while a worker of the app runs; docs/operations.md)")
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("replay", help="Produce DialFact records as chat turns (context turns, then the response).")
    broker(p)
    p.add_argument("--data", default=None, help="DialFact JSONL (default: the testsmall sample under DIALCHECK_DATA_DIR)")
    p.add_argument("--rate", type=float, default=0.0, help="records (= checked claims) per second; 0 = flat out")
    p.add_argument("--records", type=int, default=None, help="first N records only")
    p.add_argument("--prefix", default="", help="prefix for conversation ids (replay the same data again as new claims)")
    replay_protocol(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("verdicts", help="Read verdicts (dedup by claim id); --gold scores them like `dialcheck eval`.")
    broker(p)
    p.add_argument("--follow", action="store_true", help="keep reading new verdicts")
    p.add_argument("--gold", help="DialFact JSONL with gold labels: print metrics instead of verdicts")
    p.add_argument("--json", action="store_true", help="each verdict as its JSON line (default: a tab-separated summary)")
    p.add_argument("--deadletter", action="store_true", help="print the dead-letter topic instead")
    p.add_argument("--limit", type=int, default=None,
                   help="with --gold: the first N records only (as `replay --records N` sent them)")
    p.add_argument("--wait", type=float, default=None,
                   help="with --gold: wait up to S seconds for those records' verdicts (a bar on a terminal)")
    p.set_defaults(func=cmd_verdicts)

    p = sub.add_parser("demo", help="Broker, worker, replay and scoring, all embedded; prints a summary.")
    broker(p)
    p.add_argument("--records", type=int, default=20, help="DialFact records replayed as chat turns (default 20)")
    p.add_argument("--data", default=None, help="DialFact JSONL (default: the testsmall sample under DIALCHECK_DATA_DIR)")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("--timeout", type=float, default=None, help="seconds to wait for all verdicts")
    replay_protocol(p)
    p.add_argument("--pipeline", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ui", action="store_true", help="also serve the live verdict page (dialcheck ui); stays up until Ctrl-C")
    p.add_argument("--ui-port", type=int, default=None, help="port of the page with --ui (default: DIALCHECK_UI_PORT, 8765; 0: any free port)")
    p.set_defaults(func=cmd_demo)
