"""infra/git-hooks/commit-msg as git runs it: real commits in a throw-away repository with
core.hooksPath pointing at the hook (what infra/setup.sh sets for contributors)."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

HOOKS = Path(__file__).resolve().parent.parent / "infra" / "git-hooks"


@pytest.fixture
def repo(tmp_path):
    def git(*args, check=True):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=check)

    git("init", "-q")
    for key, value in (("user.name", "t"), ("user.email", "t@example.invalid"), ("core.hooksPath", str(HOOKS))):
        git("config", key, value)
    (tmp_path / "README.md").write_text("start\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "Start")
    return tmp_path, git


def commit(repo, files: dict[str, str], message: str) -> subprocess.CompletedProcess:
    root, git = repo
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
        git("add", name)
    return git("commit", "-q", "-m", message, check=False)


def test_code_without_a_body_is_refused_and_with_one_taken(repo):
    bare = commit(repo, {"workers/rule.py": "X = 1\n"}, "Change the rule")
    assert bare.returncode != 0
    assert "changes code that runs (workers/rule.py): add a body saying why" in bare.stderr
    told = commit(repo, {}, "Change the rule\n\nWhy: the old level let off-topic windows refute.")
    assert told.returncode == 0, told.stderr


def test_tests_and_docs_alone_need_no_body(repo):
    done = commit(repo, {"tests/test_rule.py": "def test(): pass\n", "docs/rule.md": "# Rule\n",
                         "workers/README.md": "notes\n"}, "Test and document the rule")
    assert done.returncode == 0, done.stderr


def test_a_long_subject_is_refused_whatever_it_changes(repo):
    subject = "Describe " + "x" * 64  # 73 characters
    long = commit(repo, {"docs/a.md": "a\n"}, subject)
    assert long.returncode != 0 and "the subject is 73 characters; keep it to 72" in long.stderr
    assert commit(repo, {}, subject[:72]).returncode == 0


def test_the_body_follows_one_blank_line(repo):
    glued = commit(repo, {"streams/x.py": "Y = 2\n"}, "Change x\nbecause y")
    assert glued.returncode != 0 and "one blank line between the subject and the body" in glued.stderr
