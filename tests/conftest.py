"""Shared fixtures: real models and real DialFact records, loaded once per session."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Bytecode: where the environment sets PYTHONDONTWRITEBYTECODE (this machine's does) and the packages
# came from uv (which writes no .pyc), every Python process a test starts (CLI runs, workers, examples:
# ~150 a run) compiled every module it imports from source again: measured at load 5, +1.1 s for the
# stream imports alone, +3.5 to 7 s for `dialcheck check`. The session's processes share one bytecode
# cache in a temporary directory instead (nothing is written into the checkout or .venv); removed at exit.
if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
    import atexit
    import shutil
    import tempfile

    _pycache = tempfile.mkdtemp(prefix="dialcheck-tests-pycache-")
    atexit.register(shutil.rmtree, _pycache, ignore_errors=True)
    del os.environ["PYTHONDONTWRITEBYTECODE"]
    os.environ["PYTHONPYCACHEPREFIX"] = sys.pycache_prefix = _pycache
    sys.dont_write_bytecode = False

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# The shared test index is the benchmark passages only: with the starter knowledge base (~12k more
# passages) a clean CI run would spend most of its time encoding them; tests/test_starter_kb.py
# builds its own small starter index, and the first-run time is measured in docs/results.md.
os.environ.setdefault("DIALCHECK_STARTER_KB", "0")

REPO = Path(__file__).resolve().parent.parent
# ...and it lives in a directory of its own: the tests never rebuild the user's artifacts/index (with
# the starter base) into this smaller one, and the next `dialcheck demo` never has to rebuild it back
os.environ.setdefault("DIALCHECK_INDEX_DIR", str(REPO / "artifacts" / "test-index"))
HEAVY_MARKS = ("data", "model", "broker", "postgres")
# a test that asks for one of these fixtures gets the mark, whatever its module says
FIXTURE_MARKS = {"data_dir": "data", "dialfact_records": "data", "index_dir": "model", "nli": "model",
                 "encoder": "model", "broker": "broker", "fresh_broker": "broker", "broker_settings": "broker",
                 "start_worker": "broker", "served": "data", "mirror": "data",  # mirrors serve copies of real data
                 "postgres_server": "postgres", "postgres_url": "postgres"}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """A module's `pytestmark = pytest.mark.unit` means its tests that are not marked data, model or
    broker: a test that reads a data set, loads a real model or starts a broker is never `unit`, so
    `pytest -m unit` runs on a fresh clone with no data folder. A test that asks for a data, model or
    broker fixture (FIXTURE_MARKS) gets that mark. Runs before `-m` selects."""
    import collections

    heavy = set()
    for item in items:
        for fixture in getattr(item, "fixturenames", ()):
            if fixture in FIXTURE_MARKS and not item.get_closest_marker(FIXTURE_MARKS[fixture]):
                item.add_marker(FIXTURE_MARKS[fixture])
        if any(item.get_closest_marker(h) for h in HEAVY_MARKS):
            heavy.add(item)
    below = collections.defaultdict(list)  # module / class node -> its test items
    for item in items:
        for node in item.listchain()[:-1]:
            below[node].append(item)
    for item in heavy:
        for node in item.listchain():
            if not any(m.name == "unit" for m in node.own_markers):
                continue
            node.own_markers[:] = [m for m in node.own_markers if m.name != "unit"]
            for other in below.get(node, ()):  # the node's other tests keep their unit mark, on themselves
                if other not in heavy and not any(m.name == "unit" for m in other.own_markers):
                    other.add_marker(pytest.mark.unit)


@pytest.fixture(scope="session")
def settings():
    from schemas.settings import load_settings

    return load_settings()


@pytest.fixture(scope="session")
def data_dir(settings) -> Path:
    d = Path(settings.data.dir)
    assert Path(settings.data.dialfact_sample).exists(), f"shared data not found at {d} (set DIALCHECK_DATA_DIR)"
    return d


@pytest.fixture(scope="session")
def dialfact_records(data_dir):
    from schemas.items import load_dialfact

    return load_dialfact(data_dir / "dialfact" / "testsmall.jsonl")


@pytest.fixture(scope="session")
def nli(settings):
    from workers.models.onnx_nli import load_local_nli

    return load_local_nli(settings.models.nli_model_dir)


@pytest.fixture(scope="session")
def encoder(settings):
    from workers.models.encoders import load_local_encoder

    return load_local_encoder(settings.models.encoder)


@pytest.fixture(scope="session")
def index_dir(settings, encoder, data_dir):
    """The real default index (its sources and encoder) in the tests' own directory (DIALCHECK_INDEX_DIR
    above), built once if missing and then shared with the stream tests and the demo, which load it too."""
    from workers.retrieval.build import ensure_index

    ensure_index(settings, encoder)
    return Path(settings.retrieval.index_dir)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A real embedded Tansu broker per test module (stopped on every exit path)."""
    from streams.broker import EmbeddedBroker

    with EmbeddedBroker(log_path=str(tmp_path_factory.mktemp("broker") / "tansu.log")) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path):
    """A broker of the test's own, so a rerun starts from empty topics and groups."""
    from streams.broker import EmbeddedBroker

    with EmbeddedBroker(log_path=str(tmp_path / "tansu.log")) as b:
        yield b


@pytest.fixture(scope="module")
def broker_settings(broker):
    """A factory: `broker_settings(stream={...}, ...)` is load_settings(...) pointed at this module's
    broker (kafka.bootstrap; other kafka keys may be given), with its topics created. A module names
    what it builds from it (e.g. `stream_settings`): never `settings`, the session's plain settings."""
    from schemas.settings import load_settings
    from streams.topics import ensure_topics

    def make(**sections):
        kafka = {"bootstrap": broker.bootstrap, **sections.pop("kafka", {})}
        s = load_settings(kafka=kafka, **sections)
        ensure_topics(s)
        return s

    return make


@pytest.fixture(scope="module")
def start_worker(tmp_path_factory):
    """A factory: `start_worker(settings, pipeline, env=None, ready_timeout_s=180, args=())` starts a real
    `dialcheck worker --pipeline PIPELINE` child (streams.worker.WorkerProcess, its log in a temp dir),
    waits until it is ready and returns it; every worker started is stopped when the module ends."""
    from contextlib import ExitStack

    from streams.worker import WorkerProcess

    with ExitStack() as stack:
        def start(settings, pipeline: str, env: dict[str, str] | None = None, ready_timeout_s: float = 180.0,
                  args: tuple[str, ...] = ()):
            w = stack.enter_context(WorkerProcess(settings, tmp_path_factory.mktemp("worker") / "worker.log",
                                                  extra_args=["--pipeline", pipeline, *args], env=env))
            w.wait_ready(timeout_s=ready_timeout_s)
            return w

        yield start


# -- PostgreSQL: one real server per session (tests/pg.py), a fresh database per test ---------------
@pytest.fixture(scope="session")
def postgres_server():
    """Debian's PostgreSQL in a temporary directory on a free loopback port, for the whole session."""
    from tests.pg import PostgresServer

    with PostgresServer() as server:
        yield server


@pytest.fixture
def postgres_url(postgres_server) -> str:
    """A new, empty database on the session's server: its postgresql:// URL (password included)."""
    return postgres_server.database()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def feedback_store_url(request, tmp_path) -> str:
    """The feedback store's setting on each backend: a SQLite file in tmp_path, then a fresh database
    on the session's PostgreSQL server (started only when a test asks for this one)."""
    if request.param == "sqlite":
        return str(tmp_path / "feedback.sqlite3")
    return request.getfixturevalue("postgres_url")
