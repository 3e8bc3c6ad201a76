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
