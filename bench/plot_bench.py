"""Plot bench/ JSON output: `python bench/bench_stream.py --json > stream.json` then
`python bench/plot_bench.py stream.json --out docs/figures` writes bench_stream.png + .csv
(throughput of the batch and Kafka paths, produce→verdict latency p50/p95/p99)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lab.evaluation.plots import plot_bench_stream  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("stream_json", help="output of bench/bench_stream.py --json")
    ap.add_argument("--out", default="docs/figures")
    ap.add_argument("--label", default="", help="a line under the title (machine, load)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(args.stream_json, encoding="utf-8") as f:
        results = json.load(f)
    for p in plot_bench_stream(results, out / "bench_stream", args.label):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
