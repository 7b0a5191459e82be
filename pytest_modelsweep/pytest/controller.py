"""The controller's (or a plain run's) side of a run: results, gate, summaries; only it writes.

Measurements arrive on test reports (from xdist workers too); every hook returns at once in a
run without modelsweep tests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import ModelsweepError
from .context import active_run_state, run_state

if TYPE_CHECKING:
    from .html_hooks import HtmlReportHooks
    from .state import RunState


def fail_report(report: pytest.TestReport, state: RunState, line: str) -> None:
    """A test whose results could not be written fails in ``line``; a setup that passed goes
    on (its test may still write) and the line fails the session at its end."""
    if report.when == "setup" and report.passed:
        state.session_errors.append(line)
        return
    if report.passed:
        report.outcome = "failed"
        report.longrepr = line
    else:
        from ..core.secrets import redact

        said = str(report.longrepr)  # a failure that says the store failed says it once
        if redact(line) not in said and not (
            line.startswith("the store ") and redact(str(state.config.store_location)) in said
        ):
            report.sections.append(("modelsweep: results not written", redact(line)))


def first_line(report: pytest.TestReport) -> str:
    """What a failed report says, in one line: the error's own line, else the last one."""
    crash = getattr(report.longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(report.longrepr or "")
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[0] if crash is not None and lines else (lines[-1] if lines else report.outcome)


def _fail_on_errors(session: pytest.Session, state: RunState) -> None:
    """A session error fails a session that would pass."""
    if state.session_errors and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


class ControllerHooks:
    """Registered on xdist's controller or a plain run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.html_column = False  # pytest-html asked for its header after the state was made

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        recorded = getattr(report, "modelsweep_measurements", None)
        if getattr(report, "modelsweep_model", None) is None and not recorded:
            return
        from .state import attempted

        state = run_state(self.config)
        writes: list[Callable[[], None]] = [] if state.tests_reported else [state.start_run]
        writes += [partial(state.add_measurement, m) for m in recorded or []]
        finished = report.when == "call" or (report.when == "setup" and not report.passed)
        if finished and getattr(report, "modelsweep_model", None) is not None:
            # Comparisons on other workers stop waiting for a test that ended without a result.
            writes.append(
                lambda: state.store.add_outcome(state.config.run_id, report.nodeid, report.outcome)
            )
        if problems := attempted(writes):  # a full disk: this test fails, the others run
            fail_report(report, state, "; ".join(dict.fromkeys(problems)))
        unjudged = getattr(report, "modelsweep_unjudged", None)
        if unjudged is not None:
            state.unjudged.append((report.nodeid, unjudged))
        if report.failed:  # listed in the results and the reports
            from ..core.secrets import redact

            state.failures.append(
                {
                    "test_id": report.nodeid,
                    "when": report.when,
                    "outcome": "failed" if report.when == "call" else "error",
                    "message": redact(first_line(report)),
                }
            )
        if self.config.pluginmanager.hasplugin("html") and self.config.getoption("htmlpath", None):
            self._html(state).pytest_runtest_logreport(report)  # (the report code loads only then)

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

    def _html(self, state: RunState) -> HtmlReportHooks:
        from .html_hooks import HtmlReportHooks

        return HtmlReportHooks.for_state(state, self.config)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        """Write the results, save or compare the baseline; a regression fails the session."""
        state = active_run_state(self.config)
        if state is None:
            return
        try:
            self._finish(session, state)
        finally:  # a run recorded in the store is marked ended whatever happened above
            try:
                state.finish_run(int(session.exitstatus))
            except ModelsweepError as error:  # a full disk at the end: one line
                state.session_errors.append(str(error))
                _fail_on_errors(session, state)

    def _finish(self, session: pytest.Session, state: RunState) -> None:
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
        if state.unjudged and not state.config.options.allow_unjudged:
            test, why = state.unjudged[0]
            state.session_errors.append(
                f"{len(state.unjudged)} comparison test(s) judged nothing, so this run does not "
                f"pass (first: {test}: {why}); run the reference's benchmarks first, or pass "
                "--allow-unjudged"
            )
        _fail_on_errors(session, state)
        if not state.tests_reported:
            return  # an option of ours, but no modelsweep test ran: nothing to write
        from .state import attempted

        state.session_errors += attempted(  # a full disk at the end: one line, no traceback
            (
                lambda: state.finish_results(
                    {"exitstatus": int(session.exitstatus), "gate": [row.__dict__ for row in rows]}
                ),
                lambda: write_markdown(self.config, state),
                lambda: write_llmd(self.config, state),
            ),
            ModelsweepError,
        )
        _fail_on_errors(session, state)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int) -> None:
        state = active_run_state(self.config)
        if state is None:
            return
        from ..core.secrets import redact
        from ..report.terminal import gate_table, measurement_table

        for line in state.session_errors:
            terminalreporter.write_line(redact(f"modelsweep: {line}"), red=True)
        if state.gate_rows or state.gate_error or state.gate_ungated:
            failed = sum(row.failed for row in state.gate_rows)
            ungated = bool(state.gate_ungated) and not state.config.options.allow_ungated
            bad = bool(failed or state.gate_error or ungated)
            terminalreporter.write_sep(
                "=",
                f"modelsweep baseline {state.config.options.baseline}: "
                + (
                    f"{failed} regressed or not comparable"
                    if failed
                    else "compared nothing"
                    if state.gate_ungated
                    else "no regression"
                ),
                red=bad,
                green=not bad,
            )
            if state.gate_error:
                terminalreporter.write_line(redact(f"modelsweep: {state.gate_error}"), red=True)
            for line in gate_table(state.gate_rows):
                terminalreporter.write_line(line)
        if not state.measurements:
            return
        terminalreporter.write_sep("=", "modelsweep measurements")
        if state.config.options.sweep_run is not None:
            members = state.sweep_run_members()
            terminalreporter.write_line(
                f"sweep run {state.config.options.sweep_run}: {len(members)} "
                f"run{'s' if len(members) != 1 else ''} ("
                + ", ".join(str(m) for m in members)
                + ")"
            )
        for line in measurement_table(state.judged_measurements()):
            terminalreporter.write_line(line)
        if state.config.results_path.is_file():  # (else a line above said why it is not)
            terminalreporter.write_line(f"results: {state.config.results_path}")


def write_llmd(config: pytest.Config, state: RunState) -> None:
    """``--llm-d-report FILE``: llm-d's Benchmark Report v0.2.1 of the run's settings."""
    if config.option.llm_d_report:
        from ..report.llmd import write_llmd_report

        write_llmd_report(
            config.option.llm_d_report,
            "--llm-d-report",
            state.judged_measurements(),
            state.report_run(),
        )


def write_markdown(config: pytest.Config, state: RunState) -> None:
    """``--md PATH`` and ``$GITHUB_STEP_SUMMARY``: the run's tables as a PR-ready comment."""
    path = config.option.md
    if not (path or os.environ.get("GITHUB_STEP_SUMMARY")):
        return
    from ..core.outputs import OutputError, write_failure, write_file
    from ..core.secrets import redact
    from ..report.markdown import append_step_summary, markdown_report
    from .state import attempted

    text = redact(markdown_report(state.judged_measurements(), state.report_run(), state.failures))
    problems = attempted([lambda: write_file(path, "--md", text)] if path else [])
    try:
        append_step_summary(text)
    except OSError as error:
        problems.append(
            str(write_failure("$GITHUB_STEP_SUMMARY", os.environ["GITHUB_STEP_SUMMARY"], error))
        )
    if problems:
        raise OutputError("; ".join(problems))
