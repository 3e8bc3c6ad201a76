"""Fail fast: a path or directory setting that cannot be used is one `dialcheck:` line and exit 2 when
the settings load, before any model loads (schemas/settings: `creatable_path`, `model_dir_complete`);
a missing folder is never made (it was made at the filesystem root), and a model directory's
missing files are named instead of a tokenizer traceback."""
from __future__ import annotations

from pathlib import Path

import pytest

pytestmark = pytest.mark.unit


def cases(tmp_path: Path) -> list[tuple[str, str, str]]:
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "empty-model").mkdir()
    (tmp_path / "no-tokenizer").mkdir()
    (tmp_path / "no-tokenizer" / "model.onnx").write_bytes(b"")
    return [
        ("DIALCHECK_FEEDBACK_STORE", str(tmp_path / "missing" / "dir" / "fb.sqlite3"), "no such directory"),
        ("DIALCHECK_FEEDBACK_STORE", str(tmp_path / "a-file" / "fb.sqlite3"), "is not a directory"),
        ("DIALCHECK_FEEDBACK_STORE", str(tmp_path), "not a file"),
        ("DIALCHECK_PID_FILE", str(tmp_path / "missing" / "worker.pid"), "no such directory"),
        ("DIALCHECK_STATE_DIR", str(tmp_path / "missing" / "state"), "no such directory"),
        ("DIALCHECK_STATE_DIR", str(tmp_path / "a-file"), "not a directory"),
        ("DIALCHECK_NLI_MODEL_DIR", str(tmp_path / "empty-model"), "holds no model.onnx"),
        ("DIALCHECK_NLI_MODEL_DIR", str(tmp_path / "no-tokenizer"), "has model.onnx but no tokenizer"),
        ("DIALCHECK_KAFKA_SSL_CAFILE", str(tmp_path / "missing" / "ca.pem"), "no such file"),
    ]


@pytest.mark.parametrize("n", range(9))
def test_an_unusable_path_setting_is_one_line_before_anything_loads(tmp_path, monkeypatch, capsys, n):
    from dialcheck.cli import main

    name, value, says = cases(tmp_path)[n]
    monkeypatch.setenv(name, value)
    rc = main(["worker"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith(f"dialcheck: invalid setting {name}: "), err
    assert says in err[0], err
    assert not (tmp_path / "missing").exists()  # never made


def test_a_folder_that_exists_is_fine_and_nothing_is_made_in_it(tmp_path, monkeypatch):
    from schemas.settings import load_settings

    monkeypatch.setenv("DIALCHECK_FEEDBACK_STORE", str(tmp_path / "fb.sqlite3"))
    monkeypatch.setenv("DIALCHECK_PID_FILE", str(tmp_path / "worker.pid"))
    monkeypatch.setenv("DIALCHECK_STATE_DIR", str(tmp_path / "state"))
    s = load_settings()
    assert s.stream.feedback_store == str(tmp_path / "fb.sqlite3") and list(tmp_path.iterdir()) == []
