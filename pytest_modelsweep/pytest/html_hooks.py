"""pytest-html 4 hooks: the decision page and summary section, a measurement column, extras.

On the controller only: a test's measurements arrive on its report and become
``report.extras`` before pytest-html's own (``trylast``) ``pytest_runtest_logreport`` reads them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

import pytest

from ..core.errors import ModelsweepError
from ..report.history import HISTORY_TITLE, history_section
from ..report.html import (
    CSS,
    DECISION_TITLE,
    SUMMARY_TITLE,
    decision_html,
    escape_text,
    headline,
    measurement_json,
    measurements_extra_html,
    section_or_note,
    summary_html,
)
from ..report.tables import records
from ..store.results import FailedTest, RunInfo

Source = Callable[[], tuple[Sequence[Mapping[str, Any]], Mapping[str, Any]]]
"""The measurements recorded so far and the run dict."""
Failures = Sequence[Mapping[str, Any]]

if TYPE_CHECKING:
    from .state import RunState


def run_of(state: RunState) -> dict[str, Any]:
    """The run dict of a session or its sweep run (never failing over a bad sweep)."""
    try:
        return state.report_run()
    except ModelsweepError:
        return {"run_id": state.config.run_id}


class HtmlReportHooks:
    """The hooks, reading ``source`` (measurements so far, run dict) and ``failures``."""

    def __init__(
        self,
        source: Source,
        *,
        enabled: bool = True,
        failures: Callable[[], Failures] = lambda: (),
        history: Callable[[], str] = lambda: "",
    ) -> None:
        self.source = source
        self.enabled = enabled
        self.failures = failures
        self.history = history

    @classmethod
    def for_state(cls, state: RunState, config: pytest.Config) -> HtmlReportHooks:
        """Hooks reading the run's (or sweep run's) measurements; idle unless ``--html``."""
        return cls(
            lambda: (state.judged_measurements(), run_of(state)),
            enabled=bool(config.getoption("htmlpath", None)),
            failures=lambda: state.failures,
            history=lambda: history_section(state.store, state.config.sweep.name),
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(
        self, prefix: list[str], summary: list[str], postfix: list[str], session: pytest.Session
    ) -> None:
        recorded, run = self.source()
        if not recorded:
            return
        measurements, info = records(recorded), RunInfo.of(run)
        decision = section_or_note(
            DECISION_TITLE,
            lambda: decision_html(measurements, info, [FailedTest.of(f) for f in self.failures()]),
        )
        if decision:
            # prefix: right under pytest-html's "Summary" heading, the first screen
            prefix.append(f"<style>{CSS}</style>{decision}")
        postfix.append(
            section_or_note(SUMMARY_TITLE, lambda: summary_html(measurements, info))
            + section_or_note(HISTORY_TITLE, self.history)
        )

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if not self.enabled or report.when != "call":
            return
        recorded = records(getattr(report, "modelsweep_measurements", None) or [])
        if not recorded:
            return
        from pytest_html import extras

        added = [
            extras.html(measurements_extra_html(recorded)),
            *(
                extras.json(measurement_json(m), name=f"{m.benchmark or 'measurement'} JSON")
                for m in recorded
            ),
        ]
        report.extras = [*getattr(report, "extras", []), *added]  # type: ignore[attr-defined]

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells.insert(
            _after_test_id(cells, 'data-column-type="testId"'),
            '<th class="modelsweep-col">Measurement</th>',
        )

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_table_row(self, report: pytest.TestReport, cells: list[str]) -> None:
        if not cells:  # another plugin dropped the row
            return
        _escape_test_id(report, cells)
        recorded = records(getattr(report, "modelsweep_measurements", None) or [])
        text = "<br>".join(escape_text(f"{m.model}: {headline(m)}") for m in recorded)
        cells.insert(
            _after_test_id(cells, 'class="col-testId"'), f'<td class="modelsweep-col">{text}</td>'
        )


def _after_test_id(cells: Sequence[str], marker: str) -> int:
    return next((i + 1 for i, cell in enumerate(cells) if marker in cell), len(cells))


def _escape_test_id(report: pytest.TestReport, cells: list[str]) -> None:
    """Escape the test id pytest-html 4.2 puts in its cell raw (its issue #1024), only when
    the cell holds the raw id (a fixed pytest-html is not escaped twice)."""
    test_id = report.nodeid if report.when in ("call", None) else f"{report.nodeid}::{report.when}"
    raw = f'<td class="col-testId">{test_id}</td>'
    for i, cell in enumerate(cells):
        if cell == raw:
            cells[i] = f'<td class="col-testId">{escape(test_id, quote=False)}</td>'
