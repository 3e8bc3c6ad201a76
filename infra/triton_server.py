"""Start/stop the tritonserver bundled in nvidia-pytriton against our model repository.

One job: a reusable launcher (context manager) for `dialcheck serve-models`, tests and the
benchmark. Binds 127.0.0.1 on free ports, waits for readiness, stops cleanly. The launch recipe
(python backend + stub copied next to each other, interpreter LIBDIR on LD_LIBRARY_PATH, venv
first on PATH) is the one docs/local-stack.md ("Triton") explains.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Sequence

from streams.processes import die_with_parent, free_port
from schemas.errors import DialcheckError

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REPOSITORY = REPO_ROOT / "triton_models"


class TritonStartError(DialcheckError, RuntimeError):
    """tritonserver exited or did not become ready: the first line names the log's last line and the
    log file (the CLI's one line), the lines after it carry the log tail."""


def pytriton_root() -> Path:
    import pytriton

    return Path(pytriton.__file__).resolve().parent / "tritonserver"


def backend_directory() -> Path:
    """A backends/ dir holding the python backend with this interpreter's stub (copied once)."""
    ver = f"{sys.version_info.major}.{sys.version_info.minor}"
    target = Path(tempfile.gettempdir()) / f"dialcheck-triton-backends-py{ver}"
    stub = target / "python" / "triton_python_backend_stub"
    if stub.exists():
        return target
    root = pytriton_root()
    staging = Path(tempfile.mkdtemp(prefix="dialcheck-backends-"))
    shutil.copytree(root / "backends" / "python", staging / "python")
    shutil.copy2(root / "python_backend_stubs" / ver / "triton_python_backend_stub", staging / "python")
    try:
        staging.rename(target)
    except OSError:  # another process won the race
        shutil.rmtree(staging, ignore_errors=True)
    return target


def server_env() -> dict[str, str]:
    """LD_LIBRARY_PATH with the interpreter's LIBDIR (else the stub loads another libpython);
    this interpreter's bin first on PATH so the stub sees the venv's packages."""
    env = dict(os.environ)
    libs = [str(Path(pytriton_root()).parent.parent / "nvidia_pytriton.libs"), sysconfig.get_config_var("LIBDIR") or ""]
    env["LD_LIBRARY_PATH"] = ":".join([p for p in libs if p] + ([env["LD_LIBRARY_PATH"]] if env.get("LD_LIBRARY_PATH") else []))
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = ":".join([str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


class TritonServer:
    """A tritonserver process. `models` given: explicit model control, only those are loaded.
    Ports are kept across stop()/start() so clients can reconnect after a restart."""

    def __init__(self, model_repository: str | Path = DEFAULT_REPOSITORY, *, models: Sequence[str] | None = None,
                 http_port: int | None = None, grpc_port: int | None = None, host: str = "127.0.0.1",
                 log_path: str | Path | None = None, verbose: bool = False):
        self.model_repository = Path(model_repository).resolve()
        self.models = list(models) if models else None
        self.host = host
        self.http_port = http_port or free_port()
        self.grpc_port = grpc_port or free_port()
        self._own_log = log_path is None  # a temp log of ours is removed on __exit__
        if log_path:
            self.log_path = Path(log_path)
        else:
            fd, name = tempfile.mkstemp(prefix="tritonserver-", suffix=".log")
            os.close(fd)
            self.log_path = Path(name)
        self.verbose = verbose
        self.process: subprocess.Popen | None = None

    @property
    def grpc_url(self) -> str:
        return f"triton://{self.host}:{self.grpc_port}"

    @property
    def http_url(self) -> str:
        return f"triton+http://{self.host}:{self.http_port}"

    def command(self) -> list[str]:
        cmd = [str(pytriton_root() / "bin" / "tritonserver"), f"--model-repository={self.model_repository}",
               f"--backend-directory={backend_directory()}", f"--http-address={self.host}",
               f"--http-port={self.http_port}", f"--grpc-address={self.host}", f"--grpc-port={self.grpc_port}",
               "--allow-metrics=false", "--strict-readiness=true", "--exit-on-error=true"]
        if self.models:
            cmd.append("--model-control-mode=explicit")
            cmd += [f"--load-model={m}" for m in self.models]
        if self.verbose:
            cmd.append("--log-verbose=1")
        return cmd

    def start(self, timeout_s: float = 180.0) -> "TritonServer":
        if self.running:
            return self
        log = open(self.log_path, "ab")
        # Own session: stop() can signal the server and its python-backend stubs as one group.
        # SIGTERM when we die, even by SIGKILL: the server then stops its python-backend stubs itself
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=server_env(),
                                        start_new_session=True, cwd=str(REPO_ROOT), preexec_fn=die_with_parent())
        log.close()
        try:
            self.wait_ready(timeout_s)
        except BaseException:  # not ready, exited, or Ctrl-C while waiting: nothing left running
            self.stop()
            raise
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://{self.host}:{self.http_port}/v2/health/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running:
                raise self._start_error(f"tritonserver exited (rc={self.process.returncode if self.process else None})")
            if self.ready():
                return
            time.sleep(0.25)
        self.stop()
        raise self._start_error(f"tritonserver not ready after {timeout_s:.0f} s")

    def _start_error(self, what: str) -> TritonStartError:
        tail = self.log_tail()
        last = next((line.strip() for line in reversed(tail.splitlines()) if line.strip()), "no log output")
        return TritonStartError(f"{what}: {last[:200]} (log: {self.log_path})\n{tail}")

    def log_tail(self, n: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def _signal_group(self, sig: int) -> None:
        if self.process is None:
            return
        try:
            os.killpg(self.process.pid, sig)
        except ProcessLookupError:
            pass

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM to the server (it drains requests and stops its stubs); SIGKILL to the whole
        group after the grace period. The group is only signalled while its leader is unreaped,
        so the id cannot have been reused by someone else's processes."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal_group(signal.SIGKILL)
                self.process.wait()
        self.process = None

    def kill(self) -> None:
        """Crash the server (SIGKILL, whole group): outage simulation."""
        if self.process is not None:
            if self.process.poll() is None:
                self._signal_group(signal.SIGKILL)
            self.process.wait()
            self.process = None

    def __enter__(self) -> "TritonServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        if self._own_log:
            self.log_path.unlink(missing_ok=True)


def adapted_config(text: str, params: dict[str, str], note: str | None = None) -> str:
    """A config.pbtxt with the named `parameters` values replaced (appended when absent)."""
    import re

    for key, value in params.items():
        pattern = re.compile(r'(parameters \{ key: "' + re.escape(key) + r'"\s+value: \{ string_value: ")[^"]*(")')
        if pattern.search(text):
            text = pattern.sub(lambda m: m.group(1) + value + m.group(2), text)
        else:
            text += f'parameters {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'
    return (f"# Written for {note}.\n" if note else "") + text


def write_nli_repository(artifact: str | Path, repo: str | Path, with_embed: bool = True) -> Path:
    """A CPU python-backend model repository (the layout of triton_models/) serving another NLI
    artifact (e.g. one `dialcheck nli adopt` wrote) as model `nli`: the shipped config with the
    artifact's max length (calibration.json `max_length`) and, for an int8 artifact, one pass per
    request; the shipped python model (it tokenises with the artifact's own tokenizer/); the
    encoder model `embed` beside it (clients of `--models triton://` use both)."""
    import json

    artifact, repo = Path(artifact), Path(repo)
    cal = json.loads((artifact / "calibration.json").read_text())
    nli = repo / "nli"
    if nli.exists():
        shutil.rmtree(nli)
    version = nli / "1"
    version.mkdir(parents=True)
    shutil.copy2(DEFAULT_REPOSITORY / "nli" / "1" / "model.py", version / "model.py")
    for f in ("model.onnx", "calibration.json"):
        shutil.copy2(artifact / f, version / f)
    shutil.copytree(artifact / "tokenizer", version / "tokenizer")
    params = {"max_length": str(cal.get("max_length", 256))}
    if cal.get("quantization", {}).get("shipped") == "int8":
        params["merge_requests"] = "false"  # dynamic int8: per-pass activation scales
    (nli / "config.pbtxt").write_text(adapted_config((DEFAULT_REPOSITORY / "nli" / "config.pbtxt").read_text(),
                                                     params, f"NLI artifact {cal.get('version')} ({artifact.resolve()})"))
    if with_embed:
        if (repo / "embed").exists():
            shutil.rmtree(repo / "embed")
        shutil.copytree(DEFAULT_REPOSITORY / "embed", repo / "embed")
    return repo
