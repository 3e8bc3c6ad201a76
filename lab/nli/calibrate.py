"""Temperature scaling (docs/method.md §3): one scalar T minimising NLL on a validation split, and
expected calibration error to show what it bought."""
from __future__ import annotations

import numpy as np

from workers.models.nli_base import softmax


def nll(logits: np.ndarray, labels: np.ndarray, t: float) -> float:
    p = softmax(logits, t)
    return float(-np.mean(np.log(np.clip(p[np.arange(len(labels)), labels], 1e-12, 1.0))))


def fit_temperature(logits: np.ndarray, labels: np.ndarray) -> float:
    from scipy.optimize import minimize_scalar

    res = minimize_scalar(lambda t: nll(logits, labels, t), bounds=(0.05, 20.0), method="bounded")
    return float(res.x)


def ece(probs: np.ndarray, labels: np.ndarray, bins: int = 15) -> float:
    """Expected calibration error of the top-class confidence, equal-width bins."""
    conf = probs.max(axis=1)
    correct = probs.argmax(axis=1) == labels
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        m = (conf > lo) & (conf <= hi)
        if m.any():
            total += m.mean() * abs(correct[m].mean() - conf[m].mean())
    return float(total)
