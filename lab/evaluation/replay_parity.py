"""Stream against batch for grounded turns: DialFact-format records replayed
with `dialcheck replay --protocol fv` through a default worker should get, verdict for verdict, the
label and the shown badge `dialcheck eval --protocol fv` gives on the same file, and every verdict's
evidence should be its own turn's passages (source "turn", texts from that record).

    python -m lab.evaluation.replay_parity --data FILE.jsonl --eval-run RUN.jsonl --verdicts VERDICTS.jsonl

RUN.jsonl: `dialcheck eval --protocol fv --surfaces SURFACE --output RUN.jsonl` (the worker's surface);
VERDICTS.jsonl: `dialcheck verdicts --json` after the replay. Prints one JSON object; exit 1 when
fewer than `--floor` percent agree or any verdict's evidence is not its own turn's.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Iterable, Mapping, Sequence

from schemas.items import DialFactRecord, response_claim_id
from schemas.turn import clean_text


def _shown(verdict: Mapping) -> bool | None:
    display = verdict.get("display")
    return display.get("show") if isinstance(display, Mapping) else None


def own_evidence(verdict: Mapping, record: DialFactRecord) -> bool:
    """Every evidence item came from the turn (source "turn") and quotes one of the record's passages
    (cleaned as the stream cleans a passage: NFKC, invisible characters removed)."""
    texts = [clean_text(text) for _, text in record.evidence]
    return all(e.get("source") == "turn" and any(e.get("text", "") in t for t in texts)
               for e in verdict.get("evidence") or [])


def parity(stream: Mapping[str, Mapping], batch: Iterable[Mapping], records: Sequence[DialFactRecord],
           show_differences: int = 5) -> dict:
    """`stream`: verdict dicts by claim id (the stream's); `batch`: eval's run rows or verdict dicts (the
    summary row of each record). Percentages are of the records."""
    by_claim = {row["claim_id"]: row for row in batch}
    n = len(records)
    same_label = same_shown = own = got = 0
    differences = []
    for rec in records:
        cid = response_claim_id(rec)
        live, ref = stream.get(cid), by_claim.get(cid)
        if live is None or ref is None:
            differences.append({"record": rec.id, "missing": "stream" if live is None else "eval"})
            continue
        got += 1
        same_label += live["label"] == ref["label"]
        same_shown += _shown(live) == _shown(ref)
        own += own_evidence(live, rec)
        if live["label"] != ref["label"] or _shown(live) != _shown(ref):
            differences.append({"record": rec.id, "eval": [ref["label"], _shown(ref)],
                                "stream": [live["label"], _shown(live)]})
    pct = (lambda k: round(100.0 * k / n, 2) if n else 0.0)
    return {"records": n, "verdicts": got, "same_label_pct": pct(same_label), "same_shown_pct": pct(same_shown),
            "same_label_and_shown_pct": pct(n - len(differences)), "own_evidence_pct": pct(own),
            "differences": len(differences), "first_differences": differences[:show_differences]}


def main(argv: list[str] | None = None) -> int:
    from schemas.items import load_dialfact
    from workers.jsonl import read_jsonl

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="the DialFact-format file replayed and evaluated")
    p.add_argument("--eval-run", required=True, help="`dialcheck eval --protocol fv --output` run file")
    p.add_argument("--verdicts", required=True, help="`dialcheck verdicts --json` lines")
    p.add_argument("--limit", type=int, default=None, help="the first N records (as `replay --records N` sent)")
    p.add_argument("--floor", type=float, default=99.0, help="percent of records that must agree")
    args = p.parse_args(argv)
    records = load_dialfact(args.data, args.limit)
    stream = {v["claim_id"]: v for v in read_jsonl(args.verdicts)}
    result = parity(stream, read_jsonl(args.eval_run), records)
    print(json.dumps(result, indent=1))
    return 0 if result["same_label_and_shown_pct"] >= args.floor and result["own_evidence_pct"] == 100.0 else 1


if __name__ == "__main__":
    sys.exit(main())
