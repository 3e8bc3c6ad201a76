"""Leave-one-dataset-out: the cross-domain yardstick behind `dialcheck tune decision --lodo`.

Every decision method is fitted on all sets but one and scored on the one left out (sklearn's
LeaveOneGroupOut with the set as the group), so no reported number was tuned on its own records.
DialFact testsmall is also scored by grouped CV inside it (fit on the other sets plus the other
folds of testsmall, grouped by conversation). Rules with nothing to fit (threshold, argmax) are
the baselines; `shipped` is the decision the settings load today, applied as is.

Gold evidence is on topic by construction, so it cannot show what the on-topic guard is for. E2E
rows (`--e2e hybridial=DIR`) score the same left-out fits on evidence the product retrieves from
an index (default surface R4 + gate, as the stream runs): `<set>_e2e` in the report. They are
never fitted on; a DialFact-format set's E2E row is scored by the fits that leave that set out."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from workers.decision import RULES, DecisionMethod, method as decision_method
from .cv import folds
from .fit import fit_decision
from workers.display import CONSTANT

from .datasets import FIT_SETS, IN_NLI_TRAINING, EvalSet, badge_right, set_metrics
from .display_fit import DISPLAY_FITS, SHIPPED_FIT, BadgeRows, displays
from .tune import Tuner, log, nli_model_meta
from .variants import guarded_method

FITTED = ("guarded", "logreg")
# sets whose evidence passages can be indexed: the two dialogue sets, and FoolMeTwice (standalone claims
# over an index of its pages, DialFact's passages as distractors: where a claim without context meets
# passages about something else)
E2E_SETS = ("dialfact", "hybridial", "foolmetwice")


def set_evidence(tuner: Tuner, s: EvalSet, surface: str = "r0") -> list:
    """The real FV pipeline over a set's claims with their gold evidence, each claim at `surface`
    (R0: the reply as written, the yardstick's rows; r4g: R1–R4 behind the gate, as the stream reads it)."""
    from workers.stages import claim_evidence

    log(f"{s.name}: {len(s)} claims through the FV pipeline ({surface})")
    out = []
    for start in range(0, len(s), 1000):  # bounded memory; the NLI pairs are cached on disk
        out += [claim_evidence(st) for st in tuner.states(s.items[start:start + 1000], "fv", surface)]
    return out


def e2e_set(s: EvalSet) -> EvalSet:
    """The same claims without their gold evidence: the pipeline retrieves (protocol e2e)."""
    if s.name not in E2E_SETS:
        raise ValueError(f"no E2E row for {s.name!r}: only the dialogue sets and FoolMeTwice ({', '.join(E2E_SETS)}) have one")
    return EvalSet(f"{s.name}_e2e", [replace(it, gold_evidence=None) for it in s.items], s.labels, s.groups,
                   s.label_space, s.type_labels)


def e2e_evidence(tuner: Tuner, s: EvalSet, index_dir: str | None, surface: str = "r4g") -> tuple[EvalSet, list]:
    """A dialogue set's claims through the real E2E pipeline on `index_dir` (None: the settings'
    index), each claim's evidence as the decision sees it."""
    from workers.stages import claim_evidence

    e2e = e2e_set(s)
    t = tuner.on_index(index_dir) if index_dir else tuner
    log(f"{e2e.name}: {len(e2e)} claims through the E2E pipeline ({surface}, index {t.settings.retrieval.index_dir})")
    return e2e, [claim_evidence(st) for st in t.states(e2e.items, "e2e", surface)]


# the guarded rule with its coverage guard (workers/decision/guarded.py `Coverage.covers`), as named in reports
VARIANTS = {"guarded": {}, "guarded+names": {"cover": "names"}, "guarded+all": {"cover": "all"},
            "guarded+half": {"cover": "half"}, "guarded+most": {"cover": "most"},
            "guarded+half+slot": {"cover": "half", "slot_refutes": True},
            **{f"guarded+{c}+chat": {"cover": c, "cover_scope": "dialogue"} for c in ("names", "half", "most", "all")},
            "guarded+half+slot+chat": {"cover": "half", "slot_refutes": True, "cover_scope": "dialogue"},
            **{f"guarded+{c}+chat+{k}": {"cover": c, "cover_scope": f"dialogue+{k}"}
               for c in ("half", "most", "all") for k in ("names", "topic", "subject")},
            "guarded+names+slot": {"cover": "names", "slot_refutes": True},
            # the shipped rule without the typed-slot REFUTES nor the slot-clash REFUTES (before the structured checks)
            "guarded+half+chat+noslots": {"cover": "half", "cover_scope": "dialogue", "slots": False,
                                          "clash_refutes": False},
            # the shipped rule without the slot-clash REFUTES of an undecided claim
            "guarded+half+chat+noclash": {"cover": "half", "cover_scope": "dialogue", "clash_refutes": False},
            # a SUPPORTS the structured checks disagree with is NOT ENOUGH INFO (the label, not only the badge)
            "guarded+half+chat+checked": {"cover": "half", "cover_scope": "dialogue", "checked": True},
            # only where the deciding window gives a claim's relation to another word (a clash, not silence): shipped
            "guarded+half+chat+relclash": {"cover": "half", "cover_scope": "dialogue", "relation_clash": True},
            # the shipped rule with registered checks named in checks_on: the rival filler (REFUTES) and
            # the named subject (a SUPPORTS from windows not naming it withdrawn), measured before they ship
            **{f"guarded+half+chat+relclash+{'+'.join(on)}": {"cover": "half", "cover_scope": "dialogue",
                                                              "relation_clash": True, "checks_on": list(on)}
               for on in (("rival",), ("subject",), ("rival", "subject"))},
            "guarded+all+slot": {"cover": "all", "slot_refutes": True}}


def _fit(method: str, train: list[tuple[EvalSet, list]], refutes_floor: str = "per_set") -> DecisionMethod:
    if method in RULES:
        return decision_method(method)
    if method == "logreg":  # a 3-way classifier: binary sets have no R/NEI label to learn from
        train = [(s, e) for s, e in train if not s.binary]
    evs = [e for _, es in train for e in es]
    labels = [lab for s, _ in train for lab in s.labels]
    sets = [s.name for s, es in train for _ in es]
    base = method.split("+")[0]
    return fit_decision(base, evs, labels, sets=sets, spaces={s.name: s.label_space for s, _ in train},
                        refutes_floor=refutes_floor, **VARIANTS.get(method, {}))


def display_basis(layer: DecisionMethod) -> DecisionMethod:
    """The decisions a display is fitted on: this method's before `relation_clash` relabels a SUPPORTS.

    Every SUPPORTS that relabel takes is one the display's structural veto hides anyway (its precise
    clash implies the broad one the veto reads, structure.py), and the rule's thresholds are fitted
    without it; so fitted on these the display is the one fitted without the relabel and shows the
    same badges. Fitted on the relabelled decisions instead, the vetoed SUPPORTS leave the fit, the
    thresholds fall, and a set left out lost shown precision (WiCE 76.5 -> 66.2 %, docs/stress.md)."""
    if getattr(layer, "name", "") == "guarded" and layer.params.get("relation_clash"):
        return guarded_method({**layer.params, "relation_clash": False}, layer.meta)
    return layer


def _display(layer: DecisionMethod, train: list[tuple[EvalSet, list]], fit: str = SHIPPED_FIT):
    """The display policy fitted on the training sets' decisions by this method (DISPLAY_FITS[fit];
    before a label-only relabel its veto covers: `display_basis`)."""
    layer = display_basis(layer)
    rows = {}
    for s, es in train:
        ds = layer.decide_many(es)
        rows[s.name] = BadgeRows.of(ds, [badge_right(s, g, d.label) for g, d in zip(s.labels, ds)], es)
    return DISPLAY_FITS[fit](rows)


def _scored(s: EvalSet, layer: DecisionMethod, s_evs: list, policy, others: dict | None = None) -> dict:
    """The set's metrics under `layer`, shown badges under `policy` (and `others`: name → policy,
    each as `shown_<name>`) and under the constant rule."""
    ds = layer.decide_many(s_evs)
    pred = [d.label for d in ds]
    row = set_metrics(s, pred, displays(policy, ds, s_evs) if policy is not None else None)
    for name, other in (others or {}).items():
        row[f"shown_{name}"] = set_metrics(s, pred, displays(other, ds, s_evs))["shown"]
    row["shown_constant"] = set_metrics(s, pred, displays(CONSTANT, ds, s_evs))["shown"]
    return row


def lodo_report(tuner: Tuner | None, sets: list[EvalSet], methods=("threshold", "argmax", "guarded", "logreg"),
                shipped: DecisionMethod | None = None, k: int = 5, evs: dict | None = None,
                refutes_floor: str = "per_set", e2e: dict | None = None, shipped_display=None,
                compare_displays: bool = False, surface: str = "r0") -> dict:
    """`evs`: the sets' ClaimEvidence by set name when already computed (else the pipeline runs);
    `refutes_floor`: how the guarded fit holds its REFUTES-precision floor (workers/decision/guarded.py);
    `e2e`: set name → (its E2E set, evidence) from `e2e_evidence`, scored beside the FV row;
    `compare_displays`: also score the other display fits (DISPLAY_FITS) as `shown_<fit>`, and with
    `e2e` the shipped fit fitted on the training sets' E2E rows too (`shown_badge_e2e`);
    `surface`: the FV rows' claim surface (`set_evidence`), fitted on and scored alike."""
    e2e = e2e or {}
    evs = evs if evs is not None else {s.name: set_evidence(tuner, s, surface) for s in sets}
    report: dict = {"nli_model": nli_model_meta(tuner)["dir"] if tuner is not None else None,
                    "nli_fingerprint": getattr(tuner, "fp", None),
                    "protocol": "fv", "surface": surface,
                    "sets": {s.name: {"n": len(s), "labels": list(s.label_space),
                                      "in_nli_training": IN_NLI_TRAINING.get(s.name, False)} for s in sets},
                    "left_out": {}}
    for name, (es, _) in e2e.items():
        report["sets"][es.name] = {"n": len(es), "labels": list(es.label_space), "protocol": "e2e",
                                   "scored_by_fits_without": name, "in_nli_training": False}
    for held in sets:
        train = [(s, evs[s.name]) for s in sets if s.name != held.name and s.name in FIT_SETS]
        layers = {m: _fit(m, train, refutes_floor) for m in methods}
        policies = {m: _display(layer, train) for m, layer in layers.items()}
        others = {m: {f: _display(layer, train, f) for f in DISPLAY_FITS if f != SHIPPED_FIT}
                  for m, layer in layers.items()} if compare_displays else {}
        train_e2e = [e2e[s.name] for s, _ in train if s.name in e2e]  # the training sets' retrieved rows
        if compare_displays and train_e2e:  # the shipped fit, also fitted on those (as sets of their own)
            for m, layer in layers.items():
                others[m]["badge_e2e"] = _display(layer, train + train_e2e)
        scored = [(held, evs[held.name])] + ([e2e[held.name]] if held.name in e2e else [])  # + retrieved evidence
        for s, s_evs in scored:
            row = {m: {**_scored(s, layer, s_evs, policies[m], others.get(m)),
                       **({"params": layer.params} if m.startswith("guarded") else {}),
                       "display": policies[m].to_dict()["show"] | {"high_" + k: v for k, v in policies[m].high.items()}
                       | {"evidence": "+".join(policies[m].evidence)}}
                   for m, layer in layers.items()}
            if shipped is not None:
                row["shipped"] = _scored(s, shipped, s_evs, shipped_display)
            report["left_out"][s.name] = row
            log(f"left out {held.name}, scored {s.name}: " + ", ".join(f"{m} {r['macro_f1']}" for m, r in row.items()))
    inner = next((s for s in sets if s.name == "dialfact"), None)
    if inner is not None:
        report["dialfact_grouped_cv"] = _grouped_cv(inner, evs, sets, methods, k, refutes_floor)
    return report


def _grouped_cv(inner: EvalSet, evs: dict, sets: list[EvalSet], methods, k: int,
                refutes_floor: str = "per_set") -> dict:
    """DialFact testsmall by grouped CV: each fold predicted by a decision fitted on the other sets
    plus the other folds (pooled out-of-fold predictions)."""
    others = [(s, evs[s.name]) for s in sets if s.name != inner.name]
    out = {}
    for m in methods:
        pred: list = [None] * len(inner)
        for test in folds(inner.groups, k):
            train_idx = np.setdiff1d(np.arange(len(inner)), test)
            part = inner.subset(train_idx)
            layer = _fit(m, others + [(part, [evs[inner.name][i] for i in train_idx])], refutes_floor)
            for i, p in zip(test, layer.predict([evs[inner.name][i] for i in test])):
                pred[i] = p
        out[m] = set_metrics(inner, pred)
    return out


def swap_probe(tuner: Tuner, fmt: EvalSet, layers: dict, limit: int = 400) -> dict:
    """The other-page swap probe: FoolMeTwice claims each given the gold evidence of a claim about
    another Wikipedia page, so the evidence is silent by construction and every REFUTES is wrong.
    Returns each decision's REFUTES rate (the target is ~0) and SUPPORTS rate."""
    n = min(limit, len(fmt))
    items = []
    for i in range(n):
        j = next(k for k in range(i + 7, i + 7 + len(fmt)) if fmt.groups[k % len(fmt)] != fmt.groups[i]) % len(fmt)
        it = fmt.items[i]
        items.append(type(it)(it.conversation_id + "-swap", it.turn_id, [], it.claim, fmt.items[j].gold_evidence))
    probe = EvalSet("swap", items, ["NOT ENOUGH INFO"] * n, [f"s{i}" for i in range(n)], fmt.label_space)
    evs = set_evidence(tuner, probe)
    out = {"claims": n}
    for name, layer in layers.items():
        pred = layer.predict(evs)
        out[name] = {"refutes_rate": round(100 * pred.count("REFUTES") / n, 1),
                     "supports_rate": round(100 * pred.count("SUPPORTS") / n, 1)}
    return out
