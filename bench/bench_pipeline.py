"""Benchmark (not a test): today's default path beside the previous release's default, in the same
process, on the same records, with the same encoder and index.

    python bench/bench_pipeline.py [--protocol e2e] [--limit 300] [--batch 16] [--json]
                                   [--surface SURFACE] [--off] [--variant-nli DIR]

"previous" is the default of the last release (base commit 507bba7): surface R4 + gate, the fp32 NLI
artifact, every window of the pre-score top 24 read in one NLI call chunked 32 pairs at a time by
characters, no BM25 hit cache, one spaCy call per text, the batch unsplit. "default"
is what the settings give today (their surface, NLI artifact, window budget and caches; `--surface`
overrides the surface of "default" only). `speedup_vs_previous_default` = claims/s default ÷
previous. The runs are interleaved batch by batch (order flipped every batch), so load from other
processes on a shared machine falls on both alike. The two change verdicts on purpose (the yardstick for that is the shown badges, not identical
labels: `dialcheck tune decision --lodo`), so the bench reports how many labels and shown badges differ,
and the windows read per claim. Per-stage milliseconds per claim come from the verdicts' timings;
`model_seconds` is the time inside the NLI model's `predict` and the encoder's `encode`.

`--off` adds "off": "previous" with settings section `perf` off (batch_query_encoding=false,
cache_entries=0), the path before the verdict-preserving optimisations; their ratio
(`speedup_perf`) must come with identical labels (exit 1 otherwise). `--variant-nli DIR` adds
"variant": "default" with another NLI artifact, deciding and displaying with the shipped decision
and display files applied as is (as the `shipped` row of `dialcheck tune decision --lodo --model-dir
DIR` does; the Pipeline refuses files fitted for another model, so the bench relabels copies).
"""
from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from schemas import TIMING_META_KEYS  # noqa: E402
from schemas.items import load_dialfact  # noqa: E402
from schemas.protocols import turn_verdicts  # noqa: E402
from schemas.settings import REPO_ROOT, load_settings  # noqa: E402

# The defaults of 507bba7 (before the speed round) for every setting it changed: whatever the
# environment says for the others, "previous" runs with these.
PREVIOUS_SURFACE = "r4g"
PREVIOUS_NLI_DIR = str(REPO_ROOT / "triton_models" / "nli" / "1")
PREVIOUS_SETTINGS: dict[str, dict] = {"models": {"nli_model_dir": PREVIOUS_NLI_DIR}}
# the NLI call of 507bba7 (chunks of 32 pairs sorted by characters, one at a time): set where the settings have it
PREVIOUS_NLI_CHUNKING = {"ort_nli_chunk": 32, "ort_nli_sort": "chars", "ort_nli_workers": 1}


def previous_changes(base) -> dict[str, dict]:
    """Section overrides that give 507bba7's defaults, for the settings that exist in `base`."""
    out = {name: dict(fields) for name, fields in PREVIOUS_SETTINGS.items()}
    models = type(base.models).model_fields
    out["models"].update({k: v for k, v in PREVIOUS_NLI_CHUNKING.items() if k in models})
    if "window_first" in type(base.windows).model_fields:  # the adaptive window budget: 0 reads the top k in one call, as before
        out.setdefault("windows", {})["window_first"] = 0
    out.setdefault("perf", {})["search_cache_entries"] = 0
    if "batch_parsing" in type(base.perf).model_fields:  # one spaCy pass per batch for claims and topics
        out["perf"]["batch_parsing"] = False
    if "overlap_parts" in type(base.perf).model_fields:  # the NLI reads one part while the next is prepared
        out["perf"]["overlap_parts"] = 1
    return out


def shipped_files_for(base, nli_version: str, directory: Path) -> dict[str, dict]:
    """Copies of the configured decision and display files relabelled for `nli_version` in
    `directory`, as settings overrides: a variant artifact judged by the shipped files as they are."""
    from schemas.settings import DecisionSettings
    from workers.decision.decider import decision_path
    from workers.display.loader import display_path_for

    decision = decision_path(base.decision, "e2e")
    display = Path(base.decision.display_params or "")
    if base.decision.display_params == DecisionSettings.model_fields["display_params"].default \
            and display_path_for(decision).is_file():  # the loader's choice (workers/display/loader.py)
        display = display_path_for(decision)
    out = {}
    for key, src in (("decision_params", decision), ("display_params", display)):
        if not src or not Path(src).is_file():
            continue
        doc = json.loads(Path(src).read_text())
        doc.setdefault("meta", {})["nli_model"] = {**doc["meta"].get("nli_model", {}), "version": nli_version,
                                                   "relabelled_from": str(src)}
        dst = directory / Path(src).name
        dst.write_text(json.dumps(doc))
        out[key] = str(dst)
    return {"decision": out}


def default_surface(base) -> str:
    return getattr(base.claims, "surface", None) or getattr(base.stream, "surface", None) or PREVIOUS_SURFACE


class Timed:
    """A model with the seconds spent inside `method` counted."""

    def __init__(self, inner, method: str):
        self.inner, self.seconds = inner, 0.0
        call = getattr(inner, method)

        def timed(*args, **kwargs):
            t = time.perf_counter()
            try:
                return call(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - t

        setattr(self, method, timed)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def stage_ms(verdicts) -> dict[str, float]:
    total: collections.Counter = collections.Counter()
    for v in verdicts:
        total.update({k: x for k, x in v.timings_ms.items() if k not in TIMING_META_KEYS})
    return {k: round(x / max(len(verdicts), 1), 1) for k, x in total.items()}


def windows_read(v) -> int:
    return int(((v.rationale or {}).get("numbers") or {}).get("windows_read", 0))


def shown(v) -> str:
    """The badge a user sees: '' when none, else label/confidence."""
    d = v.display
    return f"{v.label}/{d.confidence}" if d is not None and d.show else ""


def against_gold(verdicts, gold: list[str]) -> dict:
    """Macro-F1 over the three labels and the shown badges' coverage and precision against the
    records' own labels (the records are not held out from the shipped fit: a sanity check beside
    the speed, not the yardstick)."""
    from sklearn.metrics import f1_score

    pred = [v.label for v in verdicts]
    badges = [(v.label, g) for v, g in zip(verdicts, gold) if shown(v)]
    return {"macro_f1": round(100 * f1_score(gold, pred, average="macro", labels=sorted(set(gold) | set(pred))), 2),
            "shown_coverage": round(100 * len(badges) / max(len(gold), 1), 1),
            "shown_precision": round(100 * sum(a == b for a, b in badges) / len(badges), 1) if badges else None}


def searcher_for(base, searcher, changes):
    """The index as `load_searcher` hands it to the pipeline under these settings (BM25 hit cache or not)."""
    entries = changes.get("perf", {}).get("search_cache_entries", base.perf.search_cache_entries)
    if searcher is None or not entries:
        return searcher
    from workers.caches import CachedSearcher

    return CachedSearcher(searcher, entries)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--protocol", default="e2e", choices=["e2e", "fv"])
    ap.add_argument("--surface", default=None, help="the default run's surface (default: the settings')")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--data", default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--off", action="store_true", help="also the previous path with settings section perf off")
    ap.add_argument("--variant-nli", default=None, help="another NLI artifact dir, measured as 'variant'")
    args = ap.parse_args()

    from workers.models.factory import load_models
    from workers.models.onnx_nli import load_local_nli
    from workers.pipeline import Pipeline
    from workers.retrieval.factory import load_searcher
    from workers.caches import memoize
    from workers.surfaces import pronouns
    from workers.surfaces.pronouns import set_parse_cache

    base = load_settings()
    prev_changes = previous_changes(base)
    previous = base.updated(**prev_changes)
    nli, encoder = load_models(base)
    nli, encoder = Timed(nli, "predict"), Timed(encoder, "encode")
    m = previous.models
    prev_nli = nli if m == base.models else Timed(load_local_nli(
        m.nli_model_dir, m.ort_threads, m.ort_graph_optimization,
        **{k: getattr(m, f) for k, f in (("chunk", "ort_nli_chunk"), ("sort_by", "ort_nli_sort"),
                                         ("workers", "ort_nli_workers")) if hasattr(m, f)}),
        "predict")
    raw = None
    if args.protocol == "e2e":
        raw = load_searcher(base.updated(perf={"search_cache_entries": 0}), encoder)
    every = load_dialfact(args.data or base.data.dialfact_sample)
    records, warm = every[:args.limit], [r.to_check_item(args.protocol) for r in every[-2:]]
    items = [r.to_check_item(args.protocol) for r in records]
    surface = args.surface or default_surface(base)
    runs = {"previous": (previous, prev_nli, PREVIOUS_SURFACE, prev_changes), "default": (base, nli, surface, {})}
    if args.off:
        off = {**prev_changes, "perf": {**prev_changes.get("perf", {}), "batch_query_encoding": False, "cache_entries": 0}}
        runs["off"] = (base.updated(**off), prev_nli, PREVIOUS_SURFACE, off)
    if args.variant_nli:
        import tempfile

        variant_nli = Timed(load_local_nli(args.variant_nli), "predict")
        files = shipped_files_for(base, variant_nli.version, Path(tempfile.mkdtemp(prefix="bench-variant-")))
        runs["variant"] = (base.updated(**files), variant_nli, surface, {})
    pipes = {name: Pipeline(s, model, encoder, searcher_for(base, raw, changes), args.protocol, surf)
             for name, (s, model, surf, changes) in runs.items()}
    for p in pipes.values():  # warm-up on records outside the timed set: not timed
        turn_verdicts(p.check_turns(warm))
    out = {"protocol": args.protocol, "claims": len(items), "batch": args.batch,
           "surfaces": {name: r[2] for name, r in runs.items()},
           "nli": {name: r[1].version for name, r in runs.items()}}
    verdicts_of = {name: [] for name in pipes}
    secs, in_models = dict.fromkeys(pipes, 0.0), dict.fromkeys(pipes, 0.0)

    # each run its own spaCy parse cache (the module keeps one): neither reads the other's parses
    parse_caches = {name: memoize(pronouns._parse, base.perf.cache_entries) for name in pipes}

    def timed_batch(name: str, chunk) -> None:
        models = (runs[name][1], encoder)
        if pronouns.parse_cache_on():
            pronouns.swap_parse_cache(parse_caches[name])
        before, t = sum(x.seconds for x in models), time.perf_counter()
        verdicts_of[name].extend(turn_verdicts(pipes[name].check_turns(chunk)))
        secs[name] += time.perf_counter() - t
        in_models[name] += sum(x.seconds for x in models) - before

    if "off" in pipes:  # alone, with no parse cache: the path before the perf optimisations
        set_parse_cache(0)
        for s in range(0, len(items), args.batch):
            timed_batch("off", items[s:s + args.batch])
    # the others interleaved batch by batch, the order flipped every batch: a neighbour's load on a
    # shared machine falls on each run alike, so the ratio holds where absolute claims/s do not
    interleaved = [name for name in pipes if name != "off"]
    set_parse_cache(0)
    set_parse_cache(base.perf.cache_entries)
    for b, s in enumerate(range(0, len(items), args.batch)):
        for name in (interleaved if b % 2 == 0 else interleaved[::-1]):
            timed_batch(name, items[s:s + args.batch])
    for name, pipe in pipes.items():
        verdicts = verdicts_of[name]
        read = [windows_read(v) for v in verdicts]
        out[name] = {"claims_per_second": round(len(items) / secs[name], 3), "seconds": round(secs[name], 1),
                     "model_seconds": round(in_models[name], 1), "stage_ms_per_claim": stage_ms(verdicts),
                     "windows_read_per_claim": round(sum(read) / max(len(read), 1), 2),
                     "badges_shown": sum(bool(shown(v)) for v in verdicts),
                     "against_record_labels": against_gold(verdicts, [r.label for r in records])}
        cache = getattr(pipe.searcher, "counts", None)
        if cache is not None:
            out[name]["search_cache"] = cache.as_dict()
    cps = {name: out[name]["claims_per_second"] for name in runs}
    out["speedup_vs_previous_default"] = round(cps["default"] / cps["previous"], 2)
    prev, new = verdicts_of["previous"], verdicts_of["default"]
    out["label_differences"] = sum(a.label != b.label for a, b in zip(prev, new))
    out["badge_differences"] = sum(shown(a) != shown(b) for a, b in zip(prev, new))
    ok = True
    if args.off:
        out["speedup_perf"] = round(cps["previous"] / cps["off"], 2)
        out["identical_labels_perf"] = ok = [v.label for v in verdicts_of["off"]] == [v.label for v in prev]
    if args.variant_nli:
        out["variant"].update(nli_dir=args.variant_nli, speedup_vs_previous_default=round(cps["variant"] / cps["previous"], 2),
                              label_differences_from_default=sum(a.label != b.label for a, b in
                                                                 zip(verdicts_of["variant"], new)))
    print(json.dumps(out, indent=1) if args.json else
          f"{args.protocol}: previous default ({PREVIOUS_SURFACE}) {cps['previous']} claims/s, default ({surface}) "
          f"{cps['default']} claims/s: x{out['speedup_vs_previous_default']}; windows read per claim "
          f"{out['previous']['windows_read_per_claim']} -> {out['default']['windows_read_per_claim']}; labels differing "
          f"{out['label_differences']}, shown badges differing {out['badge_differences']} of {len(items)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
