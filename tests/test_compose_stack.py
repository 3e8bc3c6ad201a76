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


def test_valid_against_compose_spec(compose):
    assert _errors(compose) == []


def test_schema_check_has_teeth(compose):
    broken = copy.deepcopy(compose)
    broken["services"]["triton"]["healthcheck"]["retries"] = "many"
    broken["services"]["worker"]["depends_on"]["triton"] = {"condition": "when_ready"}
    assert len(_errors(broken)) >= 2


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
    gpu = triton["deploy"]["resources"]["reservations"]["devices"][0]
    assert gpu["driver"] == "nvidia" and "gpu" in gpu["capabilities"]
    for name in ("kafka", "opensearch", "triton"):
        assert "healthcheck" in s[name], name
    deps = s["worker"]["depends_on"]
    assert deps["triton"]["condition"] == deps["opensearch"]["condition"] == "service_healthy"
    assert set(compose["volumes"]) >= {"kafka-data", "opensearch-data"}
    for path in ("infra/docker/triton.Dockerfile", "infra/docker/worker.Dockerfile"):
        assert (REPO / path).exists()


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
