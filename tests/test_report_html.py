"""The HTML reports: plots, the standalone file, and pytest-html's report of a real pytest run."""

from __future__ import annotations

import html
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from support.paths import TWO_WORKERS
from support.report_pages import (
    PWNED,
    make_report,
)

from pytest_modelsweep.core.records import ItemRecord
from pytest_modelsweep.pytest.html_hooks import HtmlReportHooks
from pytest_modelsweep.report import plots
from pytest_modelsweep.report.html import html_document, measurement_html, summary_html
from pytest_modelsweep.report.tables import records
from pytest_modelsweep.store.results import RunInfo, load_results

pytest_plugins = ("pytester",)

try:
    # Import matplotlib here, before any in-process pytester run: pytester drops the modules
    # an inner run imported, and a half-reimported matplotlib has two SubplotSpec classes.
    import matplotlib.backends.backend_svg
    import matplotlib.figure  # noqa: F401
except ImportError:
    pass

PWNED_ESCAPED = html.escape(PWNED)


def summary_section(text: str) -> str:
    start = text.index('<section class="modelsweep" id="modelsweep-summary">')
    return text[start : text.index("</section>", start) + len("</section>")]


def report_tests(text: str) -> dict[str, Any]:
    """pytest-html's per-test data (rows and extras), decoded from the page's JSON blob."""
    match = re.search(r'data-jsonblob="([^"]*)"', text)
    assert match is not None
    tests: dict[str, Any] = json.loads(html.unescape(match.group(1)))["tests"]
    return tests


# --------------------------------------------------------------------------- a real run


def test_pytest_html_report_has_the_summary_tables_plots_and_escaped_items(
    pytester: pytest.Pytester,
) -> None:
    result, text = make_report(pytester)
    result.assert_outcomes(passed=6, failed=1)  # the worse verdict fails
    section = summary_section(text)
    assert "<h2>modelsweep summary</h2>" in section
    for title in ("Verdicts", "GSM8K accuracy", "Throughput"):
        assert f"<h3>{title}</h3>" in section
    # the candidate answered 10 of 40, the reference 30 of 40: a real, paired "worse"
    assert re.search(
        r'<td class="ms-text">smollm2-135m</td><td class="ms-text">gemma3-270m</td>'
        r'<td class="ms-text">gsm8k</td><td class="ms-num">-50.0 pp</td>',
        section,
    )
    assert '<td class="ms-text ms-verdict ms-verdict-worse">worse</td>' in section
    assert '<td class="ms-text">gemma3-270m</td><td class="ms-num">75.0%</td>' in section
    if plots.matplotlib_available():
        assert section.count('<img alt="') == 4  # forest, accuracy, throughput, latency
        assert "data:image/svg+xml;base64," in section
    else:
        assert plots.MATPLOTLIB_HINT in section

    # The response's markup appears only escaped: never raw in the file, escaped in the extra.
    assert PWNED not in text
    assert text.count("<script") == 1  # pytest-html's own app.js
    tests = report_tests(text)
    gsm8k = tests["test_bench.py::test_gsm8k[gemma3-270m]"][0]
    extra = next(e["content"] for e in gsm8k["extras"] if e["format_type"] == "html")
    assert f'<pre class="ms-response">{PWNED_ESCAPED}</pre>' in extra
    assert PWNED not in extra
    assert "First 5 of 40 items (raw responses)" in extra
    assert [e["name"] for e in gsm8k["extras"] if e["format_type"] == "json"] == ["gsm8k JSON"]
    assert (
        '<td class="modelsweep-col">gemma3-270m: gsm8k 75.0% (n=40)</td>'
        in gsm8k["resultsTableRow"]
    )
    throughput = tests["test_bench.py::test_throughput[gemma3-270m-4]"][0]
    extra = next(e["content"] for e in throughput["extras"] if e["format_type"] == "html")
    assert "<h4>Latency (ms)</h4>" in extra and "<h4>Requests</h4>" in extra
    assert "over all 2 timed requests of the setting" in extra and "<h4>Repeats</h4>" in extra


def test_the_standalone_file_has_the_live_runs_summary(pytester: pytest.Pytester) -> None:
    """`modelsweep report` (html_document of the results file) shows what the live run showed."""
    result, text = make_report(pytester)
    result.assert_outcomes(passed=6, failed=1)  # the worse verdict fails
    data = load_results(pytester.path / "results.json")
    standalone = html_document(data["measurements"], data["run"])
    assert summary_section(standalone) == summary_section(text)
    assert PWNED not in standalone and PWNED_ESCAPED in standalone
    assert standalone.count("<script") == 0


def test_extras_and_summary_under_xdist(pytester: pytest.Pytester) -> None:
    """Measurements travel on the report to the controller, which adds the extras there."""
    pytest.importorskip("xdist")
    # Without the verdict: it waits for the reference's result from the other worker, and
    # that cross-worker wait is the verdict tests' business (test_verdict_plugin.py).
    result, text = make_report(pytester, *TWO_WORKERS, "-m", "not verdict")
    result.assert_outcomes(passed=6)
    section = summary_section(text)
    assert "<h3>GSM8K accuracy</h3>" in section and "<h3>Throughput</h3>" in section
    tests = report_tests(text)
    kinds = {
        node_id: [e["format_type"] for e in tests[node_id][0]["extras"]]
        for node_id in (
            "test_bench.py::test_gsm8k[smollm2-135m]",
            "test_bench.py::test_throughput[smollm2-135m-1]",
        )
    }
    assert kinds == {  # one html extra per test, one JSON per measurement (repeats inside)
        "test_bench.py::test_gsm8k[smollm2-135m]": ["html", "json"],
        "test_bench.py::test_throughput[smollm2-135m-1]": ["html", "json"],
    }


def test_a_test_id_with_markup_is_shown_as_text(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_id="""
        import pytest

        @pytest.mark.parametrize("name", ["<b>bold</b>"])
        def test_id(name):
            pass
        """
    )
    pytester.runpytest(
        "--modelsweep-dir", "work", "--html", "report.html", "-p", "no:cacheprovider"
    )
    tests = report_tests((pytester.path / "report.html").read_text(encoding="utf-8"))
    (row,) = tests["test_id.py::test_id[<b>bold</b>]"]
    assert (
        '<td class="col-testId">test_id.py::test_id[&lt;b&gt;bold&lt;/b&gt;]</td>'
        in row["resultsTableRow"]
    )
    assert '<td class="modelsweep-col"></td>' in row["resultsTableRow"]


def test_no_summary_without_measurements_and_idle_without_html() -> None:
    hooks = HtmlReportHooks(lambda: ([], {}))
    postfix: list[str] = []
    hooks.pytest_html_results_summary([], [], postfix, None)  # type: ignore[arg-type]
    assert postfix == []

    class Report:
        def __init__(self) -> None:
            self.when = "call"
            self.modelsweep_measurements = [
                {"model": "m", "benchmark": "b", "value": 1.0, "unit": "u"}
            ]

    report = Report()
    HtmlReportHooks(lambda: ([], {}), enabled=False).pytest_runtest_logreport(report)  # type: ignore[arg-type]
    assert not hasattr(report, "extras")


# --------------------------------------------------------------------------- units


MARKUP_MODEL = "<img src=x onerror=alert(1)>|$x$"


def _measurements() -> list[dict[str, Any]]:
    verdict = {
        "model": MARKUP_MODEL,
        "benchmark": "verdict:gsm8k",
        "value": -0.05,
        "unit": "accuracy difference",
        "n": 100,
        "params": {"reference": "ref", "verdict": "worse"},
        "stats": {
            "candidate": MARKUP_MODEL,
            "reference": "ref",
            "metric": "gsm8k",
            "verdict": "worse",
            "difference": -0.05,
            "low": -0.09,
            "high": -0.01,
            "confidence": 0.95,
            "n": 100,
            "discordant": 12,
            "min_detectable_difference": 0.04,
            "margin": 0.02,
            "rule": "equivalence-margin",
            "resamples": 1000,
            "method": "percentile",
            "seed": 0,
            "candidate_ahead": 4,
            "reference_ahead": 8,
            "candidate_mean": 0.2,
            "reference_mean": 0.25,
            "standard_error": 0.02,
            "bootstrap_standard_error": 0.02,
            "p_value": 0.4,
        },
    }
    accuracy = {
        "model": MARKUP_MODEL,
        "benchmark": "gsm8k",
        "value": 0.25,
        "unit": "accuracy",
        "n": 8,
        "params": {"note": "<i>param</i>"},
        "stats": {"errors": 1},
        "items": [
            ItemRecord(
                item_id="<q1>", prompt_hash="p", correct=False, response=PWNED, error="<b>boom</b>"
            ).to_dict()
        ],
    }
    throughput = {
        "model": MARKUP_MODEL,
        "benchmark": "throughput",
        "value": 10.0,
        "unit": "tokens/s",
        "n": 1,
        "params": {"concurrency": 1, "prompt_tokens": None, "output_tokens": 256, "repeats": 1},
        "stats": {
            "repeat_values": [10.0],
            "repeats": [
                {
                    "ttft": {"p50_ms": 50.0, "p99_ms": 80.0},
                    "fidelity": 1.0,
                    "contention": {"note": MARKUP_MODEL, "contended": True},
                }
            ],
        },
    }
    return [verdict, accuracy, throughput]


def test_everything_from_a_model_or_file_is_escaped_in_the_summary() -> None:
    section = summary_html(records(_measurements()), RunInfo(sweep_name="<s>", reference="ref"))
    assert "<img src=x" not in section and "&lt;img src=x onerror=alert(1)&gt;|$x$" in section
    assert "sweep &lt;s&gt;" in section
    details = measurement_html(records(_measurements())[1])
    assert PWNED not in details and PWNED_ESCAPED in details
    assert "&lt;q1&gt;" in details and "&lt;b&gt;boom&lt;/b&gt;" in details
    assert "&lt;i&gt;param&lt;/i&gt;" in details
    assert "<b>" not in details and "<i>" not in details
    throughput = measurement_html(records(_measurements())[2])
    assert (
        '<td class="ms-text">TTFT</td><td class="ms-text">n/a</td><td class="ms-text">50.0</td>'
        in throughput
    )
    assert "<img src=x" not in throughput and "&lt;img src=x onerror=alert(1)&gt;" in throughput
    assert "contended (1/1)" in section


@pytest.mark.skipif(not plots.matplotlib_available(), reason="matplotlib is not installed")
def test_plots_are_svg_with_escaped_labels() -> None:
    measurements = records(_measurements())
    for svg in (
        plots.forest_plot(measurements),
        plots.accuracy_plot(measurements),
        plots.throughput_plot(measurements),
        plots.latency_plot(measurements),
    ):
        assert svg is not None and svg.startswith("<svg")
        assert "<img" not in svg and "&lt;img src=x onerror=alert(1)&gt;" in svg
    forest = plots.forest_plot(measurements)
    assert forest is not None and forest == plots.forest_plot(measurements)  # stable output
    assert plots.forest_plot(measurements[1:]) is None
    assert plots.throughput_plot(measurements[:2]) is None
    assert plots.latency_plot(measurements[:2]) is None


def test_without_matplotlib_the_report_says_how_to_get_plots(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert plots.matplotlib_available() is False
    assert plots.summary_plots(records(_measurements())) is None
    assert plots.forest_plot(records(_measurements())) is None
    text = html_document(_measurements(), {})
    assert "plots need matplotlib: pip install &#x27;pytest-modelsweep[html]&#x27;" in text
    assert "data:image/svg+xml" not in text
