"""Cross-validated tuning behind `dialcheck tune`: decision methods, the gate's τ and the
verifier's hypothesis context, on cached window probabilities (artifacts/tune)."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from .cache import DEFAULT_DIR, PairCache
from .cv import cross_validate, folds
from .data import CachedNLI, TuneSet, evidence, gate_scores, model_fingerprint, retrieved_passages
from .features import ClaimEvidence
from .layer import METHODS, DecisionLayer, macro_f1
from ..windows import top_windows


def log(msg: str) -> None:
    print(f"[tune] {msg}", file=sys.stderr, flush=True)


class Tuner:
    """One NLI model + one DialFact file, with every expensive piece cached on disk."""

    def __init__(self, settings, model_dir: str | None = None, data: str | None = None, cache_dir: Path = DEFAULT_DIR):
        from ..models.onnx_nli import load_local_nli

        self.settings = settings
        self.model_dir = model_dir or settings.models.nli_model_dir
        self.data = data or settings.data.dialfact_sample
        self.cache_dir = cache_dir
        self.fp = model_fingerprint(self.model_dir)
        self.cache = PairCache(cache_dir / "pairs.sqlite", self.fp)
        self.nli = CachedNLI(load_local_nli(self.model_dir), self.cache)
        self.ts = TuneSet.load(self.data, cache_dir)
        self._encoder = self._gates = self._searcher = None

    @property
    def encoder(self):
        if self._encoder is None:
            from ..models.encoders import load_local_encoder

            self._encoder = load_local_encoder(self.settings.models.encoder)
        return self._encoder

    def gates(self) -> dict:
        if self._gates is None:
            self._gates = gate_scores(self.ts, self.nli, self.encoder, self.cache, self.settings.gate.context_turns)
        return self._gates

    def passages(self, surface: str, tau_ir: float | None = None) -> dict:
        """Retrieved passages per record for `surface` (r4g: routed by τ_IR)."""
        if self._searcher is None:
            from ..retrieval.build import ensure_index

            self._searcher = ensure_index(self.settings, self.encoder)
        tau = self.settings.gate.tau_ir if tau_ir is None else tau_ir
        gates = self.gates() if surface == "r4g" else {}

        def surface_of(r):
            s = self.ts.surfaces[r.id]
            if surface != "r4g":
                return s[surface]
            g = gates.get(r.id)
            return s["alt"] if g is not None and g[0] >= tau else r.response
        # the retrieval cache is keyed by the query texts, not the model
        key = json.dumps([surface_of(r) for r in self.ts.records])
        tag = f"{Path(self.settings.retrieval.index_dir).resolve()}:{hashlib.sha1(key.encode()).hexdigest()[:12]}"
        enc_cache = PairCache(self.cache_dir / "pairs.sqlite", "retrieval")
        return retrieved_passages(self.ts, self._searcher, self.encoder, enc_cache, surface_of, self.settings, tag)

    def evidence(self, surface: str = "r0", protocol: str = "fv", hyp_turns: int | None = None,
                 tau_fv: float | None = None, tau_ir: float | None = None, window_fn=top_windows) -> list[ClaimEvidence]:
        s = self.settings
        gates = self.gates() if surface == "r4g" else None
        passages = self.passages(surface, tau_ir) if protocol == "e2e" else None
        return evidence(self.ts, self.nli, surface, s.verify.hypothesis_context_turns if hyp_turns is None else hyp_turns,
                        passages, gates, s.gate.tau_fv if tau_fv is None else tau_fv, s.verify.max_windows, window_fn)

    def cv(self, evs, methods=METHODS, k: int = 5, transfer: dict | None = None) -> dict:
        return {m: cross_validate(evs, self.ts.labels, self.ts.groups, lambda m=m: DecisionLayer(m), k, transfer)
                for m in methods}


def transfer_sets(tuner: Tuner, names=("foolmetwice", "wice")) -> dict:
    """Gold-evidence claim sets outside DialFact (both are in the NLI training pairs: optimistic).
    FoolMeTwice: SUPPORTS/REFUTES. WiCE: supported → SUPPORTS, partially/not supported → NOT ENOUGH
    INFO (WiCE's 'not supported' means the cited page does not back the claim, not that it refutes)."""
    d = Path(tuner.settings.data.dir)
    out = {}
    for name in names:
        if name == "foolmetwice":
            rows = [json.loads(x) for x in open(d / "foolmetwice" / "dev.jsonl", encoding="utf-8") if x.strip()]
            items = [(r["text"], [" ".join(g["text"] for g in r["gold_evidence"])], r["label"]) for r in rows]
        else:
            rows = [json.loads(x) for x in open(d / "wice" / "dev.jsonl", encoding="utf-8") if x.strip()]
            items = [(r["claim"], [" ".join(r["evidence"])], "SUPPORTS" if r["label"] == "supported" else "NOT ENOUGH INFO")
                     for r in rows]
        plan = [(c, top_windows(p, c, tuner.settings.verify.max_windows), y) for c, p, y in items]
        probs = tuner.nli.predict([w.text for _, ws, _ in plan for w in ws], [c for c, ws, _ in plan for _ in ws])
        evs, k = [], 0
        for c, ws, _ in plan:
            evs.append(ClaimEvidence(c, probs[k:k + len(ws)], np.array([w.prescore for w in ws]),
                                     np.array([w.passage_index for w in ws], dtype=int), [None]))
            k += len(ws)
        out[name] = (evs, [y for *_, y in plan])
        log(f"transfer set {name}: {len(evs)} claims")
    return out


def nested_choice(evs: dict, y, g, taus, method: str, k: int, tie_break_toward: float) -> dict:
    """Nested grouped CV of a threshold: in each outer fold pick τ by inner CV on the training
    folds (ties toward `tie_break_toward`), fit the layer there, score the held-out fold."""
    outer, chosen = [], []
    for test in folds(g, k):
        train = np.setdiff1d(np.arange(len(y)), test)
        inner = {t: cross_validate([evs[t][i] for i in train], [y[i] for i in train], [g[i] for i in train],
                                   lambda: DecisionLayer(method), k)["mean"] for t in taus}
        best = max(taus, key=lambda t: (inner[t], -abs(t - tie_break_toward)))
        layer = DecisionLayer(method).fit([evs[best][i] for i in train], [y[i] for i in train])
        outer.append(macro_f1([y[i] for i in test], layer.predict([evs[best][i] for i in test])))
        chosen.append(float(best))
    return {"folds": [round(f, 2) for f in outer], "mean": round(float(np.mean(outer)), 2),
            "std": round(float(np.std(outer)), 2), "tau_chosen_per_fold": chosen}


def tune_tau(tuner: Tuner, method: str, taus=tuple(np.round(np.arange(0.40, 0.96, 0.05), 2)), k: int = 5,
             protocol: str = "fv") -> dict:
    """τ_FV by nested choice: in each outer fold, pick τ by inner CV on the training folds, fit the
    layer there, score the held-out fold. Also the plain CV curve per τ."""
    evs = {t: tuner.evidence("r4g", protocol, tau_fv=float(t)) for t in taus}
    y, g = tuner.ts.labels, tuner.ts.groups
    curve = {str(t): cross_validate(evs[t], y, g, lambda: DecisionLayer(method), k)["mean"] for t in taus}
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
        layer = DecisionLayer(method).fit([evs[i] for i in train], [labels[i] for i in train])
        for i, p in zip(test, layer.predict([evs[i] for i in test])):
            out[i] = p
    return out


def checkworthy_report(tuner: Tuner, method: str = "logreg", k: int = 5, protocol: str = "fv",
                       surface: str = "r0") -> dict:
    """Precision/recall of 'not check-worthy' against DialFact type_label == personal, for the
    rule and for a logistic classifier over its parse features (grouped CV), and the effect on
    the claim labels when not-check-worthy turns are forced to NOT ENOUGH INFO."""
    from sklearn.linear_model import LogisticRegression

    from ..checkworthy import check_worthiness, features

    recs = tuner.ts.records
    gold = np.array([r.type_label == "personal" for r in recs])
    rule = np.array([not check_worthiness(r.response).checkworthy for r in recs])
    X = np.vstack([features(r.response) for r in recs])
    clf_pred = np.zeros(len(recs), bool)
    for test in folds(tuner.ts.groups, k):
        train = np.setdiff1d(np.arange(len(recs)), test)
        mu, sd = X[train].mean(0), X[train].std(0) + 1e-9
        clf = LogisticRegression(class_weight="balanced", max_iter=2000).fit((X[train] - mu) / sd, gold[train])
        # a high bar: only confident 'personal' calls skip checking
        clf_pred[test] = clf.predict_proba((X[test] - mu) / sd)[:, 1] >= 0.8

    def pr(pred):
        tp = int((pred & gold).sum())
        return {"flagged": int(pred.sum()), "precision": round(100 * tp / max(int(pred.sum()), 1), 1),
                "recall": round(100 * tp / max(int(gold.sum()), 1), 1),
                "factual_flagged_by_label": {lab: int((pred & ~gold & (np.array(tuner.ts.labels) == lab)).sum())
                                             for lab in ("SUPPORTS", "REFUTES", "NOT ENOUGH INFO")}}

    evs = tuner.evidence(surface, protocol)
    base = oof_predictions(evs, tuner.ts.labels, tuner.ts.groups, method, k)
    y = tuner.ts.labels
    eff = {"none": round(macro_f1(y, base), 2)}
    for name, pred in (("rule", rule), ("classifier_cv", clf_pred)):
        eff[name] = round(macro_f1(y, ["NOT ENOUGH INFO" if f else p for p, f in zip(base, pred)]), 2)
    return {"positives_personal": int(gold.sum()), "rule": pr(rule), "classifier_cv": pr(clf_pred),
            "effect_macro_f1": {"protocol": protocol, "surface": surface, "method": method,
                                "pooled_out_of_fold": eff}}


def segmentation_report(tuner: Tuner, method: str = "logreg", k: int = 5) -> dict:
    """FV labels with claim segmentation (each segment verified against the gold evidence, turn
    label = worst segment) against the whole-turn labels, layers fitted out of fold."""
    from ..segment import segment, turn_label

    recs, y, g = tuner.ts.records, tuner.ts.labels, tuner.ts.groups
    segs = {r.id: segment(r.response) for r in recs}
    multi = [i for i, r in enumerate(recs) if len(segs[r.id]) > 1]
    whole = tuner.evidence("r0", "fv")
    plan = [(i, s.text, top_windows([t for _, t in recs[i].evidence], s.text, tuner.settings.verify.max_windows))
            for i in multi for s in segs[recs[i].id]]
    probs = tuner.nli.predict([w.text for *_, ws in plan for w in ws], [t for _, t, ws in plan for _ in ws])
    seg_ev, k0 = [], 0
    for i, text, ws in plan:
        seg_ev.append((i, ClaimEvidence(text, probs[k0:k0 + len(ws)], np.array([w.prescore for w in ws]),
                                        np.array([w.passage_index for w in ws], dtype=int), [None] * 3)))
        k0 += len(ws)
    base, segmented = [None] * len(y), [None] * len(y)
    for test in folds(g, k):
        train = np.setdiff1d(np.arange(len(y)), test)
        layer = DecisionLayer(method).fit([whole[i] for i in train], [y[i] for i in train])
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
    from functools import partial

    variants = {"regex+suffix (old)": ("regex", "suffix"), "spacy+suffix": ("spacy", "suffix"),
                "spacy+snowball": ("spacy", "snowball"), "regex+snowball": ("regex", "snowball")}
    out = {}
    for name, (sp, st) in variants.items():
        fn = partial(top_windows, splitter=sp, stemmer=st)
        evs = tuner.evidence(surface, protocol, window_fn=lambda p, f, keep, fn=fn: fn(p, f, keep))
        cv = cross_validate(evs, tuner.ts.labels, tuner.ts.groups, lambda: DecisionLayer(method), k)
        rule = macro_f1(tuner.ts.labels, DecisionLayer("threshold").predict(evs))
        out[name] = {f"{method}_cv_mean": cv["mean"], f"{method}_cv_std": cv["std"], "threshold_rule": round(rule, 2)}
        log(f"{name}: {out[name]}")
    return out


def bm25_tokenizer_report(settings, data: str | None = None) -> dict:
    """BM25 document recall (query = last 2 turns + claim, ∪ top-1 per context turn, as the
    retrieve stage) with the project's tokenizer vs bm25s's tokenizer and stop words, with and
    without a Snowball stemmer; in-memory indexes over the same passages as the configured index."""
    import bm25s
    from nltk.stem.snowball import SnowballStemmer

    from schemas.items import load_dialfact

    from ..evaluate import retrieval_metrics
    from ..retrieval.bm25 import tokenize
    from ..text import with_context

    passages = [json.loads(x) for x in open(Path(settings.retrieval.index_dir) / "passages.jsonl", encoding="utf-8")]
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
    """τ_IR by the same grouped CV on E2E labels (R4 + gate, τ_FV from settings). Retrieval results
    are reused: a claim routed to the rewrite at τ ≥ 0.50 was also routed at 0.50 (acceptance is
    monotone in τ), so its passages are those of the 0.50 run; otherwise those of R0."""
    gates = tuner.gates()
    p_r0, p_alt = tuner.passages("r0"), tuner.passages("r4g", tau_ir=0.50)
    y, g = tuner.ts.labels, tuner.ts.groups
    curve, evs = {}, {}
    for t in taus:
        mixed = {r.id: (p_alt[r.id] if gates.get(r.id) is not None and gates[r.id][0] >= t else p_r0[r.id])
                 for r in tuner.ts.records}
        evs[t] = evidence(tuner.ts, tuner.nli, "r4g", tuner.settings.verify.hypothesis_context_turns, mixed, gates,
                          tuner.settings.gate.tau_fv, tuner.settings.verify.max_windows)
        curve[str(t)] = cross_validate(evs[t], y, g, lambda: DecisionLayer(method), k)["mean"]
        log(f"tau_ir {t}: {curve[str(t)]}")
    nested = nested_choice(evs, y, g, taus, method, k, tie_break_toward=0.5)
    routed = {str(t): round(100 * float(np.mean([s[0] >= t for s in gates.values()])), 1) for t in taus}
    return {"method": method, "tau_fv": tuner.settings.gate.tau_fv, "cv_mean_by_tau_ir": curve,
            "routed_share_of_candidates": routed,
            "nested": nested}
