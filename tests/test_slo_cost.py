"""Cost per million output tokens and goodput under an SLO: the pure parts, and the real
throughput bench against a fake server whose requests are half fast, half slow.

The run's figures are checked against a count made here from the results file's own
request records (start, first token, end, completion tokens, repeat), and against the
cells of the Markdown and HTML reports the run wrote.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from scipy.stats import t as student_t
from support.report_parsing import html_tables, markdown_tables, summary_section
from support.sse_server import ListingServer

from pytest_modelsweep.core.codec import converter
from pytest_modelsweep.core.cost import (
    Pricing,
    cost_stats,
    costs_of,
    usd_per_million_output_tokens,
)
from pytest_modelsweep.core.errors import SweepError
from pytest_modelsweep.core.records import RequestRecord
from pytest_modelsweep.core.slo import (
    Goodput,
    Slo,
    SloError,
    goodput_stats,
    is_good,
    parse_slo,
    request_latencies_ms,
    window_goodput,
)
from pytest_modelsweep.core.stats.intervals import log_mean_interval
from pytest_modelsweep.core.stats.repeats import RepeatPolicy
from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.report.html import measurement_html
from pytest_modelsweep.report.markdown import escape_markdown, markdown_report
from pytest_modelsweep.report.tables import (
    NA,
    format_goodput,
    format_percent,
    format_usd,
    records,
    summary_tables,
    throughput_columns,
)

ROOT = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
SLOW_S = 0.008
"""Seconds the slow half of the requests waits before each token: TPOT ≈ 8 ms."""
TPOT_TARGET_MS = 3.0
"""Between the fast requests' TPOT (≈ 0.01 ms) and the slow ones' (≈ 8 ms)."""
TTFT_TARGET_MS = 500.0
USD_PER_HOUR = 1.2
REPEATS = 3
CONCURRENCY = 4


# --------------------------------------------------------------------------- SLO parsing


def test_parse_slo_reads_milliseconds_and_seconds() -> None:
    slo = parse_slo("ttft=500ms, tpot=50ms,e2e=2.5s")
    assert slo == Slo(ttft_ms=500.0, tpot_ms=50.0, e2e_ms=2500.0)
    assert slo.as_dict() == {"ttft_ms": 500.0, "tpot_ms": 50.0, "e2e_ms": 2500.0}
    assert Slo.from_dict(slo.as_dict()) == slo
    assert str(parse_slo("TPOT=0.05s")) == "tpot=50ms"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("", "expected targets"),
        ("ttft=500", "cannot read 'ttft=500'"),
        ("itl=5ms", "cannot read 'itl=5ms'"),
        ("ttft=1s,ttft=2s", "ttft is given twice"),
        ("tpot=0ms", "tpot must be a positive time"),
    ],
)
def test_a_bad_slo_is_one_line(text: str, says: str) -> None:
    with pytest.raises(SloError) as error:
        parse_slo(text)
    assert says in str(error.value) and "\n" not in str(error.value)


# --------------------------------------------------------------------------- good requests


def record(
    start: float = 10.0,
    ttft_s: float | None = 0.1,
    e2e_s: float = 1.1,
    tokens: int | None = 101,
    error: str | None = None,
) -> dict[str, Any]:
    """A stored request record: TTFT 100 ms, E2E 1.1 s, 101 tokens (TPOT 10 ms) by default."""
    first = None if ttft_s is None else start + ttft_s
    return RequestRecord(
        start=start, end=start + e2e_s, first_token=first, completion_tokens=tokens, error=error
    ).to_dict()


def test_a_request_is_good_when_it_meets_every_target() -> None:
    ok = record()
    latencies = request_latencies_ms(ok)
    assert latencies["ttft"] == pytest.approx(100.0)
    assert latencies["tpot"] == pytest.approx(10.0)
    assert latencies["e2e"] == pytest.approx(1100.0)
    assert is_good(ok, parse_slo("ttft=100ms,tpot=10ms,e2e=1.1s"))  # a target is met at equality
    assert not is_good(ok, parse_slo("ttft=99ms"))
    assert not is_good(ok, parse_slo("ttft=500ms,tpot=9ms"))
    assert not is_good(ok, parse_slo("e2e=1s"))


def test_a_failed_request_is_never_good() -> None:
    failed = record(error="HTTP 500: model exploded")
    assert request_latencies_ms(failed)["ttft"] == pytest.approx(100.0)
    assert not is_good(failed, parse_slo("ttft=10s"))
    assert not is_good(
        record(ttft_s=None, tokens=None, error="connection reset"), parse_slo("e2e=10s")
    )


def test_a_one_token_request_has_no_tpot_and_meets_any_tpot_target_as_in_vllm() -> None:
    # vllm bench serve: "if output_len <= 1, we regard tpot as 0 for goodput"
    single = record(tokens=1)
    assert request_latencies_ms(single)["tpot"] is None
    assert is_good(single, parse_slo("tpot=1ms"))
    assert is_good(single, parse_slo("ttft=200ms,tpot=1ms,e2e=2s"))
    assert not is_good(single, parse_slo("tpot=1ms,e2e=1s"))  # its E2E of 1.1 s misses
    assert not is_good(record(tokens=None), parse_slo("tpot=1000ms"))  # token count unknown
    no_first_token = record(ttft_s=None)
    assert request_latencies_ms(no_first_token)["ttft"] is None
    assert not is_good(no_first_token, parse_slo("ttft=10s"))
    assert is_good(no_first_token, parse_slo("e2e=10s"))


def test_window_goodput_counts_good_requests_over_the_duration() -> None:
    slo = parse_slo("ttft=150ms")
    window = [record(start=0.0), record(start=0.5, ttft_s=0.2), record(start=1.0, error="x")]
    goodput = window_goodput(window, slo, duration_s=2.0)
    assert goodput == Goodput(good=1, requests=3, duration_s=2.0)
    assert converter.unstructure(goodput.figures()) == {
        "goodput_rps": 0.5,
        "slo_attainment": pytest.approx(1 / 3),
        "good": 1,
        "requests": 3,
        "slo": None,
    }
    empty = window_goodput([], slo, duration_s=0.0)
    assert empty.goodput_rps is None and empty.slo_attainment is None
    stats = goodput_stats(slo, [goodput, Goodput(good=2, requests=2, duration_s=4.0), empty])
    assert converter.unstructure(stats) == {
        "goodput_rps": 0.5,
        "slo_attainment": pytest.approx((1 / 3 + 1) / 2),
        "good": 3,
        "requests": 5,
        "slo": {"ttft_ms": 150.0, "tpot_ms": None, "e2e_ms": None},
    }


# --------------------------------------------------------------------------- cost


def test_cost_is_the_price_over_the_tokens_an_hour() -> None:
    # $1.20 an hour at 1,000 tokens/s: 3.6M tokens an hour, $0.333 per million
    assert usd_per_million_output_tokens(1.2, 1000.0) == pytest.approx(1.2 / 3.6)
    assert usd_per_million_output_tokens(0.10, 50.0) == pytest.approx(0.10 / (50 * 3600) * 1e6)
    assert costs_of(1.2, [1000.0, 2000.0, 0.0]) == [
        pytest.approx(1 / 3),
        pytest.approx(1 / 6),
        None,
    ]


def test_a_rate_that_is_not_positive_has_no_cost() -> None:
    assert usd_per_million_output_tokens(1.2, 0.0) is None
    assert usd_per_million_output_tokens(1.2, -5.0) is None
    assert usd_per_million_output_tokens(1.2, math.nan) is None
    assert usd_per_million_output_tokens(1.2, math.inf) is None


def test_the_cost_interval_swaps_the_rate_bounds() -> None:
    interval = cost_stats(Pricing(1.2), 900.0, (800.0, 1000.0)).interval
    assert interval is not None
    low, high = interval
    assert low == pytest.approx(usd_per_million_output_tokens(1.2, 1000.0))
    assert high == pytest.approx(usd_per_million_output_tokens(1.2, 800.0))
    assert low < high
    assert cost_stats(Pricing(1.2), 900.0, (0.0, 1000.0)).interval is None


def test_cost_stats_give_an_interval_only_where_the_rate_has_one() -> None:
    pricing = Pricing(1.2, source="list price", as_of="2026-11-30")
    with_interval = converter.unstructure(cost_stats(pricing, 900.0, (800.0, 1000.0)))
    assert with_interval == {
        "usd_per_million_output_tokens": pytest.approx(1.2 / (900 * 3600) * 1e6),
        "interval": [
            pytest.approx(1.2 / 3.6),
            pytest.approx(1.2 / 2.88),
        ],
        "pricing": {
            "usd_per_hour": 1.2,
            "source": "list price",
            "as_of": "2026-11-30",
            "example": False,
        },
    }
    assert cost_stats(pricing, 900.0, None).interval is None
    assert cost_stats(pricing, 0.0, None).usd_per_million_output_tokens is None


def test_the_rate_interval_is_the_t_interval_of_the_mean_log_rate() -> None:
    values = [900.0, 1000.0, 950.0]
    low, high = log_mean_interval(values) or (math.nan, math.nan)
    logs = [math.log(v) for v in values]
    half = student_t.ppf(0.975, 2) * statistics.stdev(logs) / math.sqrt(3)
    assert low == pytest.approx(math.exp(statistics.fmean(logs) - half), rel=1e-9)
    assert high == pytest.approx(math.exp(statistics.fmean(logs) + half), rel=1e-9)
    # the interval fixed repeats record
    assert RepeatPolicy(3, 0.05, 10).interval(values) == (low, high)
    assert log_mean_interval([950.0]) is None
    assert log_mean_interval([950.0, 0.0]) is None
    assert log_mean_interval([5.0, 5.0]) == (pytest.approx(5.0), pytest.approx(5.0))


# --------------------------------------------------------------------------- sweep prices

SWEEP = """
[sweep]
name = "priced"
reference = "ref"

[serving]
backend = "llamacpp"

[models.ref]
source = "embedded:gemma3-270m-q4_k_m"
license = "gemma"
prompting = "completion"
"""


@pytest.mark.parametrize(
    ("pricing", "says"),
    [
        ('source = "a quote"', "pricing.usd_per_hour: missing"),
        ("usd_per_hour = -1.0", "pricing.usd_per_hour: expected a positive number, got -1.0"),
        ("usd_per_hour = 0", "pricing.usd_per_hour: expected a positive number, got 0"),
        ("usd_per_hour = nan", "pricing.usd_per_hour: expected a positive number, got nan"),
        ('usd_per_hour = "1.20"', "pricing.usd_per_hour: expected a positive number, got '1.20'"),
        ("usd_per_hour = 1.0\nusd_per_chip = 2.0", "pricing: unknown key(s) usd_per_chip"),
        ('usd_per_hour = 1.0\nexample = "yes"', "pricing.example: expected true or false"),
    ],
)
def test_a_bad_pricing_table_fails_the_sweep_in_one_line(
    tmp_path: Path,
    pricing: str,
    says: str,
) -> None:
    path = tmp_path / "sweep.toml"
    path.write_text(SWEEP + "\n[pricing]\n" + pricing + "\n")
    with pytest.raises(SweepError) as error:
        load_sweep(str(path))
    message = str(error.value)
    assert says in message and "\n" not in message and str(path) in message


def test_the_shipped_sweeps_state_their_prices() -> None:
    embedded = load_sweep().pricing
    assert embedded is not None and embedded.example is True
    assert embedded.usd_per_hour == 0.10 and embedded.as_of
    assert "an example price" in embedded.describe()
    tpu = load_sweep("tpu-v5e").pricing
    assert tpu is not None and tpu.example is False and tpu.usd_per_hour == 1.20
    assert "cloud.google.com/tpu/pricing" in tpu.source and tpu.as_of
    assert load_sweep("vllm-cpu").pricing is None


# --------------------------------------------------------------------------- tables by hand


def throughput_measurement(values: list[float], **extra: Any) -> dict[str, Any]:
    """A throughput measurement shaped as the bench writes it, without request records."""
    return {
        "model": MODEL,
        "benchmark": "throughput",
        "value": statistics.fmean(values),
        "unit": "tokens/s",
        "n": 8,
        "outcome": "passed",
        "params": {"concurrency": 4, "prompt_tokens": None, "output_tokens": 256},
        "stats": {
            "repeat_values": values,
            "repeats": [{"output_tokens_per_s": v} for v in values],
            **extra,
        },
    }


def test_the_table_shows_goodput_and_cost_columns_only_when_measured() -> None:
    plain = throughput_measurement([100.0, 110.0])
    [table] = summary_tables(records([plain]))
    assert table.columns == throughput_columns()
    assert not any("goodput" in note or "$/1M" in note for note in table.notes)

    pricing = Pricing(0.1, source="example machine", as_of="2026-11-30", example=True)
    priced = throughput_measurement(
        [100.0], cost=converter.unstructure(cost_stats(pricing, 100.0, None))
    )
    slo = parse_slo("ttft=2s,tpot=100ms")
    measured = throughput_measurement(
        [100.0, 110.0],
        goodput=converter.unstructure(goodput_stats(slo, [Goodput(3, 4, 2.0), Goodput(4, 4, 2.0)])),
        cost=converter.unstructure(cost_stats(pricing, 105.0, (90.0, 120.0))),
    )
    [table] = summary_tables(records([plain, priced, measured]))
    assert table.columns == throughput_columns(goodput=True, cost=True)
    assert table.columns[8:11] == ["goodput (req/s)", "SLO attainment", "$/1M output tokens"]
    rows = [row[8:11] for row in table.rows]
    assert rows == [
        [NA, NA, NA],
        [NA, NA, format_usd(0.1 / (100 * 3600) * 1e6)],  # one repeat: no interval
        [
            "1.75",
            "87.5%",
            f"{format_usd(0.1 / (105 * 3600) * 1e6)} "
            f"[{format_usd(0.1 / (120 * 3600) * 1e6)}, "
            f"{format_usd(0.1 / (90 * 3600) * 1e6)}]",
        ],
    ]
    assert rows[1][2] == "0.278" and rows[2][2] == "0.265 [0.231, 0.309]"
    notes = "; ".join(table.notes)
    assert "met every SLO target (ttft=2000ms,tpot=100ms)" in notes
    assert "at $0.1/h (example machine, 2026-11-30), an example price;" in notes
    assert notes.count("$0.1/h") == 1  # the price is stated once
    assert (
        "n/a: goodput and SLO attainment where the run had no --slo (or no request was "
        "timed); $/1M where the run had no price (or no tokens/s)"
    ) in notes


def test_markdown_escapes_dollars_so_github_draws_no_formula() -> None:
    assert escape_markdown("$0.1/h and $/1M") == "\\$0.1/h and \\$/1M"
    pricing = Pricing(0.1, source="example", example=True)
    text = markdown_report(
        [
            throughput_measurement(
                [100.0], cost=converter.unstructure(cost_stats(pricing, 100.0, None))
            )
        ],
        {},
    )
    assert "| \\$/1M output tokens |" in text and "\\$0.1/h (example), an example price" in text
    assert "$" not in text.replace("\\$", "")


# --------------------------------------------------------------------------- the real bench


class HalfSlowServer(ListingServer):
    """The fake server; every other completion request waits :data:`SLOW_S` before each
    token, so that half the requests of a window miss a tight TPOT target."""

    async def _generate(
        self, path: str, data: dict[str, Any], writer: asyncio.StreamWriter
    ) -> bool:
        if len(self.stats.bodies) % 2 == 0:
            data = {**data, "test_fault": f"slow:{SLOW_S}"}
        return await super()._generate(path, data, writer)


@dataclass
class BenchRun:
    results: dict[str, Any]
    markdown: str
    html: str

    @property
    def throughput(self) -> dict[str, Any]:
        [measurement] = [m for m in self.results["measurements"] if m["benchmark"] == "throughput"]
        return measurement


def run_bench(path: Path, url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real benches/test_throughput.py at concurrency 4 (8 timed requests a repeat)."""
    (path / "test_throughput.py").write_text(
        (ROOT / "benches" / "test_throughput.py").read_text(encoding="utf-8"), encoding="utf-8"
    )
    env = {
        **os.environ,
        "HOME": str(path / "home"),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    env.pop("GITHUB_STEP_SUMMARY", None)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "test_throughput.py",
            f"--rootdir={path}",
            "-m",
            "throughput",
            "-k",
            "c4 and not ratio",
            f"--model={MODEL}",
            f"--endpoint={MODEL}={url}",
            # the fake server serves from this process, whose CPU counts as "other"
            "--contended-cores=64",
            "--contended-steal=1",
            "--modelsweep-dir=work",
            "--results=r.json",
            "--md=r.md",
            "-p",
            "no:cacheprovider",
            *args,
        ],
        cwd=path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def priced_run(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    """Three repeats at c4 with ``--slo`` and ``--usd-per-hour``, half the requests slow."""
    path = tmp_path_factory.mktemp("priced_run")
    with HalfSlowServer(MODEL) as server:
        completed = run_bench(
            path,
            server.base_url,
            f"--repeats={REPEATS}",
            f"--slo=ttft={TTFT_TARGET_MS:g}ms,tpot={TPOT_TARGET_MS:g}ms",
            f"--usd-per-hour={USD_PER_HOUR}",
            "--html=r.html",
            "--self-contained-html",
        )
    assert completed.returncode == 0, (completed.stdout + completed.stderr)[-4000:]
    return BenchRun(
        json.loads((path / "r.json").read_text(encoding="utf-8")),
        (path / "r.md").read_text(encoding="utf-8"),
        (path / "r.html").read_text(encoding="utf-8"),
    )


@dataclass
class HandCount:
    """One repeat's figures counted here from its request records."""

    duration_s: float
    tokens_per_s: float
    good: int
    requests: int


def count_by_hand(measurement: dict[str, Any]) -> list[HandCount]:
    """Per repeat: the window (first start to last end), output tokens/s, and the requests
    that succeeded with TTFT and TPOT ((E2E − TTFT) / (tokens − 1)) within the targets."""
    counts = []
    for repeat in range(measurement["params"]["repeats"]):
        requests = [r for r in measurement["requests"] if r["repeat"] == repeat]
        duration = max(r["end"] for r in requests) - min(r["start"] for r in requests)
        good = 0
        for r in requests:
            ttft_ms = 1e3 * (r["first_token"] - r["start"])
            tpot_ms = 1e3 * (r["end"] - r["first_token"]) / (r["completion_tokens"] - 1)
            if r["error"] is None and ttft_ms <= TTFT_TARGET_MS and tpot_ms <= TPOT_TARGET_MS:
                good += 1
        tokens = sum(r["completion_tokens"] for r in requests)
        counts.append(HandCount(duration, tokens / duration, good, len(requests)))
    return counts


def test_goodput_and_attainment_match_a_count_of_the_request_records(
    priced_run: BenchRun,
) -> None:
    m = priced_run.throughput
    stats = m["stats"]
    counts = count_by_hand(m)
    assert len(counts) == len(stats["repeats"]) == REPEATS
    assert stats["goodput"]["slo"] == {
        "ttft_ms": TTFT_TARGET_MS,
        "tpot_ms": TPOT_TARGET_MS,
        "e2e_ms": None,
    }
    for hand, window in zip(counts, stats["repeats"]):
        assert hand.requests == 2 * CONCURRENCY == window["goodput"]["requests"]
        assert 0 < hand.good < hand.requests  # the slow half misses TPOT, the fast half meets it
        assert window["goodput"]["good"] == hand.good
        assert window["duration_s"] == pytest.approx(hand.duration_s, rel=1e-12)
        assert window["goodput"]["goodput_rps"] == pytest.approx(
            hand.good / hand.duration_s, rel=1e-12
        )
        assert window["goodput"]["slo_attainment"] == pytest.approx(
            hand.good / hand.requests, rel=1e-12
        )
    assert stats["goodput"]["goodput_rps"] == pytest.approx(
        statistics.fmean(h.good / h.duration_s for h in counts), rel=1e-12
    )
    assert stats["goodput"]["slo_attainment"] == pytest.approx(
        statistics.fmean(h.good / h.requests for h in counts), rel=1e-12
    )
    assert stats["goodput"]["good"] == sum(h.good for h in counts)
    assert stats["goodput"]["requests"] == sum(h.requests for h in counts)


def test_cost_matches_the_price_of_the_hand_counted_rates(priced_run: BenchRun) -> None:
    m = priced_run.throughput
    stats = m["stats"]
    rates = [h.tokens_per_s for h in count_by_hand(m)]
    assert stats["repeat_values"] == pytest.approx(rates, rel=1e-12)
    mean = statistics.fmean(rates)
    assert m["value"] == pytest.approx(mean, rel=1e-12)
    assert stats["cost"]["pricing"] == {
        "usd_per_hour": USD_PER_HOUR,
        "source": "--usd-per-hour",
        "as_of": "",
        "example": False,
    }
    assert stats["cost"]["usd_per_million_output_tokens"] == pytest.approx(
        USD_PER_HOUR / (mean * 3600) * 1e6, rel=1e-12
    )
    for rate, window in zip(rates, stats["repeats"]):
        assert window["usd_per_million_output_tokens"] == pytest.approx(
            USD_PER_HOUR / (rate * 3600) * 1e6, rel=1e-12
        )
    # the interval of the rate: Student t on log tokens/s, 2 df; cost bounds swapped
    logs = [math.log(rate) for rate in rates]
    half = student_t.ppf(0.975, REPEATS - 1) * statistics.stdev(logs) / math.sqrt(REPEATS)
    rate_low, rate_high = (math.exp(statistics.fmean(logs) + side * half) for side in (-1, 1))
    assert stats["interval"] == pytest.approx([rate_low, rate_high], rel=1e-9)
    low, high = stats["cost"]["interval"]
    assert low == pytest.approx(USD_PER_HOUR / (rate_high * 3600) * 1e6, rel=1e-9)
    assert high == pytest.approx(USD_PER_HOUR / (rate_low * 3600) * 1e6, rel=1e-9)
    assert low <= stats["cost"]["usd_per_million_output_tokens"] <= high


@pytest.mark.parametrize("kind", ["markdown", "html"])
def test_the_reports_show_the_recorded_goodput_and_cost(priced_run: BenchRun, kind: str) -> None:
    m = priced_run.throughput
    stats = m["stats"]
    tables = (
        markdown_tables(priced_run.markdown)
        if kind == "markdown"
        else html_tables(summary_section(priced_run.html))
    )
    [row] = tables["Throughput"]
    assert list(row) == throughput_columns(goodput=True, cost=True)
    counts = count_by_hand(m)
    assert row["goodput (req/s)"] == format_goodput(
        statistics.fmean(h.good / h.duration_s for h in counts)
    )
    assert (
        row["SLO attainment"]
        == format_percent(statistics.fmean(h.good / h.requests for h in counts))
        == "50.0%"
    )
    low, high = stats["cost"]["interval"]
    assert row["$/1M output tokens"] == (
        f"{format_usd(stats['cost']['usd_per_million_output_tokens'])} [{format_usd(low)}, {format_usd(high)}]"
    )
    text = priced_run.markdown if kind == "markdown" else summary_section(priced_run.html)
    plain = text.replace("\\", "")
    assert plain.count("$1.2/h (--usd-per-hour)") == 1
    assert "(ttft=500ms,tpot=3ms)" in plain and "example price" not in plain


def test_the_per_test_extra_lists_each_repeats_goodput_and_cost(priced_run: BenchRun) -> None:
    m = priced_run.throughput
    extra = measurement_html(*records([m]))
    repeats = extra[extra.index("<h4>Repeats</h4>") :]
    header = re.findall(r"<th[^>]*>(.*?)</th>", repeats.split("</thead>")[0])
    assert header[5:8] == ["goodput (req/s)", "SLO attainment", "$/1M output tokens"]
    rows = [
        re.findall(r"<td[^>]*>(.*?)</td>", row)
        for row in re.findall(r"<tr>(.*?)</tr>", repeats.split("<tbody>")[1])
    ]
    assert [row[5:8] for row in rows] == [
        [
            format_goodput(w["goodput"]["goodput_rps"]),
            format_percent(w["goodput"]["slo_attainment"]),
            format_usd(w["usd_per_million_output_tokens"]),
        ]
        for w in m["stats"]["repeats"]
    ]
    assert "$1.2/h (--usd-per-hour)" in extra and "ttft=500ms,tpot=3ms" in extra


def test_without_a_price_or_an_slo_no_cost_or_goodput_is_recorded(tmp_path: Path) -> None:
    sweep = (ROOT / "pytest_modelsweep" / "sweeps" / "embedded.toml").read_text(encoding="utf-8")
    head, _, rest = sweep.partition("[pricing]")
    (tmp_path / "unpriced.toml").write_text(
        head + rest[rest.index("\n[models.") :], encoding="utf-8"
    )
    assert load_sweep(str(tmp_path / "unpriced.toml")).pricing is None
    with ListingServer(MODEL) as server:
        completed = run_bench(
            tmp_path,
            server.base_url,
            "--repeats=1",
            "--timed-requests=4",
            f"--sweep={tmp_path / 'unpriced.toml'}",
        )
    assert completed.returncode == 0, (completed.stdout + completed.stderr)[-4000:]
    m = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["measurements"][0]
    # no default SLO and no default price: no goodput, no cost, nowhere
    assert m["stats"]["goodput"] is None and m["stats"]["cost"] is None
    for window in m["stats"]["repeats"]:
        assert window["goodput"] is None and window["priced"] is False
        assert window["usd_per_million_output_tokens"] is None
    assert m["stats"]["interval"] is None  # one repeat: no interval
    [row] = markdown_tables((tmp_path / "r.md").read_text(encoding="utf-8"))["Throughput"]
    assert list(row) == throughput_columns()


def test_the_embedded_sweeps_example_price_is_said_to_be_one(tmp_path: Path) -> None:
    with ListingServer(MODEL) as server:
        completed = run_bench(
            tmp_path,
            server.base_url,
            "--repeats=1",
            "--timed-requests=4",
            "--html=r.html",
            "--self-contained-html",
        )
    assert completed.returncode == 0, (completed.stdout + completed.stderr)[-4000:]
    m = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))["measurements"][0]
    stats = m["stats"]
    assert (
        stats["cost"]["pricing"]["example"] is True
        and stats["cost"]["pricing"]["usd_per_hour"] == 0.10
    )
    assert stats["cost"]["usd_per_million_output_tokens"] == pytest.approx(
        0.10 / (m["value"] * 3600) * 1e6, rel=1e-12
    )
    assert stats["cost"]["interval"] is None  # one repeat
    assert stats["goodput"] is None
    markdown = (tmp_path / "r.md").read_text(encoding="utf-8")
    [row] = markdown_tables(markdown)["Throughput"]
    assert list(row) == throughput_columns(cost=True)
    assert row["$/1M output tokens"] == format_usd(stats["cost"]["usd_per_million_output_tokens"])
    page = summary_section((tmp_path / "r.html").read_text(encoding="utf-8"))
    for text in (markdown.replace("\\", ""), page):
        assert text.count("an example price") == 1
