"""The worker's pid file (`DIALCHECK_PID_FILE`, `dialcheck worker --pid-file`): what `dialcheck
adapt-loop --pid-file` signals. Written atomically, removed only by the process that wrote it. The
running worker writes it once ready and removes it when stopped (tests/test_adapt_loop.py)."""
from __future__ import annotations

import os

import pytest

from streams.reload import remove_pid_file, write_pid_file

pytestmark = pytest.mark.unit


def test_written_with_this_pid_and_removed_by_it(tmp_path):
    path = tmp_path / "run" / "worker.pid"
    write_pid_file(str(path))
    assert path.read_text() == f"{os.getpid()}\n" and [p.name for p in path.parent.iterdir()] == ["worker.pid"]
    remove_pid_file(str(path))
    assert not path.exists()


def test_another_processs_pid_file_is_left_alone(tmp_path):
    path = tmp_path / "worker.pid"
    path.write_text("1\n")  # a newer worker wrote its own since
    remove_pid_file(str(path))
    assert path.read_text() == "1\n"
    remove_pid_file(str(tmp_path / "never-written.pid"))  # nothing there: nothing to do
    write_pid_file("")  # off by default: writes nothing
    assert sorted(p.name for p in tmp_path.iterdir()) == ["worker.pid"]


def test_the_worker_command_takes_the_option():
    from dialcheck.cli import build_parser

    args = build_parser().parse_args(["worker", "--pid-file", "/run/dialcheck.pid"])
    assert args.pid_file == "/run/dialcheck.pid"
