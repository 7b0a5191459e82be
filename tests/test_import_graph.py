"""The package's imports run one way: from the plugin down to the pure modules, no circles.

Every ``import`` and ``from ... import`` of the package's own modules counts,
also those inside functions (a lazy import is still an arrow). Run as a script,
it prints the module map: each module with the package modules it imports.

    python tests/test_import_graph.py
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

PACKAGE = "pytest_modelsweep"
ROOT = Path(__file__).resolve().parents[1] / PACKAGE

# The floors, top first: a module may import its own floor and the floors below it, never one
# above. The package's top level holds only __init__ (the public names, from api/) and the two
# entry points, plugin.py (pytest) and cli.py (the modelsweep command).
FLOORS = ("pytest", "report", "judging", "workloads", "scoring", "data", "serving", "client",
          "store", "api", "core")
ENTRY_POINTS = ("plugin", "cli")
# Only the pytest layer (and the plugin entry point) may import pytest.
PYTEST_LAYER = ("pytest", "plugin")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imported_names(path: Path, known: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """The package modules ``path`` imports, with the line of each import."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE):
                    yield _existing(alias.name, known), node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith(PACKAGE):
                continue
            for alias in node.names:
                child = f"{target}.{alias.name}"
                yield (child if child in known else _existing(target, known)), node.lineno


def _existing(name: str, known: dict[str, Path]) -> str:
    while name not in known and "." in name:
        name = name.rpartition(".")[0]
    return name


def import_graph() -> dict[str, set[str]]:
    known = modules()
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for target, _ in imported_names(path, known):
            if target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_import_circles() -> None:
    graph = import_graph()
    assert len(graph) > 30, "the package's modules were not found"
    assert cycles(graph) == []


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the package's floors: ``serving.pool`` counts as ``serving``."""
    def floor(name: str) -> str:
        return ".".join(name.split(".")[:2])

    floors: dict[str, set[str]] = {}
    for name, targets in graph.items():
        floors.setdefault(floor(name), set()).update(
            floor(t) for t in targets if floor(t) != floor(name))
    return floors


def test_no_circles_between_subpackages() -> None:
    """E.g. ``workloads`` and ``scoring`` must not import each other, whichever modules do it."""
    floors = package_graph(import_graph())
    assert f"{PACKAGE}.workloads" in floors and f"{PACKAGE}.scoring" in floors
    assert cycles(floors) == []


def test_the_cycle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def floor_of(name: str) -> str:
    """``pytest_modelsweep.serving.pool`` -> ``serving``; the package itself -> ``""``."""
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_top_level_holds_only_the_entry_points() -> None:
    top = sorted(floor_of(name) for name, path in modules().items()
                 if path.parent == ROOT and path.name != "__init__.py")
    assert top == sorted(ENTRY_POINTS)
    assert sorted(p.name for p in ROOT.iterdir()
                  if p.is_dir() and (p / "__init__.py").exists()) == sorted(FLOORS)


def test_no_floor_imports_a_floor_above_it() -> None:
    rank = {floor: i for i, floor in enumerate(FLOORS)}
    offenders = []
    for name, targets in import_graph().items():
        here = floor_of(name)
        if here not in rank:
            continue
        for target in targets:
            there = floor_of(target)
            if there in ENTRY_POINTS or there == "" and target != name:
                offenders.append(f"{name} imports {target} (an entry point above every floor)")
            elif there in rank and rank[there] < rank[here]:
                offenders.append(f"{name} ({here}) imports {target} ({there}, a floor above)")
    assert offenders == []


def test_only_the_pytest_layer_imports_pytest() -> None:
    offenders = []
    for name, path in modules().items():
        if floor_of(name) in PYTEST_LAYER:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""])
                if any(n == "pytest" or n.startswith(("pytest.", "_pytest", "xdist", "pytest_html"))
                       for n in names):
                    offenders.append(f"{name}:{node.lineno} imports {names[0]}")
    assert offenders == []


def test_the_plugin_and_fixtures_do_not_import_each_other() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.plugin" not in graph[f"{PACKAGE}.pytest.fixtures"]
    assert f"{PACKAGE}.pytest.fixtures" not in graph[f"{PACKAGE}.pytest.context"]
    assert f"{PACKAGE}.plugin" not in graph[f"{PACKAGE}.pytest.context"]


def module_map() -> list[str]:
    """The floors, top first, each with its modules and what each imports: what
    docs/architecture.md shows (a test keeps the two the same)."""
    graph = import_graph()
    lines = []
    for floor in (*ENTRY_POINTS, *FLOORS):
        names = sorted(n for n in graph if floor_of(n) == floor)
        for name in names:
            short = sorted(t.removeprefix(f"{PACKAGE}.") for t in graph[name])
            lines.append(f"{name.removeprefix(PACKAGE + '.'):28s} -> {', '.join(short) or '-'}")
    return lines


if __name__ == "__main__":
    print("\n".join(module_map()))
    found = cycles(import_graph())
    print("circles:", found or "none")
    sys.exit(1 if found else 0)
