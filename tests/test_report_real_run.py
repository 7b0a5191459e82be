"""The reports of a real run: the real throughput bench against fake servers, read back.

The input is what ``benches/test_throughput.py`` writes, not hand-made dicts: the
bench runs once per module (a pytest subprocess, as pytester runs one) against two
:class:`ListingServer` fakes, writing results, Markdown and HTML. The tests read the
generated files and compare their cells with figures computed here from the
results file's own request records.
"""

from __future__ import annotations

import html
import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.paths import PAIR
from support.report_parsing import (
    html_tables,
    markdown_tables,
    summary_section,
)
from support.sse_server import ListingServer

from pytest_modelsweep.report import plots
from pytest_modelsweep.report.html import measurement_html
from pytest_modelsweep.report.markdown import markdown_report
from pytest_modelsweep.report.tables import (
    NA,
    Table,
    format_ms,
    format_rate,
    format_usd,
    latency_figure,
    records,
    summary_tables,
    throughput_columns,
    throughput_row,
)

ROOT = Path(__file__).resolve().parents[1]
MODELS = ("gemma3-270m", "smollm2-135m")
REPEATS = 2
LATENCY_COLUMNS = [c for c in throughput_columns() if c.endswith("(ms)")]


@dataclass
class RealRun:
    path: Path
    results: dict[str, Any]
    markdown: str
    html: str
    output: str

    @property
    def throughput(self) -> list[dict[str, Any]]:
        return [
            m
            for m in self.results["measurements"]
            if m["benchmark"] in ("throughput", "long_prompt")
        ]


@pytest.fixture(scope="module")
def real_run(tmp_path_factory: pytest.TempPathFactory) -> RealRun:
    """The real throughput bench (c1, c4 and the 1,024-token long prompt, 2 repeats of 2
    timed requests) for two models on fake servers that stream a token every 1 or 2 ms."""
    path = tmp_path_factory.mktemp("real_run")
    (path / "test_throughput.py").write_text(
        (ROOT / "benches" / "test_throughput.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    env = {
        **os.environ,
        "HOME": str(path / "home"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    with (
        ListingServer(MODELS[0], chunk_delay_s=0.001) as first,
        ListingServer(MODELS[1], chunk_delay_s=0.002) as second,
    ):
        completed = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "test_throughput.py",
                "--rootdir",
                str(path),
                "-k",
                "(c1 or c4) and not c16 and not p3072 and not ratio",
                "--repeats",
                str(REPEATS),
                "--timed-requests",
                "2",
                # the fake servers serve from this process, whose CPU counts as "other": with
                # the default limit a busy CI machine would flag the windows contended
                "--contended-cores",
                "64",
                "--contended-steal",
                "1",
                # and two repeats of 2 ms tokens on a busy machine can differ by more than the
                # default 10% CV: these tests read the tables, not the machine's noise
                "--unstable-cv",
                "1000",
                *PAIR,
                "--endpoint",
                f"{MODELS[0]}={first.base_url}",
                "--endpoint",
                f"{MODELS[1]}={second.base_url}",
                "--modelsweep-dir",
                "work",
                "--results",
                "r.json",
                "--md",
                "r.md",
                "--html",
                "r.html",
                "--self-contained-html",
                "-p",
                "no:cacheprovider",
            ],
            cwd=path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-4000:]
    return RealRun(
        path,
        json.loads((path / "r.json").read_text(encoding="utf-8")),
        (path / "r.md").read_text(encoding="utf-8"),
        (path / "r.html").read_text(encoding="utf-8"),
        output,
    )


# --------------------------------------------------------------------------- helpers


def contention_flags(m: dict[str, Any]) -> str:
    """The flags cell of a measurement whose windows' records alone may flag it."""
    flagged = sum(bool((w.get("contention") or {}).get("contended")) for w in m["stats"]["repeats"])
    return f"contended ({flagged}/{len(m['stats']['repeats'])})" if flagged else ""


def by_setting(rows: list[dict[str, str]]) -> dict[tuple[str, str, str], dict[str, str]]:
    return {(r["model"], r["concurrency"], r["prompt tokens"]): r for r in rows}


def key_of(m: dict[str, Any]) -> tuple[str, str, str]:
    prompt = m["params"]["prompt_tokens"]
    return (
        m["model"],
        str(m["params"]["concurrency"]),
        "short" if prompt is None else f"{prompt:,}",
    )


def title_of(m: dict[str, Any]) -> str:
    return "Throughput" if m["benchmark"] == "throughput" else "Long-prompt throughput"


def expected_latencies(m: dict[str, Any]) -> dict[str, float]:
    """TTFT, TPOT and ITL percentiles (ms) over every request of the setting, numpy's way."""
    requests = [r for r in m["requests"] if r["error"] is None]
    ttft = [r["first_token"] - r["start"] for r in requests]
    tpot = [(r["end"] - r["first_token"]) / (r["completion_tokens"] - 1) for r in requests]
    itl = [float(g) for r in requests for g in np.diff(r["token_times"])]
    out = {}
    for name, values in (("TTFT", ttft), ("TPOT", tpot), ("ITL", itl)):
        for q in (50, 90, 99):
            out[f"{name} p{q} (ms)"] = 1e3 * float(np.percentile(values, q))
    return out


# --------------------------------------------------------------------------- the run itself


def test_the_bench_wrote_the_shape_the_reader_reads(real_run: RealRun) -> None:
    assert {
        (m["model"], m["benchmark"], m["params"]["concurrency"]) for m in real_run.throughput
    } == {
        (model, bench, c)
        for model in MODELS
        for bench, c in (("throughput", 1), ("throughput", 4), ("long_prompt", 4))
    }
    for m in real_run.throughput:
        assert len(m["stats"]["repeats"]) == len(m["stats"]["repeat_values"]) == REPEATS
        assert {r["repeat"] for r in m["requests"]} == set(range(REPEATS))


# --------------------------------------------------------------------------- generated files


@pytest.mark.parametrize("kind", ["markdown", "html"])
def test_no_measured_latency_or_fidelity_cell_is_missing(real_run: RealRun, kind: str) -> None:
    tables = (
        markdown_tables(real_run.markdown)
        if kind == "markdown"
        else html_tables(summary_section(real_run.html))
    )
    assert {"Throughput", "Long-prompt throughput"} <= set(tables)
    seen = 0
    for m in real_run.throughput:
        row = by_setting(tables[title_of(m)])[key_of(m)]
        # the embedded sweep's example price: a cost column; no --slo: no goodput columns
        assert list(row) == throughput_columns(goodput=False, cost=True)
        windows = m["stats"]["repeats"]
        assert all(w["ttft"]["p50_ms"] is not None and w["fidelity"] == 1.0 for w in windows)
        for column in LATENCY_COLUMNS:
            assert row[column] not in ("", NA), (column, row)
        assert row["fidelity"] == "1.000"
        assert row["repeats"] == str(REPEATS)
        low, high = min(m["stats"]["repeat_values"]), max(m["stats"]["repeat_values"])
        assert row["range"] == f"{format_rate(low)}–{format_rate(high)}"
        assert row["tokens/s"] == format_rate(m["value"])
        assert row["CV"].endswith("%") and row["CV"] != NA
        # no --unstable-cv flag can come (1000); a window is flagged contended only as its
        # record says (other processes' cores are not counted here, a VM's steal time is)
        assert row["flags"] == contention_flags(m)
        low, high = m["stats"]["cost"]["interval"]
        assert row["$/1M output tokens"] == (
            f"{format_usd(0.10 / (m['value'] * 3600) * 1e6)} [{format_usd(low)}, {format_usd(high)}]"
        )
        seen += 1
    assert seen == 6
    text = (
        real_run.markdown.replace("\\", "")
        if kind == "markdown"
        else summary_section(real_run.html)
    )
    # stated once under each of the two throughput tables (and, in the Markdown, once under
    # the decision page, which prices the setting it compares), as an example
    assert text.count(
        "$0.1/h (example price for a 2-vCPU CPU machine, not a quote, 2026-11-30), an example price"
    ) == (3 if kind == "markdown" else 2)


def test_the_markdown_cells_are_the_figures_over_all_requests(real_run: RealRun) -> None:
    tables = markdown_tables(real_run.markdown)
    for m in real_run.throughput:
        row = by_setting(tables[title_of(m)])[key_of(m)]
        for column, value in expected_latencies(m).items():
            assert row[column] == format_ms(value), (column, m["model"], key_of(m))
    note = real_run.markdown.split("### Throughput\n")[1].split("###")[0]
    assert "latencies: percentiles over every timed request of the setting" in note
    assert "short: 24-token prompts" in note and "256 output tokens per request" in note


def test_tables_built_from_the_results_file_match_the_requests(real_run: RealRun) -> None:
    measurements = real_run.results["measurements"]
    tables: dict[str, Table] = {t.title: t for t in summary_tables(records(measurements))}
    for m in real_run.throughput:
        table = tables[title_of(m)]
        rows = {(str(r[0]), str(r[1]), str(r[2])): dict(zip(table.columns, r)) for r in table.rows}
        row = rows[key_of(m)]
        assert row["repeats"] == REPEATS
        values = m["stats"]["repeat_values"]
        assert row["CV"] == f"{100 * statistics.stdev(values) / statistics.fmean(values):.1f}%"
        for column, value in expected_latencies(m).items():
            assert row[column] == format_ms(value), column

        reader = throughput_row(*records([m]))
        assert reader.latency_source == "requests"
        assert reader.latency["ttft"].n == REPEATS * 2
        expected = expected_latencies(m)
        assert latency_figure(reader.latency["ttft"], "p50") == pytest.approx(
            expected["TTFT p50 (ms)"]
        )
        assert latency_figure(reader.latency["tpot"], "p99") == pytest.approx(
            expected["TPOT p99 (ms)"]
        )
        assert reader.fidelity == min(w["fidelity"] for w in m["stats"]["repeats"])
        assert (reader.low, reader.high) == (min(values), max(values))
        assert reader.cells["flags"] == contention_flags(m) and reader.stats.cv is not None


def test_without_request_records_latency_is_the_median_of_the_repeats(real_run: RealRun) -> None:
    m = next(
        m
        for m in real_run.throughput
        if m["params"]["concurrency"] == 4 and m["benchmark"] == "throughput"
    )
    bare = {**m, "requests": []}
    reader = throughput_row(*records([bare]))
    assert reader.latency_source == "repeats"
    windows = m["stats"]["repeats"]
    assert latency_figure(reader.latency["ttft"], "p99") == pytest.approx(
        statistics.median(w["ttft"]["p99_ms"] for w in windows)
    )
    [table] = [t for t in summary_tables(records([bare])) if t.title == "Throughput"]
    assert any("median over repeats" in note for note in table.notes)
    assert NA not in [table.rows[0][table.columns.index(c)] for c in LATENCY_COLUMNS]


def test_noise_and_contention_fields_show_as_words(real_run: RealRun) -> None:
    """The fields the bench adds for noise and contention, when present, reach the row."""
    m = real_run.throughput[0]
    windows = [dict(w) for w in m["stats"]["repeats"]]
    windows[1]["contention"] = {"other_cpu_cores": 1.4, "steal_share": 0.0, "contended": True}
    flagged = {
        **m,
        "stats": {
            **m["stats"],
            "repeats": windows,
            "cv": 0.123,
            "unstable": True,
            "contended": True,
            "contended_windows": 1,
        },
    }
    [table] = [t for t in summary_tables(records([flagged])) if t.title == "Throughput"]
    row = dict(zip(table.columns, table.rows[0]))
    assert row["CV"] == "12.3%"
    assert row["flags"] == "unstable, contended (1/2)"
    markdown = markdown_tables(markdown_report([flagged], {}))["Throughput"][0]
    assert markdown["flags"] == "unstable, contended (1/2)"
    extra = measurement_html(*records([flagged]))
    assert "unstable, contended (1/2)" in extra and "other_cpu_cores 1.4" in extra
    plain = throughput_row(*records([{**m, "stats": {**m["stats"], "cv": None}}]))
    assert plain.stats.cv is None and plain.cells["flags"] == contention_flags(m)


def test_the_per_test_extra_shows_latency_over_all_requests(real_run: RealRun) -> None:
    m = real_run.throughput[0]
    extra = measurement_html(*records([m]))
    assert "<h4>Latency (ms)</h4>" in extra
    assert f"over all {REPEATS * 2} timed requests of the setting" in extra
    expected = expected_latencies(m)
    ttft_row = re.search(r'<tr><td class="ms-text">TTFT</td>(.*?)</tr>', extra)
    assert ttft_row is not None
    cells = re.findall(r"<td[^>]*>(.*?)</td>", ttft_row.group(1))
    assert cells[1] == format_ms(expected["TTFT p50 (ms)"])
    assert cells[3] == format_ms(expected["TTFT p99 (ms)"])
    assert "<h4>Repeats</h4>" in extra
    # the live pytest-html report carries the same extra for the test
    assert "over all 4 timed requests of the setting" in html.unescape(real_run.html)


@pytest.mark.skipif(not plots.matplotlib_available(), reason="matplotlib is not installed")
def test_the_plots_draw_repeat_ranges_and_latencies(real_run: RealRun) -> None:
    measurements = real_run.results["measurements"]
    latency = plots.latency_plot(records(measurements))
    assert latency is not None and latency.startswith("<svg")
    for model in MODELS:
        assert f"{model}, short prompts p50" in latency and f"{model}, short prompts p99" in latency
    assert "TTFT (ms)" in latency and "TPOT (ms)" in latency
    assert plots.latency_plot(records(m for m in measurements if m["benchmark"] == "gsm8k")) is None
    assert 'alt="TTFT and TPOT p50 and p99' in summary_section(real_run.html)
    # throughput, latency, and what the servers' /metrics showed in each window
    assert summary_section(real_run.html).count('<img alt="') == 3
    assert (
        'alt="What the server&#x27;s /metrics showed during each timed window'
        in summary_section(real_run.html)
    )


def test_throughput_range_bars_come_from_the_repeats(
    real_run: RealRun,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("matplotlib")
    from matplotlib.axes import Axes

    drawn: list[tuple[list[float], list[list[float]]]] = []
    original = Axes.errorbar

    def spy(self: Axes, x: Any, y: Any, yerr: Any = None, **kwargs: Any) -> Any:
        drawn.append((list(y), [list(side) for side in yerr]))
        return original(self, x, y, yerr=yerr, **kwargs)

    monkeypatch.setattr(Axes, "errorbar", spy)
    assert plots.throughput_plot(records(real_run.results["measurements"])) is not None
    assert len(drawn) == 4  # two models, short and long prompts
    bars = [(lower, upper) for _, (lowers, uppers) in drawn for lower, upper in zip(lowers, uppers)]
    assert len(bars) == 6 and all(lower > 0 and upper > 0 for lower, upper in bars)
    spans = sorted(round(lower + upper, 6) for lower, upper in bars)
    expected = sorted(
        round(max(m["stats"]["repeat_values"]) - min(m["stats"]["repeat_values"]), 6)
        for m in real_run.throughput
    )
    assert spans == pytest.approx(expected)
