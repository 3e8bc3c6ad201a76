"""Every file a worker reads that a command replaces in place is written beside and renamed
(schemas/atomic.py): a reader holding the old file keeps reading it whole, a failed write leaves
the old file and no litter. One test per writer in docs/operations.md's "Files replaced in place"."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable

import pytest

from schemas.atomic import replaced
from schemas.settings import REPO_ROOT

pytestmark = pytest.mark.unit


def assert_replaced(path: Path, write: Callable[[], None]) -> None:
    """`write` replaced `path` by a new file (a rename): an open reader still reads the old bytes,
    and nothing is left beside it."""
    before = set(path.parent.iterdir())
    with open(path, "rb") as reader:
        old = path.read_bytes()
        write()
        assert reader.read() == old  # the old inode, whole: the new one was renamed over the name
    assert path.read_bytes() != old
    assert set(path.parent.iterdir()) == before  # no dot file left


def test_a_failed_write_leaves_the_old_file_and_no_litter(tmp_path):
    target = tmp_path / "display.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with replaced(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed half way")
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


def test_a_decision_file_is_replaced_not_overwritten(tmp_path):
    from workers.decision import load_decision
    from schemas.settings import load_settings

    path = tmp_path / "decision.json"
    path.write_text((REPO_ROOT / "workers/decision/params/decision.json").read_text())
    decision = load_decision(load_settings(decision={"decision_params": str(path)}).decision)
    decision.meta["note"] = "refitted"
    assert_replaced(path, lambda: decision.save(path))
    assert json.loads(path.read_text())["meta"]["note"] == "refitted"


def test_a_display_file_is_replaced_not_overwritten(tmp_path):
    from lab.tuning.calibrate import write_display
    from workers.display.policy import DisplayPolicy

    path = tmp_path / "display.json"
    path.write_text((REPO_ROOT / "workers/display/params/display.json").read_text())
    assert_replaced(path, lambda: write_display(path, DisplayPolicy.load(path), {"target": 0.9}))
    assert json.loads(path.read_text())["certified"] == {"target": 0.9}


def test_the_pid_file_is_replaced_not_overwritten(tmp_path):
    from streams.reload import write_pid_file

    path = tmp_path / "worker.pid"
    path.write_text("1\n")
    assert_replaced(path, lambda: write_pid_file(str(path)))
    assert path.read_text() == f"{os.getpid()}\n"


def test_an_index_rebuild_is_swapped_in_whole(tmp_path):
    """`dialcheck index build` over an existing index (workers/retrieval/build.py): built in a dot
    folder and swapped in; a reader holding the old index's files keeps them whole, nothing is left."""
    from schemas.settings import load_settings
    from workers.retrieval.build import build_index

    corpus = tmp_path / "corpus.tsv"
    corpus.write_text("p1\tParis\tParis is the capital of France.\n")
    index = tmp_path / "index"
    build = lambda: build_index(load_settings(), index, sources=[], tsv=str(corpus), with_vectors=False,  # noqa: E731
                                progress=False)
    build()
    corpus.write_text("p1\tParis\tParis is the capital of France.\np2\tRome\tRome is the capital of Italy.\n")
    assert_replaced(index / "passages.jsonl", build)
    assert "Rome" in (index / "passages.jsonl").read_text() and sorted(p.name for p in tmp_path.iterdir()) == \
        ["corpus.tsv", "index"]
