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

# Modules that must never import pytest: libraries the CLI uses too.
PURE = ("scoring", "stats", "client", "records", "store", "comparisons", "metrics", "sweep",
        "evaluation", "results", "gate", "pairing", "workloads", "serving", "modelids",
        "report.decision", "settings", "slo", "cost")


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


def test_pure_modules_import_no_pytest_and_nothing_of_the_plugin_layer() -> None:
    glue = {f"{PACKAGE}.{name}" for name in ("plugin", "fixtures", "context", "state")}
    offenders = []
    for name, path in modules().items():
        short = name.removeprefix(f"{PACKAGE}.")
        if not any(short == pure or short.startswith(pure + ".") for pure in PURE):
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if any(n == "pytest" or n.startswith(("pytest.", "_pytest")) for n in names):
                    offenders.append(f"{name}:{node.lineno} imports pytest")
        offenders += [f"{name} imports {target}" for target in import_graph()[name] & glue]
    assert offenders == []


# The ground floor: plain records and the transport. Nothing here may import a floor above
# (serving/, workloads/, scoring/, report/, the plugin layer).
GROUND_FLOOR = ("records", "errors", "secrets", "breaker", "counters", "client", "stats",
                "store", "metrics", "options", "modelids")
UPPER_FLOORS = ("serving", "workloads", "scoring", "report", "plugin", "fixtures", "context",
                "state")


def test_the_ground_floor_imports_no_floor_above_it() -> None:
    graph = import_graph()
    offenders = []
    for low in GROUND_FLOOR:
        for target in graph[f"{PACKAGE}.{low}"]:
            floor = target.removeprefix(f"{PACKAGE}.").split(".")[0]
            if floor in UPPER_FLOORS:
                offenders.append(f"{low} imports {target}")
    assert offenders == []


def test_the_plugin_and_fixtures_do_not_import_each_other() -> None:
    graph = import_graph()
    assert f"{PACKAGE}.plugin" not in graph[f"{PACKAGE}.fixtures"]
    assert f"{PACKAGE}.fixtures" not in graph[f"{PACKAGE}.context"]
    assert f"{PACKAGE}.plugin" not in graph[f"{PACKAGE}.context"]


if __name__ == "__main__":
    graph = import_graph()
    for name in sorted(graph):
        short = sorted(t.removeprefix(f"{PACKAGE}.") for t in graph[name])
        print(f"{name.removeprefix(PACKAGE + '.') or PACKAGE:28s} -> {', '.join(short) or '-'}")
    found = cycles(graph)
    print("circles:", found or "none")
    sys.exit(1 if found else 0)
