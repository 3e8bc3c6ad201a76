"""Benchmark (not a test): NLI pairs/s of the fp32 artifact beside another one (default: the static
int8 of `dialcheck nli quantize`), same process, same DialFact evidence pairs, rounds alternating.

    python bench/bench_nli_variant.py [VARIANT_DIR]

Pairs are whole evidence passages and the verifier's windows of them (workers/windows.py), at
batches of 16 and 64. Why beside bench_pipeline: it tells how much of an end-to-end change is the
NLI arithmetic itself."""
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from schemas.items import load_dialfact  # noqa: E402
from schemas.settings import load_settings  # noqa: E402
from workers.models.onnx_nli import load_local_nli  # noqa: E402
from workers.windows import windows  # noqa: E402


def main() -> int:
    s = load_settings()
    recs = load_dialfact(s.data.dialfact_sample)
    whole = [(t, r.response) for r in recs for _, t in r.evidence][:192]
    wins = [(w, r.response) for r in recs for _, t in r.evidence for w in windows(t)][:192]
    variant = sys.argv[1] if len(sys.argv) > 1 else "artifacts/nli-int8-static"
    if not (Path(variant) / "model.onnx").is_file():
        print(f"bench_nli_variant: no model.onnx in {variant} (write one with `dialcheck nli quantize`)", file=sys.stderr)
        return 2
    models = {"fp32": load_local_nli(s.models.nli_model_dir), "int8": load_local_nli(variant)}
    out = {}
    for kind, pairs in (("passages", whole), ("windows", wins)):
        for batch in (16, 64):
            secs = dict.fromkeys(models, 0.0)
            for r in range(2):
                for name in (list(models) if r % 2 == 0 else list(models)[::-1]):
                    t = time.perf_counter()
                    for i in range(0, len(pairs), batch):
                        models[name].predict([p for p, _ in pairs[i:i+batch]], [h for _, h in pairs[i:i+batch]])
                    secs[name] += time.perf_counter() - t
            out[f"{kind}/batch{batch}"] = {n: round(2 * len(pairs) / v, 1) for n, v in secs.items()} | {"int8_vs_fp32": round(secs["fp32"] / secs["int8"], 2)}
            print(kind, batch, out[f"{kind}/batch{batch}"], flush=True)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
