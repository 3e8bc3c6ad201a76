"""docs/integration.md end to end, as a chat-app developer would run it: their own corpus indexed
alone (`index build --sources "" --tsv`), a real `dialcheck worker` started from another directory
against a real embedded Tansu broker, then examples/produce_turns.py and examples/consume_verdicts.py
(kafka-python only, run as separate processes exactly as documented) get a verdict back.

Why each assertion: the verdict must come from the user's corpus (evidence titles from the TSV)
and decide the claim the example sends; the consumer must see exactly one verdict (the user turn
is context, not checked); the worker must not leave ./dialcheck-data in the directory it was
started from and must print where its state lives.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
CORPUS = EXAMPLES / "my_corpus.tsv"


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "DIALCHECK_METRICS_PORT": "0", **extra}
    env.pop("DIALCHECK_KAFKA_BOOTSTRAP", None)
    return env


@pytest.fixture(scope="module")
def own_index(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("own-index")
    done = subprocess.run([sys.executable, "-m", "dialcheck.cli", "index", "build", "--sources", "",
                           "--tsv", str(CORPUS), "--out", str(out)],
                          capture_output=True, text=True, env=_env(), cwd=REPO, timeout=600)
    assert done.returncode == 0, done.stderr
    meta = json.loads(done.stdout)
    rows = [ln for ln in CORPUS.read_text().splitlines()[1:] if ln.strip()]
    assert meta["sources"] == [f"tsv:{CORPUS}"] and meta["passages"] == len(rows), meta
    return out


def test_own_corpus_alone_is_indexed(own_index):
    titles = {json.loads(ln)["title"] for ln in (own_index / "passages.jsonl").read_text().splitlines()}
    assert titles == {ln.split("\t")[1] for ln in CORPUS.read_text().splitlines()[1:] if ln.strip()}


def test_python_example_gets_a_verdict(own_index, fresh_broker, tmp_path):
    from streams.app import READY_MARKER
    from streams.processes import terminate

    cwd, xdg = tmp_path / "app-dir", tmp_path / "xdg-state"
    cwd.mkdir()
    log_path = tmp_path / "worker.log"
    env = _env(DIALCHECK_INDEX_DIR=str(own_index), XDG_STATE_HOME=str(xdg))
    env.pop("DIALCHECK_STATE_DIR", None)
    with open(log_path, "wb") as log:
        worker = subprocess.Popen([sys.executable, "-u", "-m", "dialcheck.cli", "worker", "--broker", fresh_broker.bootstrap],
                                  cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while READY_MARKER not in log_path.read_text(errors="replace"):
            assert worker.poll() is None, log_path.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "worker not ready"
            time.sleep(0.5)

        conv = "integration-example-1"
        produced = subprocess.run([sys.executable, str(EXAMPLES / "produce_turns.py"), "--bootstrap",
                                   fresh_broker.bootstrap, "--conversation", conv],
                                  capture_output=True, text=True, timeout=120)
        assert produced.returncode == 0, produced.stderr
        assert json.loads(produced.stdout) == {"conversation_id": conv, "turns": 2, "checked_turn": f"{conv}/2"}

        consumed = subprocess.run([sys.executable, str(EXAMPLES / "consume_verdicts.py"), "--bootstrap",
                                   fresh_broker.bootstrap, "--conversation", conv, "--count", "1", "--timeout", "300"],
                                  capture_output=True, text=True, timeout=400)
        assert consumed.returncode == 0, consumed.stdout + consumed.stderr + log_path.read_text(errors="replace")[-3000:]
        lines = [json.loads(ln) for ln in consumed.stdout.splitlines()]
        assert len(lines) == 1, lines
        shown = lines[0]
        assert shown["turn_id"] == f"{conv}/2" and shown["status"] == "ok", shown
        assert shown["label"] == "SUPPORTS", shown  # "he was born in Tupelo, Mississippi" vs the Elvis passage
        corpus_titles = {ln.split("\t")[1] for ln in CORPUS.read_text().splitlines()[1:]}
        assert shown["evidence_title"] in corpus_titles, shown
        assert 0.0 < shown["confidence"] <= 1.0
    finally:
        terminate(worker, grace_s=30)
    log_text = log_path.read_text(errors="replace")
    assert not (cwd / "dialcheck-data").exists(), os.listdir(cwd)
    assert list(cwd.iterdir()) == [], os.listdir(cwd)
    assert f"worker state dir: {xdg / 'dialcheck' / 'dialcheck'}" in log_text
