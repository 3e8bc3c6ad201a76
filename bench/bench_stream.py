"""Benchmark (not a test): the same DialFact records through Kafka end to end and through the
Kafka-free batch path, in one run.

Prints throughput (claims/s) of each and their ratio (what the transport, the context table and
the micro-batching cost), and produce-to-verdict latency p50/p95/p99 at a stated offered rate
(what a chat app waits), and the worker process's resident memory (now and peak, from /proc) after
the runs. The Kafka run uses the embedded Tansu broker unless
DIALCHECK_KAFKA_BOOTSTRAP is set, and one worker process.

    python bench/bench_stream.py --records 40 --latency-records 20 --loads 0.1,0.7 [--json]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from schemas.settings import Settings, load_settings  # noqa: E402
from streams.broker import kafka_for  # noqa: E402
from dialcheck.wiring import DEFAULT_CHECKER, load_checker  # noqa: E402
from streams.replay import iter_claim_ids, load_records, replay  # noqa: E402
from streams.topics import ensure_topics  # noqa: E402
from streams.verdicts import VerdictLog, collect_verdicts, end_offsets  # noqa: E402
from streams.worker import WorkerProcess, freeze_startup_heap  # noqa: E402
from schemas.protocols import turn_verdicts

DATA = load_settings().data.dialfact_sample


def percentile(xs: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), NaN for no data."""
    return float(np.percentile(xs, q * 100)) if len(xs) else float("nan")


def rss_mb(pid: int | None) -> dict:
    """VmRSS / VmHWM (peak) of a process in MiB, from /proc (Linux); {} when unreadable."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        return {k: round(int(fields[v].split()[0]) / 1024, 1) for k, v in (("rss_mb", "VmRSS"), ("peak_rss_mb", "VmHWM"))}
    except (OSError, KeyError, ValueError, TypeError):
        return {}


def batch_path(settings: Settings, records, spec: str) -> dict:
    pipeline = load_checker(settings, spec)
    turn_verdicts(pipeline.check_turns([records[0].to_check_item("e2e")]))  # warm-up, not timed
    freeze_startup_heap()  # as the worker does: the ratio compares transport, not when a full collection falls
    items = [r.to_check_item("e2e") for r in records]
    t0 = time.perf_counter()
    for i in range(0, len(items), settings.stream.batch_size):  # the batches the worker would take at most
        turn_verdicts(pipeline.check_turns(items[i:i + settings.stream.batch_size]))
    secs = time.perf_counter() - t0
    return {"claims": len(items), "seconds": round(secs, 2), "claims_per_s": round(len(items) / secs, 3)}


def stream_run(settings: Settings, records, rate: float, prefix: str, timeout_s: float, worker) -> tuple[VerdictLog, dict]:
    """Replay in a thread while collecting verdicts here, so arrival times are real."""
    start = end_offsets(settings, settings.kafka.topic_verdicts)
    expected = set(iter_claim_ids(records, prefix))
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("stats", replay(settings, records, rate=rate, prefix=prefix)))
    t0 = time.time()
    t.start()
    vlog = collect_verdicts(settings, expected, timeout_s, start=start, alive=worker.alive)
    t.join()
    missing = expected - vlog.verdicts.keys()
    if missing:
        raise RuntimeError(f"{len(missing)} verdicts missing after {timeout_s}s; worker log:\n{worker.log_text()[-3000:]}")
    return vlog, {"t0": t0, "sent_at": result["stats"].sent_at}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=DATA)
    ap.add_argument("--records", type=int, default=40, help="records (claims) in each throughput run")
    ap.add_argument("--latency-records", type=int, default=20)
    ap.add_argument("--loads", default="0.1,0.7", help="offered rates as fractions of the measured capacity (the Kafka path's claims/s flat out)")
    ap.add_argument("--rate", type=float, default=0.0,
                    help="one offered rate (claims/s) for the latency run instead of --loads")
    ap.add_argument("--pipeline", default=DEFAULT_CHECKER, help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    settings = load_settings()
    if args.pipeline == DEFAULT_CHECKER and settings.retrieval.backend == "embedded":
        from workers.retrieval.build import ensure_index
        ensure_index(settings)
    loads = [float(x) for x in args.loads.split(",")]
    everything = load_records(args.data, args.records + args.latency_records * len(loads))
    # disjoint slices: the worker's caches (surfaces, parses, vectors) must not see a record twice
    records = everything[:args.records]
    lat_slices = [everything[args.records + i * args.latency_records:args.records + (i + 1) * args.latency_records]
                  for i in range(len(loads))]

    print(f"batch path: {len(records)} claims, batch_size={settings.stream.batch_size} ...", file=sys.stderr)
    batch = batch_path(settings, records, args.pipeline)

    work = Path(tempfile.mkdtemp(prefix="dialcheck-bench-"))
    with kafka_for(settings, log_path=str(work / "broker.log")) as s:
        ensure_topics(s)
        with WorkerProcess(s, work / "worker.log", extra_args=["--pipeline", args.pipeline]) as worker:
            worker.wait_ready(timeout_s=300)
            print("kafka path: warm-up ...", file=sys.stderr)
            stream_run(s, records[:2], 0, "bench-warm-", 300, worker)
            print(f"kafka path: {len(records)} claims flat out ...", file=sys.stderr)
            vlog, run = stream_run(s, records, 0, "bench-tp-", 120 + 10 * len(records), worker)
            secs = max(vlog.received_at.values()) - run["t0"]
            # replay_seconds: when the last claim was sent (a producer slower than the worker caps the ratio);
            # first_verdict_seconds: the wait before the first verdict (batching, the first pipeline call)
            kafka = {"claims": len(records), "seconds": round(secs, 2), "claims_per_s": round(len(records) / secs, 3),
                     "replay_seconds": round(max(run["sent_at"].values()) - run["t0"], 2),
                     "first_verdict_seconds": round(min(vlog.received_at.values()) - run["t0"], 2)}
            # the measured capacity: the Kafka path flat out (what one worker sustains end to end)
            rates = [args.rate] if args.rate else [round(kafka["claims_per_s"] * f, 3) for f in loads]
            latency = []
            for load, rate, lat_records in zip(loads, rates, lat_slices):
                print(f"kafka path: {len(lat_records)} claims at {rate} claims/s offered ...", file=sys.stderr)
                vlog, run = stream_run(s, lat_records, rate, f"bench-lat{load}-", 120 + 10 * len(lat_records), worker)
                lat = [vlog.received_at[c] - run["sent_at"][c] for c in run["sent_at"]]
                latency.append({"load": load, "offered_claims_per_s": rate, "claims": len(lat),
                                "p50_s": round(percentile(lat, 0.50), 3), "p95_s": round(percentile(lat, 0.95), 3),
                                "p99_s": round(percentile(lat, 0.99), 3)})
            worker_memory = rss_mb(worker.pid)
    out = {
        "records": len(records), "batch_size": settings.stream.batch_size, "batch_within_s": settings.stream.batch_within_s,
        "take_events": settings.stream.take_events,
        "broker": "embedded Tansu" if not settings.kafka.bootstrap else settings.kafka.bootstrap,
        "batch_path": batch, "kafka_path": kafka,
        "kafka_over_batch_throughput": round(kafka["claims_per_s"] / batch["claims_per_s"], 3),
        "fetch_wait_ms": settings.stream.fetch_wait_ms, "latency": latency, "worker_memory": worker_memory,
    }
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        b, k = out["batch_path"], out["kafka_path"]
        print(f"records/claims            {out['records']} (batch_size {out['batch_size']}, within {out['batch_within_s']} s)")
        print(f"batch path (no Kafka)     {b['claims_per_s']:.2f} claims/s  ({b['seconds']} s)")
        print(f"Kafka end to end          {k['claims_per_s']:.2f} claims/s  ({k['seconds']} s, {out['broker']}, 1 worker)")
        print(f"Kafka / batch             {out['kafka_over_batch_throughput']:.2f}")
        for lt in out["latency"]:
            print(f"produce→verdict latency   p50 {lt['p50_s']:.2f} s  p95 {lt['p95_s']:.2f} s  p99 {lt['p99_s']:.2f} s "
                  f"at {lt['offered_claims_per_s']} claims/s offered ({lt['load']:.0%} load, {lt['claims']} claims)")
        if worker_memory:
            print(f"worker memory             RSS {worker_memory['rss_mb']} MiB, peak {worker_memory['peak_rss_mb']} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
