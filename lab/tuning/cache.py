"""Disk caches for tuning: NLI probabilities per (model, premise, hypothesis) pair and JSON blobs
(surfaces, gate scores, retrieved passages). Tuning re-reads the same ~10k pairs many times; on
2 shared cores recomputing them would dominate every run. SQLite, no pickle."""
from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

DEFAULT_DIR = Path("artifacts/tune")


def _key(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode()).hexdigest()


class PairCache:
    """probabilities(premise, hypothesis) for one model version; misses computed in one batch."""

    def __init__(self, path: str | Path, model_version: str):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(str(path))
        self.db.execute("CREATE TABLE IF NOT EXISTS probs (k TEXT PRIMARY KEY, e REAL, n REAL, c REAL)")
        self.db.execute("CREATE TABLE IF NOT EXISTS blobs (k TEXT PRIMARY KEY, v TEXT)")
        self.version = model_version

    def predict(self, predict: Callable[[Sequence[str], Sequence[str]], np.ndarray],
                premises: Sequence[str], hypotheses: Sequence[str], chunk: int = 512) -> np.ndarray:
        keys = [_key(self.version, p, h) for p, h in zip(premises, hypotheses)]
        found: dict[str, tuple] = {}
        uniq = list(dict.fromkeys(keys))
        for s in range(0, len(uniq), 500):
            part = uniq[s:s + 500]
            q = f"SELECT k, e, n, c FROM probs WHERE k IN ({','.join('?' * len(part))})"
            found.update({r[0]: r[1:] for r in self.db.execute(q, part)})
        todo = {}
        for k, p, h in zip(keys, premises, hypotheses):
            if k not in found and k not in todo:
                todo[k] = (p, h)
        items = list(todo.items())
        for s in range(0, len(items), chunk):
            part = items[s:s + chunk]
            probs = predict([p for _, (p, _) in part], [h for _, (_, h) in part])
            rows = [(k, float(r[0]), float(r[1]), float(r[2])) for (k, _), r in zip(part, probs)]
            self.db.executemany("INSERT OR REPLACE INTO probs VALUES (?, ?, ?, ?)", rows)
            self.db.commit()
            found.update({r[0]: r[1:] for r in rows})
        return np.array([found[k] for k in keys], dtype=np.float64).reshape(len(keys), 3)

    def blob(self, name: str, make: Callable[[], object]):
        """A JSON value stored under `name` (made once)."""
        k = _key(self.version, name)
        row = self.db.execute("SELECT v FROM blobs WHERE k = ?", (k,)).fetchone()
        if row:
            return json.loads(row[0])
        v = make()
        self.db.execute("INSERT OR REPLACE INTO blobs VALUES (?, ?)", (k, json.dumps(v)))
        self.db.commit()
        return v
