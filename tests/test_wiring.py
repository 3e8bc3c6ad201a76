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


def test_load_checker_imports_the_pipeline_itself():
    """The edge into the Pipeline is load_checker's own import, not a string handed to importlib."""
    import ast
    import inspect

    from dialcheck import wiring

    tree = ast.parse(inspect.getsource(wiring.load_checker))
    imported = {(n.module, a.name) for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert ("workers.pipeline", "Pipeline") in imported


def test_surface_names_have_one_home():
    """The settings' choices and the CLI's check read schemas.protocols.SURFACES."""
    import typing

    from schemas.protocols import SURFACES
    from schemas.settings import ClaimSettings

    assert typing.get_args(ClaimSettings.model_fields["surface"].annotation) == SURFACES
