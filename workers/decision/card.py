"""Fit the shipped decision layer on a whole file and write its JSON plus a card naming the fit
data and the cross-validated numbers (the only numbers that are not in-sample)."""
from __future__ import annotations

import datetime as dt
from pathlib import Path

from .layer import DecisionLayer, macro_f1


def fit_and_write(tuner, method: str, surface: str, protocol: str, out: str | Path, k: int = 5) -> DecisionLayer:
    evs = tuner.evidence(surface, protocol)
    cv = tuner.cv(evs, ("threshold", "argmax", "perclass", "logreg"), k)
    layer = DecisionLayer(method).fit(evs, tuner.ts.labels)
    s = tuner.settings
    layer.meta = {
        "fitted_on": {"data": Path(tuner.data).name, "records": len(evs), "protocol": protocol, "surface": surface,
                      "hypothesis_context_turns": s.verify.hypothesis_context_turns, "tau_fv": s.gate.tau_fv,
                      "max_windows": s.verify.max_windows},
        "nli_model": {"dir": str(tuner.model_dir), "fingerprint": tuner.fp, "version": tuner.nli.version},
        "cv": {"folds": k, "grouped_by": "context_id", **{m: {kk: r[kk] for kk in ("mean", "std", "folds")}
                                                         for m, r in cv.items()}},
        "in_sample_macro_f1": round(macro_f1(tuner.ts.labels, layer.predict(evs)), 2),
        "date": dt.date.today().isoformat(),
    }
    layer.save(out)
    stem = Path(out).stem  # decision → DECISION_CARD.md, decision-fv → DECISION_CARD-fv.md
    write_card(Path(out).with_name(f"DECISION_CARD{stem[len('decision'):]}.md"), layer)
    return layer


def write_card(path: Path, layer: DecisionLayer) -> None:
    m = layer.meta
    f = m["fitted_on"]
    rows = "\n".join(f"| {name} | {r['mean']:.2f} ± {r['std']:.2f} | {', '.join(f'{x:.1f}' for x in r['folds'])} |"
                     for name, r in m["cv"].items() if isinstance(r, dict))
    path.write_text(f"""# Decision layer card

`workers/decision/params/{'decision' + path.stem[len('DECISION_CARD'):]}.json` maps the verifier's window-level NLI probabilities (and claim
features) to the claim label. Format `dialcheck-decision` v1: plain JSON numbers, loaded by
`workers.decision.DecisionLayer.load` (no pickle, no scikit-learn needed at inference).

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
