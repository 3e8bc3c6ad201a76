"""How well does R4 pick antecedents? A proxy measured on DialFact: for claims with an in-scope
pronoun, a choice counts as correct when the antecedent shares a content word with the title of
a gold evidence document (the evidence page is usually the entity the pronoun refers to).
Compares: most recent candidate, salience top-1, and the gate's choice among the top 3.

    python -m lab.probes.measure_r4 [--data FILE] [--with-gate]
"""
from __future__ import annotations

import argparse
import json
import re

from workers.surfaces.pronouns import candidates, find_pronoun, substitute

_STOP = {"the", "a", "an", "of", "and", "in", "on", "for", "to", "film", "band", "album", "song"}


def _words(s: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", s.lower()) if w not in _STOP}


def measure(records, gate=None, gate_context_turns: int = 2) -> dict:
    from workers.surfaces.truecasing import truecase
    from workers.surfaces.punctuation import restore_punctuation
    from workers.surfaces.contractions import decontract

    n_claims = len(records)
    with_pronoun = with_cands = 0
    hits = {"recency": 0, "salience": 0, "gate_top3": 0}
    judged = 0
    for r in records:
        r3 = truecase(restore_punctuation(decontract(r.response)))
        site = find_pronoun(r3)
        if site is None:
            continue
        with_pronoun += 1
        cands = candidates(r.context, site.text)
        if not cands:
            continue
        with_cands += 1
        titles = set().union(*(_words(t) for t, _ in r.evidence)) if r.evidence else set()
        if not titles:
            continue
        judged += 1
        ok = lambda c: bool(_words(c.text) & titles)
        hits["recency"] += ok(min(cands, key=lambda c: (c.turn_distance, -c.salience)))
        hits["salience"] += ok(cands[0])
        if gate is not None:
            from workers.gate import GateInput
            from workers.text import last_turns

            top = cands[:3]
            ctx = last_turns(r.context, gate_context_turns)
            scores = gate.score([GateInput(ctx, r.response, substitute(r3, site, c.text)) for c in top])
            hits["gate_top3"] += ok(top[max(range(len(top)), key=lambda i: scores[i][0])])
    out = {"claims": n_claims, "in_scope_pronoun_share": round(100 * with_pronoun / max(n_claims, 1), 1),
           "with_candidates": with_cands, "judged": judged,
           "proxy_accuracy": {k: round(100 * v / max(judged, 1), 1) for k, v in hits.items()
                              if gate is not None or k != "gate_top3"}}
    return out


def main() -> None:
    from schemas.settings import load_settings
    from schemas.items import load_dialfact

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=None)
    ap.add_argument("--with-gate", action="store_true")
    a = ap.parse_args()
    s = load_settings()
    records = load_dialfact(a.data or s.data.dialfact_sample)
    gate = None
    if a.with_gate:
        from workers.gate import BiConGate
        from workers.models.factory import load_models

        gate = BiConGate(*load_models(s), s.gate.weights)
    print(json.dumps(measure(records, gate, s.gate.context_turns), indent=1))


if __name__ == "__main__":
    main()
