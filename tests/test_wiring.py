"""The default checker is reached by name: an import walk from the worker command (what the AST of
each module imports, function-level imports included) arrives at the Pipeline, with no importlib
string in between (dialcheck/wiring.py imports it directly; importlib only for a user's --pipeline)."""
from __future__ import annotations

import pytest

from tests.test_layers import _graph

pytestmark = pytest.mark.unit


def test_the_worker_command_reaches_the_default_pipeline_by_imports():
    graph = _graph()
    reached, todo = set(), ["dialcheck.commands.stream"]
    while todo:
        for t in graph.get(todo.pop(), ()):
            if t not in reached:
                reached.add(t)
                todo.append(t)
    assert {"dialcheck.wiring", "workers.pipeline", "workers.building", "workers.stages"} <= reached


def test_load_checker_builds_the_pipeline_by_default(monkeypatch):
    """No --pipeline (or the default's own name): the Pipeline from the settings, at the asked
    protocol and surface (the settings' surface when none is asked); the models are not loaded here."""
    from dialcheck import wiring
    from schemas.settings import load_settings
    from workers.pipeline import Pipeline

    calls = []
    monkeypatch.setattr(Pipeline, "from_settings",
                        classmethod(lambda cls, settings, **kw: calls.append(kw) or "the pipeline"))
    s = load_settings(claims={"surface": "r4"})
    assert wiring.load_checker(s, None, protocol="fv") == "the pipeline"
    assert wiring.load_checker(s, wiring.DEFAULT_CHECKER, surface="r0") == "the pipeline"
    assert calls == [{"protocol": "fv", "surface": "r4"}, {"protocol": "e2e", "surface": "r0"}]


def test_surface_names_have_one_home():
    """The settings' choices and the CLI's check read schemas.protocols.SURFACES."""
    import typing

    from schemas.protocols import SURFACES
    from schemas.settings import ClaimSettings

    assert typing.get_args(ClaimSettings.model_fields["surface"].annotation) == SURFACES
