"""Everyday probe: true and false variants of 20 common facts (wrong place, wrong person, wrong work),
each checked end to end as a context-free claim over an index (default: the settings' index, i.e.
the benchmark passages plus the starter knowledge base), decided by the shipped guarded decision
and by the same decision with each standalone coverage scope (lab/tuning/variants.py STANDALONE:
names, topic, subject) and with the rival and subject checks named in `checks_on`, the thresholds
left as shipped (DIALCHECK_RIVAL_QUERIES=on: the rival queries' passages read for every row). Counts per decision: true claims SUPPORTS,
false claims SUPPORTS, shown badges and wrong shown badges (a shown SUPPORTS on a false claim, a
shown REFUTES on a true one), and whether the deciding window names the claim's subject.

    python -m lab.probes.everyday [--index DIR] [--json] [--write-windows]

`--write-windows` also writes everyday_windows.json: each claim with the windows the verifier read
for it (the default index, R4G surface), so `dialcheck adapt` can guard the probe pair by pair
without an index (lab/nli/adapt_run.py `everyday_claims`).

Why a probe of our own: the yardstick's sets have no such claims (none is about an everyday fact
with a near-miss passage in the index), and users found false ones supported by passages about
something else ("Albert Einstein was born in France." from the Albert Camus passage)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROBE = Path(__file__).with_name("everyday_facts.jsonl")
# checks_on variants decided beside the shipped decision; with DIALCHECK_RIVAL_QUERIES=on the rival
# queries' passages are read too (workers/rival.py), for every row alike
CHECKS_ON = (("rival",), ("subject",), ("rival", "subject"))
ROWS_OF = ("shipped+checks_on=rival,subject",)
WINDOWS = Path(__file__).with_name("everyday_windows.json")


def load_windows(path: Path = WINDOWS) -> list[dict]:
    """The probe's claims with the windows read for each: {"id", "claim", "label", "windows"}, the
    window texts looked up from the file's shared list (true and false twins share most windows)."""
    d = json.loads(Path(path).read_text())
    return [{"id": c["id"], "claim": c["claim"], "label": c["label"], "windows": [d["windows"][i] for i in c["window_ids"]]}
            for c in d["claims"]]


def write_windows(rows: list[dict], evs, index: str, path: Path = WINDOWS) -> None:
    texts: dict[str, int] = {}
    claims = [{"id": r["id"], "claim": ev.claim, "label": r["label"],
               "window_ids": [texts.setdefault(w, len(texts)) for w in ev.window_texts]} for r, ev in zip(rows, evs)]
    meta = {"built_by": "python -m lab.probes.everyday --write-windows", "index": Path(index).name,
            "windows_read": sum(len(c["window_ids"]) for c in claims)}
    Path(path).write_text(json.dumps({"meta": meta, "windows": list(texts), "claims": claims}, ensure_ascii=False) + "\n")


def _title(ev, window) -> str | None:
    if window is None:
        return None
    p = int(ev.passage_index[window])
    return ev.titles[p] if p < len(ev.titles) else None


def main(argv: list[str] | None = None) -> int:
    from lab.tuning.display_fit import displays
    from lab.tuning.tune import Tuner
    from lab.tuning.variants import STANDALONE, guarded_method
    from schemas.items import CheckItem
    from schemas.settings import load_settings
    from workers.decision import load_decision
    from workers.display import load_display
    from workers.stages import claim_evidence

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default=None, help="embedded index dir (default: the settings')")
    ap.add_argument("--surface", default="r4g", help="claim surface (default r4g, as the stream)")
    ap.add_argument("--json", action="store_true", help="print the per-claim rows too, as JSON")
    ap.add_argument("--probe", type=Path, default=PROBE, help=f"claims file (default {PROBE.name}; lab/probes/true_claims.jsonl: true claims only)")
    ap.add_argument("--write-windows", action="store_true", help=f"also write {WINDOWS.name} (adapt's everyday guard)")
    args = ap.parse_args(argv)

    settings = load_settings(retrieval={"index_dir": args.index} if args.index else {})
    rows = [json.loads(ln) for ln in args.probe.read_text().splitlines() if ln.strip()]
    tuner = Tuner(settings)
    items = [CheckItem("probe", r["id"], [], r["claim"]) for r in rows]
    states = tuner.states(items, "e2e", args.surface)
    evs = [claim_evidence(st) for st in states]
    if args.write_windows:
        write_windows(rows, evs, settings.retrieval.index_dir)
    shipped = load_decision(settings.decision, "e2e")
    policy = load_display(settings.decision, None, "e2e")
    methods = {"shipped": shipped}
    base = dict(shipped.params)
    for level, scope in STANDALONE.items():
        methods[f"shipped+{level}"] = guarded_method({**base, "cover_scope": scope}, shipped.meta)
    for on in CHECKS_ON:  # the registered checks that are off unless named (measured before they ship)
        methods[f"shipped+checks_on={','.join(on)}"] = guarded_method({**base, "checks_on": list(on)}, shipped.meta)
    report, per_claim = {}, []
    for name, m in methods.items():
        ds = m.decide_many(evs)
        shown = displays(policy, ds, evs) if policy is not None else [None] * len(ds)
        c = {"true_supports": 0, "true_refutes": 0, "false_supports": 0, "false_refutes": 0, "shown": 0,
             "shown_wrong": 0, "supports_from_window_without_subject": 0}
        for r, d, disp, ev in zip(rows, ds, shown, evs):
            true = r["label"] == "SUPPORTS"
            c[f"{'true' if true else 'false'}_{d.label.split()[0].lower()}"] = \
                c.get(f"{'true' if true else 'false'}_{d.label.split()[0].lower()}", 0) + 1
            named = d.window is not None and float(ev.coverage[d.window, 2]) > 0
            if d.label == "SUPPORTS" and not named:
                c["supports_from_window_without_subject"] += 1
            if disp is not None and disp.show:
                c["shown"] += 1
                c["shown_wrong"] += (d.label == "SUPPORTS") != true
            if name == "shipped" or name.endswith("subject") or name in ROWS_OF:
                per_claim.append({"decision": name, "claim": r["claim"], "gold": r["label"], "label": d.label,
                                  "shown": bool(disp and disp.show), "window_title": _title(ev, d.window),
                                  "window_names_subject": named})
        report[name] = {k: v for k, v in c.items() if v or k in ("false_supports", "shown_wrong")}
    out = {"claims": len(rows), "true": sum(r["label"] == "SUPPORTS" for r in rows), "index": settings.retrieval.index_dir,
           "decisions": report, **({"rows": per_claim} if args.json else {})}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
