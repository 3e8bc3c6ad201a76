"""`dialcheck demo --records 20 --json` runs everything embedded and exits 0 with a usable summary.

Why: the demo is the one-command proof that broker, worker, replay and scoring fit together, and
that it cleans up after itself (no broker or worker left running)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from schemas.settings import REPO_ROOT
from dialcheck.wiring import DEFAULT_CHECKER

PIPELINE = os.environ.get("DIALCHECK_TEST_STREAM_PIPELINE", DEFAULT_CHECKER)


def test_demo_runs_embedded_and_exits_cleanly(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DIALCHECK_KAFKA_BOOTSTRAP"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    cmd = [sys.executable, "-m", "dialcheck.cli", "demo", "--records", "20", "--json"]
    if PIPELINE != DEFAULT_CHECKER:
        cmd += ["--pipeline", PIPELINE]
    proc = subprocess.run(cmd, cwd=str(REPO_ROOT), env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["claims"] == 20 and out["verdicts"] == 20 and out["missing"] == 0
    assert out["deadletter"] == out["deadletter_expected"] == 2
    assert 0.0 <= out["metrics"]["accuracy"] <= 100.0 and "macro_f1" in out["metrics"]
    assert out["broker"] == "embedded"
    assert out["off_schema_verdicts"] == 0
