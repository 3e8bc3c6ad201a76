"""Fit the shipped decision layer on a whole file and write its JSON plus a card naming the fit
data and the cross-validated numbers (the only numbers that are not in-sample)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from workers.decision import DecisionMethod
from lab.evaluation.scoring import macro_f1

from .fit import fit_decision
from .tune import nli_model_meta


def fit_and_write(tuner, method: str, surface: str, protocol: str, out: str | Path, k: int = 5) -> DecisionMethod:
    evs = tuner.evidence(surface, protocol)
    cv = tuner.cv(evs, ("threshold", "argmax", "perclass", "logreg"), k)
    layer = fit_decision(method, evs, tuner.labels)
    s = tuner.settings
    layer.meta = {
        "fitted_on": {"data": Path(tuner.data).name, "records": len(evs), "protocol": protocol, "surface": surface,
                      "hypothesis_context_turns": s.verify.hypothesis_context_turns, "tau_fv": s.gate.tau_fv,
                      "max_windows": s.verify.max_windows},
        "nli_model": nli_model_meta(tuner),
        "cv": {"folds": k, "grouped_by": "context_id", **{m: {kk: r[kk] for kk in ("mean", "std", "folds")}
                                                         for m, r in cv.items()}},
        "in_sample_macro_f1": round(macro_f1(tuner.labels, layer.predict(evs)), 2),
        "date": dt.date.today().isoformat(),
    }
    layer.save(out)
    stem = Path(out).stem  # decision → DECISION_CARD.md, decision-fv → DECISION_CARD-fv.md
    write_card(Path(out).with_name(f"DECISION_CARD{stem[len('decision'):]}.md"), layer)
    return layer


def write_card(path: Path, layer: DecisionMethod) -> None:
    m = layer.meta
    f = m["fitted_on"]
    rows = "\n".join(f"| {name} | {r['mean']:.2f} ± {r['std']:.2f} | {', '.join(f'{x:.1f}' for x in r['folds'])} |"
                     for name, r in m["cv"].items() if isinstance(r, dict))
    path.write_text(f"""# Decision layer card

`workers/decision/params/{'decision' + path.stem[len('DECISION_CARD'):]}.json` maps the verifier's window-level NLI probabilities (and claim
features) to the claim label. Format `dialcheck-decision` v1: plain JSON numbers, loaded by
`workers.decision.methods.load` (no pickle, no scikit-learn needed at inference).

- **Method:** `{layer.method}` (chosen as the best mean macro-F1 in grouped cross-validation below)
- **Fitted on:** all {f['records']} records of DialFact `{f['data']}` ({f['protocol'].upper()} protocol:
  {'gold evidence' if f['protocol'] == 'fv' else 'the top retrieved passages'}; surface `{f['surface']}`,
  hypothesis context turns {f['hypothesis_context_turns']}, τ_FV {f['tau_fv']}, top {f['max_windows']} windows)
- **Used for:** {'`dialcheck eval --protocol fv`' if f['protocol'] == 'fv' else 'E2E: the stream worker, `dialcheck check`, `dialcheck eval --protocol e2e`'}
- **NLI model:** `{m['nli_model']['version']}` (weights fingerprint `{m['nli_model']['fingerprint']}`); refit
  the layer whenever the NLI model changes (`dialcheck tune fit`).
- **Fitted:** {m['date']}

## Cross-validated macro-F1 ({m['cv']['folds']} folds grouped by `context_id`, fitted on the other folds)

| method | mean ± std | folds |
|---|---|---|
{rows}

In-sample macro-F1 of the shipped layer on its own fit data: {m['in_sample_macro_f1']:.2f}. That
number is optimistic by construction; quote the cross-validated mean above. Any testsmall number
measured with this layer is in-sample.

## Limits
300 claims is little data for a 28-feature model; fold spread is wide. FoolMeTwice and WiCE were
used only as transfer sets and are in the NLI model's training pairs, so scores there are optimistic.
""")


def fit_union_and_write(tuner, sets: list, out: str | Path, k: int = 5, by_set: dict | None = None,
                        refutes_floor: str = "per_set") -> DecisionMethod:
    """The guarded rule fitted on the union of the yardstick's sets (FV, R0), written with a card
    that quotes its leave-one-dataset-out numbers: the only numbers not tuned on their own records.
    `by_set`: the sets' ClaimEvidence when already computed; `refutes_floor`: per_set (shipped) or
    pooled (lab/tuning/fit.py)."""
    import json

    from .lodo import lodo_report, set_evidence

    by_set = by_set or {s.name: set_evidence(tuner, s) for s in sets}
    report = lodo_report(tuner, sets, ("threshold", "argmax", "guarded", "logreg"), None, k, by_set,
                         refutes_floor=refutes_floor)
    evs = [e for s in sets for e in by_set[s.name]]
    layer = fit_decision("guarded", evs, [lab for s in sets for lab in s.labels],
                         sets=[s.name for s in sets for _ in s.items],
                         spaces={s.name: s.label_space for s in sets}, refutes_floor=refutes_floor)
    layer.meta = {
        "fitted_on": {"sets": {s.name: len(s) for s in sets}, "protocol": "fv", "surface": "r0",
                      "hypothesis_context_turns": tuner.settings.verify.hypothesis_context_turns,
                      "max_windows": tuner.settings.verify.max_windows},
        "nli_model": nli_model_meta(tuner),
        "lodo": {name: {m: {kk: r[kk] for kk in ("macro_f1", "accuracy", "refutes_precision", "nei_recall")}
                        for m, r in row.items()} for name, row in report["left_out"].items()},
        "dialfact_grouped_cv": {m: {kk: r[kk] for kk in ("macro_f1", "accuracy", "refutes_precision", "nei_recall")}
                                for m, r in report.get("dialfact_grouped_cv", {}).items()},
        "date": dt.date.today().isoformat(),
    }
    layer.save(out)
    stem = Path(out).stem
    card = Path(out).with_name(f"DECISION_CARD{stem[len('decision'):]}.md")
    rows = "\n".join(f"| {name} | {m} | {r['macro_f1']} | {r['accuracy']} | {r['refutes_precision']} | {r['nei_recall']} |"
                     for name, row in layer.meta["lodo"].items() for m, r in row.items())
    p = layer.params
    card.write_text(f"""# Decision card: the guarded rule

`workers/decision/params/{Path(out).name}` decides a claim from its windows' NLI probabilities and
their topical coverage (workers/decision/guarded.py, workers/decision/sufficiency.py):
SUPPORTS if a window's most likely class is entailment at ≥ {p['t_supports']}; else REFUTES if an on-topic
window (it names the claim's subject and covers ≥ {p['on_topic']} of its key terms) has contradiction as its most likely class at ≥ {p['t_refutes']}; else NOT ENOUGH INFO.

- **Fitted on:** the union of {', '.join(f'{n} ({c})' for n, c in layer.meta['fitted_on']['sets'].items())}
  (FV protocol, gold evidence, surface R0; a set larger than --limit-per-set is an even spread of that many), maximising mean per-set macro-F1 with REFUTES precision
  ≥ {p['min_refutes_precision']:.0%} {"over all sets together" if p.get("refutes_floor") == "pooled" else "on every set"}.
- **NLI model:** `{layer.meta['nli_model']['version']}` (fingerprint `{layer.meta['nli_model']['fingerprint']}`); loading refuses another
  model's probabilities (refit with `dialcheck tune fit --method guarded`).
- **Fitted:** {layer.meta['date']}

## Leave-one-dataset-out (each row: fitted on the other sets, scored on this one)

| set left out | method | macro-F1 | accuracy | REFUTES precision | NEI recall |
|---|---|---|---|---|---|
{rows}

FoolMeTwice and WiCE claims are also NLI training sources, so their rows are optimistic.
Full report: `dialcheck tune decision --lodo --json`.
""")
    (Path(out).with_name(f"lodo{stem[len('decision'):]}.json")).write_text(json.dumps(report, indent=1) + "\n")
    return layer
