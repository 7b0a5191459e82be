"""Open loop and capacity in requests/second through the real benches, against fake servers
whose service time grows with their queue.

Each fake server (``tests/support/sse_server.py``) runs at most ``SLOTS`` requests at once and queues
the rest, first come first served; each token of each request it runs is paced
``base × (requests running)`` seconds, so it completes ``1 / (base × 256)`` requests per second
however many it runs (its capacity), and whatever arrives faster waits in its queue. The
benches attach to them with ``--endpoint`` (a server of unknown make: its ``/metrics`` are
found by their llama-server names) and record what ``benches/test_open_loop.py`` and
``benches/test_throughput.py`` measure; the checks read the results file through the typed
records.
"""

from __future__ import annotations

import asyncio
import base64
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.browser import CHROMIUM, chromium, parse
from support.paths import PAIR, TWO_WORKERS
from support.sse_server import ListingServer

from pytest_modelsweep.core.measurements import (
    Measurement,
    SearchRatioStats,
    SearchStats,
    StepOutcome,
    ThroughputStats,
)
from pytest_modelsweep.core.slo import is_good, parse_slo
from pytest_modelsweep.core.stats.attainment import min_requests_to_pass
from pytest_modelsweep.report.decision import decision_page
from pytest_modelsweep.report.plots import matplotlib_available
from pytest_modelsweep.report.tables import (
    format_rps,
    latency_figure,
    rate_bracket_text,
    summary_tables,
    throughput_row,
)
from pytest_modelsweep.store.results import RunInfo
from pytest_modelsweep.workloads.slo_search import decide_capacity_verdict

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]
REFERENCE, CANDIDATE = "gemma3-270m", "smollm2-135m"
SLOTS = 4
TOKENS = 256
BASE_S = {REFERENCE: 0.001, CANDIDATE: 0.0005}
CAPACITY_RPS = {name: 1 / (base * TOKENS) for name, base in BASE_S.items()}  # 3.9 and 7.8


@pytest.fixture
def servers() -> Iterator[dict[str, ListingServer]]:
    with (
        ListingServer(
            REFERENCE, per_token_s_per_inflight=BASE_S[REFERENCE], slots=SLOTS
        ) as reference,
        ListingServer(
            CANDIDATE, per_token_s_per_inflight=BASE_S[CANDIDATE], slots=SLOTS
        ) as candidate,
    ):
        yield {REFERENCE: reference, CANDIDATE: candidate}


def run(
    pytester: pytest.Pytester,
    servers: dict[str, ListingServer],
    *args: str,
) -> tuple[pytest.RunResult, list[Measurement]]:
    """The real benches in a subprocess, attached to the servers; the run's measurements."""
    for name in ("test_open_loop.py", "test_throughput.py"):
        pytester.makepyfile(**{name[:-3]: (ROOT / "benches" / name).read_text()})
    attached = [f"--endpoint={name}={server.base_url}" for name, server in servers.items()]
    result = pytester.runpytest(
        *attached,
        "--contended-cores=64",
        "--contended-steal=1",
        "--results=r.json",
        "--store=s.sqlite",
        "--modelsweep-dir=work",
        "-p",
        "no:cacheprovider",
        "-s",
        *args,
    )
    found = json.loads((pytester.path / "r.json").read_text())["measurements"]
    return result, [Measurement.from_dict(m) for m in found]


def test_done_when_the_open_loop_p99_is_far_above_the_closed_loops_at_the_same_throughput(
    pytester: pytest.Pytester,
    servers: dict[str, ListingServer],
) -> None:
    """At twice the server's capacity the open loop completes requests as fast as the closed
    loop at its 4 slots, but its p99 latency holds the queue the closed loop never builds;
    the server's own metrics saw that queue, and the window says it was saturated."""
    rate = 2 * CAPACITY_RPS[CANDIDATE]
    result, found = run(
        pytester,
        servers,
        f"--model={CANDIDATE}",
        "-m",
        "throughput or open_loop",
        "-k",
        "(c4 and not ratio) or open_loop",
        f"--request-rate={rate:.2f}",
        "--timed-requests=32",
        "--repeats=2",
        "--html=r.html",
        "--self-contained-html",
    )
    result.assert_outcomes(passed=2)
    closed = next(m for m in found if m.benchmark == "throughput")
    opened = next(m for m in found if m.benchmark == "open_loop")
    assert closed.params["concurrency"] == SLOTS
    assert opened.params == {
        "concurrency": None,
        "prompt_tokens": None,
        "output_tokens": TOKENS,
        "timed_requests": 32,
        "repeats": 2,
        "request_rate": float(f"{rate:.2f}"),
        "burstiness": 1.0,
        "max_in_flight": 256,
    }
    closed_row, open_row = throughput_row(closed), throughput_row(opened)
    # about the same mean throughput (the server's capacity, both ways; how busy the machine
    # is moves each window: tests/test_open_loop.py times the claim alone) ...
    assert closed_row.mean is not None and open_row.mean is not None
    assert open_row.mean == pytest.approx(closed_row.mean, rel=0.5), (
        open_row.mean,
        closed_row.mean,
    )
    # ... and a p99 latency far above the closed loop's, from the scheduled send times
    closed_p99, open_p99 = (
        latency_figure(closed_row.latency["e2e"], "p99"),
        latency_figure(open_row.latency["e2e"], "p99"),
    )
    assert closed_p99 is not None and open_p99 is not None and open_p99 > 2 * closed_p99
    stats = opened.stats
    assert isinstance(stats, ThroughputStats) and len(stats.repeats) == 2
    for window in stats.repeats:
        loop = window.open_loop
        assert loop is not None and loop.describe == f"Poisson {float(f'{rate:.2f}'):g} req/s"
        assert loop.saturated and (loop.saturation.reason() or "").startswith("saturated: achieved")
        server = window.server_metrics
        assert server is not None and server.unavailable is None and len(server.samples) >= 2
        summary = server.summary
        assert summary.waiting is not None and summary.waiting.max > 0
        assert summary.running is not None and summary.running.max == SLOTS
        assert (summary.flag_line() or "").startswith("the server queued up to ")
        assert window.server_flag is None  # an open loop's requests queue by design
        # the series: the client's count with each sample, the server's names as it exposes them
        assert summary.sources["waiting"] == "llamacpp:requests_deferred"
        assert any((s.client_in_flight or 0) > SLOTS for s in server.samples)
    assert stats.saturated_windows == 2 and stats.server_flagged_windows == 0
    assert stats.flags[-1:] == ("saturated",)
    # the closed loop's windows were sampled too (N in flight, the server running them)
    assert isinstance(closed.stats, ThroughputStats)
    assert all(
        w.server_metrics is not None and w.server_metrics.samples for w in closed.stats.repeats
    )
    # the tables: the open loop's own table with its rates and flags
    table = next(t for t in summary_tables(found) if t.title == "Open-loop throughput")
    row = dict(zip(table.columns, table.rows[0]))
    # the schedule's own rate, the mean over the repeats (a Poisson schedule's first gap is
    # random, so a window's offered rate is the requested one only within a few percent)
    offered = [w.open_loop.saturation.offered_rps for w in stats.repeats if w.open_loop]
    assert all(o is not None and o == pytest.approx(rate, rel=0.25) for o in offered)
    assert float(str(row["offered (req/s)"])) == pytest.approx(
        sum(o for o in offered if o is not None) / len(offered), rel=0.01
    )
    assert float(str(row["achieved (req/s)"])) < 0.9 * float(str(row["offered (req/s)"]))
    assert row["flags"] == "saturated (2/2)"
    result.stdout.fnmatch_lines(
        [
            f"*open_loop {CANDIDATE} {float(f'{rate:.2f}'):g}rps: repeat 1/2, "
            "*achieved * req/s, saturated; the server queued up to *"
        ]
    )
    check_server_metrics_plot(pytester.path / "r.html", pytester.path)


def check_server_metrics_plot(report: Path, where: Path) -> None:
    """The HTML report plots the windows' server metrics: a panel per measurement, the
    series drawn; rendered in a real Chromium where one is installed."""
    if not matplotlib_available():
        return
    text = report.read_text(encoding="utf-8")
    alt = "What the server&#x27;s /metrics showed during each timed window"
    assert alt in text
    start = text.index(alt)
    data = text[text.index("base64,", start) + 7 : text.index('"', text.index("base64,", start))]
    svg = base64.b64decode(data).decode()
    for words in (
        "requests running",
        "requests waiting",
        "client in flight",
        f"{CANDIDATE} · open_loop",
        f"{CANDIDATE} · throughput c4",
        "seconds into the timed windows",
    ):
        assert words in svg, words
    if CHROMIUM is None:
        return
    page = parse(chromium(report, where / "profile", "--dump-dom"))
    assert any(src.startswith("data:image/svg+xml;base64,") for src in page.plot_images)
    png = where / "server_metrics.png"
    chromium(
        report,
        where / "profile",
        "--hide-scrollbars",
        "--window-size=1400,2000",
        f"--screenshot={png}",
    )
    assert png.read_bytes().startswith(b"\x89PNG")


def test_a_closed_loop_whose_server_queued_is_flagged(
    pytester: pytest.Pytester,
    servers: dict[str, ListingServer],
) -> None:
    """Four in flight on a server of two slots: the client believes it measures concurrency
    4, the server's /metrics show it ran 2 and queued 2. Each window says so, the setting is
    flagged, the flag shows in the table, on the decision page and in the ratio."""
    for server in servers.values():
        server.slots = 2
        server._slot_queue = asyncio.Semaphore(2)
    # (a tolerance no ratio of two alike servers leaves: the ratio's own test passes)
    result, found = run(
        pytester,
        servers,
        *PAIR,
        "-k",
        "c4 and not p1024 and not p3072",
        "--timed-requests=8",
        "--repeats=2",
        "--ratio-tolerance=0.9",
    )
    result.assert_outcomes(passed=3)
    for m in found:
        stats = m.stats
        if m.benchmark == "throughput":
            assert isinstance(stats, ThroughputStats)
            assert stats.server_flagged_windows == 2 and "server queued" in stats.flags
            for window in stats.repeats:
                assert (window.server_flag or "").startswith("the server queued up to ")
                assert "(running at most 2) while the client had up to 4 in flight" in (
                    window.server_flag or ""
                )
    table = next(t for t in summary_tables(found) if t.title == "Throughput")
    # each row says so, after "unstable" where a busy machine moved one repeat that far
    unstable = {m.model: m.stats.unstable for m in found if isinstance(m.stats, ThroughputStats)}
    model, flags = table.columns.index("model"), table.columns.index("flags")
    assert {str(row[model]): str(row[flags]) for row in table.rows} == {
        name: "unstable, " * is_unstable + "server queued (2/2)"
        for name, is_unstable in unstable.items()
    }
    (ratio,) = [m for m in found if m.benchmark == "throughput_ratio"]
    assert "server queued" in (getattr(ratio.stats, "candidate_flags", None) or ())
    assert "server queued" in (getattr(ratio.stats, "reference_flags", None) or ())
    page = decision_page(
        found, RunInfo.of(json.loads((pytester.path / "r.json").read_text())["run"])
    )
    assert page is not None
    assert all("server queued (c4)" in row.flags for row in page.rows)
    result.stdout.fnmatch_lines(
        [
            "*throughput * c4: repeat 1/2, *; the server queued up to 2 "
            "requests (running at most 2) while the client had up to 4 in "
            "flight"
        ]
    )


def steps_against_records(m: Measurement, slo_text: str) -> SearchStats:
    """The recorded sweep, each step's attainment recomputed from its stored requests."""
    stats = m.stats
    assert isinstance(stats, SearchStats) and stats.knob == "rate"
    slo = parse_slo(slo_text)
    for index, step in enumerate(stats.steps):
        sent = [r for r in m.requests if r["step"] == index]
        assert {r["rate"] for r in sent} == {step.rate}
        # a step's interval pools its windows so far (a saturated one: its own window only)
        pooled = (
            sent
            if step.outcome is StepOutcome.SATURATED
            else [r for r in m.requests if r["step"] <= index and r["rate"] == step.rate]
        )
        assert step.interval is not None and step.interval.requests == len(pooled)
        assert step.interval.good == sum(is_good(r, slo) for r in pooled)
        window = step.recorded
        assert window is not None and window.open_loop is not None
        assert window.server_metrics is not None and window.server_metrics.samples
        assert window.goodput is not None
        assert window.goodput.good == sum(is_good(r, slo) for r in sent)
    return stats


def test_the_rate_sweep_stops_at_saturation_and_compares_in_requests_per_second(
    pytester: pytest.Pytester,
    servers: dict[str, ListingServer],
) -> None:
    """Each model's sweep doubles the rate until its server falls behind, then bisects; the
    candidate, twice as fast, gets about twice the reference's capacity, and its ratio's
    verdict comes from the interval the two brackets give. The sweeps start at 2.35 req/s (a
    step at 1 req/s would take 29 s and pass as surely), each model on its own xdist worker:
    the ratio on one worker waits for the other's sweep through the store. (A step's progress
    line, which xdist's workers do not print, is tests/test_rate_sweep.py's.) The doubling
    steps, from 2.35 req/s, stand clear of both capacities (3.9 and 7.8): the last passing
    step at 60% of a server's capacity, the next at 120%, so that noise does not decide them
    (from 2, the reference's second step, 4, sat at 103% and was a miss on a busy machine)."""
    slo = "e2e=3000ms"
    result, found = run(
        pytester,
        servers,
        *PAIR,
        "-m",
        "rate_capacity",
        f"--slo={slo}",
        "--rate-sweep=2.35:40",
        *TWO_WORKERS,
    )
    result.assert_outcomes(passed=3)
    sweeps = {m.model: m for m in found if m.benchmark == "rate_capacity"}
    for name, m in sweeps.items():
        stats = steps_against_records(m, slo)
        steps = stats.steps
        assert m.value == stats.capacity and m.unit == "req/s"
        assert m.params["timed_requests"] == min_requests_to_pass(0.9) == 29
        # doubling from 2 until the first failure, which is the server falling behind
        growth = [s.rate for s in steps[: next(i for i, s in enumerate(steps) if s.failed) + 1]]
        assert growth == [2.35 * 2.0**i for i in range(len(growth))], growth
        first_failure = next(s for s in steps if s.failed)
        assert first_failure.outcome is StepOutcome.SATURATED, stats.stopped
        assert first_failure.rate > CAPACITY_RPS[name]
        assert stats.saturated_at is not None and stats.saturated_at > CAPACITY_RPS[name] * 0.7
        # a window of 29 requests a little above capacity builds a queue of a few requests
        # only, less than the 10% shortfall (or the SLO) shows: the sweep may pass it
        assert stats.capacity is not None and 0 < stats.capacity < CAPACITY_RPS[name] * 1.25
        assert stats.bracket is not None and stats.bracket[0] == stats.capacity
        assert stats.bracket[1] is not None and stats.bracket[1] > stats.bracket[0]
        assert stats.at_capacity is not None and stats.at_capacity.slo_attainment is not None
        assert all(s.outcome is not StepOutcome.PASS for s in steps if s.rate >= stats.bracket[1])
    (ratio,) = [m for m in found if m.benchmark == "rate_capacity_ratio"]
    judged = ratio.stats
    assert isinstance(judged, SearchRatioStats) and judged.knob == "rate"
    assert judged.ratio is not None
    interval = judged.ratio
    candidate, reference = (sweeps[n].stats for n in (CANDIDATE, REFERENCE))
    assert isinstance(candidate, SearchStats) and isinstance(reference, SearchStats)
    assert candidate.knob == reference.knob == "rate"
    assert candidate.bracket is not None and reference.bracket is not None
    assert interval.ratio == pytest.approx(ratio.value)
    assert ratio.value == pytest.approx((candidate.capacity or 0) / (reference.capacity or 1))
    assert interval.low == pytest.approx(candidate.bracket[0] / (reference.bracket[1] or math.inf))
    assert interval.high == pytest.approx((candidate.bracket[1] or math.inf) / reference.bracket[0])
    assert interval.low <= ratio.value <= interval.high
    assert judged.verdict is decide_capacity_verdict(interval, 0.10)
    assert judged.rule == "rate-capacity-interval-beyond-tolerance" and judged.confidence == 0.9
    # the capacity table: both sweeps, then the candidate's ratio with its verdict
    table = next(t for t in summary_tables(found) if t.kind == "rate_capacity")
    assert [row[0] for row in table.rows] == [REFERENCE, CANDIDATE, CANDIDATE]
    assert table.rows[-1][-1] == (judged.verdict.value if judged.verdict else "")
    # the decision page: each model's capacity, the candidate's verdict and ratio with the
    # interval the brackets give; the concurrency capacity's group (not measured here) left out
    page = decision_page(
        found, RunInfo.of(json.loads((pytester.path / "r.json").read_text())["run"])
    )
    assert page is not None
    titles = [c.title for c in page.columns]
    cells = {
        row.model: {
            t: row.cells[titles.index(t)]
            for t in ("capacity in req/s", "req/s vs reference [interval]", "req/s verdict")
        }
        for row in page.rows
    }
    assert cells[REFERENCE]["capacity in req/s"].text == f"{format_rps(reference.capacity)} req/s"
    assert cells[CANDIDATE]["capacity in req/s"].text == f"{format_rps(candidate.capacity)} req/s"
    assert cells[CANDIDATE]["req/s verdict"].verdict == (
        judged.verdict.value if judged.verdict else None
    )
    high = "∞)" if math.isinf(interval.high) else f"{interval.high:.2f}]"
    assert cells[CANDIDATE]["req/s vs reference [interval]"].text == (
        f"{ratio.value:.2f}× [{interval.low:.2f}, {high}"
    )
    assert rate_bracket_text(candidate.bracket) in cells[CANDIDATE]["capacity in req/s"].tip
    assert "capacity under the SLO" in [group for group, _ in page.unmeasured]


def test_without_a_rate_or_an_slo_the_open_loop_benches_skip(
    pytester: pytest.Pytester,
    servers: dict[str, ListingServer],
) -> None:
    result, found = run(pytester, servers, *PAIR, "-m", "open_loop or rate_capacity", "-rs")
    result.assert_outcomes(skipped=5)
    result.stdout.fnmatch_lines(
        [
            "*the open loop needs --request-rate, e.g. --request-rate 2*",
            "*capacity in req/s needs --slo, e.g. --slo ttft=2000ms,tpot=100ms*",
        ]
    )
    assert found == []


def test_too_few_requests_per_step_is_one_line_naming_the_fix(
    pytester: pytest.Pytester,
    servers: dict[str, ListingServer],
) -> None:
    result, found = run(
        pytester,
        servers,
        f"--model={CANDIDATE}",
        "-m",
        "rate_capacity",
        "-k",
        "not ratio",
        "--slo=e2e=2000ms",
        "--timed-requests=10",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "--timed-requests 10: 10 requests per step can never show 90% SLO attainment at 90% "
            "confidence (even all good gives a lower bound below it); use at least 29 timed "
            "requests per step"
        ]
    )
    assert found == []


def users_open_loop(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_mine="""
import pytest
from pytest_modelsweep import MeasureThroughput


@pytest.mark.modelsweep_benchmark("support", kind="throughput")
@pytest.mark.parametrize("concurrency", [2], ids=lambda c: f"c{c}")
def test_support(measure_throughput: MeasureThroughput, concurrency: int) -> None:
    measure_throughput("support", ["summarise the report", "draft a reply"],
                       concurrency=concurrency, output_tokens=8, rate=20.0)
"""
    )


def test_a_users_prompts_in_an_open_loop(
    pytester: pytest.Pytester,
    servers: dict[str, ListingServer],
) -> None:
    """``measure_throughput(..., rate=R)``: the user's prompts sent at R per second, at most
    ``concurrency`` in flight (vllm bench serve's --max-concurrency), recorded as their own
    throughput benchmark with the open-loop figures in every window."""
    users_open_loop(pytester)
    attached = [f"--endpoint={name}={server.base_url}" for name, server in servers.items()]
    result = pytester.runpytest(
        *attached,
        f"--model={CANDIDATE}",
        "--contended-cores=64",
        "--contended-steal=1",
        "--results=r.json",
        "--store=s.sqlite",
        "--modelsweep-dir=work",
        "-p",
        "no:cacheprovider",
        "--timed-requests=12",
        "--repeats=2",
        "-k",
        "test_support",
    )
    result.assert_outcomes(passed=1)
    (data,) = json.loads((pytester.path / "r.json").read_text())["measurements"]
    m = Measurement.from_dict(data)
    assert m.benchmark == "support" and m.unit == "tokens/s"
    assert m.params["concurrency"] == 2 and m.params["max_in_flight"] == 2
    assert m.params["request_rate"] == 20.0 and m.params["user_prompts"] == 2
    stats = m.stats
    assert isinstance(stats, ThroughputStats) and len(stats.repeats) == 2
    for window in stats.repeats:
        assert window.open_loop is not None and window.open_loop.saturation.max_in_flight == 2
        assert window.open_loop.peak_in_flight <= 2 and window.completed == 12
        assert window.violations == ()
