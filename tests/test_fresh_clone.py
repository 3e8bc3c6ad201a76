"""A newcomer's first hour: the repository's tracked files (`git ls-files`) copied into a temp dir
with no ../shared beside it, DIALCHECK_DATA_DIR pointing at an empty dir, and the README's first
command run there with this checkout's .venv python (cwd and PYTHONPATH = the copy, so the copy's
code is what runs). `dialcheck demo --records 2` must stop in one line saying what to fetch; after
`dialcheck data fetch dialfact --base-url <a real local http.server>` the next run names the next
missing thing (FoolMeTwice, which the first index is built from) in one line, and `data list` shows
what is there. The server serves copies of the real files (../shared/data, never committed)."""
from __future__ import annotations

import http.server
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from dialcheck.commands.data import Manifest
from schemas.settings import REPO_ROOT, SHARED_DATA_DIR

pytestmark = pytest.mark.unit

SETS = ("dialfact", "foolmetwice")


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True).stdout
    dest = tmp_path_factory.mktemp("fresh") / "dialcheck"
    for rel in filter(None, files.decode().split("\0")):
        src = REPO_ROOT / rel
        if src.is_file():  # a path the index still lists but the working tree moved is skipped
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dest / rel)
    for rel in ("dialcheck/commands/data.py", "dialcheck/data_manifest.json"):
        assert (dest / rel).is_file(), f"{rel} is not tracked"
    assert not (dest.parent / "shared").exists()
    return dest


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    files = Manifest.load().files_of(SETS)
    if not all((SHARED_DATA_DIR / f["path"]).is_file() for f in files):
        pytest.skip(f"needs the real data files in {SHARED_DATA_DIR} to serve copies of")
    root = tmp_path_factory.mktemp("mirror")
    for f in files:
        (root / f["path"]).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(SHARED_DATA_DIR / f["path"], root / f["path"])

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: Quiet(*a, directory=str(root)))
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _run(clone: Path, data: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIALCHECK_")}
    env.update(PYTHONPATH=str(clone), DIALCHECK_DATA_DIR=str(data), DIALCHECK_INDEX_DIR=str(clone / "artifacts" / "index"),
               HOME=str(clone.parent / "home"), DIALCHECK_STARTER_KB="0")
    # -P: the copy on PYTHONPATH first; the venv's editable install of this checkout must not win
    return subprocess.run([sys.executable, "-P", "-m", "dialcheck.cli", *args], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=60)


def _one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr[-2000:]
    return done.stderr


def test_readme_first_command_says_what_to_fetch_then_the_next_missing_thing(clone, mirror, tmp_path):
    data = tmp_path / "empty-data"
    data.mkdir()
    line = _one_line(_run(clone, data, "demo", "--records", "2"))
    assert line == (f"dialcheck: DialFact data not found (looked in {data} (DIALCHECK_DATA_DIR)): "
                    "run `dialcheck data fetch dialfact` or set DIALCHECK_DATA_DIR\n")
    done = _run(clone, data, "data", "fetch", "dialfact", "--base-url", mirror)
    assert done.returncode == 0, done.stderr
    assert (data / "dialfact" / "testsmall.jsonl").is_file()
    line = _one_line(_run(clone, data, "demo", "--records", "2"))
    assert "FoolMeTwice data not found" in line and "dialcheck data fetch foolmetwice" in line, line
    assert not (clone / "artifacts" / "index").exists()  # stopped before an index build started
    done = _run(clone, data, "data", "fetch", "foolmetwice", "--base-url", mirror)
    assert done.returncode == 0, done.stderr
    listing = _run(clone, data, "data", "list").stdout
    states = {ln.split()[0]: ln.split()[1] for ln in listing.splitlines()[1:]}
    assert states["dialfact"] == "present" and states["foolmetwice"] == "present" and states["wice"] == "missing", listing
