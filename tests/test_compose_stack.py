"""docker-compose.yml is a valid Compose file (JSON-schema check against the Compose
Specification schema vendored in tests/fixtures; no Docker engine here) and wires the stack
the way infra/README.md describes: KRaft Kafka, OpenSearch with k-NN, Triton on a GPU with our
model repository, workers configured only through declared DIALCHECK_* variables."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

SCHEMA = json.loads((REPO / "tests" / "fixtures" / "compose_spec.json").read_text())


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((REPO / "docker-compose.yml").read_text())


def _errors(doc: dict) -> list[str]:
    validator = jsonschema.Draft7Validator(SCHEMA)
    return [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(doc)]


@pytest.mark.unit
def test_valid_against_compose_spec(compose):
    assert _errors(compose) == []


@pytest.mark.unit
def test_schema_check_has_teeth(compose):
    broken = copy.deepcopy(compose)
    broken["services"]["triton"]["healthcheck"]["retries"] = "many"
    broken["services"]["worker"]["depends_on"]["triton"] = {"condition": "when_ready"}
    assert len(_errors(broken)) >= 2


@pytest.mark.unit
def test_stack_shape(compose):
    s = compose["services"]
    kafka = s["kafka"]["environment"]
    assert "controller" in kafka["KAFKA_PROCESS_ROLES"] and not any("ZOOKEEPER" in k for k in kafka)
    assert s["opensearch"]["image"].startswith("opensearchproject/opensearch:")
    triton = s["triton"]
    assert triton["build"]["args"]["TRITON_IMAGE"].startswith("nvcr.io/nvidia/tritonserver:")
    assert triton["build"]["args"]["TRITON_IMAGE"].endswith("-py3")
    assert "./triton_models:/models:ro" in triton["volumes"]
    assert "--model-repository=/models" in triton["command"]
    gpu = s["triton-gpu"]["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and "gpu" in gpu["capabilities"]
    for name in ("kafka", "opensearch", "triton"):
        assert "healthcheck" in s[name], name
    deps = s["worker"]["depends_on"]
    assert deps["triton"]["condition"] == deps["opensearch"]["condition"] == "service_healthy"
    assert set(compose["volumes"]) >= {"kafka-data", "opensearch-data"}
    for path in ("infra/docker/triton.Dockerfile", "infra/docker/worker.Dockerfile"):
        assert (REPO / path).exists()


@pytest.mark.unit
def test_worker_env_uses_declared_settings(compose):
    from schemas.settings import load_settings

    declared = set(load_settings().env())
    env = compose["services"]["worker"]["environment"]
    used = {k for k in env if k.startswith("DIALCHECK_")}
    assert used and used <= declared, used - declared
    assert env["DIALCHECK_MODELS"].startswith("triton://")
    assert env["DIALCHECK_SEARCH"] == "opensearch"
    readme = (REPO / "infra" / "README.md").read_text()
    for var in used:
        assert var in readme, f"{var} not documented in infra/README.md"


# --- commands that exist, images that install what they run, a scrape config that matches

import os
import re
import shlex
import shutil
import subprocess
import tomllib

from streams.processes import terminate

DOCKERFILE = REPO / "infra" / "docker" / "worker.Dockerfile"


def _dialcheck_services(compose: dict) -> dict[str, dict]:
    return {name: svc for name, svc in compose["services"].items() if str(svc.get("image", "")).startswith("dialcheck/worker")}


@pytest.mark.unit
def test_every_compose_command_is_a_real_cli_command(compose):
    """The worker once ran `dialcheck stream worker`, which the CLI rejects (and restarted forever)."""
    from dialcheck.cli import build_parser

    services = _dialcheck_services(compose)
    assert set(services) >= {"worker", "indexer"}
    for name, svc in services.items():
        cmd = svc["command"]
        assert cmd[0] == "dialcheck", name
        args = build_parser().parse_args(cmd[1:])  # SystemExit (argparse's error) fails the test
        assert callable(args.func), name


@pytest.mark.unit
def test_parser_check_has_teeth():
    from dialcheck.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["stream", "worker"])


@pytest.mark.unit
def test_documented_commands_parse():
    """Every `dialcheck ...` line in infra/README.md's code blocks is accepted by the CLI."""
    from dialcheck.cli import build_parser

    text = (REPO / "infra" / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    lines = [ln.split("#", 1)[0].strip() for b in blocks for ln in b.splitlines()]
    cmds = [shlex.split(ln)[1:] for ln in lines if ln.startswith("dialcheck ")]
    assert cmds
    for cmd in cmds:
        build_parser().parse_args([c for c in cmd if c != "..."])


@pytest.mark.unit
def test_prometheus_scrapes_the_worker_metrics_port(compose):
    env = compose["services"]["worker"]["environment"]
    port = int(env["DIALCHECK_METRICS_PORT"])
    prom = yaml.safe_load((REPO / "infra" / "prometheus.yml").read_text())
    job = next(j for j in prom["scrape_configs"] if j["job_name"] == "dialcheck-worker")
    assert job["metrics_path"] == "/metrics"
    sd = job["dns_sd_configs"][0]
    assert sd["names"] == ["worker"] and sd["port"] == port
    assert env["DIALCHECK_METRICS_HOST"] == "0.0.0.0"  # reachable from the prometheus container
    assert f"127.0.0.1:{port}/healthz" in " ".join(compose["services"]["worker"]["healthcheck"]["test"])
    assert "./infra/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in compose["services"]["prometheus"]["volumes"]


def _dockerfile() -> tuple[list[tuple[str, str]], str]:
    """(COPY source, destination) pairs and the RUN line of the worker image."""
    copies, run = [], ""
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY "):
            *srcs, dst = line.split()[1:]
            copies += [(src, dst) for src in srcs]
        elif line.startswith("RUN "):
            run = line[4:]
    return copies, run


@pytest.mark.unit
def test_worker_image_installs_declared_extras():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    copies, run = _dockerfile()
    sources = {src for src, _ in copies}
    assert {"pyproject.toml", "README.md"} <= sources, "pyproject names README.md: the build needs it"
    extras = re.search(r'"\.\[([a-z,]+)\]"', run).group(1).split(",")
    assert "infra/docker/install.sh" in run and extras == ["stream", "opensearch"]
    assert set(extras) <= set(project["optional-dependencies"])
    stream = " ".join(project["optional-dependencies"]["stream"])
    assert "faust-streaming" in stream and "prometheus-client" in stream
    assert not any(d.startswith("faust") for d in project["dependencies"])


@pytest.mark.broker
def test_image_install_steps_in_a_fresh_virtualenv(tmp_path):
    """The worker image's COPY and RUN steps, replayed without Docker: copy exactly what the
    Dockerfile copies, run its install script into a fresh virtualenv (no system site-packages;
    uv's wheel cache is reused, torch comes from pip's configured sources instead of the CPU
    index), then start the installed `dialcheck worker` on the embedded broker and ask /readyz.
    The worker runs the model-free stand-in Checker (tests/stream_standin.py, hidden --pipeline
    flag): the point is that the installed package and its extras run, not the models.
    Not run here: `docker build` itself, the python:3.11-slim base, USER 1000, the CPU torch index."""
    import urllib.request

    from schemas.settings import load_settings
    from streams.broker import EmbeddedBroker
    from streams.processes import free_port

    ctx = tmp_path / "ctx"
    copies, run = _dockerfile()
    for src, dst in copies:  # destinations are relative to WORKDIR (= ctx)
        if (REPO / src).is_dir():
            shutil.copytree(REPO / src, ctx / dst, dirs_exist_ok=True,
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target = ctx / dst / src if dst.endswith("/") else ctx / dst
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / src, target)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    cmd = run.split("sh infra/docker/install.sh", 1)[1].strip()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run(["sh", "infra/docker/install.sh", *shlex.split(cmd)], cwd=ctx, check=True,
                   env={**env, "PYTHON": str(py)})
    out = subprocess.run([str(venv / "bin" / "dialcheck"), "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("dialcheck ")
    # the stand-in Checker, importable as tests.stream_standin from a directory of its own
    standin = tmp_path / "standin"
    (standin / "tests").mkdir(parents=True)
    (standin / "tests" / "stream_standin.py").write_bytes((REPO / "tests" / "stream_standin.py").read_bytes())
    port = free_port()
    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as broker:
        log_path = tmp_path / "worker.log"
        settings = load_settings(kafka={"bootstrap": broker.bootstrap})
        child_env = {**env, **settings.env(), "PYTHONPATH": str(standin), "DIALCHECK_METRICS_PORT": str(port)}
        with open(log_path, "wb") as log:
            proc = subprocess.Popen([str(venv / "bin" / "dialcheck"), "worker", "--pipeline", "tests.stream_standin:create"],
                                    cwd=tmp_path, env=child_env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        try:
            import time

            from streams.app import READY_MARKER

            deadline = time.monotonic() + 180
            while READY_MARKER not in log_path.read_text(errors="replace"):
                assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
                assert time.monotonic() < deadline, log_path.read_text(errors="replace")[-3000:]
                time.sleep(0.3)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10) as r:
                assert r.status == 200
            installed = subprocess.run([str(py), "-c", "import streams, sys; print(streams.__file__)"],
                                       capture_output=True, text=True, check=True, env=env, cwd=tmp_path).stdout
            assert str(venv) in installed  # the installed package ran, not the checkout
        finally:
            terminate(proc, grace_s=30, kill_wait_s=None)


# --- a stack chat apps outside the compose network can reach, a GPU profile, a ui
# service, a build context without the virtualenv, and the same pins in the Triton image


def _listeners(value: str) -> dict[str, str]:
    """'NAME://host:port,...' → {NAME: 'host:port'}."""
    return dict(item.split("://", 1) for item in value.split(","))


@pytest.mark.unit
def test_kafka_has_an_external_listener_with_a_variable_address(compose):
    kafka = compose["services"]["kafka"]
    env = kafka["environment"]
    listeners, advertised = _listeners(env["KAFKA_LISTENERS"]), _listeners(env["KAFKA_ADVERTISED_LISTENERS"])
    protocols = dict(pair.split(":") for pair in env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].split(","))
    assert set(listeners) <= set(protocols), "every listener needs a security protocol"
    assert advertised["PLAINTEXT"] == "kafka:9092" == compose["x-dialcheck-env"]["DIALCHECK_KAFKA_BOOTSTRAP"]
    assert advertised["EXTERNAL"] == "${KAFKA_EXTERNAL_HOST:-localhost}:${KAFKA_EXTERNAL_PORT:-29092}"
    container_port = listeners["EXTERNAL"].rsplit(":", 1)[1]
    published = [p for p in kafka["ports"] if p.endswith(f":{container_port}")]
    assert published == ["${KAFKA_EXTERNAL_BIND:-127.0.0.1}:${KAFKA_EXTERNAL_PORT:-29092}:29092"]
    assert "9092" not in " ".join(kafka["ports"]).replace("29092", ""), "the internal listener stays internal"


@pytest.mark.unit
def test_gpu_profile_builds_and_mounts_the_gpu_repository(compose, tmp_path):
    s = compose["services"]
    assert "profiles" not in s["triton"] and s["triton-gpu"]["profiles"] == s["gpu-repository"]["profiles"] == ["gpu"]
    builder = s["gpu-repository"]
    script = builder["command"][1]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in builder["volumes"]}
    host_script = REPO / script.replace("/src/infra", mounts["/src/infra"].lstrip("./").rstrip("/") or "infra")
    assert host_script.resolve() == (REPO / "infra" / "make_gpu_repository.py").resolve()
    out_volume = mounts[builder["command"][2]]
    assert f"{out_volume}:/models:ro" in s["triton-gpu"]["volumes"] and out_volume in compose["volumes"]
    assert s["triton-gpu"]["depends_on"]["gpu-repository"]["condition"] == "service_completed_successfully"
    assert s["triton-gpu"]["command"] == s["triton"]["command"]
    assert "deploy" not in s["triton"], "the default Triton runs anywhere (KIND_CPU repository)"
    # what each mounts: the shipped repository is CPU-only, the built one puts the NLI ONNX on the GPU
    kinds = lambda root: {p.parent.name: re.findall(r"KIND_\w+", p.read_text()) for p in root.glob("*/config.pbtxt")}
    assert {k for ks in kinds(REPO / "triton_models").values() for k in ks} == {"KIND_CPU"}
    sys.path.insert(0, str(REPO / "infra"))
    from make_gpu_repository import make  # the builder's script, run for real (it copies files)

    built = kinds(make(tmp_path / "gpu-models"))
    assert "KIND_GPU" in built["nli_onnx"] and (tmp_path / "gpu-models" / "nli_onnx" / "1" / "model.onnx").exists()
    env = compose["x-dialcheck-env"]
    assert env["DIALCHECK_MODELS"] == "triton://${DIALCHECK_TRITON_HOST:-triton}:8001"


@pytest.mark.unit
def test_ui_service_serves_the_page_on_loopback(compose):
    from dialcheck.cli import build_parser

    ui = compose["services"]["ui"]
    args = build_parser().parse_args(ui["command"][1:])
    assert args.func.__module__ == "dialcheck.commands.ui"
    assert args.broker == compose["x-dialcheck-env"]["DIALCHECK_KAFKA_BOOTSTRAP"] and args.host == "0.0.0.0"
    assert ui["ports"] == [f"127.0.0.1:${{DIALCHECK_UI_HOST_PORT:-8765}}:{args.port}"]
    assert ui["depends_on"]["kafka-init"]["condition"] == "service_completed_successfully"


@pytest.mark.unit
def test_topic_partitions_agree(compose):
    init = " ".join(compose["services"]["kafka-init"]["command"])
    assert f"--partitions {compose['x-dialcheck-env']['DIALCHECK_TOPIC_PARTITIONS']} " in init


@pytest.mark.unit
def test_host_ports_are_unique_and_every_variable_has_a_default(compose):
    text = (REPO / "docker-compose.yml").read_text()
    body = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    bare = re.findall(r"\$\{(\w+)\}", body)
    assert not bare, f"variables without a default make `docker compose up` fail on a fresh host: {bare}"
    host_ports = [p.rsplit(":", 2)[-2] for svc in compose["services"].values() for p in svc.get("ports", [])]
    assert len(host_ports) == len(set(host_ports)), host_ports


def _dockerignore() -> list[str]:
    return [ln.strip().rstrip("/") for ln in (REPO / ".dockerignore").read_text().splitlines()
            if ln.strip() and not ln.startswith("#")]


def _ignored(path: str, patterns: list[str]) -> bool:
    import fnmatch

    parts = path.rstrip("/").split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(p, pat.removeprefix("**/")) for p in prefixes for pat in patterns)


@pytest.mark.unit
def test_dockerignore_keeps_the_virtualenv_out_and_every_copy_in():
    patterns = _dockerignore()
    for heavy in (".venv", ".git", "artifacts", "dialcheck.egg-info", "workers/__pycache__"):
        assert _ignored(heavy, patterns), heavy
    sources = []
    for dockerfile in (REPO / "infra" / "docker").glob("*.Dockerfile"):
        for line in dockerfile.read_text().splitlines():
            if line.startswith("COPY ") and "--from" not in line:
                sources += line.split()[1:-1]
    assert sources
    for src in sources:
        assert (REPO / src).exists() and not _ignored(src, patterns), src


@pytest.mark.unit
def test_triton_image_pins_match_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    ours = dict(d.split("==", 1) for d in project["dependencies"] if "==" in d)
    ours = {k.split("[")[0]: v for k, v in ours.items()}
    image = dict(re.findall(r'"([A-Za-z0-9_.-]+)==([^"]+)"', (REPO / "infra" / "docker" / "triton.Dockerfile").read_text()))
    assert image
    known = {"onnxruntime-gpu": "onnxruntime"}  # the GPU build of the same library: same major version
    for name, version in image.items():
        if name in known:
            assert version.split(".")[0] == ours[known[name]].split(".")[0], (name, version, ours[known[name]])
        else:
            assert ours.get(name) == version, (name, version, ours.get(name))


# --- the feedback store: a postgres service the workers share, its password never in the store's URL


@pytest.mark.unit
def test_postgres_service_holds_the_workers_feedback_store(compose):
    from psycopg.conninfo import conninfo_to_dict

    s = compose["services"]
    pg = s["postgres"]
    assert pg["image"] == "postgres:15" and "ports" not in pg, "the store stays on the compose network"
    assert "pg_isready" in " ".join(pg["healthcheck"]["test"])
    assert "postgres-data:/var/lib/postgresql/data" in pg["volumes"] and "postgres-data" in compose["volumes"]
    worker = s["worker"]
    assert worker["depends_on"]["postgres"]["condition"] == "service_healthy"
    env, pg_env = worker["environment"], pg["environment"]
    store = conninfo_to_dict(env["DIALCHECK_FEEDBACK_STORE"])  # libpq's own parser
    assert env["DIALCHECK_FEEDBACK_STORE"].startswith("postgresql://") and "password" not in store
    assert (store["host"], store["user"], store["dbname"]) == ("postgres", pg_env["POSTGRES_USER"], pg_env["POSTGRES_DB"])
    assert env["PGPASSWORD"] == pg_env["POSTGRES_PASSWORD"]  # one variable sets both
    assert re.fullmatch(r"\$\{DIALCHECK_POSTGRES_PASSWORD:-[^}]+\}", pg_env["POSTGRES_PASSWORD"])
    assert "DIALCHECK_POSTGRES_PASSWORD" in (REPO / "infra" / "README.md").read_text()


def test_the_workers_store_setting_and_pgpassword_log_in(compose, postgres_server, monkeypatch):
    """The worker's DIALCHECK_FEEDBACK_STORE with the password in PGPASSWORD, as the stack sets them,
    opens a real store: the same URL pointed at the test server (tests/pg.py: the same role name)."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    from streams.feedback_store import FeedbackStore, StoreUnavailable

    setting = compose["services"]["worker"]["environment"]["DIALCHECK_FEEDBACK_STORE"]
    dbname = conninfo_to_dict(setting)["dbname"]
    with psycopg.connect(postgres_server.url(), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (dbname,)).fetchone():
            conn.execute(f'CREATE DATABASE "{dbname}"')
    url = setting.replace("@postgres:5432/", f"@127.0.0.1:{postgres_server.port}/")
    assert url != setting
    monkeypatch.setenv("PGPASSWORD", postgres_server.password)
    with FeedbackStore(url) as st:
        assert st.counts()["feedback"] == 0 and st.public_url == url.replace("dialcheck@", "***@")
    monkeypatch.setenv("PGPASSWORD", "not-the-password")
    with pytest.raises(StoreUnavailable, match="password authentication failed"):
        FeedbackStore(url)
