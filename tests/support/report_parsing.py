"""Shared by the tests: moved from test_report_real_run.py."""

from __future__ import annotations

import html
import re


def markdown_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Each ``### title`` table of a Markdown report as rows of column -> cell."""
    tables: dict[str, list[dict[str, str]]] = {}
    for block in text.split("\n### ")[1:]:
        title, _, body = block.partition("\n")
        lines = [line for line in body.splitlines() if line.startswith("| ")]
        if len(lines) < 2:
            continue

        def cells(line: str) -> list[str]:
            return [c.strip().replace("\\", "") for c in re.split(r"(?<!\\)\|", line)[1:-1]]

        header = cells(lines[0])
        tables[title] = [dict(zip(header, cells(line))) for line in lines[2:]]
    return tables


def html_tables(text: str) -> dict[str, list[dict[str, str]]]:
    """Each summary table of an HTML report (``data-kind="throughput"``) as rows of column -> cell."""
    tables: dict[str, list[dict[str, str]]] = {}
    for match in re.finditer(
        r'<div class="ms-table-block" data-kind="throughput"><h3>(.*?)</h3>'
        r"<table.*?<thead>(.*?)</thead><tbody>(.*?)</tbody>",
        text,
        re.DOTALL,
    ):
        title, head, body = match.groups()
        header = [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", head)]
        rows = [
            [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body)
        ]
        tables[html.unescape(title)] = [dict(zip(header, row)) for row in rows]
    return tables


def summary_section(text: str) -> str:
    start = text.index('<section class="modelsweep" id="modelsweep-summary">')
    return text[start : text.index("</section>", start)]
