"""`dialcheck tune decision | gate | fit | checkworthy | segment | windows | bm25`: cross-validated
choice of the decision layer, the gate's τ, the verifier's input and BM25 tokenisation, and fitting
the shipped layer. Each runs the real Pipeline (lab/tuning/tune.py) with NLI probabilities
cached in artifacts/tune, so re-runs are fast."""
from __future__ import annotations

import json
import sys
from pathlib import Path


_DEFAULT_METHODS = ",".join(("threshold", "argmax", "perclass", "logreg"))


METHOD_HELP = "the decision method (default logreg; `tune decision` lists them)"


def register(sub) -> None:
    p = sub.add_parser("tune", help="cross-validated tuning of the decision layer and gate")
    tsub = p.add_subparsers(dest="tune_command", required=True)
    d = tsub.add_parser("decision", help="CV report per decision method (grouped by conversation)")
    g = tsub.add_parser("gate", help="τ_FV by nested CV for one decision method")
    f = tsub.add_parser("fit", help="fit a decision layer on the whole file and write its JSON + card")
    c = tsub.add_parser("checkworthy", help="check-worthiness precision/recall vs type_label and effect on labels")
    sg = tsub.add_parser("segment", help="FV labels with claim segmentation vs whole turns (out of fold)")
    w = tsub.add_parser("windows", help="verifier input variants (sentence splitter, stemmer), one at a time")
    b = tsub.add_parser("bm25", help="BM25 recall with the project's tokenizer vs bm25s's tokenizer/stemmer")
    b.add_argument("--data", default=None, help="DialFact JSONL (default: testsmall)")
    b.set_defaults(func=run_bm25)
    for q in (d, g, f, c, sg, w):
        q.add_argument("--model-dir", default=None, help="NLI model directory (default: settings)")
        q.add_argument("--data", default=None, help="DialFact JSONL (default: testsmall)")
        q.add_argument("--folds", type=int, default=5, help="cross-validation folds, grouped by conversation (default 5)")
        q.add_argument("--protocol", choices=["fv", "e2e"], default="fv",
                       help="fv: the records' gold evidence (default); e2e: evidence retrieved from the index")
        q.add_argument("--json", action="store_true", help="print the report as JSON")
    d.add_argument("--surfaces", default="r0", help="comma list of r0..r4,r4g")
    d.add_argument("--hyp-turns", default=None, help="comma list of hypothesis context turns (default: settings)")
    d.add_argument("--methods", default=_DEFAULT_METHODS, help=f"comma list of decision methods (default {_DEFAULT_METHODS})")
    d.add_argument("--transfer", default="", help="comma list of foolmetwice,wice (in NLI training data: optimistic)")
    d.add_argument("--lodo", action="store_true",
                   help="leave-one-dataset-out over DialFact testsmall, HybriDial dev, FoolMeTwice dev, WiCE dev, "
                        "TRUE-DialFact valid and the FaithDial audit: each method (and its display policy) fitted on "
                        "all sets but one, scored on the one left out")
    d.add_argument("--sets", default="dialfact,hybridial,foolmetwice,wice,true_dialfact,faithdial",
                   help="--lodo: comma list")
    d.add_argument("--refutes-floor", choices=("per_set", "pooled"), default="per_set",
                   help="--lodo: the guarded fit holds REFUTES precision per training set (default) or over all together")
    d.add_argument("--limit-per-set", type=int, default=None,
                   help="--lodo: at most N claims per set (an even spread over the file); default all")
    d.add_argument("--e2e", action="append", default=[], metavar="SET[=INDEX_DIR]",
                   help="--lodo: also score SET (dialfact or hybridial) end to end, retrieving from INDEX_DIR "
                        "(default: the settings' index), with the fits that leave SET out; repeatable")
    d.add_argument("--e2e-surface", default="r4g", help="--lodo --e2e: the claim surface (default r4g, as the stream)")
    d.add_argument("--fv-surface", choices=("r0", "r4g"), default="r0",
                   help="--lodo: the FV rows' claim surface, fitted on and scored alike (default r0, the reply as "
                        "written, as the shipped fit; r4g: R1-R4 behind the gate, as the stream reads it)")
    d.add_argument("--compare-displays", action="store_true",
                   help="--lodo: also score the other display fits (thresholds on p alone; the badge scorer held "
                        "to a stricter training floor; its floors held one standard error below) as shown_p / shown_badge_held / "
                        "shown_badge_se")
    d.set_defaults(func=run_decision)
    g.add_argument("--method", default="logreg", help=METHOD_HELP)
    g.add_argument("--which", choices=["fv", "ir"], default="fv", help="τ_FV (FV labels) or τ_IR (E2E labels)")
    g.set_defaults(func=run_gate)
    f.add_argument("--method", default="logreg", help=METHOD_HELP)
    f.add_argument("--surface", default="r4g",
                   help="the claim surface the fit reads (default r4g, as the stream); --method guarded is fitted on "
                        "the yardstick's FV rows at r0 whatever this says (`tune decision --lodo --fv-surface r4g` "
                        "measures the other)")
    f.add_argument("--out", default="workers/decision/params/decision.json", help="the decision JSON to write (default: the shipped one)")
    f.add_argument("--limit-per-set", type=int, default=None, help="guarded: at most N claims per set")
    f.add_argument("--refutes-floor", choices=("per_set", "pooled"), default="per_set",
                   help="guarded: hold REFUTES precision on every set (shipped) or over all sets together "
                        "(more REFUTES found, fewer of them right: docs/results.md)")
    f.add_argument("--cover", choices=("none", "names", "half", "most", "all"), default="none",
                   help="guarded: what a SUPPORTS window must state of the claim (workers/decision/guarded.py Coverage.covers)")
    f.add_argument("--slot-refutes", action="store_true",
                   help="guarded + --cover: a supported claim whose number the on-topic evidence states differently is REFUTES")
    # workers.decision.guarded.COVER_SCOPES' names, written out: importing it here costs every command ~2.7 s
    f.add_argument("--cover-scope", choices=("all", "dialogue", "dialogue+names", "dialogue+topic", "dialogue+subject"),
                   default="all",
                   help="guarded + --cover: ask it of every claim, or only of replies that came with dialogue context "
                        "(dialogue+names / +topic / +subject: a claim without context must still have its names and "
                        "numbers stated / an on-topic supporting window / one naming its subject)")
    f.add_argument("--relation-clash", action="store_true",
                   help="guarded: a SUPPORTS whose deciding window gives a relation of the claim to another word is "
                        "NOT ENOUGH INFO (shipped; not fitted, the thresholds are the same; lodo variant +relclash)")
    f.add_argument("--checks-on", default="",
                   help="guarded: comma list of registered decision checks whose label effect is on (rival: another "
                        "filler of a one-filler relation is REFUTES, shipped; subject: a SUPPORTS from windows not "
                        "naming the subject is withdrawn); not fitted; lodo variants +rival, +subject, +rival+subject")
    f.add_argument("--guide", default=None,
                   help="guarded: regenerate the precision-per-band table in this file from the left-out numbers "
                        "(default: docs/integration.md when --out is the shipped decision, else none)")
    f.set_defaults(func=run_fit)
    c.add_argument("--method", default="logreg", help=METHOD_HELP)
    c.add_argument("--surface", default="r0", help="the claim surface (r0..r4, r4g; default r0)")
    c.add_argument("--sets", default="dialfact,hybridial",
                   help="sets the rule is also reported on (type_label precision/recall, gold S/R skipped)")
    c.add_argument("--rule-only", action="store_true",
                   help="only the rule on --sets (spaCy alone: no NLI model, classifier or macro-F1 effect)")
    c.set_defaults(func=run_checkworthy)
    sg.add_argument("--method", default="logreg", help=METHOD_HELP)
    sg.set_defaults(func=run_segment)
    w.add_argument("--method", default="logreg", help=METHOD_HELP)
    w.add_argument("--surface", default="r0", help="the claim surface (r0..r4, r4g; default r0)")
    w.set_defaults(func=run_windows)


def _tuner(args):
    """The Tuner reads DialFact and loads the NLI model: the options every tune command shares are
    checked first."""
    from dialcheck.errors import UsageError
    from schemas.settings import load_settings
    from lab.tuning.tune import Tuner

    if args.folds < 2:
        raise UsageError(f"--folds must be at least 2 (got {args.folds})")
    return Tuner(load_settings(), args.model_dir, args.data)


def _methods(args, variants=()) -> list[str]:
    """--methods, each a decision method workers/decision/methods.py knows (or, for --lodo, one of
    lab/tuning/lodo.py's guarded variants, e.g. the shipped guarded+half+chat+relclash)."""
    from dialcheck.errors import UsageError
    from workers.decision.methods import METHODS

    known = [*METHODS, *(v for v in variants if v not in METHODS)]
    methods = [m for m in args.methods.split(",") if m]
    if not methods or any(m not in known for m in methods):
        raise UsageError(f"--methods {args.methods!r}: choose from {','.join(known)}")
    return methods


def _decision_options(args) -> tuple[list[str], list[int] | None]:
    """(--methods, --hyp-turns) checked before the tuner reads the data and loads the model."""
    from dialcheck.errors import UsageError

    methods = _methods(args)
    if not args.hyp_turns:
        return methods, None
    try:
        turns = [int(x) for x in args.hyp_turns.split(",")]
    except ValueError:
        turns = [-1]
    if any(n < 0 for n in turns):
        raise UsageError(f"--hyp-turns {args.hyp_turns!r}: a comma list of whole numbers, 0 or more")
    return methods, turns


def run_decision(args) -> int:
    from lab.tuning.tune import log, transfer_sets

    if args.lodo:
        return run_lodo(args)
    methods, turns = _decision_options(args)
    t = _tuner(args)
    turns = turns or [t.settings.windows.hypothesis_context_turns]
    transfer = transfer_sets(t, [x for x in args.transfer.split(",") if x]) if args.transfer else None
    report = {"model_dir": t.model_dir, "model_fingerprint": t.fp, "data": t.data, "records": len(t.records),
              "protocol": args.protocol, "folds": args.folds, "grouped_by": "context_id", "metric": "macro_f1",
              "results": {}}
    for surface in [s for s in args.surfaces.split(",") if s]:
        for ht in turns:
            log(f"{args.protocol} {surface} hyp_turns={ht}")
            evs = t.evidence(surface, args.protocol, hyp_turns=ht)
            res = t.cv(evs, methods, args.folds, transfer)
            report["results"][f"{surface}/hyp{ht}"] = res
    for key, res in report["results"].items():
        best = max(res, key=lambda m: res[m]["mean"])
        report.setdefault("best", {})[key] = best
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for key, res in report["results"].items():
            for m, r in res.items():
                print(f"{key:12s} {m:10s} {r['mean']:6.2f} ± {r['std']:5.2f}  folds {r['folds']}  "
                      + (f"transfer {r['transfer']}" if "transfer" in r else ""))
    return 0


def run_lodo(args) -> int:
    from dialcheck.errors import UsageError
    from workers.decision import load_decision
    from workers.display import CONSTANT, load_display
    from lab.tuning.datasets import SETS, load_set
    from lab.tuning.lodo import E2E_SETS, VARIANTS, e2e_evidence, lodo_report

    names = [x for x in args.sets.split(",") if x]
    unknown = [x for x in names if x not in SETS]
    if unknown or len(names) < 2:
        raise UsageError(f"--sets needs two or more of {','.join(SETS)} (got {args.sets!r})")
    e2e_specs = {}  # set → index directory (None: the settings' index); checked before any model loads
    for spec in args.e2e:
        name, _, index_dir = spec.partition("=")
        if name not in E2E_SETS or name not in names:
            raise UsageError(f"--e2e {spec!r}: the set must be one of {','.join(E2E_SETS)} and in --sets")
        if index_dir and not Path(index_dir).is_dir():
            raise UsageError(f"--e2e {spec!r}: no index at {index_dir} (build one with `dialcheck index build --tsv`)")
        e2e_specs[name] = index_dir or None
    methods = _methods(args, VARIANTS) if args.methods != _DEFAULT_METHODS else ["threshold", "argmax", "guarded", "logreg"]
    t = _tuner(args)
    from schemas.settings import load_settings

    try:  # the decision the settings ship, applied as is (the tuner's own settings decide by rule)
        shipped = load_decision(load_settings().decision, "fv")
        shipped_display = load_display(load_settings().decision) or CONSTANT
    except (FileNotFoundError, ValueError):
        shipped, shipped_display = None, None
    sets = [load_set(n, t.settings.data.dir, args.limit_per_set) for n in names]
    e2e = {name: e2e_evidence(t, next(x for x in sets if x.name == name), index_dir, args.e2e_surface)
           for name, index_dir in e2e_specs.items()}
    report = lodo_report(t, sets, methods, shipped, args.folds, refutes_floor=args.refutes_floor, e2e=e2e,
                         shipped_display=shipped_display, compare_displays=args.compare_displays,
                         surface=args.fv_surface)
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for name, row in report["left_out"].items():
            for m, r in row.items():
                sh = r.get("shown") or {}
                print(f"{name:14s} {m:16s} macro-F1 {r['macro_f1']:6.2f}  S-prec {r['supports_precision']}  "
                      f"R-prec {r['refutes_precision']} ({r['refutes_predicted']})  shown {sh.get('coverage')} % "
                      f"at {sh.get('precision')} % (attainable {sh.get('attainable')} %)  NEI-rec {r['nei_recall']}")
    return 0


def run_gate(args) -> int:
    from lab.tuning.tune import tune_tau, tune_tau_ir

    if args.which == "ir":
        res = tune_tau_ir(_tuner(args), args.method, k=args.folds)
    else:
        res = tune_tau(_tuner(args), args.method, k=args.folds, protocol=args.protocol)
    return _print(args, res)


def run_fit(args) -> int:
    from lab.tuning.card import fit_and_write, fit_union_and_write

    if args.method == "guarded":  # the variant the flags name, refused before any model loads when none is measured
        from lab.tuning.lodo import VARIANTS

        variant = "guarded" + (f"+{args.cover}" if args.cover != "none" else "") + ("+slot" if args.slot_refutes else "") \
            + (args.cover_scope.replace("dialogue", "+chat", 1) if args.cover != "none" and args.cover_scope != "all" else "") \
            + ("+relclash" if args.relation_clash else "") + "".join(f"+{c}" for c in args.checks_on.split(",") if c)
        if variant not in VARIANTS:
            from dialcheck.errors import UsageError

            raise UsageError(f"no guarded variant {variant!r} with these flags (measured: {', '.join(VARIANTS)})")
    t = _tuner(args)
    if args.method == "guarded":  # fitted across domains: the yardstick's sets, not one file
        from lab.tuning.datasets import FIT_SETS, load_set
        from schemas.settings import REPO_ROOT

        sets = [load_set(n, t.settings.data.dir, args.limit_per_set) for n in FIT_SETS]
        shipped = Path(args.out).resolve() == (REPO_ROOT / "workers" / "decision" / "params" / "decision.json").resolve()
        guide = args.guide if args.guide is not None else (str(REPO_ROOT / "docs" / "integration.md") if shipped else "")
        layer = fit_union_and_write(t, sets, args.out, args.folds, refutes_floor=args.refutes_floor, variant=variant,
                                    guide=guide or None)
    else:
        layer = fit_and_write(t, args.method, args.surface, args.protocol, args.out, args.folds)
    print(json.dumps(layer.to_dict()["meta"], indent=1) if args.json else f"wrote {args.out}", file=sys.stdout)
    return 0


def _print(args, res) -> int:
    print(json.dumps(res, indent=1) if args.json else res)
    return 0


def run_checkworthy(args) -> int:
    from dialcheck.errors import UsageError
    from schemas.settings import load_settings
    from lab.tuning.tune import CHECKWORTHY_SETS, checkworthy_report, checkworthy_sets_report

    sets = [x for x in args.sets.split(",") if x]
    if any(x not in CHECKWORTHY_SETS for x in sets):
        raise UsageError(f"--sets takes {','.join(CHECKWORTHY_SETS)} (got {args.sets!r})")
    if args.rule_only:
        return _print(args, checkworthy_sets_report(load_settings().data.dir, sets))
    return _print(args, checkworthy_report(_tuner(args), args.method, args.folds, args.protocol, args.surface, sets))


def run_segment(args) -> int:
    from lab.tuning.tune import segmentation_report

    return _print(args, segmentation_report(_tuner(args), args.method, args.folds))


def run_windows(args) -> int:
    from lab.tuning.tune import window_variants_report

    return _print(args, window_variants_report(_tuner(args), args.method, args.folds, args.protocol, args.surface))


def run_bm25(args) -> int:
    """Needs only the index's passages, not its vectors: on a checkout where the index is not built
    yet, the passages the default index is built from are read in memory (nothing is written), so
    the report runs instead of failing on a missing passages.jsonl."""
    from schemas.settings import load_settings
    from lab.tuning.tune import bm25_tokenizer_report

    settings = load_settings()
    index_dir = Path(settings.retrieval.index_dir)
    passages = None
    if not (index_dir / "passages.jsonl").is_file():
        from dialcheck.commands.data import require_index_sources
        from workers.retrieval.build import collect, collection_meta

        require_index_sources(settings)  # a source file that is not there: one line naming what to fetch
        sources, _ = collection_meta(settings, None, None)
        print(f"[dialcheck] no index in {index_dir}: BM25 over the passages of the default sources "
              f"({','.join(sources)}), read in memory", file=sys.stderr)
        passages = [{"title": p.title, "text": p.text, "doc_id": p.doc_id} for p in collect(settings, sources)]
    print(json.dumps(bm25_tokenizer_report(settings, args.data, passages), indent=1))
    return 0
