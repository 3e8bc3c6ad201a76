"""`dialcheck serve-models` starts the bundled server, prints the URL to use, serves requests,
and exits 0 on SIGTERM (stopping the server with it)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
import pytest

pytestmark = pytest.mark.model

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def test_serve_models_command():
    from workers.models.triton import TritonEncoder

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "dialcheck.cli", "serve-models", "--models", "embed"],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url = None
        deadline = time.monotonic() + 180
        while url is None and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            if "DIALCHECK_MODELS=triton://" in line:
                url = line.strip().split("=", 1)[1]
        assert url, "serve-models did not report readiness"
        enc = TritonEncoder.from_url(url)
        assert enc.encode(["hello"], is_query=True).shape == (1, enc.dim)
        enc.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
