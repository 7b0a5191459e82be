"""Capacity under an SLO through the real bench, against fake servers whose latency grows
with load.

Each fake server paces its tokens by the requests in flight
(``per_token_s_per_inflight``): with ``c`` kept in flight, a request's TPOT is about
``base × c``. Under ``--slo=tpot=6ms`` the capacity is the largest ``c`` with
``base × c ≤ 6 ms``: the reference (base 4 ms) serves 1 (c2 gives 8 ms), the candidate
(base 6/3.5 ms) serves 3 (5.1 ms; c4 gives 6.9 ms). The targets lie half a step from
either side's boundary, so scheduling noise cannot move a step across them. The runs ask
for 50% attainment (``--slo-attainment=0.5``), so that a step is decided from a few
windows of two requests: 7 good requests pass it at 97.5%, 8 bad ones miss it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.capacity_runs import (
    CANDIDATE,
    REFERENCE,
    TIMED,
    Servers,
    run,
)
from support.paths import PAIR, TWO_WORKERS
from support.sse_server import ListingServer

from pytest_modelsweep.core.codec import converter
from pytest_modelsweep.core.cost import usd_per_million_output_tokens
from pytest_modelsweep.core.measurements import Measurement
from pytest_modelsweep.core.slo import Slo, is_good, parse_slo
from pytest_modelsweep.core.sweep import load_sweep

pytest_plugins = ("pytester",)

REFERENCE_BASE_S, CANDIDATE_BASE_S = 0.004, 0.006 / 3.5
SLO = "tpot=6ms"


@pytest.fixture
def servers() -> Iterator[Servers]:
    with (
        ListingServer(REFERENCE, per_token_s_per_inflight=REFERENCE_BASE_S) as reference,
        ListingServer(CANDIDATE, per_token_s_per_inflight=CANDIDATE_BASE_S) as candidate,
    ):
        yield Servers(reference, candidate)


def measurements(pytester: pytest.Pytester, benchmark: str) -> dict[str, dict[str, Any]]:
    """This run's measurements of ``benchmark`` by model."""
    found = json.loads((pytester.path / "r.json").read_text())["measurements"]
    return {m["model"]: m for m in found if m["benchmark"] == benchmark}


def attainment(requests: list[dict[str, Any]], step: int, slo: Slo) -> float:
    """A window's share of good requests, recomputed from the stored request records."""
    records = [r for r in requests if r["step"] == step]
    return sum(is_good(r, slo) for r in records) / len(records)


def check_capacity(
    measurement: dict[str, Any], capacity: int, navigated: list[int], decided: list[int]
) -> None:
    """The recorded capacity and windows, checked against the stored per-request records:
    ``navigated`` one window each, then ``decided`` the windows that decide the boundary."""
    slo = parse_slo(SLO)
    stats, params = measurement["stats"], measurement["params"]
    assert measurement["value"] == capacity == stats["capacity"]
    assert measurement["unit"] == "concurrent requests" and measurement["outcome"] == "passed"
    assert params == {
        "slo": {"tpot_ms": 6.0},
        "attainment_target": 0.5,
        "max_concurrency": 16,
        "output_tokens": 256,
        "timed_requests": TIMED,
        "step_confidence": 0.975,
        "min_windows": 2,
        "max_windows": 4,
    }
    assert stats["source"] == "the sweep's max_num_seqs"
    assert stats["confidence"] == 0.95 and stats["inconclusive"] == []
    steps = stats["steps"]
    tried = navigated + decided
    assert [s["value"] for s in steps] == tried
    requests = measurement["requests"]
    assert measurement["n"] == len(requests) == sum(max(TIMED, c) for c in tried)
    pooled: dict[int, list[float]] = {}
    for index, step in enumerate(steps):
        assert {r["concurrency"] for r in requests if r["step"] == index} == {step["value"]}
        share = step["good"] / step["requests"]
        assert share == attainment(requests, index, slo)
        assert step["violations"] == []
        assert step["requests"] == max(TIMED, tried[index])  # the window's timed requests
        at = pooled.setdefault(step["value"], [])
        at.append(share)
        assert step["interval"]["windows"] == len(at)
        assert step["interval"]["good"] == sum(round(a * step["requests"]) for a in at)
        assert step["outcome"] == ("undecided" if len(at) == 1 else step["outcome"])
    last_pass, first_fail = stats["bracket"]
    assert (last_pass, first_fail) == (capacity, capacity + 1)
    outcomes = {s["value"]: s["outcome"] for s in steps}
    assert (outcomes[last_pass], outcomes[first_fail]) == ("pass", "miss")
    assert set(pooled[last_pass]) == {1.0} and set(pooled[first_fail]) == {0.0}
    at = max(i for i, s in enumerate(steps) if s["value"] == last_pass)
    assert steps[at]["outcome"] == "pass" and sum(s["outcome"] == "pass" for s in steps) == 1
    at_capacity = stats["at_capacity"]
    assert at_capacity["slo_attainment"] == steps[at]["good"] / steps[at]["requests"]
    assert at_capacity["output_tokens_per_s"] == steps[at]["output_tokens_per_s"]
    assert (
        at_capacity["goodput_rps"]
        == steps[at]["goodput_rps"]
        == pytest.approx(steps[at]["good"] / steps[at]["duration_s"])
    )
    pricing = load_sweep("embedded").pricing
    assert pricing is not None and stats["pricing"] == converter.unstructure(pricing)
    assert at_capacity["usd_per_million_output_tokens"] == pytest.approx(
        usd_per_million_output_tokens(pricing.usd_per_hour, at_capacity["output_tokens_per_s"])
    )
    assert stats["reason"] is None


# The reference: c1 passes, c2 misses; 7 good requests pass a step and 8 bad ones miss it,
# two a window at c1 and c2. The candidate: c3 passes in 3 windows of 3, c4 misses in 2 of 4.
REFERENCE_WINDOWS = ([1, 2], [2, 2, 2, 1, 1, 1])
CANDIDATE_WINDOWS = ([1, 2, 4, 3], [4, 3, 3])


@pytest.mark.timing
def test_capacity_of_two_paced_servers_and_their_ratio(
    pytester: pytest.Pytester,
    servers: Servers,
) -> None:
    result = run(pytester, *servers.args, *PAIR, f"--slo={SLO}", own_process=True)
    result.assert_outcomes(passed=3)
    found = measurements(pytester, "capacity")
    check_capacity(found[REFERENCE], 1, *REFERENCE_WINDOWS)
    check_capacity(found[CANDIDATE], 3, *CANDIDATE_WINDOWS)
    (ratio,) = measurements(pytester, "capacity_ratio").values()
    assert ratio["model"] == CANDIDATE and ratio["value"] == 3.0
    assert ratio["unit"] == "x reference"
    assert ratio["params"] == {"reference": REFERENCE, "verdict": "better", "slo": {"tpot_ms": 6.0}}
    stats, sides = ratio["stats"], ratio["stats"]["ratio"]
    assert (sides["candidate"]["capacity"], sides["reference"]["capacity"]) == (3, 1)
    assert [
        [sides[r]["last_pass"], sides[r]["first_fail"]] for r in ("candidate", "reference")
    ] == [
        [3, 4],
        [1, 2],
    ]
    # the crossings lie in [3, 4) and [1, 2): the ratio between 3/2 and 4/1 at 90%, wholly
    # above 1 + 10%
    assert (sides["low"], sides["high"]) == (1.5, 4.0)
    assert sides["confidence"] == pytest.approx(0.90)
    assert Measurement.from_dict(ratio).stats.ratio.degenerate is False  # type: ignore[union-attr]
    assert stats["rule"] == "capacity-interval-beyond-tolerance"
    result.stdout.fnmatch_lines(
        [
            f"*capacity {CANDIDATE}: window 3, c4 (its 1st): SLO met by 0.0% (0/4); navigating: "
            "below the 50% needed; *",
            f"*capacity {CANDIDATE}: window 5, c4 (its 2nd): SLO met by 0.0% (0/4); step c4 0/8 = "
            "0.0%, 97.5% CI [[]0.0%, *] (design effect 1.00), 50% needed: miss; *",
            f"*capacity {CANDIDATE}: window 7, c3 (its 3rd): SLO met by 100.0% (3/3); step c3 9/9 = "
            "100.0%, 97.5% CI [[]61.5%, 100.0%] (design effect 1.00), 50% needed: pass; *",
            f"*{CANDIDATE} ÷ {REFERENCE}, capacity under tpot=6ms (50% attainment): 3 ÷ 1 = 3.00x, "
            "better (90% interval 1.50–4.00; capacity intervals 3 and 1 at 95% each, tolerance "
            "±10%)",
        ]
    )

    # The store's results, read back by the ratio alone, with the roles swapped: worse.
    again = run(
        pytester,
        *servers.args,
        f"--slo={SLO}",
        f"--reference={CANDIDATE}",
        f"--model={REFERENCE}",
        "-m",
        "verdict",
        "--md=again.md",
    )
    again.assert_outcomes(failed=1)
    # its decision page says where both capacities came from, not that none was measured
    page = (pytester.path / "again.md").read_text().replace("\\", "")
    run_id = ratio["stats"]["candidate_run"]
    for role, model in (("reference", CANDIDATE), ("candidate", REFERENCE)):
        assert (
            f"the {role} {model}'s capacity comes from earlier run {run_id} (the capacity "
            "ratios use it)"
        ) in page
    (swapped,) = measurements(pytester, "capacity_ratio").values()
    assert swapped["model"] == REFERENCE and swapped["value"] == pytest.approx(1 / 3)
    assert swapped["params"]["verdict"] == "worse"
    assert swapped["stats"]["candidate_run"] == ratio["stats"]["candidate_run"]
    assert (swapped["stats"]["ratio"]["low"], swapped["stats"]["ratio"]["high"]) == (0.25, 2 / 3)

    # Another SLO: the stored capacities, alike but under 6 ms, are refused by name (and
    # sides under two SLOs: test_like_with_like.py).
    other = run(pytester, *servers.args, *PAIR, "--slo=tpot=7ms", "-m", "verdict")
    other.assert_outcomes(failed=1)
    other.stdout.fnmatch_lines(
        [
            f"refusing to pair {CANDIDATE} with this run on capacity: slo differs ({CANDIDATE}: "
            '{"tpot_ms": 6.0}, this run: {"tpot_ms": 7.0}); re-run '
            f"{CANDIDATE}'s capacity test (run {run_id}) under this run's --slo and "
            "--slo-attainment"
        ]
    )


def test_without_slo_capacity_tests_skip_with_one_line(
    pytester: pytest.Pytester,
    servers: Servers,
) -> None:
    result = run(pytester, *servers.args, *PAIR, "-rs")
    result.assert_outcomes(skipped=3)
    skipped = [line for line in result.stdout.lines if line.startswith("SKIPPED [")]
    assert skipped and all(
        line.endswith(": capacity needs --slo, e.g. --slo ttft=500ms,tpot=50ms") for line in skipped
    )
    assert sum(int(line.split("[")[1].split("]")[0]) for line in skipped) == 3
    assert servers.reference.stats.bodies == servers.candidate.stats.bodies == []


def test_a_reference_that_misses_at_concurrency_one_has_capacity_zero_and_no_ratio(
    pytester: pytest.Pytester,
    servers: Servers,
) -> None:
    # tpot ≤ 3 ms: the reference (4 ms at c1) meets it nowhere, the candidate (1.7 ms) at c1
    result = run(pytester, *servers.args, *PAIR, "--slo=tpot=3ms")
    result.assert_outcomes(passed=2, failed=1)
    found = measurements(pytester, "capacity")
    zero = found[REFERENCE]
    assert zero["value"] == 0 and zero["outcome"] == "passed"
    stats = zero["stats"]
    assert (stats["capacity"], stats["bracket"]) == (0, [0, 1])
    assert [s["value"] for s in stats["steps"]] == [1] * 4  # 8 bad requests: a miss
    assert stats["reason"] == (
        "surely misses the SLO even at concurrency 1: 0% of its requests met it (0/8), 50% needed"
    )
    for absent in (
        "slo_attainment",
        "output_tokens_per_s",
        "goodput_rps",
        "usd_per_million_output_tokens",
    ):
        assert absent not in stats
    # the candidate misses c2 (3.4 ms) however idle the machine; a busy one can make it miss
    # c1 (1.7 ms) too, and the reference alone is this test's point
    assert found[CANDIDATE]["stats"]["bracket"] in ([1, 2], [0, 1])
    assert measurements(pytester, "capacity_ratio") == {}
    result.stdout.fnmatch_lines(
        [
            "cannot compare: the reference meets the SLO at no concurrency "
            f"({REFERENCE} under tpot=3ms: surely misses the SLO even at concurrency 1: 0% of its "
            "requests met it (0/8), 50% needed)"
        ]
    )


def test_a_broken_window_fails_the_test_records_no_capacity_and_no_ratio(
    pytester: pytest.Pytester,
) -> None:
    with (
        ListingServer(REFERENCE, default_fault="short:12") as reference,
        ListingServer(CANDIDATE, default_fault="short:12") as candidate,
    ):
        result = run(
            pytester,
            *PAIR,
            f"--endpoint={REFERENCE}={reference.base_url}",
            f"--endpoint={CANDIDATE}={candidate.base_url}",
            f"--slo={SLO}",
        )
    result.assert_outcomes(failed=3)
    found = measurements(pytester, "capacity")
    for measurement in found.values():
        stats = measurement["stats"]
        assert measurement["outcome"] == "failed" and measurement["value"] == 0
        assert stats["capacity"] is None and stats["bracket"] is None
        assert stats["error"].startswith(
            "the window at concurrency 1 broke its rules: request 0 produced 12 of 256 tokens"
        )
        assert len(measurement["requests"]) == TIMED and len(stats["steps"]) == 1
    assert set(found) == {REFERENCE, CANDIDATE}
    assert measurements(pytester, "capacity_ratio") == {}
    result.stdout.fnmatch_lines(
        [
            f"{CANDIDATE}: the window at concurrency 1 broke its rules: request 0 produced 12 of 256 "
            "tokens (finish_reason=stop); *; no capacity is concluded from a broken window",
            f"{REFERENCE}'s capacity result at slo *, attainment target 0.5 in this run comes from a "
            f"test that failed (test_the_capacity.py::test_capacity[[]{REFERENCE}[]]): no comparison is "
            "drawn from it; fix that test's failure and re-run it",
        ]
    )


def test_the_maximum_comes_from_the_sweep_and_a_search_that_reaches_it_says_so(
    pytester: pytest.Pytester,
    servers: Servers,
) -> None:
    text = Path(load_sweep("embedded").path).read_text()
    sweep = pytester.path / "two.toml"
    sweep.write_text(text.replace("max_num_seqs = 16", "max_num_seqs = 2"))
    result = run(
        pytester,
        f"--endpoint={CANDIDATE}={servers.candidate.base_url}",
        f"--slo={SLO}",
        f"--model={CANDIDATE}",
        f"--sweep={sweep}",
        "-m",
        "capacity and not verdict",
    )
    result.assert_outcomes(passed=1)
    (measurement,) = measurements(pytester, "capacity").values()
    stats = measurement["stats"]
    assert measurement["params"]["max_concurrency"] == 2
    assert (stats["capacity"], stats["bracket"]) == (2, [2, None])
    assert [s["value"] for s in stats["steps"]] == [1, 2, 2, 2, 2]
    assert stats["reason"].startswith("meets the SLO at the server's maximum concurrency 2")


def test_under_xdist_each_model_is_searched_once_on_one_worker(
    pytester: pytest.Pytester,
    servers: Servers,
) -> None:
    result = run(pytester, *servers.args, *PAIR, f"--slo={SLO}", *TWO_WORKERS)
    result.assert_outcomes(passed=3)
    found = measurements(pytester, "capacity")
    # every request each server saw belongs to its one search: warm-up c, timed max(2, c)
    # (which steps pass is the paced servers' in real time: the test above, alone)
    for model, server in ((REFERENCE, servers.reference), (CANDIDATE, servers.candidate)):
        tried = [step["value"] for step in found[model]["stats"]["steps"]]
        completions = [b for b in server.stats.bodies if "prompt" in b]
        assert len(completions) == sum(c + max(TIMED, c) for c in tried), model
    (ratio,) = measurements(pytester, "capacity_ratio").values()
    assert ratio["value"] == found[CANDIDATE]["value"] / found[REFERENCE]["value"]
