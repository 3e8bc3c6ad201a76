"""Model switches that cannot break the worker (dialcheck/model_switch.py, `dialcheck adapt-loop
--promote / --rollback`): a candidate the worker would refuse is refused before anything moves; a
promotion and a rollback killed at every one of their steps leave a live model the worker's own
check accepts, and the loop finishes them when it resumes, with one model_events row each.

Real parts: the shipped NLI model (hard-linked copies, so no 90 MB copies), the worker's reload
check (workers/reloading.py) on the live path, a real feedback store, a real process killed with
os._exit at step N (DIALCHECK_SWITCH_CRASH_AT). Why the killed process skips the candidate check:
the check runs before the first step (a refused one is tested below), and loading the model in each
of about twenty processes would cost CI half a minute for nothing the steps do."""
from __future__ import annotations

import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dialcheck.adapt_loop import AdaptLoop, Layout, LoopOptions
from dialcheck.model_switch import CRASH_ENV, CRASH_EXIT, SwitchRefused, acceptable, promotion, rollback, version_of
from schemas.settings import REPO_ROOT, load_settings
from streams.feedback_store import FeedbackStore

pytestmark = pytest.mark.model

SHIPPED = Path(load_settings().models.nli_model_dir)
NEW = "dialcheck-nli+switch-test"

KILLED = """
import sys
from pathlib import Path
from dialcheck.adapt_loop import AdaptLoop, Layout, LoopOptions
from dialcheck.model_switch import promotion, rollback

live, store, candidate = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
loop = AdaptLoop(Layout(live), store, LoopOptions(), log=lambda m: None)
with loop.locked(), loop.open_store() as st:
    loop.switch(st, lambda: promotion(loop.versions, candidate, "promote (test)"))
    loop.switch(st, lambda: rollback(loop.versions, "rollback (test)"))
"""


def linked_copy(src: Path, dest: Path) -> Path:
    """The model's files hard-linked (never written through: a file changed here is replaced)."""
    shutil.copytree(src, dest, copy_function=os.link)
    return dest


def replace_json(path: Path, data: dict) -> None:
    path.unlink(missing_ok=True)  # a hard link: writing through it would change the shipped file
    path.write_text(json.dumps(data))


def model_version(where: Path, version: str, stamped: bool = True) -> Path:
    """The shipped weights as `version`; `stamped`: its decision and display say they are fitted for
    it (what the command `dialcheck nli quantize` ends with does), else the worker refuses it."""
    linked_copy(SHIPPED, where)
    replace_json(where / "calibration.json", {**json.loads((SHIPPED / "calibration.json").read_text()), "version": version})
    if stamped:
        for name, path in (("decision.json", REPO_ROOT / "workers/decision/params/decision.json"),
                           ("display.json", REPO_ROOT / "workers/display/params/display.json")):
            d = json.loads(path.read_text())
            d["meta"]["nli_model"] = {**d["meta"]["nli_model"], "version": version}
            replace_json(where / name, d)
    return where


def candidate(where: Path, stamped: bool) -> Path:
    return model_version(where, NEW, stamped)


def events(store: Path) -> list[tuple[str, str]]:
    with FeedbackStore(store) as st:
        return [(e.event, e.version) for e in st.events()]


def test_a_candidate_the_worker_would_refuse_is_refused_before_any_rename(tmp_path, capsys):
    from dialcheck.cli import main

    live = linked_copy(SHIPPED, tmp_path / "nli")
    bad = candidate(tmp_path / "nli-new", stamped=False)
    store = tmp_path / "fb.sqlite3"
    before = sorted(p.name for p in tmp_path.iterdir())
    rc = main(["adapt-loop", "--model-dir", str(live), "--store", str(store), "--promote", str(bad)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("dialcheck: the worker would refuse"), err
    assert "fitted for NLI model" in err[0]
    assert not live.is_symlink() and version_of(live) == version_of(SHIPPED) and (bad / "model.onnx").is_file()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "fb.sqlite3" and not p.name.startswith(".")) == \
        [n for n in before if not n.startswith(".")]


def test_a_pid_file_naming_a_dead_process_is_an_error_before_any_rename(tmp_path, capsys):
    from dialcheck.cli import main

    live = linked_copy(SHIPPED, tmp_path / "nli")
    good = candidate(tmp_path / "nli-new", stamped=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (tmp_path / "worker.pid").write_text(dead.stdout)
    rc = main(["adapt-loop", "--model-dir", str(live), "--store", str(tmp_path / "fb.sqlite3"), "--promote", str(good),
               "--pid-file", str(tmp_path / "worker.pid")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "which is not running" in err[0], err
    assert not live.is_symlink() and (good / "model.onnx").is_file()


@pytest.mark.timeout(600)
def test_a_switch_killed_at_any_step_leaves_a_complete_model_and_resumes(tmp_path):
    """Promote then roll back, killed at step 1, 2, ... until a run goes through without being
    killed: after each kill the live path passes the worker's check, and a resumed loop (plus an
    operator repeating the promotion the kill came before) ends with one row per switch."""
    settings = load_settings()
    shipped_version = version_of(SHIPPED)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    killed_at = []
    for n in range(1, 40):
        root = tmp_path / f"kill-{n}"
        live = linked_copy(SHIPPED, root / "nli")
        cand = candidate(root / "nli-new", stamped=True)
        store = root / "fb.sqlite3"
        r = subprocess.run([sys.executable, "-c", KILLED, str(live), str(store), str(cand)],
                           env={**env, CRASH_ENV: str(n)}, capture_output=True, text=True, timeout=120)
        if r.returncode == 0:
            break
        assert r.returncode == CRASH_EXIT, r.stderr[-2000:]
        killed_at.append(n)
        assert acceptable(live, settings).startswith(f"NLI model {version_of(live)} from"), n
        loop = AdaptLoop(Layout(live), str(store), LoopOptions(), log=lambda m: None)
        with loop.locked(), loop.open_store() as st:
            loop.resume(st)
            done = [e for e, _ in events(store)]
            if "promoted" not in done:  # killed before the promotion was written down: the operator repeats it
                loop.switch(st, lambda: promotion(loop.versions, cand, "promote (test)"))
            if "rolled_back" not in done:
                loop.switch(st, lambda: rollback(loop.versions, "rollback (test)"))
        assert events(store) == [("promoted", NEW), ("rolled_back", NEW)], n
        assert version_of(live) == shipped_version and live.is_symlink(), n
        assert not Layout(live).previous.exists() and (Layout(live).retired / NEW / "model.onnx").is_file(), n
        assert not loop.versions.journal.exists(), n
    else:
        pytest.fail("the switch was still being killed at step 39")
    assert events(store) == [("promoted", NEW), ("rolled_back", NEW)]
    assert len(killed_at) >= 10, killed_at  # every step of both switches was a kill point



@pytest.mark.parametrize("takes_it", [True, False], ids=["worker-takes-it", "worker-keeps-the-old"])
def test_the_switch_asks_the_worker_and_undoes_what_it_does_not_serve(tmp_path, takes_it):
    """After the SIGHUP the loop reads the worker's /metrics (`dialcheck_model_info`, the real
    endpoint): the new version there confirms the promotion; still the old one after
    `confirm_s` and the switch is undone (`rolled_back`, the old version live again) and
    WorkerRefused raised. The "worker" is this process: its SIGHUP handler re-reads the live
    path's version (as a reload does) or, in the second case, keeps what it serves."""
    import signal

    from dialcheck.model_switch import WorkerRefused
    from streams.observability import Observability

    live = linked_copy(SHIPPED, tmp_path / "nli")
    cand = candidate(tmp_path / "nli-new", stamped=True)
    serving = {"nli": version_of(live)}

    class Served:  # what /metrics' dialcheck_model_info reads from the worker's checker
        def model_versions(self) -> dict:
            return dict(serving)

    obs = Observability(load_settings())
    obs.attach(None, None, checker=Served())
    port = obs.serve("127.0.0.1", 0)
    before = signal.signal(signal.SIGHUP, lambda *_: serving.update(nli=version_of(live)) if takes_it else None)
    opts = LoopOptions(metrics_urls=(f"http://127.0.0.1:{port}/metrics",), confirm_s=3)
    loop = AdaptLoop(Layout(live), str(tmp_path / "fb.sqlite3"), opts, pids=lambda: [os.getpid()], log=lambda m: None)
    try:
        with loop.locked(), loop.open_store() as st:
            if takes_it:
                assert loop.promote(st, cand, "test") == NEW
            else:
                with pytest.raises(WorkerRefused, match=re.escape(f"did not report {NEW}")):
                    loop.promote(st, cand, "test")
    finally:
        signal.signal(signal.SIGHUP, before)
        obs.close()
    got = [(e, v) for e, v in events(tmp_path / "fb.sqlite3")]
    if takes_it:
        assert got == [("promoted", NEW)] and version_of(live) == NEW == serving["nli"]
    else:
        assert got == [("rolled_back", NEW)] and version_of(live) == version_of(SHIPPED) == serving["nli"]
        assert (Layout(live).retired / NEW / "model.onnx").is_file() and not loop.versions.journal.exists()


def test_promote_and_rollback_by_hand_are_one_row_each(tmp_path, capsys):
    from dialcheck.cli import main

    live = linked_copy(SHIPPED, tmp_path / "nli")
    cand = candidate(tmp_path / "nli-new", stamped=True)
    store = tmp_path / "fb.sqlite3"
    common = ["adapt-loop", "--model-dir", str(live), "--store", str(store)]
    assert main([*common, "--promote", str(cand)]) == 0
    assert version_of(live) == NEW and f"promoted {NEW}" in capsys.readouterr().out
    assert main([*common, "--rollback"]) == 0
    assert version_of(live) == version_of(SHIPPED) and f"rolled back {NEW}" in capsys.readouterr().out
    assert main([*common, "--rollback"]) == 2  # nothing kept to go back to: one line
    assert "no previous version to roll back to" in capsys.readouterr().err
    assert [e for e, _ in events(store)] == ["promoted", "rolled_back"]
