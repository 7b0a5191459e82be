"""pytest-modelsweep's pytest plugin: options, markers, collection, hooks.

Thin on purpose: it reads options into one :class:`RunState` (``config.stash``)
and hands every decision to pure modules. Nothing heavy is imported and no
process is started at import time or in ``pytest_addoption``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator
from typing import Any

import pytest

from .context import measurements_key, model_of_item, run_state_key
from .errors import ModelsweepError
from .state import Options, RunState, stderr_line, worker_id_from_env

MARKERS = {
    "smoke": "a single real generation per model (the quickest end-to-end check)",
    "throughput": "output throughput at 1, 4 and 16 concurrent requests, 256 tokens each",
    "long_prompt": "throughput with 1,024- and 3,072-token prompts that never repeat",
    "gsm8k": "GSM8K accuracy, scored as lm-evaluation-harness scores it",
    "bfcl": "BFCL simple tool-calling accuracy, scored by BFCL's AST rules",
    "verdict": "paired comparison of a candidate with the reference",
    "screen": "candidate screening from the Hugging Face API (licence, memory)",
    "vllm": "needs a real vLLM server",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("modelsweep", "LLM serving benchmarks (pytest-modelsweep)")
    group.addoption("--model", action="append", default=[], metavar="NAME",
                    help="model of the sweep to run (repeatable; default: every model)")
    group.addoption("--reference", default=None, metavar="NAME",
                    help="reference model the candidates are compared with "
                         "(default: the sweep's reference)")
    group.addoption("--sweep", default=None, metavar="PATH",
                    help="sweep file (TOML), or a built-in sweep: embedded (default), tpu-v5e")
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
    group.addoption("--store", default=None, metavar="PATH",
                    help="SQLite store of runs, measurements and items "
                         "(default: .modelsweep/store.sqlite)")
    group.addoption("--no-reuse", action="store_true", default=False,
                    help="send every item again instead of reusing stored answers "
                         "of the same model, server, settings and prompt")
    group.addoption("--margin", type=float, default=None, metavar="X",
                    help="equivalence margin for accuracy differences (e.g. 0.02 = 2 points): "
                         "verdicts become equivalent/inconclusive instead of matches")
    group.addoption("--fail-on", default="worse", metavar="VERDICTS",
                    help="comma-separated verdicts that fail a comparison test "
                         "(better, worse, matches, equivalent, inconclusive; default: worse)")
    group.addoption("--holm", action="store_true", default=False,
                    help="Holm-correct the candidates' intervals for multiple comparisons")
    group.addoption("--resamples", type=int, default=10_000, metavar="N",
                    help="bootstrap resamples of paired comparisons (default: 10000)")
    group.addoption("--verdict-wait", type=float, default=7200.0, metavar="SECONDS",
                    help="how long a comparison waits for the reference's result when it runs "
                         "on another xdist worker (default: 7200)")
    group.addoption("--save-baseline", default=None, metavar="NAME",
                    help="save this run in the store as baseline NAME")
    group.addoption("--baseline", default=None, metavar="NAME|PATH",
                    help="compare every model x metric with a stored baseline (or a results "
                         "file); the session fails when one regressed")
    group.addoption("--fail-on-regression", default=None, metavar="RULES",
                    help="how much worse is a regression (default: accuracy:1pp,throughput:10%%)")
    group.addoption("--repeats", type=int, default=3, metavar="N",
                    help="timed repeats of each throughput setting (default: 3)")
    group.addoption("--timed-requests", type=int, default=None, metavar="N",
                    help="timed requests per throughput repeat (default: 2 x concurrency, "
                         "at least 4)")
    group.addoption("--limit", type=int, default=None, metavar="N",
                    help="run only the first N items of accuracy benchmarks (a subset)")
    group.addoption("--gsm8k-path", default=None, metavar="PATH",
                    help="GSM8K test split as local JSONL (default: openai/gsm8k from the Hub)")
    group.addoption("--gsm8k-max-tokens", type=int, default=2048, metavar="N",
                    help="GSM8K answer length limit (default: 2048, as in the seed)")
    group.addoption("--bfcl-path", default=None, metavar="DIR",
                    help="folder with BFCL simple records and possible answers "
                         "(default: the BFCL dataset from the Hub)")


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_modelsweep_verdict(interval: Any, margin: float | None, kind: str) -> Any:
    """The default rules: for accuracy the seed's covers-zero rule, with an optional
    equivalence margin; for a throughput ratio whether its interval lies above or below 1."""
    from .stats import decide_ratio_verdict, decide_verdict

    if kind == "throughput":
        return decide_ratio_verdict(interval)
    return decide_verdict(interval, margin)


def pytest_configure(config: pytest.Config) -> None:
    for name, help_text in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {help_text}")
    option = config.option
    if option.repeats < 1:
        raise pytest.UsageError("--repeats: expected a positive integer")
    if option.limit is not None and option.limit < 1:
        raise pytest.UsageError("--limit: expected a positive integer")
    if option.margin is not None and not 0 <= option.margin < 1:
        raise pytest.UsageError("--margin: expected an accuracy difference in [0, 1), e.g. 0.02")
    if option.timed_requests is not None and option.timed_requests < 1:
        raise pytest.UsageError("--timed-requests: expected a positive integer")
    if option.gsm8k_max_tokens < 1:
        raise pytest.UsageError("--gsm8k-max-tokens: expected a positive integer")
    if option.holm and getattr(option, "numprocesses", None):
        raise pytest.UsageError(
            "--holm compares every candidate at once, which xdist workers cannot wait for "
            "each other to do: measure with -n, then run `pytest benches -m verdict --holm` "
            "without -n (it reads the stored results)"
        )
    if option.resamples < 100:
        raise pytest.UsageError("--resamples: expected at least 100")
    from .gate import DEFAULT_THRESHOLDS, parse_thresholds
    from .stats import Verdict
    from .verdicts import parse_fail_on

    try:
        thresholds = parse_thresholds(option.fail_on_regression or DEFAULT_THRESHOLDS)
    except ModelsweepError as error:
        _fail_usage(error)

    try:
        fail_on = parse_fail_on(option.fail_on, [v.value for v in Verdict])
    except ModelsweepError as error:
        _fail_usage(error)
    workerinput = getattr(config, "workerinput", None)
    state = RunState(
        options=Options(
            sweep=option.sweep,
            models=list(option.model),
            reference=option.reference,
            endpoints=list(option.endpoint),
            results=option.results,
            workdir=option.modelsweep_dir,
            repeats=option.repeats,
            limit=option.limit,
            gsm8k_path=option.gsm8k_path,
            bfcl_path=option.bfcl_path,
            gsm8k_max_tokens=option.gsm8k_max_tokens,
            timed_requests=option.timed_requests,
            store=option.store,
            reuse=not option.no_reuse,
            margin=option.margin,
            fail_on=fail_on,
            holm=option.holm,
            resamples=option.resamples,
            verdict_wait_s=option.verdict_wait,
            baseline=option.baseline,
            save_baseline=option.save_baseline,
            thresholds=thresholds,
        ),
        rootdir=config.rootpath,
        run_id=workerinput["modelsweep_run_id"] if workerinput else RunState.new_run_id(),
        is_worker=workerinput is not None,
        worker_id=workerinput["workerid"] if workerinput else worker_id_from_env(),
        write_line=_progress_writer(config),
        args=list(config.invocation_params.args),
    )
    config.stash[run_state_key] = state
    try:
        # A bad --sweep, --model, --reference or --endpoint fails here, as a usage error.
        state.selection
    except ModelsweepError as error:
        _fail_usage(error)
    if not state.is_worker:
        config.pluginmanager.register(_ResultsCollector(state), "modelsweep-results")
        if config.pluginmanager.hasplugin("html"):
            # pytest-html is optional: its hooks are implemented only when it is installed,
            # on the controller only (workers' extras would appear twice).
            from .report.html import HtmlReportHooks

            config.pluginmanager.register(HtmlReportHooks.for_state(state, config), "modelsweep-html")
    if config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_XdistHooks(state), "modelsweep-xdist")
    from . import fixtures

    config.pluginmanager.register(fixtures, "modelsweep-fixtures")


def _progress_writer(config: pytest.Config) -> Any:
    """Progress lines (server build, server start) shown live, past pytest's capture.

    On an xdist worker there is no terminal reporter; its stderr is the
    terminal's, so the line goes there with capture suspended.
    """

    def write_line(message: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if reporter is not None and not hasattr(config, "workerinput"):
                reporter.write_line(f"modelsweep: {message}")
                reporter.flush()  # also when the output is a file or a CI log
            else:
                stderr_line(message)

    return write_line


def _state(config: pytest.Config) -> RunState:
    return config.stash[run_state_key]


def _fail_usage(error: ModelsweepError) -> None:
    raise pytest.UsageError(str(error))


@pytest.hookimpl(tryfirst=True)
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``model_name`` with the run's models, ``candidate_name`` with its candidates."""
    state = _state(metafunc.config)
    if "model_name" in metafunc.fixturenames:
        names = state.models_to_run
        metafunc.parametrize("model_name", names, ids=names, scope="function")
    elif "candidate_name" in metafunc.fixturenames:
        names = [m for m in state.models_to_run if m != state.selection.reference]
        metafunc.parametrize("candidate_name", names, ids=names, scope="function")


def pytest_collection_modifyitems(
    session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
) -> None:
    """Run one model's tests together, reference first, so each server starts once."""
    state = _state(config)
    order: dict[str, int] = {}
    for item in items:
        name = model_of_item(item)
        if name is not None and name not in order:
            order[name] = len(order)
    if not order:
        return
    run_order = {name: i for i, name in enumerate(state.models_to_run)}
    position = {id(item): i for i, item in enumerate(items)}

    holm = state.options.holm

    def key(item: pytest.Item) -> tuple[int, int, int]:
        name = model_of_item(item)
        if name is None:
            return (2, 0, position[id(item)])
        if holm and item.get_closest_marker("verdict") is not None:
            # Holm compares all candidates at once: after every model's own tests.
            return (3, run_order.get(name, len(run_order)), position[id(item)])
        return (1, run_order.get(name, len(run_order)), position[id(item)])

    items.sort(key=key)


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop a model's server as soon as its last test is done (one chip, one model)."""
    name = model_of_item(item)
    if name is None:
        return
    if nextitem is None or model_of_item(nextitem) != name:
        state = _state(item.config)
        if state._pool is not None:
            state.pool.release(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        recorded = item.stash.get(measurements_key, [])
        if recorded:
            for measurement in recorded:
                measurement["outcome"] = report.outcome
            # Plain data on the report: pytest-xdist carries it to the controller.
            report.modelsweep_measurements = recorded  # type: ignore[attr-defined]
    return report


def _write_markdown(config: pytest.Config, state: RunState) -> None:
    """``--md PATH`` and ``$GITHUB_STEP_SUMMARY``: the run's tables as a PR-ready comment."""
    import os

    path = config.option.md
    if not state.measurements or not (path or os.environ.get("GITHUB_STEP_SUMMARY")):
        return
    from pathlib import Path

    from .report.markdown import append_step_summary, markdown_report

    text = markdown_report(state.measurements, state.run)
    if path:
        Path(path).write_text(text, encoding="utf-8")
    append_step_summary(text)


class _ResultsCollector:
    """Takes measurements off test reports as they arrive (controller or plain run only)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        for measurement in getattr(report, "modelsweep_measurements", None) or []:
            self.state.add_measurement(measurement)
        finished = report.when == "call" or (report.when == "setup" and not report.passed)
        if finished and self.state.id_parser.model_of(report.nodeid) is not None:
            # Comparisons on other workers stop waiting for a test that ended without a result.
            self.state.store.add_outcome(self.state.run_id, report.nodeid, report.outcome)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the results, save or compare the baseline; a regression fails the session."""
    state = _state(session.config)
    if not state.is_worker:
        try:
            rows = state.gate()
        except ModelsweepError as error:
            state.gate_error = str(error)
            rows = []
        if state.gate_error or any(row.failed for row in rows):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        state.save_baseline_if_asked()
        state.finish_results({"exitstatus": int(session.exitstatus),
                              "gate": [row.__dict__ for row in rows]})
        _write_markdown(session.config, state)
    state.close()


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = _state(config)
    if state.is_worker:
        return
    if state.gate_rows or state.gate_error:
        from .gate import gate_table

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


class _XdistHooks:
    """Hooks that exist only when pytest-xdist is installed."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput["modelsweep_run_id"] = self.state.run_id

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(self, config: pytest.Config, log: Any) -> Any:
        if config.getvalue("dist") == "each":
            return None
        from .scheduler.by_model import ModelScheduling

        try:
            parser = self.state.id_parser
        except ModelsweepError as error:
            _fail_usage(error)
        return ModelScheduling(config, log, parser)
