"""Cross-validated tuning behind `dialcheck tune`: decision methods, the gate's τ and the
verifier's hypothesis context. Every number comes from the real `Pipeline` (the same stages the
stream and `dialcheck eval` run) over cached NLI probabilities (artifacts/tune)."""
from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import numpy as np

from schemas import LABELS
from schemas.items import CheckItem

from workers.decision import METHODS, ClaimEvidence, method as decision_method
from workers.jsonl import read_jsonl
from lab.evaluation.scoring import macro_f1
from workers.windows import top_windows
from .cache import DEFAULT_DIR, PairCache
from .cv import cross_validate, folds
from .data import CachedNLI, MemoSearcher, model_fingerprint
from .fit import fit_decision


def log(msg: str) -> None:
    print(f"[tune] {msg}", file=sys.stderr, flush=True)


class Tuner:
    """One NLI model + one DialFact file; `states()` runs the real Pipeline over the file with the
    NLI probabilities cached on disk, `evidence()` turns each claim state into the decision's input."""

    def __init__(self, settings, model_dir: str | None = None, data: str | None = None, cache_dir: Path = DEFAULT_DIR):
        from schemas.items import load_dialfact

        from workers.caches import memoize
        from workers.models.onnx_nli import load_local_nli
        from workers.stages import surfaces_of

        self.model_dir = model_dir or settings.models.nli_model_dir
        # tuning reads window probabilities, not a decision: the cheap rule keeps the shipped
        # layer out of the loop (and a layer fitted for another model from being loaded); every
        # claim is verified (no turn skipped: `tune checkworthy` measures skipping on its own)
        self.settings = settings.updated(models={"nli_model_dir": self.model_dir},
                                         decision={"method": "threshold", "display_params": ""},
                                         claims={"skip_turns": "", "checkworthy": False, "segment": False})
        self.data = data or settings.data.dialfact_sample
        self.cache_dir = cache_dir
        self.fp = model_fingerprint(self.model_dir)
        self.cache = PairCache(cache_dir / "pairs.sqlite", self.fp)
        self.nli = CachedNLI(load_local_nli(self.model_dir), self.cache)
        self.records = load_dialfact(self.data)
        self.surfaces = memoize(surfaces_of, max(settings.perf.cache_entries, 1 << 16))
        self._encoder = self._searcher = None

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.records]

    @property
    def groups(self) -> list[str]:
        return [r.context_id for r in self.records]

    @property
    def encoder(self):
        if self._encoder is None:
            from workers.caches import CachedEncoder
            from workers.models.encoders import load_local_encoder

            self._encoder = CachedEncoder(load_local_encoder(self.settings.models.encoder), 1 << 16)
        return self._encoder

    @property
    def searcher(self):
        if self._searcher is None:
            from workers.retrieval.factory import load_searcher

            self._searcher = MemoSearcher(load_searcher(self.settings, self.encoder))
        return self._searcher

    def on_index(self, index_dir: str) -> "Tuner":
        """This tuner (same NLI model, cache and encoder) retrieving from another embedded index:
        the yardstick's E2E rows read each set's own passages (e.g. HybriDial's passages TSV)."""
        import copy

        other = copy.copy(self)
        other._encoder = self.encoder  # loaded once, shared
        other.settings = self.settings.updated(retrieval={"index_dir": index_dir})
        other._searcher = None
        return other

    def pipeline(self, protocol: str = "fv", surface: str = "r0", window_fn=None, **changes):
        """The real Pipeline with the cached models; `changes`: settings sections to override."""
        from workers.pipeline import Pipeline, PipelineHooks

        settings = self.settings.updated(**changes) if changes else self.settings
        return Pipeline(settings, self.nli, self.encoder, self.searcher if protocol == "e2e" else None,
                        protocol, surface, self.surfaces, PipelineHooks(window_fn=window_fn))

    def states(self, items: list[CheckItem], protocol: str = "fv", surface: str = "r0", window_fn=None, **changes):
        """One claim state per item (the tuner's settings never split a turn into claims)."""
        return [t.states[0] for t in self.pipeline(protocol, surface, window_fn, **changes).check_turns(items)]

    def items(self, protocol: str) -> list[CheckItem]:
        return [r.to_check_item(protocol) for r in self.records]

    def evidence(self, surface: str = "r0", protocol: str = "fv", hyp_turns: int | None = None,
                 tau_fv: float | None = None, tau_ir: float | None = None, window_fn=None) -> list[ClaimEvidence]:
        from workers.stages import claim_evidence

        windows = {"hypothesis_context_turns": hyp_turns}
        gate = {"tau_fv": tau_fv, "tau_ir": tau_ir}
        return [claim_evidence(st) for st in
                self.states(self.items(protocol), protocol, surface, window_fn, windows=windows, gate=gate)]

    def cv(self, evs, methods=METHODS, k: int = 5, transfer: dict | None = None) -> dict:
        return {m: cross_validate(evs, self.labels, self.groups, lambda e, y, m=m: fit_decision(m, e, y), k, transfer)
                for m in methods}


def transfer_sets(tuner: Tuner, names=("foolmetwice", "wice")) -> dict:
    """Gold-evidence claim sets outside DialFact (both are in the NLI training pairs: optimistic).
    FoolMeTwice: SUPPORTS/REFUTES. WiCE: supported → SUPPORTS, partially/not supported → NOT ENOUGH
    INFO (WiCE's 'not supported' means the cited page does not back the claim, not that it refutes)."""
    d = Path(tuner.settings.data.dir)
    out = {}
    for name in names:
        if name == "foolmetwice":
            rows = list(read_jsonl(d / "foolmetwice" / "dev.jsonl"))
            items = [(r["text"], [" ".join(g["text"] for g in r["gold_evidence"])], r["label"]) for r in rows]
        else:
            rows = list(read_jsonl(d / "wice" / "dev.jsonl"))
            items = [(r["claim"], [" ".join(r["evidence"])], "SUPPORTS" if r["label"] == "supported" else "NOT ENOUGH INFO")
                     for r in rows]
        out[name] = (gold_evidence(tuner, [(c, p) for c, p, _ in items]), [y for *_, y in items])
        log(f"transfer set {name}: {len(items)} claims")
    return out


def gold_evidence(tuner: Tuner, claims: list[tuple[str, list[str]]], context: list[str] | None = None
                  ) -> list[ClaimEvidence]:
    """Claims without dialogue (claim, passage texts) verified by the real FV pipeline at R0."""
    from workers.stages import claim_evidence

    items = [CheckItem(f"t{i}", f"t{i}#claim", list(context or []), c, [("", p) for p in ps])
             for i, (c, ps) in enumerate(claims)]
    return [claim_evidence(st) for st in tuner.states(items, "fv", "r0")]


def nested_choice(evs: dict, y, g, taus, method: str, k: int, tie_break_toward: float) -> dict:
    """Nested grouped CV of a threshold: in each outer fold pick τ by inner CV on the training
    folds (ties toward `tie_break_toward`), fit the layer there, score the held-out fold."""
    outer, chosen = [], []
    for test in folds(g, k):
        train = np.setdiff1d(np.arange(len(y)), test)
        inner = {t: cross_validate([evs[t][i] for i in train], [y[i] for i in train], [g[i] for i in train],
                                   lambda e, y: fit_decision(method, e, y), k)["mean"] for t in taus}
        best = max(taus, key=lambda t: (inner[t], -abs(t - tie_break_toward)))
        layer = fit_decision(method, [evs[best][i] for i in train], [y[i] for i in train])
        outer.append(macro_f1([y[i] for i in test], layer.predict([evs[best][i] for i in test])))
        chosen.append(float(best))
    return {"folds": [round(f, 2) for f in outer], "mean": round(float(np.mean(outer)), 2),
            "std": round(float(np.std(outer)), 2), "tau_chosen_per_fold": chosen}


def tune_tau(tuner: Tuner, method: str, taus=tuple(np.round(np.arange(0.40, 0.96, 0.05), 2)), k: int = 5,
             protocol: str = "fv") -> dict:
    """τ_FV by nested choice: in each outer fold, pick τ by inner CV on the training folds, fit the
    layer there, score the held-out fold. Also the plain CV curve per τ."""
    evs = {t: tuner.evidence("r4g", protocol, tau_fv=float(t)) for t in taus}
    y, g = tuner.labels, tuner.groups
    curve = {str(t): cross_validate(evs[t], y, g, lambda e, y: fit_decision(method, e, y), k)["mean"] for t in taus}
    nested = nested_choice(evs, y, g, taus, method, k, tie_break_toward=0.7)
    gated = [e.gate for e in evs[taus[0]] if e.gate is not None]
    acc = {str(t): round(100 * float(np.mean([e.gate for e in evs[t] if e.gate is not None])), 1) for t in taus}
    return {"method": method, "candidates": len(gated), "cv_mean_by_tau": curve, "acceptance_by_tau": acc,
            "nested": nested}


def oof_predictions(evs, labels, groups, method: str, k: int = 5) -> list[str]:
    """Out-of-fold predictions of a layer (each claim predicted by a layer not fitted on it)."""
    out = [None] * len(labels)
    for test in folds(groups, k):
        train = np.setdiff1d(np.arange(len(labels)), test)
        layer = fit_decision(method, [evs[i] for i in train], [labels[i] for i in train])
        for i, p in zip(test, layer.predict([evs[i] for i in test])):
            out[i] = p
    return out


CHECKWORTHY_SETS = ("dialfact", "hybridial")  # the DialFact-format sets with a type_label


def checkworthy_on_set(s) -> dict:
    """The hand-written rule as shipped (nothing fitted) on one DialFact-format set: precision and
    recall of 'not check-worthy' against type_label == personal, and the gold SUPPORTS/REFUTES
    claims it skips (each one a verdict lost: the turn is answered NOT ENOUGH INFO unchecked)."""
    from workers.checkworthy import check_worthiness

    ws = [check_worthiness(it.claim) for it in s.items]
    flagged = np.array([not w.checkworthy for w in ws])
    gold = np.array([t == "personal" for t in s.type_labels])
    tp = int((flagged & gold).sum())
    lost = [i for i in np.flatnonzero(flagged) if s.labels[i] in ("SUPPORTS", "REFUTES")]
    kinds: dict[str, int] = {}
    for w in ws:
        if not w.checkworthy:
            kinds[w.kind] = kinds.get(w.kind, 0) + 1
    return {"n": len(s), "positives_personal": int(gold.sum()), "flagged": int(flagged.sum()),
            "precision": round(100 * tp / max(int(flagged.sum()), 1), 1),
            "recall": round(100 * tp / max(int(gold.sum()), 1), 1),
            "flagged_by_gold_label": {lab: int((flagged & (np.array(s.labels) == lab)).sum()) for lab in LABELS},
            "gold_supports_refutes_lost": len(lost), "kinds_flagged": kinds,
            "lost": [{"id": s.items[i].conversation_id, "label": s.labels[i], "kind": ws[i].kind,
                      "claim": s.items[i].claim[:160]} for i in lost]}


def checkworthy_sets_report(data_dir: str | Path, sets=CHECKWORTHY_SETS) -> dict:
    """`checkworthy_on_set` for each named set (DialFact testsmall and HybriDial dev by default)."""
    from .datasets import load_set

    return {name: checkworthy_on_set(load_set(name, data_dir)) for name in sets}


def checkworthy_report(tuner: Tuner, method: str = "logreg", k: int = 5, protocol: str = "fv",
                       surface: str = "r0", sets=CHECKWORTHY_SETS) -> dict:
    """Precision/recall of 'not check-worthy' against DialFact type_label == personal, for the
    rule and for a logistic classifier over its parse features (grouped CV), and the effect on
    the claim labels when not-check-worthy turns are forced to NOT ENOUGH INFO; then the rule
    alone on each of `sets` (precision/recall and the gold SUPPORTS/REFUTES it skips)."""
    from sklearn.linear_model import LogisticRegression

    from workers.checkworthy import check_worthiness, features

    recs = tuner.records
    gold = np.array([r.type_label == "personal" for r in recs])
    rule = np.array([not check_worthiness(r.response).checkworthy for r in recs])
    X = np.vstack([features(r.response) for r in recs])
    clf_pred = np.zeros(len(recs), bool)
    for test in folds(tuner.groups, k):
        train = np.setdiff1d(np.arange(len(recs)), test)
        mu, sd = X[train].mean(0), X[train].std(0) + 1e-9
        clf = LogisticRegression(class_weight="balanced", max_iter=2000).fit((X[train] - mu) / sd, gold[train])
        # a high bar: only confident 'personal' calls skip checking
        clf_pred[test] = clf.predict_proba((X[test] - mu) / sd)[:, 1] >= 0.8

    def pr(pred):
        tp = int((pred & gold).sum())
        return {"flagged": int(pred.sum()), "precision": round(100 * tp / max(int(pred.sum()), 1), 1),
                "recall": round(100 * tp / max(int(gold.sum()), 1), 1),
                "factual_flagged_by_label": {lab: int((pred & ~gold & (np.array(tuner.labels) == lab)).sum())
                                             for lab in LABELS}}

    evs = tuner.evidence(surface, protocol)
    base = oof_predictions(evs, tuner.labels, tuner.groups, method, k)
    y = tuner.labels
    eff = {"none": round(macro_f1(y, base), 2)}
    for name, pred in (("rule", rule), ("classifier_cv", clf_pred)):
        eff[name] = round(macro_f1(y, ["NOT ENOUGH INFO" if f else p for p, f in zip(base, pred)]), 2)
    return {"positives_personal": int(gold.sum()), "rule": pr(rule), "classifier_cv": pr(clf_pred),
            "effect_macro_f1": {"protocol": protocol, "surface": surface, "method": method,
                                "pooled_out_of_fold": eff},
            "sets": checkworthy_sets_report(tuner.settings.data.dir, sets)}


def segmentation_report(tuner: Tuner, method: str = "logreg", k: int = 5) -> dict:
    """FV labels with claim segmentation (each segment verified against the gold evidence, turn
    label = worst segment) against the whole-turn labels, layers fitted out of fold."""
    from workers.segment import segment, turn_label

    recs, y, g = tuner.records, tuner.labels, tuner.groups
    from workers.stages import claim_evidence

    segs = {r.id: segment(r.response) for r in recs}
    multi = [i for i, r in enumerate(recs) if len(segs[r.id]) > 1]
    whole = tuner.evidence("r0", "fv")
    owners = [i for i in multi for _ in segs[recs[i].id]]
    items = [CheckItem(recs[i].id, f"{recs[i].id}#response", list(recs[i].context), s.text, list(recs[i].evidence))
             for i in multi for s in segs[recs[i].id]]
    seg_ev = list(zip(owners, (claim_evidence(st) for st in tuner.states(items, "fv", "r0"))))
    base, segmented = [None] * len(y), [None] * len(y)
    for test in folds(g, k):
        train = np.setdiff1d(np.arange(len(y)), test)
        layer = fit_decision(method, [whole[i] for i in train], [y[i] for i in train])
        for i, p in zip(test, layer.predict([whole[i] for i in test])):
            base[i] = segmented[i] = p
        tset = set(test.tolist())
        mine = [(i, e) for i, e in seg_ev if i in tset]
        labs = layer.predict([e for _, e in mine])
        per: dict[int, list[str]] = {}
        for (i, _), lab in zip(mine, labs):
            per.setdefault(i, []).append(lab)
        for i, labs_i in per.items():
            segmented[i] = turn_label(labs_i)
    single = [i for i in range(len(y)) if i not in set(multi)]
    return {"records": len(y), "multi_segment": len(multi), "segments": len(seg_ev),
            "macro_f1_whole_turn": round(macro_f1(y, base), 2), "macro_f1_segmented": round(macro_f1(y, segmented), 2),
            "single_segment_unchanged": all(base[i] == segmented[i] for i in single),
            "multi_only": {"whole_turn": round(macro_f1([y[i] for i in multi], [base[i] for i in multi]), 2),
                           "segmented": round(macro_f1([y[i] for i in multi], [segmented[i] for i in multi]), 2)}}


def window_variants_report(tuner: Tuner, method: str = "logreg", k: int = 5, protocol: str = "fv",
                           surface: str = "r0") -> dict:
    """FV macro-F1 (grouped CV of `method`, and the threshold rule pooled) for each verifier-input
    variant, changed one at a time: regex→spaCy sentencizer, then suffix→Snowball stemmer."""
    variants = {"regex+suffix (old)": ("regex", "suffix"), "spacy+suffix": ("spacy", "suffix"),
                "spacy+snowball": ("spacy", "snowball"), "regex+snowball": ("regex", "snowball")}
    out = {}
    for name, (sp, st) in variants.items():
        evs = tuner.evidence(surface, protocol, window_fn=partial(top_windows, splitter=sp, stemmer=st))
        cv = cross_validate(evs, tuner.labels, tuner.groups, lambda e, y: fit_decision(method, e, y), k)
        rule = macro_f1(tuner.labels, decision_method("threshold").predict(evs))
        out[name] = {f"{method}_cv_mean": cv["mean"], f"{method}_cv_std": cv["std"], "threshold_rule": round(rule, 2)}
        log(f"{name}: {out[name]}")
    return out


def bm25_tokenizer_report(settings, data: str | None = None, passages: list[dict] | None = None) -> dict:
    """BM25 document recall (query = last 2 turns + claim, ∪ top-1 per context turn, as the
    retrieve stage) with the project's tokenizer vs bm25s's tokenizer and stop words, with and
    without a Snowball stemmer; in-memory indexes over the same passages as the configured index,
    or over `passages` ({title, text, doc_id} rows) when given."""
    import bm25s
    from nltk.stem.snowball import SnowballStemmer

    from schemas.items import load_dialfact

    from lab.evaluation.scoring import retrieval_metrics
    from workers.retrieval.bm25 import tokenize
    from workers.text import with_context

    if passages is None:
        passages = list(read_jsonl(Path(settings.retrieval.index_dir) / "passages.jsonl"))
    recs = [r for r in load_dialfact(data or settings.data.dialfact_sample) if r.type_label == "factual" and r.evidence]
    gold = [{t for t, _ in r.evidence} for r in recs]
    snow = SnowballStemmer("english")

    class _Stem:  # bm25s calls stemWords on the token list
        def stemWords(self, words):
            return [snow.stem(w) for w in words]

    variants = {
        "project tokenizer (regex + stop list)": lambda texts: [tokenize(t) or ["_"] for t in texts],
        "bm25s tokenizer + 'en' stop words": lambda texts: bm25s.tokenize(texts, stopwords="en", return_ids=False,
                                                                            show_progress=False),
        "bm25s tokenizer + 'en' stop words + Snowball": lambda texts: bm25s.tokenize(
            texts, stopwords="en", stemmer=_Stem(), return_ids=False, show_progress=False),
    }
    out = {"queries": len(recs)}
    for name, tok in variants.items():
        bm = bm25s.BM25(k1=settings.retrieval.bm25_k1, b=settings.retrieval.bm25_b, method="lucene")
        bm.index(tok([f"{p['title']} {p['text']}" for p in passages]), show_progress=False)
        ranked = []
        for r in recs:
            qt = [q or ["_"] for q in tok([with_context(r.context, r.response, settings.retrieval.query_context_turns),
                                           *r.context])]
            docs, scores = bm.retrieve(qt, k=settings.retrieval.bm25_top_k, show_progress=False, n_threads=1)
            seen, order = set(), []
            for d, s in zip(docs[0], scores[0]):
                if s > 0 and passages[int(d)]["doc_id"] not in seen:
                    seen.add(passages[int(d)]["doc_id"])
                    order.append(passages[int(d)]["doc_id"])
            for row_d, row_s in zip(docs[1:], scores[1:]):
                if len(row_d) and row_s[0] > 0 and passages[int(row_d[0])]["doc_id"] not in seen:
                    seen.add(passages[int(row_d[0])]["doc_id"])
                    order.append(passages[int(row_d[0])]["doc_id"])
            ranked.append(order)
        m = retrieval_metrics(gold, ranked, [10, settings.retrieval.bm25_top_k])
        out[name] = {k: v for k, v in m.items() if k != "n"}
        log(f"{name}: {out[name]}")
    return out


def tune_tau_ir(tuner: Tuner, method: str = "logreg", taus=tuple(np.round(np.arange(0.50, 0.96, 0.05), 2)),
                k: int = 5) -> dict:
    """τ_IR by the same grouped CV on E2E labels (R4 + gate, τ_FV from settings): the real e2e
    pipeline per τ (search results and query vectors are remembered across τ)."""
    y, g = tuner.labels, tuner.groups
    curve, evs, routed = {}, {}, {}
    for t in taus:
        from workers.stages import claim_evidence

        states = tuner.states(tuner.items("e2e"), "e2e", "r4g", gate={"tau_ir": float(t)})
        evs[t] = [claim_evidence(st) for st in states]
        curve[str(t)] = cross_validate(evs[t], y, g, lambda e, y: fit_decision(method, e, y), k)["mean"]
        gated = [st.ir_surface.gate for st in states if st.ir_surface.gate is not None]
        routed[str(t)] = round(100 * float(np.mean([d.accepted for d in gated])), 1) if gated else 0.0
        log(f"tau_ir {t}: {curve[str(t)]}")
    nested = nested_choice(evs, y, g, taus, method, k, tie_break_toward=0.5)
    return {"method": method, "tau_fv": tuner.settings.gate.tau_fv, "cv_mean_by_tau_ir": curve,
            "routed_share_of_candidates": routed,
            "nested": nested}


def nli_model_meta(tuner) -> dict:
    """The NLI model a decision was fitted for; its directory relative to the repository when it
    lies inside it, so a committed artifact does not name the machine it was fitted on."""
    from schemas.settings import REPO_ROOT

    d = Path(tuner.model_dir).resolve()
    shown = d.relative_to(REPO_ROOT) if d.is_relative_to(REPO_ROOT) else d
    return {"dir": str(shown), "fingerprint": tuner.fp, "version": tuner.nli.version}
