"""pytest-modelsweep's pytest plugin: options, markers, collection, hooks.

Thin on purpose, and dormant until used: every pytest run in an environment
where the plugin is installed loads it, so nothing heavy is imported and no
process is started at import, in ``pytest_addoption`` or in
``pytest_configure``. The one :class:`~pytest_modelsweep.state.RunState`
(``config.stash``) is made when a modelsweep option is given or a modelsweep
test is collected (:func:`~pytest_modelsweep.context.run_state`); until then
every hook here returns at once, and xdist schedules as the user asked.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import pytest

from .core.errors import ModelsweepError
from .core.metrics import MARKERS, STARTUP_MARKER, VERDICT_MARKER
from .core.options import (
    DEFAULTS,
    MIN_TIMED_REQUESTS,
    TIMED_REQUESTS_PER_SLOT,
    add_noise_options,
    add_noisy_option,
    add_open_loop_options,
    add_regression_option,
    add_resamples_option,
    add_slo_cost_options,
    add_startup_option,
    add_store_option,
    add_sweep_option,
    add_timeout_options,
    parse_fail_on,
    parse_margin,
    parse_positive_int,
    parse_ratio_tolerance,
    parse_wait_seconds,
)
from .pytest.collection import declares_benchmark
from .pytest.context import (
    MODEL_PARAMS,
    active_run_state,
    measurements_key,
    model_of_item,
    run_id,
    run_state,
    unjudged_key,
)

if TYPE_CHECKING:
    from .pytest.state import RunState

# Every option of ours and its default, filled in by pytest_addoption: a run that gives
# none of them and collects no modelsweep test never makes the run state.
_OPTION_DEFAULTS: dict[str, Any] = {}

def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("modelsweep", "LLM serving benchmarks (pytest-modelsweep)")
    group.addoption("--model", action="append", default=[], metavar="NAME",
                    help="model of the sweep to run (repeatable; default: every model)")
    group.addoption("--reference", default=None, metavar="NAME",
                    help="reference model the candidates are compared with "
                         "(default: the sweep's reference)")
    add_sweep_option(group.addoption)
    group.addoption("--endpoint", action="append", default=[], metavar="NAME=URL",
                    help="attach model NAME to a running OpenAI-compatible server at URL "
                         "instead of starting one (repeatable)")
    group.addoption("--results", default=None, metavar="PATH",
                    help="write the results (JSON) here "
                         "(default: .modelsweep/runs/<run>/results.json)")
    group.addoption("--md", default=None, metavar="PATH",
                    help="write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY "
                         "when that is set)")
    group.addoption("--modelsweep-dir", default=None, metavar="DIR",
                    help="where runs keep logs and results (default: <rootdir>/.modelsweep)")
    add_store_option(group.addoption)
    group.addoption("--no-reuse", action="store_true", default=False,
                    help="send every item again instead of reusing stored answers "
                         "of the same model, server, settings and prompt")
    group.addoption("--margin", type=parse_margin, default=None, metavar="X",
                    help="equivalence margin for accuracy differences (e.g. 0.02 = 2 points): "
                         "verdicts become equivalent/inconclusive instead of matches")
    group.addoption("--ratio-tolerance", type=parse_ratio_tolerance,
                    default=DEFAULTS.ratio_tolerance, metavar="X",
                    help="a candidate whose throughput ratio interval lies wholly below 1 - X "
                         f"is worse (above 1 + X: better; default: {DEFAULTS.ratio_tolerance:.2f})")
    group.addoption("--interleave", action="store_true", default=False,
                    help="throughput ratio tests measure both models themselves, their windows "
                         "alternating A B B A ..., so that drift in machine speed cancels "
                         "(both servers stay up; not with -n)")
    group.addoption("--allow-unjudged", action="store_true", default=False,
                    help="pass a run whose comparison tests found nothing to compare with "
                         "(default: such a run fails, since it judged nothing)")
    group.addoption("--fail-on", type=parse_fail_on, default=DEFAULTS.fail_on, metavar="VERDICTS",
                    help="comma-separated verdicts that fail a comparison test "
                         "(better, worse, matches, equivalent, inconclusive; "
                         f"default: {','.join(sorted(DEFAULTS.fail_on))})")
    group.addoption("--holm", action="store_true", default=False,
                    help="Holm-correct the candidates' intervals for multiple comparisons")
    add_resamples_option(group.addoption)
    add_timeout_options(group.addoption)
    group.addoption("--verdict-wait", type=parse_wait_seconds, default=DEFAULTS.verdict_wait,
                    metavar="SECONDS",
                    help="how long a comparison waits for the reference's result when it runs "
                         f"on another xdist worker (default: {DEFAULTS.verdict_wait:g})")
    group.addoption("--save-baseline", default=None, metavar="NAME",
                    help="save this run in the store as baseline NAME")
    group.addoption("--baseline", default=None, metavar="NAME|PATH",
                    help="compare every model x metric with a stored baseline (or a results "
                         "file); the session fails when one regressed")
    add_regression_option(group.addoption)
    add_noisy_option(group.addoption)
    add_noise_options(group.addoption)
    add_slo_cost_options(group.addoption)
    add_open_loop_options(group.addoption)
    add_startup_option(group.addoption)
    group.addoption("--timed-requests", type=parse_positive_int, default=None, metavar="N",
                    help="timed requests per throughput repeat (default: "
                         f"{TIMED_REQUESTS_PER_SLOT} x concurrency, at least {MIN_TIMED_REQUESTS})")
    group.addoption("--limit", type=parse_positive_int, default=None, metavar="N",
                    help="run only the first N items of accuracy benchmarks (a subset)")
    group.addoption("--gsm8k-path", default=None, metavar="PATH",
                    help="GSM8K test split as local JSONL (default: openai/gsm8k from the Hub)")
    group.addoption("--gsm8k-max-tokens", type=parse_positive_int, default=None, metavar="N",
                    help="GSM8K answer length limit (default: the sweep's [benchmarks.gsm8k] "
                         "max_tokens; 256 in the embedded sweep, 2048 where a sweep sets none)")
    group.addoption("--bfcl-path", default=None, metavar="DIR",
                    help="folder with BFCL simple records and possible answers "
                         "(default: the BFCL dataset from the Hub)")
    _OPTION_DEFAULTS.clear()
    _OPTION_DEFAULTS.update({option.dest: getattr(option, "default", None)
                             for option in group.options})


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from .pytest import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_modelsweep_verdict(interval: Any, margin: float | None, kind: str) -> Any:
    """The default rules: for accuracy the seed's covers-zero rule, with an optional
    equivalence margin; for a throughput ratio whether its interval lies beyond
    1 ± ``--ratio-tolerance`` (``margin`` carries it); for a capacity ratio the same
    rule on its search bracket, for a capacity in req/s on its sweeps' interval."""
    from .core.stats import decide_ratio_verdict, decide_verdict

    if kind == "throughput":
        return decide_ratio_verdict(interval, margin or 0.0)
    if kind == "capacity":
        from .workloads.capacity import decide_capacity_verdict

        return decide_capacity_verdict(interval, margin or 0.0)
    if kind == "rate_capacity":
        from .workloads.rate_sweep import decide_rate_capacity_verdict

        return decide_rate_capacity_verdict(interval, margin or 0.0)
    return decide_verdict(interval, margin)


def pytest_configure(config: pytest.Config) -> None:
    """Markers, the options that exclude each other, fixtures; the run state only when an
    option of ours is given (each option's own value was checked by its ``type=`` parser)."""
    for name, help_text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {help_text}")
    option = config.option
    if option.holm and getattr(option, "numprocesses", None):
        raise pytest.UsageError(
            "--holm compares every candidate at once, which xdist workers cannot wait for "
            "each other to do: measure with -n, then run `pytest benches -m verdict --holm` "
            "without -n (it reads the stored results)"
        )
    if option.interleave and getattr(option, "numprocesses", None):
        raise pytest.UsageError(
            "--interleave measures the candidate and the reference side by side, so both "
            "servers must live in one process: run it without -n")
    from .pytest import fixtures

    config.pluginmanager.register(fixtures, "modelsweep-fixtures")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_ControllerHooks(config), "modelsweep-controller")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(), "modelsweep-xdist")
    if modelsweep_options_given(config):
        run_state(config)  # a bad --sweep, --model, --fail-on... is a usage error now


def modelsweep_options_given(config: pytest.Config) -> list[str]:
    """The modelsweep options this run gives (their values differ from the defaults)."""
    return [dest for dest, default in _OPTION_DEFAULTS.items()
            if getattr(config.option, dest, default) != default]


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``model_name`` with the run's models, ``candidate_name`` with its candidates."""
    if not any(param in metafunc.fixturenames for param in MODEL_PARAMS):
        return
    state = run_state(metafunc.config)
    if "model_name" in metafunc.fixturenames:
        names = state.models_to_run
        metafunc.parametrize("model_name", names, ids=names, scope="function")
    elif "candidate_name" in metafunc.fixturenames:
        names = [m for m in state.models_to_run if m != state.selection.reference]
        metafunc.parametrize("candidate_name", names, ids=names, scope="function")


@pytest.hookimpl(wrapper=True)
def pytest_pycollect_makeitem(
    collector: pytest.Module | pytest.Class, name: str, obj: object
) -> Generator[None, Any, Any]:
    """A test declared ``@pytest.mark.modelsweep_benchmark(NAME)`` gets the marker NAME and,
    beside it, the candidates' verdict tests (:mod:`.benchmark_collection`)."""
    collected = yield
    if not declares_benchmark(obj):
        return collected
    from .pytest.collection import with_verdict_tests

    return with_verdict_tests(collector, name, obj, collected)


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Run one model's tests together, reference first, so each server starts once; its
    cold starts (``startup`` marker) first, before the run's own server of it is up; a
    candidate's comparisons (``verdict`` marker) after its own measurements."""
    if not any(model_of_item(item) is not None for item in items):
        return
    state = run_state(config)
    run_order = {name: i for i, name in enumerate(state.models_to_run)}
    position = {id(item): i for i, item in enumerate(items)}
    holm = state.options.holm

    def key(item: pytest.Item) -> tuple[int, int, int, int]:
        name = model_of_item(item)
        if name is None:
            return (2, 0, 0, position[id(item)])
        comparison = item.get_closest_marker(VERDICT_MARKER) is not None
        if holm and comparison:
            # Holm compares all candidates at once: after every model's own tests.
            return (3, run_order.get(name, len(run_order)), 0, position[id(item)])
        startup = item.get_closest_marker(STARTUP_MARKER) is not None
        return (1, run_order.get(name, len(run_order)), -1 if startup else int(comparison),
                position[id(item)])

    items.sort(key=key)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop a model's server as soon as its last test is done (one chip, one model)."""
    name = model_of_item(item)
    if name is None:
        return
    if nextitem is None or model_of_item(nextitem) != name:
        state = active_run_state(item.config)
        if state is not None and not (state.options.interleave
                                      and name == state.selection.reference):
            # (--interleave keeps the reference up: the candidates' ratio tests measure it)
            state.release_endpoint(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Put the test's model and measurements on its report, as plain data xdist carries."""
    report = yield
    model = model_of_item(item)
    if model is not None:
        report.modelsweep_model = model  # type: ignore[attr-defined]
    if call.excinfo is not None and call.excinfo.errisinstance(ModelsweepError):
        # A failure we predicted reads as its one line: no traceback, no fixture dump.
        report.longrepr = str(call.excinfo.value)
    unjudged = item.stash.get(unjudged_key, None)
    if unjudged is not None and report.skipped:
        report.modelsweep_unjudged = unjudged  # type: ignore[attr-defined]
    if report.when == "call":
        recorded = item.stash.get(measurements_key, [])
        if recorded:
            for measurement in recorded:
                measurement["outcome"] = report.outcome
            report.modelsweep_measurements = recorded  # type: ignore[attr-defined]
    return report


def first_line(report: pytest.TestReport) -> str:
    """What a failed report says, in one line: the error's own line, else the last one."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if crash is not None and lines else (lines[-1] if lines else report.outcome)


class _ControllerHooks:
    """The controller's (or a plain run's) side: results, gate, summaries.

    Only the controller writes: measurements arrive on test reports (from xdist
    workers too), and every hook returns at once in a run without modelsweep tests.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        # pytest-html asks for its table header at session start, before collection: the
        # Measurement column is there when the run state already was (an option of ours).
        self.html_column = False

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        recorded = getattr(report, "modelsweep_measurements", None)
        if getattr(report, "modelsweep_model", None) is None and not recorded:
            return
        state = run_state(self.config)
        state.tests_reported = True
        for measurement in recorded or []:
            state.add_measurement(measurement)
        finished = report.when == "call" or (report.when == "setup" and not report.passed)
        if finished and getattr(report, "modelsweep_model", None) is not None:
            # Comparisons on other workers stop waiting for a test that ended without a result.
            state.store.add_outcome(state.run_id, report.nodeid, report.outcome)
        unjudged = getattr(report, "modelsweep_unjudged", None)
        if unjudged is not None:
            state.unjudged.append((report.nodeid, unjudged))
        if report.failed:
            state.add_failure(report.nodeid, report.when, "failed" if report.when == "call"
                              else "error", first_line(report))
        if self.config.pluginmanager.hasplugin("html"):
            self._html(state).pytest_runtest_logreport(report)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        state = active_run_state(self.config)
        if state is not None:
            self._html(state).pytest_html_results_summary(prefix, summary, postfix, session)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        state = active_run_state(self.config)
        if state is not None:
            self._html(state).pytest_html_results_table_header(cells)
            self.html_column = True

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        state = active_run_state(self.config)
        if state is not None and self.html_column:
            self._html(state).pytest_html_results_table_row(report, cells)

    def _html(self, state: RunState) -> Any:
        from .pytest.html_hooks import HtmlReportHooks

        return HtmlReportHooks.for_state(state, self.config)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the results, save or compare the baseline; a regression fails the session."""
        state = active_run_state(self.config)
        if state is None:
            return
        from .core.errors import ModelsweepError

        try:
            rows = state.gate()
        except ModelsweepError as error:
            state.gate_error = str(error)
            rows = []
        if state.gate_error or any(row.failed for row in rows):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        refusal = state.save_baseline_if_asked()
        if refusal is not None:
            state.session_errors.append(refusal)
        if state.unjudged and not state.options.allow_unjudged:
            test, why = state.unjudged[0]
            state.session_errors.append(
                f"{len(state.unjudged)} comparison test(s) judged nothing, so this run does not "
                f"pass (first: {test}: {why}); run the reference's benchmarks first, or pass "
                "--allow-unjudged")
        if state.session_errors and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        if not state.tests_reported:
            return  # an option of ours, but no modelsweep test ran: nothing to write
        state.finish_results({"exitstatus": int(session.exitstatus),
                              "gate": [row.__dict__ for row in rows]})
        _write_markdown(self.config, state)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        state = active_run_state(self.config)
        if state is None:
            return
        for line in state.session_errors:
            terminalreporter.write_line(f"modelsweep: {line}", red=True)
        if state.gate_rows or state.gate_error:
            from .judging.gate import gate_table

            failed = sum(row.failed for row in state.gate_rows)
            terminalreporter.write_sep(
                "=", f"modelsweep baseline {state.options.baseline}: "
                     + (f"{failed} regressed or not comparable" if failed else "no regression"),
                red=bool(failed or state.gate_error), green=not (failed or state.gate_error),
            )
            if state.gate_error:
                terminalreporter.write_line(f"modelsweep: {state.gate_error}", red=True)
            for line in gate_table(state.gate_rows):
                terminalreporter.write_line(line)
        if not state.measurements:
            return
        from .report.terminal import measurement_table

        terminalreporter.write_sep("=", "modelsweep measurements")
        for line in measurement_table(state.measurements):
            terminalreporter.write_line(line)
        terminalreporter.write_line(f"results: {state.results_path}")


def _write_markdown(config: pytest.Config, state: RunState) -> None:
    """``--md PATH`` and ``$GITHUB_STEP_SUMMARY``: the run's tables as a PR-ready comment."""
    import os

    path = config.option.md
    if not (path or os.environ.get("GITHUB_STEP_SUMMARY")):
        return
    from pathlib import Path

    from .report.markdown import append_step_summary, markdown_report

    text = markdown_report(state.measurements, state.run, state.failures)
    if path:
        Path(path).write_text(text, encoding="utf-8")
    append_step_summary(text)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """Stop this process's servers and close the store (workers and controller alike)."""
    state = active_run_state(config)
    if state is not None:
        state.close()


class _XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["modelsweep_run_id"] = run_id(node.config)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        """Keep each model's tests on one worker, once modelsweep tests turn out to be collected.

        Until the workers' collections are in, the scheduler xdist would have made for
        the user's ``--dist`` runs alone; a collection without modelsweep tests keeps it.
        """
        dist = config.getvalue("dist")
        if dist == "each":
            return None  # every worker runs every test, its own servers included
        others = config.pluginmanager.subset_hook_caller(
            "pytest_xdist_make_scheduler", remove_plugins=[self]
        )
        from .pytest.scheduler.choice import SchedulingByCollection

        return SchedulingByCollection(config, log, dist, others(config=config, log=log))
