"""The house's floors: schemas/ (contracts) ← workers/ (NLP stages) and streams/ (Kafka wiring) ← dialcheck/ (CLI).

An import from a lower floor to a higher one, or from streams/ into workers/, would let Kafka
wiring and NLP code grow into each other again; this test reads every import (module level and
inside functions) with `ast`, so it fails on the first such line."""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("schemas", "workers", "streams", "dialcheck")
# what each package may import from the project (besides itself)
ALLOWED = {"schemas": set(), "workers": {"schemas"}, "streams": {"schemas"},
           "dialcheck": {"schemas", "workers", "streams"}}


def _project_imports(path: Path, package: str) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out += [(node.lineno, n.split(".")[0]) for n in names if n.split(".")[0] in PACKAGES]
    return out


def test_no_import_from_a_lower_floor_to_a_higher_one():
    bad = []
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            for line, target in _project_imports(path, package):
                if target != package and target not in ALLOWED[package]:
                    bad.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not bad, "\n".join(bad)


def test_layering_has_no_cycles():
    edges = {p: set() for p in PACKAGES}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            edges[package] |= {t for _, t in _project_imports(path, package) if t != package}

    def reaches(a, b, seen=()):
        return any(n == b or (n not in seen and reaches(n, b, (*seen, n))) for n in edges[a])

    assert not [p for p in PACKAGES if reaches(p, p)]


def _workers_graph() -> dict[str, set[str]]:
    """workers' own units (a top-level module or a subpackage, e.g. workers.decision) → the units
    they import (module level and inside functions, absolute and relative)."""
    graph: dict[str, set[str]] = {}
    root = REPO / "workers"
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).with_suffix("").parts
        unit = f"workers.{rel[0]}"
        package = ["workers", *rel[:-1]] if rel[-1] != "__init__" else ["workers", *rel[:-1]]
        targets = graph.setdefault(unit, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package[: len(package) - node.level + 1]
                    mod = base + (node.module.split(".") if node.module else [])
                    names = [".".join(mod)] if node.module else [".".join(mod + [a.name]) for a in node.names]
                else:
                    names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                parts = name.split(".")
                if parts[0] == "workers" and len(parts) > 1 and f"workers.{parts[1]}" != unit:
                    targets.add(f"workers.{parts[1]}")
    return graph


def test_no_import_circles_inside_workers():
    graph = _workers_graph()
    cycles = []

    def visit(node, stack):
        for nxt in sorted(graph.get(node, ())):
            if nxt in stack:
                cycles.append(" → ".join(stack[stack.index(nxt):] + [nxt]))
            elif len(stack) < len(graph):
                visit(nxt, stack + [nxt])

    for start in graph:
        visit(start, [start])
    assert not cycles, "\n".join(sorted(set(cycles))[:20])


def test_models_do_not_import_the_training_package():
    """Serving (workers/models) needs the NLIModel contract (schemas/protocols.py), never the
    training code in workers/nli."""
    assert "workers.nli" not in _workers_graph().get("workers.models", set())
