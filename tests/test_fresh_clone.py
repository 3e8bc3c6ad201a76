"""A newcomer's first hour: the repository's tracked files (`git ls-files`) copied into a temp dir
with no ../shared beside it, DIALCHECK_DATA_DIR pointing at an empty dir, and the README's first
command run there with this checkout's .venv python (cwd and PYTHONPATH = the copy, so the copy's
code is what runs). Offline, `dialcheck demo --records 2` stops in one line naming
DIALCHECK_DATA_BASE_URL and writes nothing; against a mirror (a real local http.server serving
copies of the real files from ../shared/data, never committed) it fetches what it needs, says what
and from where in one line and ends with the demo's summary (the first index and the E5 export are
the ones this test run built with the same code, not built twice)."""
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
from workers.models.onnx_e5 import DEFAULT_DIR as ONNX_E5_DIR

pytestmark = pytest.mark.unit  # the tests below marked data / model / broker are not unit (tests/conftest.py)

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


def _run(clone: Path, data: Path, *args: str, env_extra: dict[str, str] | None = None,
         timeout: float = 60) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DIALCHECK_")}
    env.update(PYTHONPATH=str(clone), DIALCHECK_DATA_DIR=str(data), DIALCHECK_INDEX_DIR=str(clone / "artifacts" / "index"),
               HOME=str(clone.parent / "home"), DIALCHECK_STARTER_KB="0", **(env_extra or {}))
    # -P: the copy on PYTHONPATH first; the venv's editable install of this checkout must not win
    return subprocess.run([sys.executable, "-P", "-m", "dialcheck.cli", *args], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=timeout)


def _one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr[-2000:]
    return done.stderr


def _files(d: Path) -> list[str]:
    return sorted(str(p.relative_to(d)) for p in d.rglob("*") if p.is_file())


def test_offline_the_readme_command_stops_in_one_line_naming_the_mirror_setting(clone, tmp_path):
    """No network (port 9 on loopback: nothing listens): the demo's fetch fails on its first file,
    says why and how to use a mirror, and leaves no file behind."""
    data = tmp_path / "empty-data"
    data.mkdir()
    line = _one_line(_run(clone, data, "demo", "--records", "2",
                          env_extra={"DIALCHECK_DATA_BASE_URL": "http://127.0.0.1:9"}))
    assert line.startswith("dialcheck: could not download dialfact/"), line
    assert "127.0.0.1 refused the connection" in line and "DIALCHECK_DATA_BASE_URL" in line, line
    assert _files(data) == [] and not (clone / "artifacts" / "index").exists()


@pytest.mark.data
@pytest.mark.model
@pytest.mark.broker
@pytest.mark.timeout(2400)
def test_the_readme_command_fetches_what_it_needs_and_runs_to_the_summary(clone, mirror, tmp_path, index_dir, encoder):
    """`dialcheck demo --records 2` as written, with DIALCHECK_DATA_BASE_URL at the mirror: one line
    naming what it fetches and from where (DialFact only: the index is there), then the demo's summary.
    A second run fetches nothing.

    The E5 export and the default index are what this CI run already built once with the same code
    (`index_dir`: workers.retrieval.build.ensure_index, the demo's own call, from the same two sets and
    encoder; `encoder`: the export on first use, also tested by tests/test_encoder_onnx.py): the copy
    gets them (the index copied, the 850 MB export linked) rather than building both a second time
    (about 75 s of CI). The demo still checks the index it finds is the default for its settings
    (`stale_default`) and would rebuild it otherwise; the first stderr line proves it built nothing."""
    assert (ONNX_E5_DIR / "meta.json").is_file() and (index_dir / "meta.json").is_file()
    (clone / "artifacts").mkdir(exist_ok=True)
    shutil.copytree(index_dir, clone / "artifacts" / "index")
    os.symlink(ONNX_E5_DIR, clone / "artifacts" / "e5-onnx", target_is_directory=True)
    data = tmp_path / "data"
    done = _run(clone, data, "demo", "--records", "2", env_extra={"DIALCHECK_DATA_BASE_URL": mirror}, timeout=2400)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-3000:])
    first = done.stderr.splitlines()[0]
    # the index is there, so only what the demo's records need (FoolMeTwice feeds the index build)
    assert first == (f"demo: DialFact data not found; fetching 3 files (2.7 MB) from {mirror} "
                     f"into {data} (once; DIALCHECK_DATA_BASE_URL for a mirror)"), done.stderr[:2000]
    assert done.stdout.startswith("demo: 2/2 verdicts"), done.stdout
    assert "building the index" not in done.stderr, done.stderr[-2000:]  # the seeded default was used
    assert "Traceback" not in done.stderr and "DEBUG" not in done.stderr and "WARNING:root" not in done.stderr
    listing = _run(clone, data, "data", "list").stdout
    states = {ln.split()[0]: ln.split()[1] for ln in listing.splitlines()[1:]}
    assert states["dialfact"] == "present" and states["foolmetwice"] == "missing" and states["wice"] == "missing", listing
    again = _run(clone, data, "demo", "--records", "2", "--json", timeout=900)
    assert again.returncode == 0 and "fetching" not in again.stderr, again.stderr[-2000:]
