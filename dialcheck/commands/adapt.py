"""`dialcheck adapt`: adapt the shipped NLI verifier to a deployment's judged replies (lab/nli/adapt_run.py).

    dialcheck adapt --labels DATA.jsonl --out DIR        # an annotation export, DialFact format
    dialcheck adapt --from-feedback --out DIR            # the feedback store's judged verdicts
    DIALCHECK_NLI_MODEL_DIR=DIR dialcheck check ...      # DIR alone serves its verdicts and badges

Writes DIR (model.onnx, tokenizer/, calibration.json, decision.json, display.json, MODEL_CARD.md,
DECISION_CARD.md, adapt.json) when the adapted model ranks the deployment's held-out conversations
better with confidence (cross-fitted by conversation) and the safety guards hold; the certificate
(the target certified, the best attainable, or how many more judged replies a target needs) is in
adapt.json, the cards and the line printed. Otherwise only DIR/adapt.json, one `dialcheck: …` line
and exit 2."""
from __future__ import annotations

import sys
from pathlib import Path

from dialcheck.errors import UsageError


def register(sub) -> None:
    p = sub.add_parser("adapt", help="fine-tune the verifier on judged replies, certify it, write a model dir")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--labels", default=None,
                     help="DialFact-format JSONL with gold evidence and response_label (three-way, or binary "
                          "SUPPORTS / NOT SUPPORTS)")
    src.add_argument("--from-feedback", action="store_true",
                     help="the feedback store's judged verdicts (DIALCHECK_FEEDBACK_STORE, or --store)")
    p.add_argument("--store", default=None, help="with --from-feedback: the store's path or database URL")
    p.add_argument("--sources", default="moderator,annotator",
                   help="with --from-feedback: whose judgements to learn from (default moderator,annotator; "
                        "add user only for trusted users: clicks can be wrong or hostile)")
    p.add_argument("--out", required=True, help="the model directory to write (not the shipped one)")
    p.add_argument("--folds", type=int, default=3, help="cross-fitting folds, split by conversation: each fold is "
                   "scored by a model fitted on the others; the model written is fitted on all (default 3)")
    p.add_argument("--seed", type=int, default=0, help="the folds' and the first training run's seed (default 0)")
    p.add_argument("--seeds", type=int, default=1, help="training runs per fold with seeds seed, seed+1, ...; the "
                   "spread is reported, the first is used (default 1)")
    p.add_argument("--target", type=float, default=0.85, help="least share of shown badges right (default 0.85)")
    p.add_argument("--confidence", type=float, default=0.9, help="probability the guarantee holds (default 0.9)")
    p.add_argument("--min-target", type=float, default=None,
                   help="when --target cannot be certified, the lowest target certified instead (default target − 0.1); "
                        "below it no badge is shown")
    p.add_argument("--guard-yardstick", action="store_true",
                   help="also refuse a model that loses more than 3 ROC AUC points on any yardstick set (claim "
                        "verification included: for a deployment that checks claims, not chat replies)")
    p.add_argument("--max-steps", type=int, default=200, help="optimiser steps at most (default 200)")
    p.add_argument("--train-layers", type=int, default=2,
                   help="the top encoder layers fine-tuned (default 2); the layers below keep the shipped weights "
                        "and run once per reply. The encoder's depth (6 for the shipped model) trains them all")
    p.add_argument("--replay-pairs", type=int, default=0,
                   help="general NLI pairs (the training side of the base's sources, never an evaluation set) "
                        "replayed beside the judged ones, held to the shipped model's probabilities so general NLI "
                        "is not forgotten (e.g. 384; default 0: none — measured, it lets a higher mix through the "
                        "SNLI anchor guard but showed fewer badges)")
    p.add_argument("--limit-per-set", type=int, default=None,
                   help="records per yardstick set in the report of what else moved (default 100; 300 with "
                        "--guard-yardstick, where it decides)")
    p.add_argument("--probe-pairs", type=int, default=200,
                   help="pairs of the unrelated-evidence probe (and of the silent probe) (default 200)")
    p.add_argument("--anchor-pairs", type=int, default=500,
                   help="SNLI test pairs of the general-NLI anchor the adapted model must stay within 3 accuracy "
                        "points of the shipped one on (default 500)")
    p.add_argument("--data-dir", default=None, help="the yardstick's data dir (default: the settings')")
    p.add_argument("--base", default=None, help="the NLI model dir to adapt (default: the configured one)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


def _check(args) -> None:
    for name in ("target", "confidence", "min_target"):
        v = getattr(args, name)
        if v is not None and not 0.0 < v < 1.0:
            raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1 (got {v})")
    if args.min_target is not None and args.min_target > args.target:
        raise UsageError(f"--min-target {args.min_target} is above --target {args.target}")
    if not 2 <= args.folds <= 10:
        raise UsageError(f"--folds must be between 2 and 10 (got {args.folds})")
    if args.limit_per_set is None:  # reported only: 100 per set is enough to see what moves; guarded: 300
        args.limit_per_set = 300 if args.guard_yardstick else 100
    if min(args.seeds, args.max_steps, args.limit_per_set, args.probe_pairs, args.anchor_pairs, args.train_layers) < 1:
        raise UsageError("--seeds, --max-steps, --train-layers, --limit-per-set, --probe-pairs and --anchor-pairs "
                         "must be at least 1")
    if args.replay_pairs < 0:
        raise UsageError(f"--replay-pairs must be 0 or more (got {args.replay_pairs})")
    if args.labels and not Path(args.labels).is_file():
        raise UsageError(f"--labels {args.labels}: no such file")
    if args.store and not args.from_feedback:
        raise UsageError("--store goes with --from-feedback")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out} is a file: name a directory")
    if out.is_dir() and {p.name for p in out.iterdir()} - {"adapt.json", ".adapt-work"}:
        raise UsageError(f"--out {args.out} is not empty: name a new directory (write beside the model in use, "
                         "then move it over: docs/operations.md)")


def _sources(raw: str) -> tuple[str, ...]:
    from schemas.feedback import SOURCES

    names = tuple(s.strip() for s in raw.split(",") if s.strip())
    bad = [s for s in names if s not in SOURCES]
    if bad or not names:
        raise UsageError(f"--sources {raw}: a comma-separated list of {', '.join(SOURCES)}")
    return names


def _pairs(args):
    from lab.nli.judged import from_dialfact, from_feedback, pairs_sha1, sha1_of

    if args.labels:
        try:
            pairs = from_dialfact(args.labels)
        except UnicodeDecodeError:
            raise UsageError(f"--labels {args.labels}: not UTF-8 text") from None
        data = {"kind": "labels", "file": Path(args.labels).name, "file_sha1": sha1_of(args.labels)}
    else:
        from schemas.settings import load_settings

        from .feedback import open_store

        sources = _sources(args.sources)
        with open_store(args.store, load_settings()) as store:
            pairs, dropped = from_feedback(store.judged(), sources)
            where = store.url
        from schemas.settings import redact

        data = {"kind": "feedback", "store": redact(where), "sources": list(sources), "left_out": dropped}
    if not pairs:
        raise UsageError(f"{args.labels or 'the feedback store'}: no judged reply to learn from "
                         "(SUPPORTS / REFUTES judged right or wrong, or gold labels with evidence)")
    data["pairs_sha1"] = pairs_sha1(pairs)
    return pairs, data


def run(args) -> int:
    _check(args)
    from schemas.settings import load_settings

    settings = load_settings()
    base = Path(args.base or settings.models.nli_model_dir)
    if not (base / "model.onnx").is_file():
        raise UsageError(f"{base}: no model.onnx (--base names an NLI model dir)")
    out = Path(args.out)
    if out.resolve() == base.resolve():
        raise UsageError(f"--out {args.out} is the model being adapted: write beside it, then move it over")
    pairs, data = _pairs(args)
    from lab.nli.adapt_run import AdaptOptions, adapt

    opts = AdaptOptions(folds=args.folds, seed=args.seed, seeds=args.seeds, target=args.target,
                        confidence=args.confidence, min_target=args.min_target,
                        guard_yardstick=args.guard_yardstick, max_steps=args.max_steps,
                        train_layers=args.train_layers, replay_pairs=args.replay_pairs,
                        limit_per_set=args.limit_per_set, probe_pairs=args.probe_pairs, anchor_pairs=args.anchor_pairs,
                        data_dir=str(args.data_dir or settings.data.dir),
                        progress=not args.quiet)
    out.mkdir(parents=True, exist_ok=True)
    report = adapt(pairs, data, base, out, opts, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(f"adapted → {out}: {report['summary']} ({report['seconds']} s); serve it with DIALCHECK_NLI_MODEL_DIR={out}")
    return 0
