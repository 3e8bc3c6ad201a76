"""Benchmark (not a test): one verdict from a warm `dialcheck serve-api` (POST /check) beside a
one-shot `dialcheck check --claim` (a new process: settings, models, index, warm-up, one claim), on
the same claims, same settings, same machine, measured in this process.

    python bench/bench_api.py [--protocol e2e|fv] [--claims 20] [--oneshot 3] [--json]

Reports the median and p95 milliseconds per claim of sequential POSTs after one warm-up request,
the one-shot wall seconds per claim (median of --oneshot runs), the server's start-to-ready seconds,
and `speedup_warm_vs_oneshot` = one-shot median ÷ warm median. The labels of the two paths are
compared (they run the same pipeline: they must agree, exit 1 otherwise).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# everyday claims (examples/everyday_claims.jsonl style): a context-free claim each
CLAIMS = [
    "The Eiffel Tower was completed in 1889.", "Mount Everest is the highest mountain on Earth.",
    "Paris is the capital of France.", "Paris is the capital of Germany.", "The Moon is made of cheese.",
    "Elvis Presley was born in Tupelo, Mississippi.", "The Amazon is the largest rainforest on Earth.",
    "Water boils at 100 degrees Celsius at sea level.", "The Great Wall of China is in China.",
    "Albert Einstein developed the theory of relativity.", "The Pacific is the largest ocean.",
    "Shakespeare wrote Hamlet.", "The Nile flows through Egypt.", "Tokyo is the capital of Japan.",
    "The Beatles were a band from Liverpool.", "Leonardo da Vinci painted the Mona Lisa.",
    "The Sahara is a desert in Africa.", "Isaac Newton formulated the laws of motion.",
    "Rome is the capital of Italy.", "The Danube flows through Vienna.",
]
EVIDENCE = "The Eiffel Tower was completed in 1889. Paris is the capital of France."


def _body(claim: str, protocol: str) -> dict:
    return {"claim": claim, **({"evidence": [EVIDENCE]} if protocol == "fv" else {})}


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")]))}


def oneshot(claim: str, protocol: str) -> tuple[float, str]:
    args = [sys.executable, "-m", "dialcheck.cli", "check", "--protocol", protocol, "--claim", claim, "--format", "json"]
    if protocol == "fv":
        args += ["--evidence", EVIDENCE]
    t = time.perf_counter()
    done = subprocess.run(args, capture_output=True, text=True, env=_env(), cwd=REPO, timeout=900)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"one-shot check failed: {done.stderr[-2000:]}")
    return wall, json.loads(done.stdout.splitlines()[-1])["label"]


def main() -> int:
    import requests

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--protocol", choices=["e2e", "fv"], default="e2e", help="both paths' protocol (default e2e)")
    ap.add_argument("--claims", type=int, default=20, help="claims POSTed to the warm server (default 20)")
    ap.add_argument("--oneshot", type=int, default=3, help="one-shot check runs (default 3)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    claims = [CLAIMS[i % len(CLAIMS)] for i in range(args.claims)]

    log = Path(tempfile.mkdtemp(prefix="bench-api-")) / "api.log"
    t0 = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "dialcheck.cli", "serve-api", "--port", "0", "--protocol",
                                 args.protocol], env=_env(), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        while "dialcheck api at" not in log.read_text():
            if proc.poll() is not None:
                raise SystemExit(f"serve-api exited: {log.read_text()[-2000:]}")
            time.sleep(0.2)
        ready_s = time.perf_counter() - t0
        url = next(ln for ln in log.read_text().splitlines() if ln.startswith("dialcheck api at")).split()[3]
        session = requests.Session()
        session.post(f"{url}/check", json=_body("Warm-up: the Eiffel Tower is in Paris.", args.protocol), timeout=600)
        warm_ms, warm_labels = [], {}
        for c in claims:
            t = time.perf_counter()
            r = session.post(f"{url}/check", json=_body(c, args.protocol), timeout=600)
            warm_ms.append((time.perf_counter() - t) * 1000)
            r.raise_for_status()
            warm_labels[c] = r.json()["label"]
    finally:
        proc.terminate()
        proc.wait(30)
    shots, disagree = [], []
    for c in claims[: args.oneshot]:
        wall, label = oneshot(c, args.protocol)
        shots.append(wall)
        if label != warm_labels[c]:
            disagree.append(c)
    q = statistics.quantiles(warm_ms, n=20, method="inclusive") if len(warm_ms) > 1 else [warm_ms[0]] * 19
    result = {"protocol": args.protocol, "claims": len(claims), "server_ready_s": round(ready_s, 1),
              "warm_ms_per_claim_median": round(statistics.median(warm_ms), 1), "warm_ms_per_claim_p95": round(q[18], 1),
              "oneshot_s_per_claim_median": round(statistics.median(shots), 2), "oneshot_runs": len(shots),
              "speedup_warm_vs_oneshot": round(statistics.median(shots) * 1000 / statistics.median(warm_ms), 1),
              "labels_disagree": disagree, "cpu_count": os.cpu_count(), "load_avg_1m": round(os.getloadavg()[0], 2)}
    print(json.dumps(result, indent=1) if args.json else
          f"POST /check warm: {result['warm_ms_per_claim_median']} ms/claim median (p95 {result['warm_ms_per_claim_p95']}); "
          f"one-shot check: {result['oneshot_s_per_claim_median']} s; ×{result['speedup_warm_vs_oneshot']}; "
          f"server ready in {result['server_ready_s']} s; load {result['load_avg_1m']}")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
