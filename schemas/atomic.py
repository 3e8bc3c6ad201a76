"""Files replaced in place are written beside and renamed: a reader (a worker restarting, a SIGHUP
reload, a second command) sees the old file or the new one, never a half-written one, and a crash
leaves at most a dot file beside it. One helper so every writer does it the same way (the audit
table in docs/operations.md "Files replaced in place")."""
from __future__ import annotations

import contextlib
import os
import uuid
from pathlib import Path
from typing import Iterator


def beside(path: str | Path) -> Path:
    """A fresh dot name in `path`'s folder (same file system, so the rename is atomic)."""
    p = Path(path)
    return p.with_name(f".{p.name}.{os.getpid()}-{uuid.uuid4().hex[:6]}.tmp")


@contextlib.contextmanager
def replaced(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path` to write (a file or a directory); on success it is renamed
    over `path`, on failure removed. A directory over a directory takes two renames (the old one
    moved aside, then the new one in: rename cannot replace a non-empty directory), so a reader may
    find none for that instant; a model directory a worker reads is switched by symlink instead
    (dialcheck/model_switch.py). Why a context: writers that take a path (ONNX, an index) use it too."""
    import shutil

    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = beside(target)
    try:
        yield tmp
        if tmp.is_dir() and target.is_dir() and not target.is_symlink():
            old = beside(target)
            target.rename(old)  # a directory cannot be renamed over a non-empty one
            tmp.rename(target)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, target)
    except BaseException:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            tmp.unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> None:
    """`path` replaced by `text` in one rename."""
    with replaced(path) as tmp:
        tmp.write_text(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    """`path` replaced by `data` in one rename."""
    with replaced(path) as tmp:
        tmp.write_bytes(data)
