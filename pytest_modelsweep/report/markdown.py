"""The run's summary as GitHub Markdown: a pull-request comment or a CI step summary.

Cells are escaped for GitHub: ``&<>`` become entities, ``|``, inline markup and ``$`` (its math
delimiter) get a backslash, line breaks become ``<br>``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.measurements import Measurement
from ..store.results import FailedTest, RunInfo
from .decision.build import decision_page
from .decision.layout import (
    Block,
    cell_lines,
    figure_lines,
    pareto_line,
    table_columns,
    unmeasured_line,
    unplaced_line,
)
from .decision.page import FIGURES_TITLE, DecisionPage, DecisionRow
from .tables import TEXT_COLUMNS, Cell, Table, provenance_line, records, run_title, summary_tables

STEP_SUMMARY_ENV = "GITHUB_STEP_SUMMARY"

_ENTITIES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKSLASHED = set("\\|`*_[]~$")
_SEVERITY = ("worse", "inconclusive", "better", "equivalent", "matches")


def escape_markdown(text: object) -> str:
    """Text made inert in a GitHub Markdown table cell or paragraph."""
    return "".join(
        _ENTITIES.get(char)
        or ("\\" + char if char in _BACKSLASHED else "<br>" if char == "\n" else char)
        for char in str(text).replace("\r\n", "\n").replace("\r", "\n")
    )


def _status(word: Cell) -> str:
    return f"**{escape_markdown(str(word).upper())}**"


def _line(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def markdown_table(table: Table) -> list[str]:
    """A table as GitHub Markdown lines (header, alignment row, rows)."""
    return [
        _line(map(escape_markdown, table.columns)),
        _line("---" if c in TEXT_COLUMNS else "---:" for c in table.columns),
        *(
            _line(
                _status(cell) if i == table.status_column else escape_markdown(cell)
                for i, cell in enumerate(row)
            )
            for row in table.rows
        ),
    ]


def _decision_cell(block: Block, row: DecisionRow) -> str:
    """A row's cell in a table column: its lines (``<br>`` between them), verdict words bold."""
    return "<br>".join(
        " ".join(
            ([escape_markdown(line.label)] if line.label else [])
            + [
                _status(cell.text)
                if column.verdict and cell.verdict and not cell.why
                else escape_markdown(cell.shown)
                for column, cell in line.parts
            ]
        )
        for line in cell_lines(block, row)
    )


def decision_markdown(page: DecisionPage) -> list[str]:
    """The decision page as Markdown lines."""
    blocks = table_columns(page)
    titles = [
        "model",
        *(f"{escape_markdown(b.title)}<br><sub>{escape_markdown(b.parts)}</sub>" for b in blocks),
        "flags",
    ]
    figures = figure_lines(page)
    return [
        "### Decision: which model to serve",
        "",
        f"**{escape_markdown(page.answer)}**",
        "",
        _line(titles),
        _line("---" for _ in titles),
        *(
            _line(
                [
                    escape_markdown(row.model) + ("<br>(reference)" if row.is_reference else ""),
                    *(_decision_cell(block, row) for block in blocks),
                    "<br>".join(map(escape_markdown, row.flags)),
                ]
            )
            for row in page.rows
        ),
        *(
            part
            for line in (unplaced_line(page), unmeasured_line(page))
            if line
            for part in ("", escape_markdown(line))
        ),
        *([""] if page.reasons else []),
        *(f"{escape_markdown(f'[{i}] {why}')}  " for i, why in enumerate(page.reasons, 1)),
        *(
            ["", "<sub>" + "<br>".join(map(escape_markdown, page.notes)) + "</sub>"]
            if page.notes
            else []
        ),
        *(
            [
                "",
                f"<details><summary>{escape_markdown(FIGURES_TITLE)}</summary>",
                "",
                *(f"{escape_markdown(line)}  " for line in figures),
                "",
                "</details>",
            ]
            if figures
            else []
        ),
        "",
        escape_markdown(pareto_line(page)),
    ]


def _table_lines(table: Table) -> list[str]:
    """A summary table under its heading: a verdicts table's counts of each word first, its
    notes under it."""
    counts = (
        Counter(str(row[table.status_column]) for row in table.rows)
        if table.kind == "verdicts" and table.status_column is not None
        else Counter()
    )
    ordered = sorted(
        counts, key=lambda w: (_SEVERITY.index(w) if w in _SEVERITY else len(_SEVERITY), w)
    )
    return [
        "",
        f"### {escape_markdown(table.title)}",
        "",
        *(
            [
                f"{len(table.rows)} comparison{'s' if len(table.rows) != 1 else ''}: "
                + ", ".join(f"{counts[w]} {escape_markdown(w)}" for w in ordered),
                "",
            ]
            if counts
            else []
        ),
        *markdown_table(table),
        *(
            ["", "<sub>" + escape_markdown("; ".join(table.notes)) + "</sub>"]
            if table.notes
            else []
        ),
    ]


def markdown_report(
    measurements: Iterable[Measurement | Mapping[str, Any]],
    run: Mapping[str, Any],
    failures: Sequence[Mapping[str, Any]] = (),
) -> str:
    """The whole report of a results file's measurements, run and failed tests."""
    found, info, failed = (
        records(measurements),
        RunInfo.of(run),
        [FailedTest.of(f) for f in failures],
    )
    page = decision_page(found, info, failed)
    tables = summary_tables(found, reference=info.reference)
    return (
        "\n".join(
            [
                f"## {escape_markdown(run_title(info))}",
                "",
                escape_markdown(provenance_line(found, info)),
                *(["", *decision_markdown(page)] if page is not None else []),
                *(
                    [
                        "",
                        f"### Failed tests ({len(failed)})",
                        "",
                        *(
                            f"- `{escape_markdown(f.test_id)}` ({escape_markdown(f.when)}): "
                            f"{escape_markdown(f.message)}"
                            for f in failed
                        ),
                    ]
                    if failed
                    else []
                ),
                *([] if tables else ["", "No measurements were recorded."]),
                *(line for table in tables for line in _table_lines(table)),
            ]
        )
        + "\n"
    )


def append_step_summary(markdown: str) -> Path | None:
    """Append to the file ``$GITHUB_STEP_SUMMARY`` names (GitHub Actions); None when unset."""
    target = os.environ.get(STEP_SUMMARY_ENV)
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(markdown if markdown.endswith("\n") else markdown + "\n")
    return Path(target)
