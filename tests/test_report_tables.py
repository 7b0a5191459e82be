"""Summary tables and the Markdown report, read from real runs.

The input is what the benches write (the runs of ``tests/test_decision_page.py``: the real
benches and a user's own evaluation against fake servers, and one more here with ``--holm
--margin``, a single repeat and the smoke test), never hand-made measurement dicts. The
tables built from a results file's records (:func:`summary_tables`) must be exactly the
Markdown's and the HTML's, cell for cell, and each cell the figure of the record behind it.
"""

from __future__ import annotations

import html
import re
from pathlib import Path
from typing import Any

import pytest
from support.decision_runs import (
    LIMIT,
    REFERENCE,
    SAME,
    SWEEP,
    TPU_PRICE,
    UNREACHABLE,
    WORSE,
    AnsweringServer,
    Run,
    replies_of,
    run_benches,
    run_capacity_only,
    run_failed_reference,
    run_real,
    serving,
)
from support.shared_runs import once_per_session

from pytest_modelsweep.core.measurements import CONCURRENCY, SearchRatioStats, SearchStats
from pytest_modelsweep.core.stats.intervals import wilson_interval
from pytest_modelsweep.report.markdown import (
    append_step_summary,
    escape_markdown,
    markdown_report,
)
from pytest_modelsweep.report.tables import (
    NA,
    Table,
    format_goodput,
    format_percent,
    format_percent_interval,
    format_points,
    format_points_interval,
    format_rate,
    format_ratio,
    format_usd,
    provenance_line,
    records,
    run_title,
    summary_tables,
)
from pytest_modelsweep.store.results import RunInfo

HOLM_CANDIDATES = ("qwen3-4b", "phi-4-mini")


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return once_per_session(tmp_path_factory, "decision_run", run_real)


@pytest.fixture(scope="module")
def capacity_only_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return once_per_session(tmp_path_factory, "capacity_only_run", run_capacity_only)


@pytest.fixture(scope="module")
def failed_reference_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return once_per_session(tmp_path_factory, "failed_reference", run_failed_reference)


@pytest.fixture(scope="module")
def holm_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The user's arith evaluation judged with ``--holm --margin 0.05``, c1 throughput with
    one repeat (its ratio has no interval) and the smoke test, for the reference and two
    candidates."""
    path = tmp_path_factory.mktemp("holm_run")
    servers = {
        model: AnsweringServer(model, replies_of(model), chunk_delay_s=0.0004)
        for model in (REFERENCE, *HOLM_CANDIDATES)
    }
    (path / "test_smoke.py").write_text(
        (Path(__file__).resolve().parents[1] / "benches" / "test_smoke.py").read_text()
    )
    return serving(
        servers,
        lambda: run_benches(
            path,
            servers,
            "test_arith.py",
            "test_throughput.py",
            "test_smoke.py",
            "-k",
            "arith or smoke or (c1 and not c16 and not long)",
            "--holm",
            "--margin=0.05",
            "--repeats=1",
            "--timed-requests=4",
            "--contended-cores=64",
            "--contended-steal=1",
            sweep=SWEEP + TPU_PRICE,
        ),
    )


RUNS = ["real_run", "capacity_only_run", "failed_reference_run", "holm_run"]


def run_of(request: pytest.FixtureRequest, name: str) -> Run:
    run: Run = request.getfixturevalue(name)
    return run


def tables_of(run: Run) -> dict[str, Table]:
    """The tables built from the results file's records, by title."""
    tables = summary_tables(
        records(run.results["measurements"]), reference=run.results["run"].get("reference")
    )
    return {t.title: t for t in tables}


def measurements(run: Run, benchmark: str) -> list[dict[str, Any]]:
    return [m for m in run.results["measurements"] if m["benchmark"] == benchmark]


# --------------------------------------------------------------------------- reading the reports


def _unescape_markdown(cell: str) -> str:
    return html.unescape(re.sub(r"\\(.)", r"\1", cell.strip()).replace("<br>", "\n"))


def markdown_tables(text: str) -> dict[str, tuple[list[str], list[list[str]], str]]:
    """Each ``### title`` summary table of a Markdown report: (columns, rows, notes)."""
    found = {}
    for block in text.split("\n### ")[1:]:
        title, _, body = block.partition("\n")
        lines = [line for line in body.splitlines() if line.startswith("| ")]
        if title.startswith(("Decision", "Failed tests")) or len(lines) < 2:
            continue

        def cells(line: str) -> list[str]:
            found = [_unescape_markdown(c) for c in re.split(r"(?<!\\)\|", line)[1:-1]]
            # a verdict word is shown in bold capitals: **WORSE**
            return [c[2:-2].lower() if re.fullmatch(r"\*\*[A-Z]+\*\*", c) else c for c in found]

        notes = re.search(r"<sub>(.*)</sub>", body)
        found[_unescape_markdown(title)] = (
            cells(lines[0]),
            [cells(line) for line in lines[2:]],
            _unescape_markdown(notes.group(1)) if notes else "",
        )
    return found


def html_tables(text: str) -> dict[str, tuple[list[str], list[list[str]], str]]:
    """Each summary table of an HTML report: (columns, rows, notes)."""
    found = {}
    for title, head, body, notes in re.findall(
        r'<div class="ms-table-block" data-kind="[^"]*"><h3>(.*?)</h3><table class="ms-table">'
        r"<thead>(.*?)</thead><tbody>(.*?)</tbody></table>"
        r'(?:<p class="ms-notes">(.*?)</p>)?</div>',
        text,
        re.DOTALL,
    ):
        rows = [
            [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr>(.*?)</tr>", body)
        ]
        found[html.unescape(title)] = (
            [html.unescape(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", head)],
            rows,
            html.unescape(notes),
        )
    return found


# --------------------------------------------------------------------------- Markdown = HTML = tables


@pytest.mark.parametrize("name", RUNS)
def test_the_reports_show_the_tables_of_the_records_cell_for_cell(
    request: pytest.FixtureRequest,
    name: str,
) -> None:
    run = run_of(request, name)
    expected = {
        title: (t.columns, [[str(c) for c in row] for row in t.rows], "; ".join(t.notes))
        for title, t in tables_of(run).items()
    }
    assert expected
    assert markdown_tables(run.markdown) == expected
    assert html_tables(run.html) == expected
    # the standalone report of the results file (`modelsweep report`) says the same
    again = markdown_report(
        run.results["measurements"], run.results["run"], run.results["summary"].get("failures", [])
    )
    assert markdown_tables(again) == expected


# --------------------------------------------------------------------------- each cell


def test_verdict_rows_are_the_paired_intervals_of_the_verdict_records(real_run: Run) -> None:
    table = tables_of(real_run)["Verdicts"]
    assert table.columns == [
        "candidate",
        "reference",
        "metric",
        "difference",
        "95% interval",
        "n",
        "discordant",
        "detectable",
        "verdict",
    ]
    verdicts = [
        m for m in real_run.results["measurements"] if m["benchmark"].startswith("verdict:")
    ]
    expected = sorted(
        (
            [
                s["candidate"],
                s["reference"],
                s["metric"],
                format_points(s["interval"]["difference"]),
                format_points_interval(s["interval"]["low"], s["interval"]["high"]),
                s["interval"]["n"],
                s["interval"]["discordant"],
                format_points(s["interval"]["min_detectable_difference"]).replace("+", "±"),
                s["verdict"],
            ]
            for s in (m["stats"] for m in verdicts)
        ),
        key=lambda row: (["gsm8k", "bfcl", "arith"].index(row[2]), row[0]),
    )
    assert table.rows == expected and len(expected) == 6
    assert table.status_column == 8
    assert not any("Holm" in note or "margin" in note for note in table.notes)


def test_holm_and_a_margin_are_stated_with_the_level_of_each_interval(holm_run: Run) -> None:
    table = tables_of(holm_run)["Verdicts"]
    assert table.columns[4] == "interval"  # the levels differ from 95%: each cell says its own
    for row, m in zip(
        table.rows,
        sorted(measurements(holm_run, "verdict:arith"), key=lambda m: m["stats"]["candidate"]),
    ):
        stats = m["stats"]["interval"]
        assert m["stats"]["rule"].startswith("holm+") and stats["confidence"] > 0.95
        assert row[4] == (
            f"{format_points_interval(stats['low'], stats['high'])} "
            f"({round(100 * stats['confidence'], 1):g}%)"
        )
    assert "equivalence margin ±5.0 pp" in table.notes
    assert "intervals Holm-adjusted across the candidates" in table.notes


def test_accuracy_rows_list_the_reference_first_with_wilson_intervals(real_run: Run) -> None:
    tables = tables_of(real_run)
    for benchmark, title in (
        ("gsm8k", "GSM8K accuracy"),
        ("bfcl", "BFCL accuracy"),
        ("arith", "arith accuracy"),
    ):
        rows = tables[title].rows
        assert rows[0][0] == REFERENCE and [r[0] for r in rows[1:]] == sorted(
            r[0] for r in rows[1:]
        )
        for row in rows:
            [m] = [m for m in measurements(real_run, benchmark) if m["model"] == row[0]]
            low, high = wilson_interval(round(m["value"] * m["n"]), m["n"])
            assert row[1:3] == [format_percent(m["value"]), format_percent_interval(low, high)]
            stats = m["stats"]
            if benchmark == "gsm8k":
                assert row[3:] == [
                    format_percent(stats["figures"]["strict_match_accuracy"]),
                    m["n"],
                    f"first {LIMIT}",
                    format_percent(stats["truncated_rate"]),
                    stats["failed"],
                ]
            elif benchmark == "bfcl":
                errors = sorted(
                    stats["figures"]["error_types"].items(), key=lambda kv: (-kv[1], kv[0])
                )
                assert row[3:] == [
                    m["n"],
                    f"first {LIMIT}",
                    stats["figures"]["parse_failures"],
                    stats["failed"],
                    ", ".join(f"{k} {v}" for k, v in errors),
                ]
            else:
                assert row[3:] == [m["n"], f"first {LIMIT}"]


def test_ratio_rows_and_a_ratio_from_single_repeats(real_run: Run, holm_run: Run) -> None:
    [m] = [m for m in measurements(real_run, "throughput_ratio") if m["model"] == "qwen3-4b"]
    rows = tables_of(real_run)["Throughput relative to the reference"].rows
    stats = m["stats"]["interval"]
    assert [
        "qwen3-4b",
        REFERENCE,
        "throughput",
        16,
        "short",
        f"{m['value']:.2f}×",
        f"[{stats['low']:.2f}, {stats['high']:.2f}]",
    ] in rows
    single = tables_of(holm_run)["Throughput relative to the reference"].rows
    assert single and all(
        row[2:5] == ["throughput", 1, "short"] and row[6] == "n/a (single repeat)" for row in single
    )
    assert all(
        m["stats"]["interval"]["degenerate"] for m in measurements(holm_run, "throughput_ratio")
    )


def test_throughput_rows_of_one_repeat_and_their_cost(holm_run: Run) -> None:
    rows = tables_of(holm_run)["Throughput"]
    assert [row[0] for row in rows.rows] == [REFERENCE, *sorted(HOLM_CANDIDATES)]
    for row in rows.rows:
        [m] = [m for m in measurements(holm_run, "throughput") if m["model"] == row[0]]
        cells = dict(zip(rows.columns, row))
        assert cells["tokens/s"] == format_rate(m["value"])
        assert (cells["range"], cells["repeats"], cells["CV"]) == (NA, 1, NA)
        # the sweep's price; one repeat: no interval
        assert cells["$/1M output tokens"] == format_usd(
            m["stats"]["cost"]["usd_per_million_output_tokens"]
        )


def test_other_measurements_are_listed_as_recorded(holm_run: Run) -> None:
    smoke = tables_of(holm_run)["Other measurements"]
    assert smoke.columns == ["model", "benchmark", "parameters", "value", "n", "outcome"]
    for row, m in zip(smoke.rows, measurements(holm_run, "smoke")):
        assert row[:2] == [m["model"], "smoke"] and row[3].endswith(" tokens/s")
        assert row[2] == " ".join(f"{k}={v}" for k, v in m["params"].items())
        assert (row[4], row[5]) == (m["n"], m["outcome"])


def test_a_concurrency_capacity_has_the_capacity_table_in_its_unit(
    capacity_only_run: Run,
) -> None:
    """The capacity searches and their ratios are the table the rate sweeps have, in
    concurrent requests: a row per search (the reference first), then each ratio."""
    tables = tables_of(capacity_only_run)
    assert "Other measurements" not in tables
    table = tables["Capacity under SLO"]
    assert (table.kind, table.columns) == (
        "capacity",
        [
            "model",
            "capacity (concurrent requests)",
            "bracket",
            "steps",
            "goodput (req/s)",
            "SLO attainment",
            "tokens/s",
            "flags",
            "stopped",
        ],
    )
    found = records(capacity_only_run.results["measurements"])
    searches = sorted(
        (m for m in found if m.benchmark == "capacity"),
        key=lambda m: (m.model != REFERENCE, m.model),
    )
    ratios = sorted((m for m in found if m.benchmark == "capacity_ratio"), key=lambda m: m.model)
    assert len(table.rows) == len(searches) + len(ratios) and len(searches) == 4
    for row, m in zip(table.rows, searches):
        stats = m.stats
        assert isinstance(stats, SearchStats) and stats.knob == CONCURRENCY
        at = stats.at_capacity
        shown = {
            "capacity (concurrent requests)": NA if stats.capacity is None else str(stats.capacity),
            "bracket": NA
            if stats.bracket is None
            else f"[{stats.bracket[0]}, {'open' if stats.bracket[1] is None else stats.bracket[1]}]",
            "steps": len(stats.steps),
            "goodput (req/s)": format_goodput(at and at.goodput_rps),
            "SLO attainment": format_percent(at and at.slo_attainment),
            "tokens/s": format_rate(at and at.output_tokens_per_s),
            "stopped": stats.error or stats.reason or "",
        }
        assert row[0] == m.model
        assert {c: row[table.columns.index(c)] for c in shown} == shown, m.model
    # the broken search says why it has no capacity; the others' capacities are their slots
    rows = {row[0]: row for row in table.rows[: len(searches)]}
    assert {model: row[1] for model, row in rows.items()} == {
        REFERENCE: "3",
        SAME: "4",
        WORSE: "0",
        UNREACHABLE: NA,
    }
    assert rows[UNREACHABLE][-1] and rows[SAME][2] == "[4, open]"
    for row, m in zip(table.rows[len(searches) :], ratios):
        stats = m.stats
        assert isinstance(stats, SearchRatioStats) and stats.ratio is not None
        verdict = NA if stats.verdict is None else stats.verdict.value
        assert row[:2] == [m.model, f"{format_ratio(m.value)} {REFERENCE}"]
        assert row[-1] == verdict and row[3:7] == ["", "", "", ""]
    assert "concurrent requests" in table.notes[0] and "search ended" in table.notes[0]


def test_order_of_the_tables(real_run: Run, holm_run: Run, capacity_only_run: Run) -> None:
    assert list(tables_of(real_run)) == [
        "Verdicts",
        "GSM8K accuracy",
        "BFCL accuracy",
        "arith accuracy",
        "Throughput relative to the reference",
        "Throughput",
        "Other measurements",
    ]
    assert list(tables_of(holm_run)) == [
        "Verdicts",
        "arith accuracy",
        "Throughput relative to the reference",
        "Throughput",
        "Other measurements",
    ]
    assert list(tables_of(capacity_only_run)) == [
        "Throughput relative to the reference",
        "Throughput",
        "Capacity under SLO",
    ]


# --------------------------------------------------------------------------- heading, formats


def test_run_title_and_provenance_line(real_run: Run) -> None:
    run = {
        "run_id": "20250101T000000Z-abc123",
        "sweep_name": "tpu-v5e",
        "reference": "gemma3-270m",
        "project": {"commit": "0123456789abcdef0123", "dirty": False},
    }
    assert run_title(RunInfo.of(run)) == (
        "modelsweep: sweep tpu-v5e, reference gemma3-270m, commit 0123456789"
    )
    assert run_title(RunInfo.of({**run, "project": {"commit": "abc", "dirty": True}})).endswith(
        "commit abc (dirty)"
    )
    assert run_title(RunInfo()) == "modelsweep"
    results = real_run.results
    line = provenance_line(records(results["measurements"]), RunInfo.of(results["run"]))
    assert line == (
        f"openai-compatible · run {results['run']['run_id']} · "
        f"{len(results['measurements'])} measurements"
    )
    assert real_run.markdown.splitlines()[2] == escape_markdown(line)
    assert provenance_line([], RunInfo(backend="llamacpp")) == "llamacpp · 0 measurements"


def test_number_formats() -> None:
    assert format_percent(0.41234) == "41.2%"
    assert format_percent(float("nan")) == "n/a"
    assert format_percent(None) == "n/a"
    assert format_points(0.02) == "+2.0 pp"
    assert format_points(-0.0001) == "+0.0 pp"  # never "-0.0"
    assert format_points_interval(-0.0904, 0.01) == "[-9.0, +1.0] pp"
    assert format_rate(1234.56) == "1,234.6"
    assert [format_usd(v) for v in (1234.5, 1.385, 0.1, 0.02784, 8.312e-5, 0.0009996, 0)] == [
        "1,234",
        "1.39",
        "0.100",
        "0.0278",
        "0.0000831",
        "0.00100",
        "0.00",
    ]
    assert format_usd(1.385, "$") == "$1.39" and format_usd(None, "$") == NA


def test_markdown_escapes_cells() -> None:
    assert escape_markdown("a|b") == "a\\|b"
    assert (
        escape_markdown("<script>alert('x')</script>") == "&lt;script&gt;alert('x')&lt;/script&gt;"
    )
    assert escape_markdown("one\ntwo\r\nthree") == "one<br>two<br>three"
    assert escape_markdown("R&D *bold* _it_ `code` [link](x)") == (
        "R&amp;D \\*bold\\* \\_it\\_ \\`code\\` \\[link\\](x)"
    )


def test_markdown_without_measurements() -> None:
    text = markdown_report([], {})
    assert text == "## modelsweep\n\n0 measurements\n\nNo measurements were recorded.\n"


def test_append_step_summary(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    assert append_step_summary("# hi\n") is None
    target = tmp_path / "summary.md"
    target.write_text("earlier step\n", encoding="utf-8")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(target))
    assert append_step_summary("## one") == target
    assert append_step_summary("## two\n") == target
    assert target.read_text(encoding="utf-8") == "earlier step\n## one\n## two\n"
