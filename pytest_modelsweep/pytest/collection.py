"""A declared benchmark at collection: its marker, and the candidates' verdict tests beside it.

:func:`with_verdict_tests` registers the marker ``my_eval`` of a test declared
``@pytest.mark.modelsweep_benchmark("my_eval")`` and makes its comparison tests through
pytest's own collection of a function, so that parametrization, ``-m``, ``-k`` and
``--deselect`` apply. Their items call one shared function set on the test's module (where
pytest looks an item's function up), hidden from pytest's collection.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType
from typing import Any

import pytest

from ..core.metrics import (
    ACCURACY_UNIT,
    BENCHMARK_MARKER,
    THROUGHPUT_UNIT,
    VERDICT_MARKER,
    Kind,
    benchmark_name_problem,
    kind_of,
    metric_for,
)
from .context import declared_benchmark_key, model_of_item

VERDICT_TEST = "test_verdict"
RATIO_TEST = "test_throughput_ratio"

_declarations_key = pytest.StashKey[dict[str, str]]()
"""``config.stash``: benchmark → the test (``path::name``) that declares it."""

_SHARED = "__modelsweep_verdict_tests__"
"""Set on the ``test_verdict`` a module gets from this module (to tell it from a user's)."""


def declares_benchmark(obj: object) -> bool:
    """Whether ``obj`` is a function marked ``modelsweep_benchmark`` (cheap: asked of all)."""
    marks = obj.__dict__.get("pytestmark") if isinstance(obj, FunctionType) else None
    return isinstance(marks, list) and any(
        getattr(mark, "name", None) == BENCHMARK_MARKER for mark in marks
    )


def declared_benchmark(collector: pytest.Collector, name: str, obj: Any) -> tuple[str, Kind]:
    """The benchmark a test function declares and its kind; a one-line CollectError if malformed."""
    marks = [m for m in obj.pytestmark if getattr(m, "name", None) == BENCHMARK_MARKER]
    where = f"@pytest.mark.{BENCHMARK_MARKER} on {name}"
    kinds = {"accuracy": Kind.ACCURACY, "throughput": Kind.THROUGHPUT}
    if (
        len(marks) != 1
        or len(marks[0].args) != 1
        or set(marks[0].kwargs) - {"kind", "builtin"}
        or marks[0].kwargs.get("kind", "accuracy") not in kinds
    ):
        raise collector.CollectError(
            f"{where}: give it exactly one benchmark name, once, and optionally "
            f'kind="accuracy" (the default) or kind="throughput", e.g. '
            f'@pytest.mark.{BENCHMARK_MARKER}("my_eval")'
        )
    benchmark = marks[0].args[0]
    kind = kinds[marks[0].kwargs.get("kind", "accuracy")]
    problem = benchmark_name_problem(
        benchmark, kind, builtin=marks[0].kwargs.get("builtin") is True
    )
    if problem is not None:
        raise collector.CollectError(f"{where}: {problem}")
    declared = collector.config.stash.setdefault(_declarations_key, {})
    here = f"{collector.nodeid}::{name}"
    if declared.setdefault(str(benchmark), here) != here:
        raise collector.CollectError(
            f"{where}: {benchmark!r} is declared already, by {declared[str(benchmark)]}; one "
            "test per benchmark (two would pool their items in one measurement's verdicts): "
            "name one of them otherwise"
        )
    if not isinstance(collector, pytest.Module):
        raise collector.CollectError(
            f"{where}: declare benchmarks on module-level test functions, not in a class"
        )
    return str(benchmark), kind


def register_marker(
    config: pytest.Config, benchmark: str, kind: Kind = Kind.ACCURACY
) -> pytest.MarkDecorator:
    """The benchmark's marker, registered first (``--strict-markers`` refuses unknown ones)."""
    registered = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    if benchmark not in registered:
        unit = ACCURACY_UNIT if kind is Kind.ACCURACY else THROUGHPUT_UNIT
        metric = metric_for(benchmark, unit)
        assert metric is not None
        config.addinivalue_line("markers", f"{benchmark}: {metric.marker_help}")
    decorator: pytest.MarkDecorator = getattr(pytest.mark, benchmark)
    return decorator


def _verdict_function() -> Callable[..., None]:
    def test_verdict(
        candidate_name: str, metric: str, judge_against_reference: Callable[[str], Any]
    ) -> None:
        """The candidate's paired verdict against the reference on the benchmark ``metric``."""
        judge_against_reference(metric)

    return test_verdict


def _ratio_function() -> Callable[..., None]:
    def test_throughput_ratio(
        candidate_name: str,
        metric: str,
        concurrency: int,
        judge_throughput_ratio: Callable[..., Any],
    ) -> None:
        """The candidate's throughput ÷ the reference's on the benchmark ``metric``."""
        judge_throughput_ratio(metric, concurrency=concurrency, prompt_tokens=None)

    return test_throughput_ratio


_COMPARISON_TESTS = {
    Kind.ACCURACY: ("evaluate", VERDICT_TEST, _verdict_function),
    Kind.THROUGHPUT: ("measure_throughput", RATIO_TEST, _ratio_function),
}
"""A benchmark kind → the fixture its declared test takes, its comparison tests' name and
the maker of their function."""


def with_verdict_tests(
    collector: pytest.Collector, name: str, obj: Any, collected: Any
) -> list[Any]:
    """The declared test's items, marked with its benchmark, then its comparison tests' items:
    paired verdicts for an accuracy benchmark, ratios (one per ``concurrency``) for a
    throughput one."""
    benchmark, kind = declared_benchmark(collector, name, obj)
    marker = register_marker(collector.config, benchmark, kind)
    items = list(collected) if isinstance(collected, list) else [collected] if collected else []
    fixture, test_name, make = _COMPARISON_TESTS[kind]
    concurrencies: list[int] = []
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if "model_name" not in item.fixturenames:
            raise collector.CollectError(
                f"@pytest.mark.{BENCHMARK_MARKER} on {name}: a benchmark test runs per model; "
                f"take the {fixture} fixture (or model_name)"
            )
        item.stash[declared_benchmark_key] = benchmark
        if item.get_closest_marker(benchmark) is None:
            item.add_marker(marker)
        if kind is Kind.THROUGHPUT:
            concurrency = getattr(getattr(item, "callspec", None), "params", {}).get("concurrency")
            if isinstance(concurrency, bool) or not isinstance(concurrency, int):
                raise collector.CollectError(
                    f'@pytest.mark.{BENCHMARK_MARKER}({benchmark!r}, kind="throughput") on '
                    f"{name}: parametrize it by concurrency, e.g. "
                    '@pytest.mark.parametrize("concurrency", [1, 4, 16]), and pass it on'
                )
            concurrencies.append(concurrency)
    assert isinstance(collector, pytest.Module)  # declared_benchmark refused a class
    module = collector.obj
    existing = module.__dict__.get(test_name)
    if existing is not None and not getattr(existing, _SHARED, False):
        raise collector.CollectError(
            f"{collector.name} defines {test_name}, the name of the comparison tests modelsweep "
            f"adds beside the declared benchmark {benchmark!r}: rename yours"
        )
    if existing is None:  # the module's shared comparison test (made once), which items call
        shared = getattr(pytest.mark, VERDICT_MARKER)(make())
        setattr(shared, _SHARED, True)
        shared.__test__ = False  # pytest's own walk over the module skips it
        shared.place_as = obj  # reports locate it at the declared test
        setattr(module, test_name, shared)
    # What pytest collects: the shared test's signature, parametrized by the benchmark.
    if kind is Kind.ACCURACY:
        definition = pytest.mark.parametrize(
            "metric", [pytest.param(benchmark, marks=marker, id=benchmark)]
        )(make())
    else:
        definition = pytest.mark.parametrize(
            ("metric", "concurrency"),
            [
                pytest.param(benchmark, c, marks=marker, id=f"{benchmark}-c{c}")
                for c in dict.fromkeys(concurrencies)  # each once, in collection order
            ],
        )(make())
    definition.__test__ = True  # collected whatever python_functions says
    verdicts = collector.ihook.pytest_pycollect_makeitem(
        collector=collector, name=test_name, obj=definition
    )
    return [*items, *(verdicts or [])]


SETTING_PARAMS = ("concurrency", "prompt_tokens")
"""The parameters that tell a benchmark's settings apart (a comparison is per setting)."""

StoredRun = Callable[[str, dict[str, Any]], "str | None"]
"""(benchmark, setting) → a stored run with the reference's like measurement, or None."""


def _benchmarks(item: pytest.Item) -> set[str]:
    return {
        mark.name
        for mark in item.iter_markers()
        if mark.name != VERDICT_MARKER and kind_of(mark.name) is not None
    }


def _setting(item: pytest.Item) -> dict[str, Any]:
    params = getattr(getattr(item, "callspec", None), "params", {})
    return {name: params[name] for name in SETTING_PARAMS if name in params}


def reference_tests_to_skip(
    items: list[pytest.Item], reference: str, stored_run: StoredRun
) -> tuple[list[pytest.Item], list[str]]:
    """Of the reference's own tests (collected because ``--model`` named only candidates),
    those no collected comparison needs, or whose like measurement ``stored_run`` finds (it is
    reused as a stored reference always was); and a line for each benchmark, measured or reused."""
    from ..judging.comparisons import setting_text

    needs = [
        (_benchmarks(item), _setting(item))
        for item in items
        if item.get_closest_marker(VERDICT_MARKER) is not None
    ]
    skipped: list[pytest.Item] = []
    said: dict[str, str] = {}
    for item in items:
        if model_of_item(item) != reference or item.get_closest_marker(VERDICT_MARKER):
            continue
        benchmarks, own = _benchmarks(item), _setting(item)
        wanted = [
            b
            for marks, setting in needs
            for b in marks & benchmarks
            if all(own.get(name) == value for name, value in setting.items())
        ]
        run = stored_run(wanted[0], own) if wanted else None
        if not wanted or run is not None:
            skipped.append(item)
        if wanted:
            what = f"{wanted[0]} {setting_text(own)}".strip()
            said.setdefault(
                what,
                (
                    f"the reference {reference}'s {what} comes from the store (run {run})"
                    if run is not None
                    else f"measuring the reference {reference}'s {what} too: the comparisons need it "
                    f"and the store holds no like run of it (add --model {reference} to name it "
                    "yourself)"
                ),
            )
    return skipped, list(said.values())
