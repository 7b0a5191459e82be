"""Every kind of measurement the real benches record reads back into its typed record and
writes back the same JSON, text for text.

The input is what the benches write, not hand-made dicts: ``benches/test_smoke.py``,
``test_throughput.py`` (c1 and its ratio, back to back and again with ``--interleave``),
``test_accuracy.py`` (GSM8K on the shared data, with its verdict), ``test_capacity.py`` under
``--slo`` (and its ratio), ``test_screen.py`` (recorded Hub answers) and a user's own
``evaluate``, ``measure_throughput`` and ``record_measurement``, in pytest subprocesses for a
reference and a candidate served by the decision page's fake servers (priced, so that every
optional figure is there); then ``test_open_loop.py`` (an open loop at a rate, the rate sweep
under ``--slo`` and its ratio) against the same servers, and ``test_startup.py`` against the
fake launcher of ``tests/test_startup.py``. Every window holds the server's metrics. Each measurement of the results file and of the SQLite store goes
through ``Measurement.from_dict`` → ``to_dict`` and writes back the same JSON (results schema
3: every key written is a field's).

The four runs join one sweep run, so the last one's reports show them all: a decision page
with every column group, whose table must fit a 1,400-pixel-wide screen in Chromium.

``tests/data/results_v1_every_kind.json`` (schema 1, written by this module's run at commit
432fbe3) is read by ``tests/test_results_versions.py``.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from support.browser import CHROMIUM, decision_table_width
from support.records_runs import (
    BUILD_INFO,
    SLOTS,
    RecordsRun,
    module_requirement,  # noqa: F401 (skips without the data)
    run_every_kind,
)
from support.requirements import need
from support.shared_runs import once_per_session

from pytest_modelsweep.core.jsontext import strict_json
from pytest_modelsweep.core.measurements import (
    AccuracyStats,
    AccuracyVerdictStats,
    Measurement,
    OtherStats,
    Record,
    ScreeningResult,
    SearchRatioStats,
    SearchStats,
    SmokeStats,
    StartupStats,
    ThroughputRatioStats,
    ThroughputStats,
)


@pytest.fixture(scope="module")
def records_run(tmp_path_factory: pytest.TempPathFactory) -> RecordsRun:
    return once_per_session(tmp_path_factory, "records_run", run_every_kind)


KINDS_BEFORE_OPEN_LOOP = {
    AccuracyStats,
    ThroughputStats,
    SearchStats,
    SmokeStats,
    ScreeningResult,
    AccuracyVerdictStats,
    ThroughputRatioStats,
    SearchRatioStats,
    OtherStats,
}
"""The kinds a results file written before the open loop and the cold start holds."""
EVERY_KIND = KINDS_BEFORE_OPEN_LOOP | {StartupStats}


def check_every_kind_reads_back(
    measurements: list[dict[str, Any]], kinds_expected: set[type[Record]] = EVERY_KIND
) -> None:
    kinds = set()
    designs = set()
    for data in measurements:
        record = Measurement.from_dict(data)
        kinds.add(type(record.stats))
        # every key written is a field's (a key no field holds would not be written back)
        assert strict_json(record.to_dict()) == json.dumps(data), (data["benchmark"], data["model"])
        again = Measurement.from_dict(json.loads(strict_json(record.to_dict())))
        assert strict_json(again.to_dict()) == json.dumps(data)
        if isinstance(record.stats, ThroughputRatioStats):
            designs.add(record.stats.design)
    assert kinds == kinds_expected
    assert designs == {"back-to-back", "interleaved"}


def test_every_kind_the_benches_record_reads_back_as_written(records_run: RecordsRun) -> None:
    check_every_kind_reads_back(records_run.results)


def test_the_stores_measurements_read_back_as_stored(records_run: RecordsRun) -> None:
    assert len(records_run.stored) == len(records_run.results)
    check_every_kind_reads_back(records_run.stored)


def test_the_typed_fields_are_the_recorded_figures(records_run: RecordsRun) -> None:
    """A few figures of each kind, typed, against the results file's own keys."""
    for data in records_run.results:
        record, raw = Measurement.from_dict(data), data["stats"]
        stats = record.stats
        if isinstance(stats, ThroughputStats):
            assert list(stats.repeat_values) == raw["repeat_values"] and len(stats.repeats) == 2
            assert stats.cost is not None and stats.cost.pricing.example is True
            assert (
                stats.goodput is not None and stats.goodput.requests == raw["goodput"]["requests"]
            )
        elif isinstance(stats, SearchStats) and stats.knob == "concurrency":
            # at most its server's slots: a queued request waits beyond the SLO
            assert stats.capacity == raw["capacity"] and 0 < stats.capacity <= SLOTS[record.model]
            assert [step.concurrency for step in stats.steps] == [s["value"] for s in raw["steps"]]
        elif isinstance(stats, AccuracyStats) and record.benchmark == "gsm8k":
            assert (stats.n, stats.accuracy) == (raw["n"], raw["accuracy"]) == (30, record.value)
            assert stats.strict_match_accuracy == raw["figures"]["strict_match_accuracy"]
        elif isinstance(stats, AccuracyVerdictStats) and record.benchmark == "verdict:gsm8k":
            assert stats.interval is not None and stats.interval.n == raw["interval"]["n"] == 30
            assert stats.verdict is not None and stats.verdict.value == record.params["verdict"]
        elif isinstance(stats, SearchRatioStats) and stats.knob == "concurrency":
            assert stats.ratio is not None
            assert stats.ratio.candidate.capacity / stats.ratio.reference.capacity == 1.5
        elif isinstance(stats, SmokeStats):
            assert stats.completion_tokens == raw["completion_tokens"] > 0
        elif isinstance(stats, OtherStats):
            assert dict(stats.values) == {"seen": [1, 2], "why": "a user's own"}
        elif isinstance(stats, SearchStats):  # the rate sweep
            assert stats.capacity == raw["capacity"] == record.value
            assert [step.rate for step in stats.steps] == [s["value"] for s in raw["steps"]]
            window = stats.steps[0].recorded
            assert window is not None and window.open_loop is not None
            assert window.open_loop.seed == raw["steps"][0]["recorded"]["open_loop"]["seed"]
        elif isinstance(stats, StartupStats):
            assert [c.ready_s for c in stats.launches] == [c["ready_s"] for c in raw["launches"]]
            assert stats.first_token_s == record.value
        if isinstance(stats, ThroughputStats) and record.provenance.get("how") == "attach":
            # every window of every setting sampled the server's metrics, as the server names them
            for window in stats.repeats:
                server = window.server_metrics
                assert server is not None and server.samples, (record.benchmark, record.model)
                assert [s.to_dict() for s in server.samples] == (
                    raw["repeats"][stats.repeats.index(window)]["server_metrics"]["samples"]
                )
            assert (record.benchmark == "open_loop") == all(
                w.open_loop is not None for w in stats.repeats
            )


DECISION_GROUPS = (
    "accuracy vs reference",
    "throughput at c16",
    "capacity under the SLO",
    "req/s under the SLO",
    "cost",
    "cold start",
    "screening",
)


def test_a_searchs_details_list_a_rate_sweeps_design_only_for_a_rate_sweep(
    records_run: RecordsRun,
) -> None:
    """A concurrency search leaves the rate sweep's design (target, start, maximum) unset, so
    that its HTML details do not list them at 0; a rate sweep lists them as swept."""
    from pytest_modelsweep.report.html import measurement_html

    searches = [
        m
        for m in map(Measurement.from_dict, records_run.results)
        if isinstance(m.stats, SearchStats)
    ]
    assert {m.stats.knob for m in searches} == {"concurrency", "rate"}  # type: ignore[union-attr]
    for m in searches:
        stats = m.stats
        assert isinstance(stats, SearchStats)
        design = (stats.target, stats.start, stats.maximum)
        details = measurement_html(m)
        if stats.knob == "rate":  # --rate-sweep=4:64 at the default attainment
            assert design == (0.9, 4.0, 64.0) and "<dt>maximum</dt>" in details
        else:
            assert design == (None, None, None)
            assert all(f"<dt>{key}</dt>" not in details for key in ("target", "start", "maximum"))


def test_with_every_group_the_decision_table_fits_a_1400_px_screen(
    records_run: RecordsRun,
    tmp_path: Path,
) -> None:
    """The sweep run's HTML report (pytest-html's, the page ``--html`` writes), with every
    column group of the decision page, laid out by Chromium in a 1,400-pixel-wide window: the
    table and the page's margin fit in it (a column per part, the layout before, needed 1,805
    pixels here). The Markdown's table is as narrow: a column per group."""
    report = (records_run.path / "r4.html").read_text(encoding="utf-8")
    start = report.index('<section class="modelsweep" id="modelsweep-decision">')
    section = report[start : report.index("</section>", start)]
    head = html.unescape(
        re.sub(r"<[^>]+>", " ", section[section.index("<thead>") : section.index("</thead>")])
    )
    assert all(group in head for group in DECISION_GROUPS), head
    assert "Not measured for any model" not in section
    markdown = (records_run.path / "r4.md").read_text(encoding="utf-8")
    header = next(
        line
        for line in markdown.split("### Decision: which model to serve")[1].splitlines()
        if line.startswith("| model |")
    )
    assert len(re.split(r"(?<!\\)\|", header)) - 2 == 2 + len(DECISION_GROUPS), header
    need(
        CHROMIUM is not None,
        "chromium is not installed (apt-get install -y chromium): this "
        "test lays the report out in a real headless browser",
    )
    widths = decision_table_width(records_run.path / "r4.html", tmp_path / "profile", 1400)
    assert widths["window"] == 1400, widths
    assert widths["table"] <= 1400, widths


def test_the_ratio_table_names_each_ratios_benchmark_and_design(records_run: RecordsRun) -> None:
    """The user's ``my_shape`` ratio at c2 beside the built-in ``throughput`` ratios at c1 and
    c16, back to back and (c1) interleaved: each row names its benchmark (a user's prompts:
    ``own``) and design, in both reports, from the ratio records' own parameters."""
    ratios = [m for m in records_run.results if m["benchmark"] == "throughput_ratio"]
    expected = sorted(
        [
            m["model"],
            m["params"]["reference"],
            m["params"]["benchmark"],
            str(m["params"]["concurrency"]),
            "short" if m["params"]["benchmark"] == "throughput" else "own",
            m["params"]["design"],
            f"{m['value']:.2f}×",
        ]
        for m in ratios
    )
    assert {(row[2], row[3], row[5]) for row in expected} == {
        ("my_shape", "2", "back-to-back"),
        ("throughput", "1", "back-to-back"),
        ("throughput", "1", "interleaved"),
        ("throughput", "16", "back-to-back"),
    }
    markdown = (records_run.path / "r4.md").read_text(encoding="utf-8")
    block = markdown.split("### Throughput relative to the reference\n", 1)[1].split("\n### ")[0]
    shown = [
        [
            html.unescape(re.sub(r"\\(.)", r"\1", c.strip()))
            for c in re.split(r"(?<!\\)\|", line)[1:-1]
        ]
        for line in block.splitlines()
        if line.startswith("| ")
    ]
    assert shown[0][:6] == [
        "candidate",
        "reference",
        "benchmark",
        "concurrency",
        "prompt tokens",
        "design",
    ]
    assert sorted(row[:7] for row in shown[2:]) == expected
    report = (records_run.path / "r4.html").read_text(encoding="utf-8")
    table = report[report.index("<h3>Throughput relative to the reference</h3>") :]
    table = table[: table.index("</table>")]
    cells = [
        [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        for row in re.findall(r"<tr>(.*?)</tr>", table)
    ]
    assert sorted(row[:7] for row in cells if row) == expected


def test_the_reports_name_the_build_llama_server_reports(records_run: RecordsRun) -> None:
    """The cold start's servers, launched through llama-server's launch path (the fake
    launcher, answering /props with llama-server's build as the embedded one does), record
    that build and where the binary came from; both reports' provenance line says it."""
    version = f"{BUILD_INFO} (MODELSWEEP_LLAMA_SERVER)"  # a binary not built from the sdist
    started = [m["provenance"] for m in records_run.results if m["benchmark"] == "startup"]
    assert len(started) == len(SLOTS)
    assert all(
        (p["server_name"], p["server_version"], p["how"])
        == ("llama.cpp llama-server", version, "llamacpp")
        for p in started
    )
    said = f"llama.cpp llama-server {version}"
    markdown = (records_run.path / "r4.md").read_text(encoding="utf-8").splitlines()
    assert said in html.unescape(re.sub(r"\\(.)", r"\1", markdown[2])), markdown[2]
    report = (records_run.path / "r4.html").read_text(encoding="utf-8")
    line = re.search(r'<p class="ms-provenance">(.*?)</p>', report)
    assert line is not None and said in html.unescape(line.group(1)), line
