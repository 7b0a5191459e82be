"""A declared benchmark at collection: its marker, and the candidates' verdict tests beside it.

``@pytest.mark.modelsweep_benchmark("my_eval")`` on a test function declares that
it records the accuracy benchmark ``my_eval`` (by calling ``evaluate``). When pytest
makes the test's items (``pytest_pycollect_makeitem``, wrapped by the plugin),
:func:`with_verdict_tests`:

1. registers the marker ``my_eval`` (so ``--strict-markers`` knows it) and puts it on
   the test's items, so that ``-m my_eval`` selects them and
   :func:`~pytest_modelsweep.context.tests_in_session` finds each model's test;
2. makes the paired verdict tests, ``test_verdict[<candidate>-my_eval]``, through
   pytest's own collection of a function (so ``pytest_generate_tests`` parametrizes
   ``candidate_name`` as for any modelsweep test, and ``-m``, ``-k`` and
   ``--deselect`` apply): each carries the ``verdict`` and ``my_eval`` markers and calls
   ``judge_against_reference("my_eval")``.

The verdict tests are items of the test's module: pytest calls an item's function
by looking its name up on the module, so the module gets one ``test_verdict``
attribute, shared by its benchmarks (the benchmark is the item's ``metric``
parameter) and hidden from pytest's own collection (``__test__ = False``); its
location is the first declared test's, which is where reports point.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FunctionType
from typing import Any

import pytest

from .context import declared_benchmark_key
from .metrics import (
    ACCURACY_UNIT,
    BENCHMARK_MARKER,
    VERDICT_MARKER,
    benchmark_name_problem,
    metric_for,
)

VERDICT_TEST = "test_verdict"
"""The name of the verdict tests (``test_verdict[<candidate>-<benchmark>]``)."""

_SHARED = "__modelsweep_verdict_tests__"
"""Set on the ``test_verdict`` a module gets from this module (to tell it from a user's)."""


def declares_benchmark(obj: object) -> bool:
    """Whether ``obj`` is a function marked ``modelsweep_benchmark`` (cheap: it is asked of
    every name pytest collects)."""
    marks = obj.__dict__.get("pytestmark") if isinstance(obj, FunctionType) else None
    return isinstance(marks, list) and any(
        getattr(mark, "name", None) == BENCHMARK_MARKER for mark in marks)


def declared_benchmark(collector: pytest.Collector, name: str, obj: Any) -> str:
    """The benchmark a test function declares; a one-line collection error when malformed."""
    marks = [m for m in obj.pytestmark if getattr(m, "name", None) == BENCHMARK_MARKER]
    where = f"@pytest.mark.{BENCHMARK_MARKER} on {name}"
    if len(marks) != 1 or len(marks[0].args) != 1 or marks[0].kwargs:
        raise collector.CollectError(
            f"{where}: give it exactly one benchmark name, once, e.g. "
            f"@pytest.mark.{BENCHMARK_MARKER}(\"my_eval\")")
    benchmark = marks[0].args[0]
    problem = benchmark_name_problem(benchmark)
    if problem is not None:
        raise collector.CollectError(f"{where}: {problem}")
    if not isinstance(collector, pytest.Module):
        raise collector.CollectError(
            f"{where}: declare benchmarks on module-level test functions, not in a class")
    return str(benchmark)


def register_marker(config: pytest.Config, benchmark: str) -> pytest.MarkDecorator:
    """The benchmark's marker, registered first (``--strict-markers`` refuses unknown ones)."""
    registered = {line.split(":")[0].split("(")[0].strip() for line in config.getini("markers")}
    if benchmark not in registered:
        metric = metric_for(benchmark, ACCURACY_UNIT)
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


def _module_verdict_test(module: Any, declared_at: Any) -> Callable[..., None]:
    """The module's shared ``test_verdict`` (made once), which its verdict items call."""
    shared = module.__dict__.get(VERDICT_TEST)
    if shared is not None and getattr(shared, _SHARED, False):
        return shared  # type: ignore[no-any-return]
    verdict: Callable[..., None] = getattr(pytest.mark, VERDICT_MARKER)(_verdict_function())
    setattr(verdict, _SHARED, True)
    setattr(verdict, "__test__", False)  # pytest's own walk over the module skips it
    setattr(verdict, "place_as", declared_at)  # reports locate it at the declared test
    setattr(module, VERDICT_TEST, verdict)
    return verdict


def with_verdict_tests(
    collector: pytest.Collector, name: str, obj: Any, collected: Any
) -> list[Any]:
    """The declared test's items, marked with its benchmark, then its verdict tests' items."""
    benchmark = declared_benchmark(collector, name, obj)
    marker = register_marker(collector.config, benchmark)
    items = list(collected) if isinstance(collected, list) else [collected] if collected else []
    for item in items:
        if not isinstance(item, pytest.Function):
            continue
        if "model_name" not in item.fixturenames:
            raise collector.CollectError(
                f"@pytest.mark.{BENCHMARK_MARKER} on {name}: a benchmark test runs per model; "
                "take the evaluate fixture (or model_name)")
        item.stash[declared_benchmark_key] = benchmark
        if item.get_closest_marker(benchmark) is None:
            item.add_marker(marker)
    assert isinstance(collector, pytest.Module)  # declared_benchmark refused a class
    module = collector.obj
    existing = module.__dict__.get(VERDICT_TEST)
    if existing is not None and not getattr(existing, _SHARED, False):
        raise collector.CollectError(
            f"{collector.name} defines {VERDICT_TEST}, the name of the verdict tests modelsweep "
            f"adds beside the declared benchmark {benchmark!r}: rename yours")
    _module_verdict_test(module, obj)
    # What pytest collects: a function of the same signature whose parametrization adds the
    # benchmark (and its marker); the items call the module's shared test_verdict.
    definition = pytest.mark.parametrize(
        "metric", [pytest.param(benchmark, marks=marker, id=benchmark)])(_verdict_function())
    setattr(definition, "__test__", True)  # collected whatever python_functions says
    verdicts = collector.ihook.pytest_pycollect_makeitem(
        collector=collector, name=VERDICT_TEST, obj=definition)
    return [*items, *(verdicts or [])]


__all__ = ["VERDICT_TEST", "declared_benchmark", "declares_benchmark",
           "register_marker", "with_verdict_tests"]
