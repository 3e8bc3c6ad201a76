"""Metrics for the three protocols (method.md §6): FV/E2E label metrics, IR recall/nDCG/zero-hit."""
from __future__ import annotations

import math
from typing import Sequence

from schemas import LABELS


def label_metrics(gold: Sequence[str], pred: Sequence[str]) -> dict:
    """Accuracy, macro-F1 and per-class F1 (S/R/NEI), in percent like the paper's tables."""
    if len(gold) != len(pred):
        raise ValueError(f"{len(gold)} gold labels but {len(pred)} predictions")
    per = {}
    for lab in LABELS:
        tp = sum(1 for g, p in zip(gold, pred) if g == lab and p == lab)
        fp = sum(1 for g, p in zip(gold, pred) if g != lab and p == lab)
        fn = sum(1 for g, p in zip(gold, pred) if g == lab and p != lab)
        prec = tp / (tp + fp) if tp + fp else 0.0
        rec = tp / (tp + fn) if tp + fn else 0.0
        per[lab] = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    acc = sum(g == p for g, p in zip(gold, pred)) / len(gold) if gold else 0.0
    return {"n": len(gold), "accuracy": round(100 * acc, 2),
            "macro_f1": round(100 * sum(per.values()) / len(per), 2),
            "f1": {k: round(100 * v, 2) for k, v in per.items()},
            "predicted": {lab: sum(p == lab for p in pred) for lab in LABELS}}


def retrieval_metrics(gold_docs: Sequence[set[str]], ranked_docs: Sequence[Sequence[str]], ks: Sequence[int]) -> dict:
    """Document-level macro Recall@K, nDCG@K, micro Recall@K and zero-hit rate@K.
    `ranked_docs[i]` is the ranked, de-duplicated document list for query i."""
    out: dict = {"n": len(gold_docs)}
    for k in ks:
        recalls, ndcgs, zero, hits, total = [], [], 0, 0, 0
        for gold, ranked in zip(gold_docs, ranked_docs):
            if not gold:
                continue
            top = list(ranked)[:k]
            found = [d for d in top if d in gold]
            recalls.append(len(set(found)) / len(gold))
            hits += len(set(found))
            total += len(gold)
            zero += not found
            dcg = sum(1 / math.log2(i + 2) for i, d in enumerate(top) if d in gold)
            idcg = sum(1 / math.log2(i + 2) for i in range(min(len(gold), k)))
            ndcgs.append(dcg / idcg if idcg else 0.0)
        m = len(recalls) or 1
        out[f"@{k}"] = {"macro_recall": round(100 * sum(recalls) / m, 2), "ndcg": round(100 * sum(ndcgs) / m, 2),
                        "micro_recall": round(100 * hits / max(total, 1), 2),
                        "zero_hit_rate": round(100 * zero / m, 2)}
    return out
