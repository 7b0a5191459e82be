"""pytest-modelsweep's pytest hooks and options.

Dormant until used: nothing heavy is imported at import, ``pytest_addoption`` or
``pytest_configure``. The run state is made when a modelsweep option is given or a modelsweep
test is collected (:func:`.pytest.context.run_state`); until then every hook returns at once.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from .core.errors import ModelsweepError
from .core.metrics import MARKERS, STARTUP_MARKER, VERDICT_MARKER
from .core.options import OPTIONS
from .pytest.collection import declares_benchmark
from .pytest.context import (
    MODEL_PARAMS,
    active_run_state,
    declared_benchmark_key,
    evaluated_key,
    measurements_key,
    model_of_item,
    run_id,
    run_state,
    unjudged_key,
)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("modelsweep", "LLM serving benchmarks (pytest-modelsweep)")
    for flag, keywords in OPTIONS.items():
        group.addoption(flag, **keywords)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from .pytest import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_modelsweep_verdict(interval: Any, margin: float | None, kind: str) -> Any:
    """The default rules: accuracy's covers-zero rule with an optional ``--margin``; a ratio's
    (throughput, capacity) interval against 1 ± ``--ratio-tolerance`` (``margin``)."""
    from .core.stats import decide_ratio_verdict, decide_verdict

    if kind == "throughput":
        return decide_ratio_verdict(interval, margin or 0.0)
    if kind in ("capacity", "rate_capacity"):
        from .workloads.slo_search import decide_capacity_verdict

        return decide_capacity_verdict(interval, margin or 0.0)
    return decide_verdict(interval, margin)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    """Markers, options that exclude each other, fixtures; the run state when an option of
    ours is given. First of all plugins': a bad output path is a usage error before
    pytest-html's configure meets it as an INTERNALERROR."""
    for name, help_text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {help_text}")
    option, xdist = config.option, getattr(config.option, "numprocesses", None)
    for clash, message in (
        (
            option.holm and xdist,
            "--holm compares every candidate at once, which xdist workers cannot wait for "
            "each other to do: measure with -n, then run `pytest benches -m verdict --holm` "
            "without -n (it reads the stored results)",
        ),
        (
            option.holm and option.until_decided,
            "--holm adjusts fixed-n bootstrap intervals, and --until-decided's confidence "
            "sequences have no Holm adjustment: drop one of the two",
        ),
        (
            option.interleave and xdist,
            "--interleave measures the candidate and the reference side by side, so both "
            "servers must live in one process: run it without -n",
        ),
    ):
        if clash:
            raise pytest.UsageError(message)
    from .pytest import fixtures
    from .pytest.controller import ControllerHooks

    config.pluginmanager.register(fixtures, "modelsweep-fixtures")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(ControllerHooks(config), "modelsweep-controller")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "modelsweep-xdist")
    if modelsweep_options_given(config):
        run_state(config)  # a bad --sweep, --model, --fail-on... is a usage error now


def modelsweep_options_given(config: pytest.Config) -> list[str]:
    """The modelsweep options this run gives (their values differ from the defaults)."""
    return [
        flag for flag, keywords in OPTIONS.items() if config.getoption(flag) != keywords["default"]
    ]


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``model_name`` with the run's models, ``candidate_name`` with its candidates."""
    if not any(param in metafunc.fixturenames for param in MODEL_PARAMS):
        return
    run = run_state(metafunc.config).config
    param = "model_name" if "model_name" in metafunc.fixturenames else "candidate_name"
    names = list(run.models_to_run if param == "model_name" else run.selection.candidates)
    metafunc.parametrize(param, names, ids=names, scope="function")


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, Any]:
    """A declared benchmark gets its marker and its comparison tests (:mod:`.pytest.collection`)."""
    collected = yield
    if not declares_benchmark(obj):
        return collected
    from .pytest.collection import with_verdict_tests

    return with_verdict_tests(collector, name, obj, collected)


@pytest.hookimpl(trylast=True)  # after -m, -k and --deselect
def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """One model's tests together, reference first, so each server starts once: its cold
    starts first, its comparisons after its own measurements (with --holm, after all)."""
    if not any(model_of_item(item) is not None for item in items):
        return
    state = run_state(config)
    if state.config.reference_added:
        from .pytest.collection import reference_tests_to_skip

        skipped, lines = reference_tests_to_skip(
            items, state.config.selection.reference, state.stored_reference_run
        )
        if skipped:
            config.hook.pytest_deselected(items=skipped)
            gone = {id(item) for item in skipped}
            items[:] = [item for item in items if id(item) not in gone]
        for line in lines if state.config.worker_id in ("main", "gw0") else ():  # once a run
            state.write_line(line)
    run_order = {name: i for i, name in enumerate(state.config.models_to_run)}
    holm = state.config.options.holm

    def key(item: pytest.Item) -> tuple[int, int, int]:
        name = model_of_item(item)
        if name is None:
            return (2, 0, 0)
        comparison = item.get_closest_marker(VERDICT_MARKER) is not None
        if holm and comparison:
            return (3, run_order.get(name, len(run_order)), 0)
        startup = item.get_closest_marker(STARTUP_MARKER) is not None
        return (1, run_order.get(name, len(run_order)), -1 if startup else int(comparison))

    items.sort(key=key)  # stable: collection order within each key


def pytest_collection_finish(session: pytest.Session) -> None:
    """With ``--sweep-run``: record the models whose own tests this run has (other hosts wait
    for those); xdist's controller collects nothing."""
    state = active_run_state(session.config)
    if (
        state is None
        or state.config.options.sweep_run is None
        or session.config.pluginmanager.has_plugin("dsession")
    ):
        return
    try:
        state.store.plan_run(  # the models whose own tests this run has
            state.config.run_id,
            sorted(
                {
                    model
                    for item in session.items
                    if (model := model_of_item(item)) is not None
                    and item.get_closest_marker(VERDICT_MARKER) is None
                }
            ),
        )
    except ModelsweepError as error:  # its tests fail with this line too: better than a crash
        state.write_line(f"cannot record this run's models in the store: {error}")


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop a model's server as soon as its last test is done (one chip, one model)."""
    name = model_of_item(item)
    if name is None or (nextitem is not None and model_of_item(nextitem) == name):
        return
    state = active_run_state(item.config)
    if state is not None and not (
        state.config.options.interleave  # the ratio tests measure it
        and name == state.config.selection.reference
    ):
        state.release_endpoint(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A test declared ``modelsweep_benchmark(NAME)`` that measured nothing fails in one line."""
    result = yield
    declared = item.stash.get(declared_benchmark_key, None)
    if declared is not None and not item.stash.get(evaluated_key, False):
        from .core.errors import BenchmarkDeclarationError

        raise BenchmarkDeclarationError(
            f"{item.name} is declared @pytest.mark.modelsweep_benchmark({declared!r}) but "
            f"measured nothing: call evaluate({declared!r}, items, scorer) (or, for a throughput "
            f"benchmark, measure_throughput({declared!r}, ...)) in it, or remove the "
            "declaration"
        )
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """The test's model and measurements on its report (plain data xdist carries), redacted;
    the run state keeps the report that ends a modelsweep test run in this process (a plain
    run's, or an xdist worker's own): its comparisons read how it ended from there."""
    report = yield
    model = model_of_item(item)
    if model is not None:
        report.modelsweep_model = model  # type: ignore[attr-defined]
    if call.excinfo is not None and call.excinfo.errisinstance(ModelsweepError):
        report.longrepr = str(call.excinfo.value)
    state = active_run_state(item.config)
    if state is not None:
        from .pytest.redaction import redact_report

        redact_report(report)
    ended = report.when == "call" or (report.when == "setup" and not report.passed)
    if state is not None and model is not None and ended:
        from .judging.comparisons import FinishedTest
        from .pytest.controller import first_line

        state.finished[report.nodeid] = lambda: FinishedTest(
            report.outcome, first_line(report) if report.failed else ""
        )
    unjudged = item.stash.get(unjudged_key, None)
    if unjudged is not None and report.skipped:
        report.modelsweep_unjudged = unjudged  # type: ignore[attr-defined]
    if report.when == "call" and (recorded := item.stash.get(measurements_key, [])):
        for measurement in recorded:
            measurement["outcome"] = report.outcome
        report.modelsweep_measurements = recorded  # type: ignore[attr-defined]
    return report


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop this process's servers and close the store (workers and controller alike)."""
    state = active_run_state(config)
    if state is not None:
        state.close()


class _XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    @pytest.hookimpl(wrapper=True)
    def pytest_sessionstart(self, session: pytest.Session) -> Generator[None, None, None]:
        """A worker host that ssh cannot reach (``--tx ssh=…``, while xdist starts its
        workers) is a usage error in one line, not an INTERNALERROR."""
        from execnet import HostNotFound

        try:
            return (yield)
        except (HostNotFound, OSError, EOFError) as error:  # ssh's 255, or it ended first
            from .core.secrets import redact

            hosts = [
                spec.split("ssh=", 1)[1].split("//", 1)[0]
                for spec in session.config.getoption("tx", None) or ()
                if "ssh=" in spec
            ]
            if not isinstance(error, HostNotFound) and not hosts:
                raise
            host = redact(str(error) if isinstance(error, HostNotFound) else " ".join(hosts))
            raise pytest.UsageError(
                f"xdist could not reach {host} over ssh (ssh ended before the worker started: an "
                f"unknown host, no route or a refused login): check the --tx spec and that "
                f"`ssh {host} python3 -c pass` works"
            ) from None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["modelsweep_run_id"] = run_id(node.config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Each model's tests on one worker once modelsweep tests are collected; else the user's."""
        dist = config.getvalue("dist")
        if dist == "each":
            return None  # every worker runs every test, its own servers included
        others = config.pluginmanager.subset_hook_caller(
            "pytest_xdist_make_scheduler", remove_plugins=[self]
        )
        from .pytest.scheduler.choice import SchedulingByCollection

        return SchedulingByCollection(config, log, dist, others(config=config, log=log))
