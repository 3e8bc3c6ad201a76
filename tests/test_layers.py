"""The house's floors: schemas/ (contracts) ← workers/ (NLP stages) and streams/ (Kafka wiring)
← lab/ (the offline half: training, tuning, evaluation) ← dialcheck/ (CLI).

An import from a lower floor to a higher one would let Kafka wiring, NLP code and lab code grow
into each other again; an import circle between two modules (anywhere, inside a package too)
makes the import order matter. This test reads every import (module level and inside functions,
absolute and relative) with `ast`, module by module, so it fails on the first such line."""
from __future__ import annotations

import ast
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "workers", "streams", "lab", "dialcheck")
# what each package may import from the project (besides itself)
ALLOWED = {"schemas": set(), "workers": {"schemas"}, "streams": {"schemas"}, "lab": {"schemas", "workers"},
           "dialcheck": {"schemas", "workers", "streams", "lab"}}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py")}


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, project module) for every import in the file; `from pkg import name` names the
    submodule pkg.name where there is one, else pkg."""
    mods = _modules()
    me = _module_name(path)
    package = me.split(".") if path.name == "__init__.py" else me.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            mod = ".".join(base + (node.module.split(".") if node.module else []))
            targets = [f"{mod}.{a.name}" if f"{mod}.{a.name}" in mods else mod for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in mods and t != me:
                out.append((node.lineno, t))
    return out


def _graph() -> dict[str, set[str]]:
    return {m: {t for _, t in _imports(p)} for m, p in _modules().items()}


def test_no_import_from_a_lower_floor_to_a_higher_one():
    bad = []
    for mod, path in _modules().items():
        package = mod.split(".")[0]
        for line, target in _imports(path):
            top = target.split(".")[0]
            if top != package and top not in ALLOWED[package]:
                bad.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each a circle."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_circles_anywhere():
    """Module by module over every package: a circle inside one package fails too."""
    cycles = _cycles(_graph())
    assert not cycles, "\n".join(" ↔ ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_serving_does_not_import_training():
    """Serving (workers/models) needs the NLIModel contract (schemas/protocols.py), never lab/."""
    graph = _graph()
    assert not [t for m, ts in graph.items() if m.startswith("workers.models") for t in ts if t.startswith("lab")]


def test_the_runtime_loads_no_lab_module():
    """Importing the pipeline and the stream app loads nothing of lab/ (the runtime stands without the lab)."""
    code = ("import workers.pipeline, streams.app, sys; "
            "print([m for m in sys.modules if m == 'lab' or m.startswith('lab.')])")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]", out.stdout


def test_no_stage_stands_above_the_verdict():
    """The stages (workers/stages.py, workers/state.py, workers/llm/) read the claim's Decision; none
    reaches the verdict renderer (workers/verdict.py) or the runner, even through another module:
    a stage importing the renderer would stand llm/ above verdict.py again."""
    graph = _graph()
    stages = [m for m in graph if m in ("workers.stages", "workers.state") or m.startswith("workers.llm")]
    reached, todo = set(), list(stages)
    while todo:
        for t in graph.get(todo.pop(), ()):
            if t not in reached:
                reached.add(t)
                todo.append(t)
    assert stages and not reached & {"workers.verdict", "workers.pipeline"}
