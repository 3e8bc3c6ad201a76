"""Metrics for the three protocols (docs/method.md §8) and the scoring of run files.

Why one module: `dialcheck eval` computes its metrics *from the run rows it writes*, and
`dialcheck score RUN --gold FILE` runs the same functions on the rows read back, so the two print
the same JSON by construction (tests/test_score.py checks it end to end). Verdicts read from
chat.verdicts (`dialcheck verdicts --json`) are run rows too: a row is a verdict dict.

Label metrics are counted here with one F1 definition (`per_class_f1`, also behind the decision
layer's and the tuner's macro-F1); IR metrics come from ir_measures (pytrec_eval, i.e. trec_eval);
micro recall has no library measure and stays a two-line sum.
"""
from __future__ import annotations

from typing import Iterable, Sequence

from schemas import LABELS
from schemas.errors import DialcheckError
from schemas.items import response_claim_id
from schemas.protocols import PROTOCOLS

# fields of a verdict that are timings, not results: left out of run files
TIMING_FIELDS = ("timings_ms", "created_at")


def per_class_f1(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] = LABELS) -> list[float]:
    """F1 per label as 2PR/(P+R) (0 where P+R is 0): the one definition behind every macro-F1 here.
    (2TP/(2TP+FP+FN) differs in the last bit, which flips a rounding at exact halves: 15.625 → 15.62
    instead of the published 15.63.)"""
    out = []
    for lab in labels:
        tp = sum(g == lab and p == lab for g, p in zip(gold, pred))
        n_pred, n_gold = sum(p == lab for p in pred), sum(g == lab for g in gold)
        prec, rec = (tp / n_pred if n_pred else 0.0), (tp / n_gold if n_gold else 0.0)
        out.append(2 * prec * rec / (prec + rec) if prec + rec else 0.0)
    return out


def macro_f1(gold: Sequence[str], pred: Sequence[str], labels: Sequence[str] | None = None) -> float:
    """Macro-F1 in percent over `labels` (default all three; a set without NEI passes its own)."""
    labels = labels or LABELS
    return 100 * sum(per_class_f1(gold, pred, labels)) / len(labels)


def label_metrics(gold: Sequence[str], pred: Sequence[str]) -> dict:
    """Accuracy, macro-F1 and per-class F1 (S/R/NEI), in percent like the paper's tables."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels but {len(pred)} predictions")
    per = per_class_f1(gold, pred) if gold else [0.0] * len(LABELS)
    acc = sum(g == p for g, p in zip(gold, pred)) / len(gold) if gold else 0.0
    # macro = plain mean of the three per-class F1 (summed in label order)
    return {"n": len(gold), "accuracy": round(100 * acc, 2),
            "macro_f1": round(100 * sum(per) / len(per), 2),
            "f1": {lab: round(100 * v, 2) for lab, v in zip(LABELS, per)},
            "predicted": {lab: sum(p == lab for p in pred) for lab in LABELS}}


def retrieval_metrics(gold_docs: Sequence[set[str]], ranked_docs: Sequence[Sequence[str]], ks: Sequence[int]) -> dict:
    """Document-level macro Recall@K, nDCG@K (binary gains), micro Recall@K and zero-hit rate@K
    over the queries that have gold documents. `ranked_docs[i]` is query i's ranked, de-duplicated
    document list. Queries with an empty ranking count as 0 (trec_eval would skip them)."""
    import ir_measures
    from ir_measures import Recall, Success, nDCG

    qids = [str(i) for i, g in enumerate(gold_docs) if g]
    qrels = {str(i): {d: 1 for d in g} for i, g in enumerate(gold_docs) if g}
    # strictly decreasing scores keep our order (trec_eval sorts by score, ties by doc id)
    run = {str(i): {d: float(len(r) - j) for j, d in enumerate(r)} for i, r in enumerate(ranked_docs)
           if gold_docs[i] and len(r)}
    out: dict = {"n": len(gold_docs)}
    for k in ks:
        measures = [Recall @ k, nDCG @ k, Success @ k]
        per: dict[str, dict] = {q: {} for q in qids}
        if run:
            for m in ir_measures.iter_calc(measures, qrels, run):
                per[m.query_id][str(m.measure)] = m.value
        recalls = [per[q].get(str(Recall @ k), 0.0) for q in qids]
        ndcgs = [per[q].get(str(nDCG @ k), 0.0) for q in qids]
        zero = sum(per[q].get(str(Success @ k), 0.0) == 0.0 for q in qids)
        hits = sum(len(set(ranked_docs[int(q)][:k]) & gold_docs[int(q)]) for q in qids)
        total = sum(len(gold_docs[int(q)]) for q in qids)
        m_ = len(qids) or 1
        out[f"@{k}"] = {"macro_recall": round(100 * sum(recalls) / m_, 2), "ndcg": round(100 * sum(ndcgs) / m_, 2),
                        "micro_recall": round(100 * hits / max(total, 1), 2),
                        "zero_hit_rate": round(100 * zero / m_, 2)}
    return out


# ---- run rows ---------------------------------------------------------------------------------
def verdict_row(verdict_dict: dict, record_id: str | None = None) -> dict:
    """A verdict (dict) → one run-file line: everything but timings, plus evidence ids and the
    rationale (the deciding evidence window) for readers of the file."""
    row = {k: v for k, v in verdict_dict.items() if k not in TIMING_FIELDS}
    ev = row.get("evidence") or []
    row["evidence_ids"] = [e["passage_id"] for e in ev]
    row["rationale"] = (ev[0].get("window") or None) if ev else None
    # the decision's quoted numbers: what the badge scorer reads back (BadgeFacts.of_verdict), so
    # `dialcheck calibrate --run` can refit the display from the file alone
    row["rationale_numbers"] = (verdict_dict.get("rationale") or {}).get("numbers")
    judge = (verdict_dict.get("rationale") or {}).get("judge")
    if isinstance(judge, dict):  # the cascade judge (workers/llm/judge.py): the NLI's label beside the final one
        row["nli_label"] = judge.get("nli_label")
        row["judge"] = ({k: judge.get(k) for k in ("label", "window", "used")} if judge.get("label") else None)
    if record_id is not None:
        row["record_id"] = record_id
    return row


def row_protocol(row: dict) -> str:
    return row.get("protocol") or (row.get("model_versions") or {}).get("protocol", "?")


def row_surface_mode(row: dict) -> str:
    return row.get("surface_mode") or (row.get("model_versions") or {}).get("surface_mode", "?")


def group_rows(rows: Iterable[dict]) -> dict[tuple[str, str], dict[str, dict]]:
    """(protocol, surface mode) → claim id → first row (at-least-once topics repeat verdicts)."""
    out: dict[tuple[str, str], dict[str, dict]] = {}
    for row in rows:
        by_claim = out.setdefault((row_protocol(row), row_surface_mode(row)), {})
        by_claim.setdefault(row["claim_id"], row)
    return out


def surface_stats(rows: Sequence[dict]) -> dict:
    """Rewritten share, gate acceptance and status counts of label rows (verdict dicts)."""
    n = len(rows) or 1
    rewritten = sum(r["surface"]["text"] != r["claim"] for r in rows)
    gated = [r["surface"]["gate"] for r in rows if r["surface"].get("gate") is not None]
    return {"rewritten_share": round(100 * rewritten / n, 2),
            "gate_candidates": len(gated),
            "gate_acceptance_rate": round(100 * sum(g["accepted"] for g in gated) / len(gated), 2) if gated else None,
            "status": {s: sum(r["status"]["state"] == s for r in rows) for s in ("ok", "degraded", "error")}}


def score_label_rows(by_claim: dict[str, dict], records: Sequence) -> dict:
    """FV / E2E metrics of one surface: gold labels in record order vs the rows' labels."""
    gold, rows, missing = [], [], 0
    for r in records:
        row = by_claim.get(response_claim_id(r))
        if row is None:
            missing += 1
            continue
        gold.append(r.label)
        rows.append(row)
    out = label_metrics(gold, [row["label"] for row in rows])
    out["missing"] = missing
    out.update(surface_stats(rows))
    return out


def ir_records(records: Sequence) -> list:
    """The IR protocol's queries: factual claims with gold documents."""
    return [r for r in records if r.type_label == "factual" and r.evidence]


def score_ir_rows(by_claim: dict[str, dict], records: Sequence) -> dict:
    recs = ir_records(records)
    present = [(r, by_claim[response_claim_id(r)]) for r in recs if response_claim_id(r) in by_claim]
    gold = [{t for t, _ in r.evidence} for r, _ in present]
    bm25 = [row["bm25_docs"] for _, row in present]
    dense = [row["dense_docs"] for _, row in present]
    n = len(present) or 1
    gated = [row["surface"]["gate"] for _, row in present if row["surface"].get("gate") is not None]
    return {
        "n": len(present),
        "missing": len(recs) - len(present),
        "bm25": retrieval_metrics(gold, bm25, [180]),
        "dense": retrieval_metrics(gold, dense, [10]),
        "top1": retrieval_metrics(gold, dense, [1]),
        "rewritten_share": round(100 * sum(row["surface"]["text"] != r.response for r, row in present) / n, 2),
        "gate_acceptance_rate": round(100 * sum(g["accepted"] for g in gated) / len(gated), 2) if gated else None,
    }


def score_run(rows: Sequence[dict], records: Sequence, data: str, protocol: str | None = None) -> dict:
    """The `dialcheck eval --json` object (without timings) from run rows and the gold records.
    `protocol` picks one protocol when a file mixes several (default: `main_protocol`)."""
    groups = group_rows(rows)
    if not groups:
        raise ValueError("the run has no rows")
    protocol = protocol or main_protocol(rows)
    surfaces = [s for p, s in groups if p == protocol]
    if not surfaces:
        raise ValueError(f"no rows of protocol {protocol!r} (found {sorted({p for p, _ in groups})})")
    first = next(iter(groups[(protocol, surfaces[0])].values()))
    result = {"protocol": protocol, "data": data, "records": len(records),
              "models": dict(first.get("model_versions") or {}), "surfaces": {}}
    for s in surfaces:
        by_claim = groups[(protocol, s)]
        result["surfaces"][s] = (score_ir_rows(by_claim, records) if protocol == "ir"
                                 else score_label_rows(by_claim, records))
    return result


def _dig(d: dict, path: str):
    for part in path.split("/"):
        if not isinstance(d, dict) or part not in d:
            return None
        d = d[part]
    return d


def check_reference(result: dict, reference: dict) -> list[str]:
    """Metrics of `result` (a score_run object) below bench/reference.json's by more than its
    tolerance (percentage points); [] when all hold. A run on other data than the reference's, or
    one that matches no reference metric, fails too: a check that compared nothing is no check."""
    tol = float(reference["tolerance_points"])
    proto = result["protocol"]
    ref = reference.get("metrics", {}).get(proto)
    if ref is None:
        return [f"no reference numbers for protocol {proto}"]
    if reference.get("records") is not None and result["records"] != reference["records"]:
        return [f"reference is for {reference['records']} records, the run scored {result['records']}"]
    failures, compared = [], 0
    for surface, metrics in ref.items():
        got = result["surfaces"].get(surface)
        if got is None:
            continue
        for path, want in metrics.items():
            value = _dig(got, path)
            if value is None:
                continue
            compared += 1
            if value < want - tol:
                failures.append(f"{proto} {surface} {path} {value} < {want} - {tol}")
    if not compared:
        failures.append(f"no {proto} surface of the run ({', '.join(result['surfaces'])}) has reference numbers")
    return failures


# ---- hostile run and gold files ---------------------------------------------------------------
# Why here: `dialcheck score` and `dialcheck verdicts --gold` read files and topics anyone can write;
# a row the metrics cannot read must be named (FILE:LINE: reason), not a traceback or a silent 0.
MAX_JSON_DEPTH = 32  # a verdict row nests 4 deep; DialFact records 3


class RunFileError(DialcheckError, ValueError):
    """A run or gold file dialcheck cannot score: the message is 'FILE:LINE: reason' (or 'FILE: reason')."""


def read_json_lines(path: str) -> Iterable[tuple[int, dict]]:
    """(line number, object) for every non-blank line; RunFileError on the first line that is not
    UTF-8, not JSON, nested deeper than MAX_JSON_DEPTH or not an object. Missing file: FileNotFoundError."""
    import orjson

    from schemas import json_depth

    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise RunFileError(f"{path}:{n}: not UTF-8 text (byte {e.start}): a binary or mis-encoded file?") from None
            try:
                obj = orjson.loads(raw)
            except orjson.JSONDecodeError as e:
                raise RunFileError(f"{path}:{n}: not JSON ({str(e)[:120]})") from None
            if not isinstance(obj, dict):
                raise RunFileError(f"{path}:{n}: not a JSON object (a {type(obj).__name__})")
            if json_depth(obj) > MAX_JSON_DEPTH:
                raise RunFileError(f"{path}:{n}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
            yield n, obj


def row_problem(row: dict) -> str | None:
    """Why the metrics cannot read this run row (verdict dict or IR row), or None."""
    cid = row.get("claim_id")
    if not isinstance(cid, str) or not cid:
        return "missing claim_id (a non-empty string)"
    versions = row.get("model_versions")
    if versions is not None and not isinstance(versions, dict):
        return f"model_versions is a {type(versions).__name__}, not an object"
    for key in ("protocol", "surface_mode"):
        if row.get(key) is not None and not isinstance(row[key], str):
            return f"{key} is not a string"
    if isinstance(versions, dict) and not isinstance(versions.get("protocol", ""), str):
        return "model_versions.protocol is not a string"
    protocol = row_protocol(row)
    if protocol == "?":
        return "no protocol (neither 'protocol' nor model_versions.protocol)"
    if protocol not in PROTOCOLS:
        return f"unknown protocol {protocol[:40]!r} (one of {', '.join(PROTOCOLS)})"
    surface = row.get("surface")
    if not isinstance(surface, dict) or not isinstance(surface.get("text"), str):
        return "surface is not an object with a text"
    gate = surface.get("gate")
    if gate is not None and (not isinstance(gate, dict) or not isinstance(gate.get("accepted"), bool)):
        return "surface.gate.accepted is not true or false"
    if protocol == "ir":
        for key in ("bm25_docs", "dense_docs"):
            docs = row.get(key)
            if not isinstance(docs, list) or not all(isinstance(d, str) for d in docs):
                return f"{key} is not a list of document ids"
        return None
    if row.get("label") not in LABELS:
        return f"unknown label {str(row.get('label'))[:40]!r} (one of {', '.join(LABELS)})"
    if not isinstance(row.get("claim"), str):
        return "claim is not a string"
    status = row.get("status")
    if not isinstance(status, dict) or status.get("state") not in ("ok", "degraded", "error"):
        return "status is not an object with state ok, degraded or error"
    return None


def read_run_file(path: str) -> list[dict]:
    """Every row of a run file, each one checked (`row_problem`); RunFileError names the first bad line.
    An empty file is an error too: scoring nothing is no score."""
    rows = []
    for n, row in read_json_lines(path):
        problem = row_problem(row)
        if problem:
            raise RunFileError(f"{path}:{n}: {problem}")
        rows.append(row)
    if not rows:
        raise RunFileError(f"{path}: no rows (an empty run file)")
    return rows


def check_gold_file(path: str) -> None:
    """RunFileError on the first line of a DialFact gold file that cannot be a gold record
    (load_dialfact then reads it): an object with id, context (list of strings), response, and a
    response_label among the three labels."""
    seen = False
    for n, r in read_json_lines(path):
        seen = True
        if not isinstance(r.get("id"), (str, int)) or isinstance(r.get("id"), bool):
            problem = "missing id"
        elif not isinstance(r.get("context"), list) or not all(isinstance(c, str) for c in r["context"]):
            problem = "context is not a list of strings"
        elif not isinstance(r.get("response"), str):
            problem = "missing response (a string)"
        elif r.get("response_label") not in LABELS:
            problem = f"unknown response_label {str(r.get('response_label'))[:40]!r} (one of {', '.join(LABELS)})"
        else:
            continue
        raise RunFileError(f"{path}:{n}: {problem}")
    if not seen:
        raise RunFileError(f"{path}: no gold records (an empty file)")


def main_protocol(rows: Sequence[dict]) -> str:
    """The protocol most rows declare (ties: the first seen): one stray row does not decide."""
    from collections import Counter

    counts = Counter(p for p in (row_protocol(r) for r in rows) if p != "?")
    if not counts:
        raise ValueError("no row says its protocol (protocol or model_versions.protocol)")
    best = max(counts.values())
    return next(p for p in counts if counts[p] == best)


def duplicate_ids(rows: Iterable[dict]) -> tuple[int, int]:
    """(rows repeating an earlier claim id of the same protocol and surface, those of them with
    another label): the first row is the one scored, as at-least-once topics repeat verdicts."""
    first: dict[tuple, object] = {}
    dup = conflicting = 0
    for r in rows:
        key = (row_protocol(r), row_surface_mode(r), r.get("claim_id"))
        if key in first:
            dup += 1
            conflicting += first[key] != r.get("label")
        else:
            first[key] = r.get("label")
    return dup, conflicting


def coverage_lines(result: dict) -> list[str]:
    """'5 of 300 scored, 295 missing' per surface of a score_run result (the text output's last lines)."""
    out = []
    for name, m in result["surfaces"].items():
        n, missing = m.get("n", 0), m.get("missing", 0)
        out.append(f"  {name:4s} {n} of {n + missing} scored, {missing} missing")
    return out
