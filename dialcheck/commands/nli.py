"""`dialcheck nli train | hard-pairs | release | unpack | soup | quantize | evaluate`: dialcheck's own NLI
model; `nli adopt`: anyone else's (lab/nli/adopt.py, docs/verifiers.md)."""
from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path


DATA_DIR_HELP = "the data dir (default: DIALCHECK_DATA_DIR, else ../shared/data, else the fetch dir)"
TRAIN_HELP = {
    "data_dir": "the data dir with nli/ and the yardstick sets (default: ../shared/data)",
    "out_dir": "where checkpoints and the trained model go",
    "base_model": "the encoder to start from (default: all-MiniLM-L6-v2 from the installed package)",
    "init_from": "a trained NLI checkpoint to continue from (its head kept); overrides --base-model",
    "pairs_file": "JSONL of pairs (`dialcheck nli hard-pairs`) instead of the built-in training pairs",
    "max_pairs": "the first N pairs only (0: all; the file is already shuffled)",
    "max_length": "tokens per premise-hypothesis pair",
    "batch_size": "pairs per optimiser step",
    "lr": "peak learning rate (AdamW)",
    "weight_decay": "AdamW weight decay",
    "warmup_ratio": "share of the steps with a linear warm-up",
    "epochs": "passes over the pairs (fractions allowed)",
    "checkpoint_every": "steps between checkpoints (a rerun resumes from the last)",
    "log_every": "steps between loss lines",
    "seed": "random seed (shuffling, dropout)",
    "threads": "CPU threads (ignored on CUDA)",
}


def register(sub) -> None:
    from lab.nli.config import TrainConfig

    p = sub.add_parser("nli", help="train, release and evaluate the NLI model")
    nsub = p.add_subparsers(dest="nli_command", required=True)
    t = nsub.add_parser("train", help="fine-tune the cross-encoder (resumes from checkpoints)")
    for k, v in asdict(TrainConfig()).items():
        extra = {"choices": ("auto", "cpu", "cuda"), "help": "cuda: bf16 autocast, fp32 master weights"} \
            if k == "device" else {"help": f"{TRAIN_HELP[k]} (default {v!r})"}
        t.add_argument(f"--{k.replace('_', '-')}", type=type(v), default=v, **extra)
    t.set_defaults(func=run_train)
    h = nsub.add_parser("hard-pairs", help="write hard NEI + dialogue-style pairs with a replay sample (NLI v3)")
    h.add_argument("--out", default="artifacts/nli-v3/pairs.jsonl", help="the pairs JSONL to write")
    h.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    h.add_argument("--filter-model", default=None, help="NLI artifact dir that filters out entailed 'silent' pairs")
    for k, v in (("same", 6000), ("nearest", 6000), ("dialogue", 6000), ("replay", 12000)):
        h.add_argument(f"--{k}", type=int, default=v, help=f"pairs of this kind (default {v})")
    h.add_argument("--value-swaps", type=int, default=0,
                   help="supported claims with a number or year changed → contradiction (default 0)")
    h.add_argument("--number-neutrals", type=int, default=0,
                   help="a claim with another sentence of its page stating a different number → neutral (default 0)")
    h.add_argument("--extensions", type=int, default=0,
                   help="supported claims + a clause their evidence does not state → neutral (teaches \"adds a detail\"; default 0)")
    h.add_argument("--slot-swaps", type=int, default=0,
                   help="a name in a functional slot or a month, stated by the evidence, replaced → contradiction (default 0)")
    h.add_argument("--removals", type=int, default=0,
                   help="a page window without the supporting sentence → neutral, with the full window → entailment (default 0)")
    h.set_defaults(func=run_hard_pairs)
    r = nsub.add_parser("release", help="export ONNX (fp32/int8), fit temperature, write the artifact")
    r.add_argument("--checkpoint", default="artifacts/nli-train/model", help="the trained checkpoint to release")
    r.add_argument("--out", default=None, help="default: triton_models/nli/1")
    r.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    r.set_defaults(func=run_release)
    u = nsub.add_parser("unpack", help="rebuild a trainable checkpoint from a released ONNX artifact")
    u.add_argument("artifact", help="a released artifact dir (model.onnx + tokenizer), e.g. triton_models/nli/1")
    u.add_argument("--config-from", default=None,
                   help="a checkpoint of the same architecture, for its config (default: the installed MiniLM base)")
    u.add_argument("--out", required=True, help="the checkpoint dir to write")
    u.set_defaults(func=run_unpack)
    m = nsub.add_parser("soup", help="average the weights of two released models (same export), refit the temperature")
    m.add_argument("model_a", help="a released artifact dir (model.onnx + tokenizer)")
    m.add_argument("model_b", help="another released artifact of the same export")
    m.add_argument("--weight-a", type=float, default=0.5, help="share of model_a (default 0.5)")
    m.add_argument("--out", required=True, help="the artifact dir to write")
    m.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    m.set_defaults(func=run_soup)
    q = nsub.add_parser("quantize", help="static int8 variant of the artifact (opt-in: changes verdicts)")
    q.add_argument("--model-dir", default=None, help="the fp32 artifact (default: settings)")
    q.add_argument("--out", default="artifacts/nli-int8-static", help="the int8 artifact dir to write")
    q.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    q.add_argument("--calibration-pairs", type=int, default=256, help="pairs that calibrate the int8 ranges (default 256)")
    q.add_argument("--report-pairs", type=int, default=1000, help="pairs the int8-vs-fp32 agreement is reported on (default 1000)")
    q.add_argument("--all-matmuls", action="store_true",
                   help="quantize the feed-forward output projections too (faster, further from fp32)")
    q.set_defaults(func=run_quantize)
    st = nsub.add_parser("stamp", help="declare a model's decision and display valid for a model made from it "
                         "(int8, a release), so the worker accepts it")
    st.add_argument("--model-dir", required=True, help="the new model directory (its calibration.json names its version)")
    st.add_argument("--from", dest="source", default=None,
                    help="the model it was made from (default: DIALCHECK_NLI_MODEL_DIR): whose decision and display")
    st.set_defaults(func=run_stamp)
    a = nsub.add_parser("adopt", help="any HF NLI checkpoint (DeBERTa, RoBERTa, BERT) → an artifact with its own decision")
    a.add_argument("hf_dir", help="a Hugging Face sequence-classification NLI checkpoint directory")
    a.add_argument("--out", required=True, help="the artifact dir to write (use it as DIALCHECK_NLI_MODEL_DIR)")
    a.add_argument("--int8", action="store_true", help="ship dynamic int8 as model.onnx (fp32 kept as model.fp32.onnx)")
    a.add_argument("--skip-refit", action="store_true", help="do not refit the decision for it (OUT/decision.json)")
    a.add_argument("--limit-per-set", type=int, default=None, help="refit on at most N claims per yardstick set")
    a.add_argument("--valid-limit", type=int, default=3000, help="validation pairs for the temperature (default 3000)")
    a.add_argument("--max-length", type=int, default=None, help="cap on the tokens per pair (default: the model's, at most 512)")
    a.add_argument("--folds", type=int, default=5, help="refit: folds of the DialFact grouped CV in the card")
    a.add_argument("--name", default=None, help="the version's name part (default: the checkpoint dir's name)")
    a.add_argument("--tune-cache", default=None, help="refit: the pair cache dir (default artifacts/tune)")
    a.add_argument("--triton-repo", default=None, help="also write a CPU Triton model repository serving it here")
    a.add_argument("--gpu-repo", default=None, help="also write the GPU (NGC) Triton model repository for it here")
    a.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    a.add_argument("--json", action="store_true", help="print the adoption record as JSON")
    a.set_defaults(func=run_adopt)
    e = nsub.add_parser("evaluate", help="held-out benchmarks of the shipped artifact")
    e.add_argument("--data-dir", default=None, help=DATA_DIR_HELP)
    e.add_argument("--model-dir", default=None, help="the artifact to evaluate (default: DIALCHECK_NLI_MODEL_DIR)")
    e.add_argument("--limit", type=int, default=None, help="sample N pairs per benchmark (quick check)")
    e.add_argument("--json", action="store_true", help="print the results as JSON")
    e.add_argument("--write-card", action="store_true", help="also (re)write triton_models/nli/MODEL_CARD.md")
    e.set_defaults(func=run_evaluate)


def _check_train(cfg) -> None:
    """Counts and rates that would train nothing, refused before the pairs and the model load."""
    from dialcheck.errors import UsageError

    for name in ("epochs", "batch_size", "max_length", "lr", "checkpoint_every", "log_every", "threads"):
        value = getattr(cfg, name)
        if value <= 0:
            raise UsageError(f"--{name.replace('_', '-')} must be above 0 (got {value})")
    if cfg.max_pairs < 0:
        raise UsageError(f"--max-pairs must be 0 (all) or more (got {cfg.max_pairs})")


def run_train(args) -> int:
    from lab.nli.train import TrainConfig, train

    cfg = TrainConfig(**{k: getattr(args, k) for k in asdict(TrainConfig())})
    _check_train(cfg)
    print(train(cfg))
    return 0


def run_hard_pairs(args) -> int:
    from pathlib import Path

    from schemas.settings import load_settings
    from lab.nli.pair_sets import build_training_file

    s = load_settings(data={"dir": args.data_dir})
    model = None
    if args.filter_model:
        from workers.models.onnx_nli import OnnxNLI

        model = OnnxNLI(args.filter_model)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    print(json.dumps(build_training_file(s.data.dir, args.out, model, args.same, args.nearest, args.dialogue,
                                         args.replay, n_swaps=args.value_swaps, n_number=args.number_neutrals,
                                         n_extensions=args.extensions, n_slot_swaps=args.slot_swaps,
                                         n_removals=args.removals), indent=1))
    return 0


def run_release(args) -> int:
    from schemas.settings import load_settings
    from lab.nli.release import release

    s = load_settings(data={"dir": args.data_dir})
    out = args.out or s.models.nli_model_dir
    print(json.dumps(release(args.checkpoint, out, s.data.dir), indent=1))
    print(_acceptable_line(out))
    return 0


def run_unpack(args) -> int:
    from lab.nli.export import onnx_to_checkpoint

    print(onnx_to_checkpoint(args.artifact, args.out, args.config_from))
    return 0


def run_soup(args) -> int:
    from schemas.settings import load_settings
    from lab.nli.soup import soup

    s = load_settings(data={"dir": args.data_dir})
    print(json.dumps(soup(args.model_a, args.model_b, args.weight_a, args.out, s.data.dir), indent=1))
    return 0


def run_quantize(args) -> int:
    from schemas.settings import load_settings
    from lab.nli.quantize import quantize_static_int8

    s = load_settings(data={"dir": args.data_dir}, models={"nli_model_dir": args.model_dir})
    report = quantize_static_int8(s.models.nli_model_dir, args.out, s.data.dir,
                                  args.calibration_pairs, args.report_pairs,
                                  keep_ffn_output_fp32=not args.all_matmuls)
    print(json.dumps(report, indent=1))
    print(_acceptable_line(args.out, s.models.nli_model_dir))
    return 0


def _acceptable_line(model_dir, source=None) -> str:
    from lab.nli.stamp import acceptable_line

    return acceptable_line(model_dir, source)


def run_stamp(args) -> int:
    from dialcheck.errors import UsageError
    from dialcheck.model_switch import acceptable
    from lab.nli.stamp import stamp
    from schemas.settings import load_settings

    if not (Path(args.model_dir) / "calibration.json").is_file():
        raise UsageError(f"--model-dir {args.model_dir}: no calibration.json (not an NLI model directory)")
    source = args.source or load_settings().models.nli_model_dir
    written = stamp(args.model_dir, source)
    print(f"stamped {', '.join(p.name for p in written)} of {source} for {args.model_dir}")
    print(f"checked as the worker would: {acceptable(Path(args.model_dir))}")
    return 0


def run_evaluate(args) -> int:
    from pathlib import Path

    from schemas.settings import load_settings
    from workers.models.onnx_nli import OnnxNLI, read_calibration
    from lab.nli.benchmarks import evaluate_model

    s = load_settings(data={"dir": args.data_dir}, models={"nli_model_dir": args.model_dir})
    result = evaluate_model(OnnxNLI(s.models.nli_model_dir), s.data.dir, args.limit)
    if args.write_card:
        from lab.nli.model_card import write_model_card

        cfg_path = Path("artifacts/nli-train/train_config.json")
        cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
        minutes = None
        timing = Path("artifacts/nli-train/elapsed_minutes")
        if timing.exists():
            minutes = float(timing.read_text())
        write_model_card(Path(s.models.nli_model_dir).parent / "MODEL_CARD.md", cfg, read_calibration(Path(s.models.nli_model_dir)),
                         result, minutes)
    if args.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:28s} {v}")
    return 0


def run_adopt(args) -> int:
    from pathlib import Path

    from dialcheck.errors import UsageError
    from schemas.settings import load_settings
    from lab.nli.adopt import adopt

    s = load_settings(data={"dir": args.data_dir})
    if args.limit_per_set is not None and args.limit_per_set < 1:
        raise UsageError("--limit-per-set must be at least 1")
    if args.limit_per_set and not args.skip_refit and args.folds > args.limit_per_set:
        raise UsageError(f"--folds {args.folds} needs at least that many claims per set: raise --limit-per-set "
                         f"({args.limit_per_set}) or lower --folds")
    if not Path(args.hf_dir).is_dir():
        raise UsageError(f"no such checkpoint directory: {args.hf_dir}")
    record = adopt(args.hf_dir, args.out, s.data.dir, int8=args.int8, refit=not args.skip_refit,
                   limit_per_set=args.limit_per_set, valid_limit=args.valid_limit, max_length=args.max_length,
                   folds=args.folds, tune_cache=args.tune_cache, name=args.name,
                   log=lambda m: print(m, file=sys.stderr))
    if args.triton_repo or args.gpu_repo:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # infra/ lives at the repo root
    if args.triton_repo:
        from infra.triton_server import write_nli_repository

        record["triton_repo"] = str(write_nli_repository(args.out, args.triton_repo))
    if args.gpu_repo:
        from infra.make_gpu_repository import make

        record["gpu_repo"] = str(make(Path(args.gpu_repo), Path(args.out)))
    if args.json:
        print(json.dumps(record, indent=1))
    else:
        print(f"adopted {record['version']} (fingerprint {record['fingerprint']}) → {args.out}")
        if record.get("decision"):
            print(f"use it: DIALCHECK_NLI_MODEL_DIR={args.out} dialcheck check ...  (its decision.json and display.json come with it)")
        else:
            print(f"the worker refuses {args.out} until a decision is fitted for it: `dialcheck tune fit --method guarded "
                  f"--model-dir {args.out} --out {args.out}/decision.json`")
        if record.get("triton_repo"):
            print(f"serve it: dialcheck serve-models --model-repository {record['triton_repo']}  (then --models triton://HOST:PORT)")
    return 0
