"""Switching the live NLI model in one step the worker can never see half done.

Why: a promotion by two renames (live → previous, candidate → live) left no live model when it
was killed between them, and a candidate the worker would refuse was put in place anyway. Here:
- every version is a directory in `<live>-versions/`; the live path and `<live>-previous` are
  symlinks into it, each replaced by one rename (a temporary symlink `os.replace`d over it), so a
  reader sees the old version or the new one, never neither;
- a candidate is checked first by the worker's own SIGHUP reload (workers/reloading.py
  `reload_model`: model loads and answers a probe, decision and display fitted for its version);
  one it would refuse is refused before anything moves (`SwitchRefused`, exit 2);
- a switch is written down first (a journal file beside the live path, itself written beside and
  renamed), then done in idempotent steps; whoever takes the loop's lock next finishes it, so a
  killed loop resumes and the model_events row is written once (the journal's id in its detail).

A live path that is still a plain directory (a deployment from before) becomes a symlink in one
step: its files hard-linked into `<live>-versions/<version>`, then the directory and a symlink to
the copy exchanged atomically (Linux renameat2 RENAME_EXCHANGE)."""
from __future__ import annotations

import contextlib
import ctypes
import errno
import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from schemas.atomic import write_text
from schemas.errors import DialcheckError

CRASH_ENV = "DIALCHECK_SWITCH_CRASH_AT"  # tests only: os._exit at the Nth step (fault injection)
CRASH_EXIT = 70
_steps_taken = 0


class SwitchRefused(DialcheckError, ValueError):
    """A model directory the worker would refuse, or a layout a switch cannot be made in: nothing moved."""


class WorkerRefused(DialcheckError, RuntimeError):
    """The worker did not report the new version after its SIGHUP: the switch was undone."""


def step_done() -> None:
    """A point a switch may be killed at: with DIALCHECK_SWITCH_CRASH_AT=N the Nth one ends the process
    at once (no cleanup, like kill -9), so a test can show every such point leaves a complete model."""
    global _steps_taken
    _steps_taken += 1
    if os.environ.get(CRASH_ENV) == str(_steps_taken):
        os._exit(CRASH_EXIT)


def version_of(model_dir: Path) -> str:
    return str(json.loads((Path(model_dir) / "calibration.json").read_text()).get("version", "dialcheck-nli"))


def acceptable(model_dir: Path, settings=None, protocol: str = "e2e") -> str:
    """The worker's own SIGHUP reload run on `model_dir` (its model, decision and display loaded and
    checked, as at start-up): the version in words, or SwitchRefused with the worker's reason."""
    from schemas.protocols import ReloadRefused
    from schemas.settings import load_settings
    from workers import reloading
    from workers.building import Builder, PipelineHooks

    settings = settings or load_settings()
    builder = Builder(protocol, "r0", None, None, None, PipelineHooks())  # what a reload replaces needs no encoder
    try:
        chain = reloading.reload_model(builder, SimpleNamespace(settings=settings, nli=None), str(model_dir))
    except ReloadRefused as e:
        raise SwitchRefused(f"the worker would refuse {model_dir}: {str(e).split('; the running model')[0]}") from None
    return reloading.model_in_words(builder, chain)


# --- pointers --------------------------------------------------------------------------------------

def point(link: Path, target: Path) -> None:
    """`link` → `target` (relative, so the folder can move) in one rename of a temporary symlink."""
    tmp = link.with_name(f".{link.name}.tmp-{uuid.uuid4().hex[:8]}")
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)


def _exchange(a: Path, b: Path) -> None:
    """Swap two paths atomically (Linux renameat2 RENAME_EXCHANGE): a directory and a symlink too."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    if fn is None or fn(-100, os.fsencode(a), -100, os.fsencode(b), 2) != 0:
        code = ctypes.get_errno() if fn is not None else errno.ENOSYS
        raise SwitchRefused(f"{a} is a plain directory and this system cannot swap it for a symlink in one step "
                            f"({os.strerror(code)}): stop the worker, move it into {a.name}-versions/ and symlink "
                            f"{a} to it (docs/operations.md \"Roll out and roll back a model\")")


def _hardlinked_copy(src: Path, dest: Path) -> None:
    """`dest` complete or absent: linked (no second copy on disk) into a dot folder, then renamed."""
    if dest.exists():
        return
    work = dest.with_name(f".{dest.name}.copying")
    shutil.rmtree(work, ignore_errors=True)

    def link(s, d):
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)
    shutil.copytree(src, work, copy_function=link)
    work.rename(dest)


@dataclass(frozen=True)
class Versions:
    """The live path, the previous pointer and the versions folder beside them."""
    live: Path

    def _beside(self, suffix: str) -> Path:
        return self.live.with_name(self.live.name + suffix)

    @property
    def folder(self) -> Path:
        return self._beside("-versions")

    @property
    def previous(self) -> Path:
        return self._beside("-previous")

    @property
    def retired(self) -> Path:
        return self._beside("-retired")

    @property
    def journal(self) -> Path:
        return self.live.with_name(f".{self.live.name}.switch.json")

    def target(self, link: Path) -> Path | None:
        """The version directory a pointer names (None: no pointer)."""
        return (link.parent / os.readlink(link)).resolve() if link.is_symlink() else None

    def versioned(self) -> None:
        """The live path made a symlink into the versions folder (once; atomic; resumable), and an
        old-style `<live>-previous` directory moved in beside it."""
        self.folder.mkdir(parents=True, exist_ok=True)
        for stale in self.live.parent.glob(f".{self.live.name}.tmp-*"):  # a swap killed half way
            shutil.rmtree(stale) if stale.is_dir() and not stale.is_symlink() else stale.unlink()
        if self.previous.is_dir() and not self.previous.is_symlink():  # a previous kept by two renames
            dest = self.slot(version_of(self.previous))
            self.previous.rename(dest)
            step_done()
            point(self.previous, dest)
        if self.live.is_symlink() or not self.live.is_dir():
            return
        dest = self.folder / version_of(self.live)
        _hardlinked_copy(self.live, dest)
        step_done()
        tmp = self.live.with_name(f".{self.live.name}.tmp-{uuid.uuid4().hex[:8]}")
        os.symlink(os.path.relpath(dest, self.live.parent), tmp)
        _exchange(self.live, tmp)  # live is now the symlink, tmp the old directory
        step_done()
        shutil.rmtree(tmp)

    def slot(self, version: str) -> Path:
        """A free directory name in the versions folder for `version`."""
        return _free(self.folder, version)

    def retire(self, d: Path) -> None:
        """Move a version no pointer names to the retired folder (kept, out of the way)."""
        if not d.is_dir() or d.resolve() in (self.target(self.live), self.target(self.previous)):
            return
        self.retired.mkdir(parents=True, exist_ok=True)
        d.rename(_free(self.retired, d.name))


def _free(folder: Path, name: str) -> Path:
    """`folder/name`, or `name.2`, `name.3`, ... : the first that does not exist."""
    dest, n = folder / name, 1
    while dest.exists():
        n += 1
        dest = folder / f"{name}.{n}"
    return dest


@dataclass
class Switch:
    """One switch, written down before it starts: what the live path points at after it (`to_dir`),
    what the previous pointer names (`previous_dir`, None: removed), a candidate to move in first
    (`source`), what is retired after, and the model_events row it ends in."""
    event: str  # promoted | rolled_back
    version: str
    other: str
    reason: str
    to_dir: str
    previous_dir: str | None
    source: str | None = None
    retire: list[str] = field(default_factory=list)
    detail: dict = field(default_factory=dict)
    id: str = field(default_factory=lambda: uuid.uuid4().hex)

    def save(self, path: Path) -> None:
        write_text(path, json.dumps(asdict(self)))

    @classmethod
    def load(cls, path: Path) -> "Switch | None":
        try:
            return cls(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None


def apply(v: Versions, s: Switch, store, clock: Callable[[], float], log: Callable[[str], None],
          notify: Callable[[Switch], dict]) -> None:
    """Carry `s` out from wherever it stopped (each step idempotent), tell the workers (`notify`: what
    it says goes into the row; it may undo the switch and raise), record it once, drop the journal."""
    to_dir = Path(s.to_dir)
    if s.source and Path(s.source).is_dir() and not to_dir.exists():
        Path(s.source).rename(to_dir)
        step_done()
    if s.previous_dir:
        point(v.previous, Path(s.previous_dir))
    elif v.previous.is_symlink():
        v.previous.unlink()
    step_done()
    point(v.live, to_dir)
    step_done()
    said = notify(s)
    step_done()
    for d in s.retire:
        v.retire(Path(d))
    step_done()
    if not any(e.detail.get("switch") == s.id for e in store.events()):
        e = store.add_event(s.event, s.version, other=s.other, reason=s.reason,
                            detail={**s.detail, **said, "switch": s.id}, ts=clock())
        log(f"adapt-loop {s.event}: {s.version}" + (f" ({e.reason})" if e.reason else ""))
    step_done()
    v.journal.unlink(missing_ok=True)


def resume(v: Versions, store, clock: Callable[[], float], log: Callable[[str], None],
           notify: Callable[[Switch], dict]) -> Switch | None:
    """Finish a switch a killed process left written down (under the loop's lock)."""
    s = Switch.load(v.journal)
    if s is not None:
        log(f"adapt-loop: finishing an interrupted switch ({s.event} {s.version})")
        apply(v, s, store, clock, log, notify)
    return s


def promotion(v: Versions, candidate: Path, reason: str, detail: dict | None = None) -> Switch:
    """The switch that puts `candidate` live and keeps the live version as previous."""
    live_dir = v.target(v.live)
    old_previous = v.target(v.previous)
    in_folder = candidate.resolve().parent == v.folder.resolve()
    to_dir = candidate.resolve() if in_folder else v.slot(version_of(candidate)).resolve()
    return Switch("promoted", version_of(candidate), version_of(live_dir), reason, str(to_dir), str(live_dir),
                  source=None if in_folder else str(candidate), detail=dict(detail or {}),
                  retire=[str(old_previous)] if old_previous and old_previous != to_dir else [])


def rollback(v: Versions, reason: str, detail: dict | None = None) -> Switch:
    """The switch that puts the previous version back and retires the live one."""
    back, live_dir = v.target(v.previous), v.target(v.live)
    if back is None or not back.is_dir():
        raise SwitchRefused(f"no previous version to roll back to ({v.previous} names none)")
    return Switch("rolled_back", version_of(live_dir), version_of(back), reason, str(back), None,
                  retire=[str(live_dir)], detail=dict(detail or {}))


def begin(v: Versions, s: Switch) -> None:
    """Write the switch down (nothing moved yet): from here on it is finished by whoever resumes."""
    s.save(v.journal)
    step_done()


def worker_serves(url: str, version: str, timeout_s: float = 5.0) -> bool:
    """Whether the worker's /metrics (`dialcheck_model_info`) names `version` as the one it serves."""
    import urllib.request

    with contextlib.suppress(OSError, ValueError):
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            text = r.read().decode()
        return any(ln.startswith("dialcheck_model_info{") and f'"{version}"' in ln and ln.rstrip().endswith(" 1.0")
                   for ln in text.splitlines())
    return False
