"""Benchmark (not a test): NLI pairs/s and encoder texts/s, plus per-call latency, in-process vs
Triton (bundled CPU server started here), same process, same inputs, same machine.

    python bench/bench_models.py [--pairs 200] [--call-size 16] [--calls 30]

Throughput = one big call (client-side batching, max_in_flight requests); latency = repeated
small calls (the stream worker's micro-batches). Ratios are Triton / in-process.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas.settings import load_settings  # noqa: E402


def _throughput(fn: Callable[[], object], n: int) -> float:
    fn()  # warm-up
    t = time.perf_counter()
    fn()
    return n / (time.perf_counter() - t)


def _latency_ms(fn: Callable[[], object], calls: int) -> tuple[float, float]:
    fn()
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(0.95 * len(times)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=200)
    ap.add_argument("--call-size", type=int, default=16)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--data", default=load_settings().data.dialfact_sample)
    args = ap.parse_args()

    from infra.triton_server import TritonServer
    from schemas.items import load_dialfact
    from workers.models.encoders import E5Encoder
    from workers.models.onnx_nli import OnnxNLI
    from workers.models.triton import TritonEncoder, TritonNLI

    recs = load_dialfact(args.data, limit=args.pairs)
    prem = [" ".join(t for _, t in r.evidence) or r.response for r in recs]
    hyp = [r.response for r in recs]
    n, m = len(prem), args.call_size

    local_nli, local_enc = OnnxNLI(REPO / "triton_models" / "nli" / "1"), E5Encoder()
    with TritonServer(REPO / "triton_models") as server:
        backends = {"in-process": (local_nli, local_enc)}
        for name, url in (("triton-grpc", server.grpc_url), ("triton-http", server.http_url)):
            backends[name] = (TritonNLI.from_url(url), TritonEncoder.from_url(url, load_settings().models.encoder))
        results: dict[str, dict[str, float]] = {}
        for name, (nli, enc) in backends.items():
            r = results[name] = {}
            r["nli_pairs_s"] = _throughput(lambda: nli.predict(prem, hyp), n)
            r["nli_p50"], r["nli_p95"] = _latency_ms(lambda: nli.predict(prem[:m], hyp[:m]), args.calls)
            r["enc_texts_s"] = _throughput(lambda: enc.encode(hyp, is_query=False), n)
            r["enc_p50"], r["enc_p95"] = _latency_ms(lambda: enc.encode(hyp[:m], is_query=True), args.calls)
            print(f"{name:12s} NLI {r['nli_pairs_s']:7.1f} pairs/s  p50 {r['nli_p50']:7.1f} ms  p95 {r['nli_p95']:7.1f} ms"
                  f" (calls of {m}) | E5 {r['enc_texts_s']:7.1f} texts/s  p50 {r['enc_p50']:7.1f} ms  p95 {r['enc_p95']:7.1f} ms",
                  flush=True)
    base = results["in-process"]
    print(f"\nratios vs in-process (throughput: >1 is faster; latency: >1 is slower); {n} pairs, "
          f"NLI artifact {local_nli.version}")
    for name in ("triton-grpc", "triton-http"):
        r = results[name]
        print(f"{name:12s} NLI thr x{r['nli_pairs_s'] / base['nli_pairs_s']:.2f}  lat x{r['nli_p50'] / base['nli_p50']:.2f}"
              f" | E5 thr x{r['enc_texts_s'] / base['enc_texts_s']:.2f}  lat x{r['enc_p50'] / base['enc_p50']:.2f}")


if __name__ == "__main__":
    main()
