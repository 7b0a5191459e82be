"""Verdict tests through pytest: the default rule, a user's hook, --fail-on, missing references;
throughput ratios of the real bench against fake servers, and a user's throughput rule."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.paths import PAIR, TWO_WORKERS, write_sweep
from support.sse_server import ListingServer, SseServer

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[1]


# Model tests that "measure" by writing scored items straight into the run's store, as the
# accuracy benches do after scoring real responses: this exercises the verdict plumbing.
FAKE_BENCH = """
import pytest
from pytest_modelsweep.core.records import ItemRecord

SCORES = {"gemma3-270m": [1, 0, 1, 0, 1, 0, 1, 0] * 25,
          "smollm2-135m": CANDIDATE}
PROV = {"server_name": "s", "server_version": "1", "image_digest": None,
        "server_settings": {"total_slots": 16}}

@pytest.mark.gsm8k
def test_gsm8k(model_name, modelsweep_run, record_measurement):
    store = modelsweep_run.store
    store.add_endpoint(modelsweep_run.config.run_id, model_name, PROV)
    for i, ok in enumerate(SCORES[model_name]):
        store.add_item(modelsweep_run.config.run_id, model_name, "gsm8k", "k-" + model_name,
                       ItemRecord(item_id=f"q{i:03d}", prompt_hash="p", correct=bool(ok),
                                  response="", data_hash="d"))
    record_measurement("gsm8k", sum(SCORES[model_name]) / 200, "accuracy", 200)

@pytest.mark.verdict
@pytest.mark.gsm8k
def test_verdict(candidate_name, judge_against_reference):
    judge_against_reference("gsm8k")
"""


def bench(candidate: str) -> str:
    return FAKE_BENCH.replace("CANDIDATE", candidate)


def test_worse_candidate_fails_the_session(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bench("[0] * 200"))
    result = pytester.runpytest("--modelsweep-dir", "work", *PAIR)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            (
                "*smollm2-135m vs gemma3-270m on gsm8k: worse (difference -0.500, 95% interval "
                "?-0.570, -0.430?, n=200, discordant=100, detectable ±0.099)"
            )
        ]
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_matching_candidate_passes_and_is_recorded(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bench("[0, 1, 1, 0, 1, 0, 1, 0] * 25"))
    result = pytester.runpytest("--modelsweep-dir", "work", "--results", "r.json", "-s", *PAIR)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["*smollm2-135m vs gemma3-270m on gsm8k: matches (difference +0.000*"]
    )
    data = json.loads((pytester.path / "r.json").read_text())
    verdict = next(m for m in data["measurements"] if m["benchmark"] == "verdict:gsm8k")
    assert verdict["model"] == "smollm2-135m"
    assert verdict["params"]["verdict"] == "matches"
    assert verdict["stats"]["interval"]["discordant"] == 50 and verdict["n"] == 200


def test_a_candidate_scored_alike_on_every_item_gets_no_verdict(pytester: pytest.Pytester) -> None:
    # the reference's own scores: [0, 0] is no 95% interval, so not "matches"
    pytester.makepyfile(bench("[1, 0, 1, 0, 1, 0, 1, 0] * 25"))
    result = pytester.runpytest(
        "--modelsweep-dir", "work", "--results", "r.json", "--fail-on", "worse,inconclusive", *PAIR
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*smollm2-135m vs gemma3-270m on gsm8k: inconclusive (difference +0.000, 95% interval "
            "?+0.000, +0.000?, n=200, discordant=0, detectable ±0.000); no verdict from it: only 0 "
            "of 200 items scored differently (the interval holds its 95% coverage from 30 items "
            "with 10 scored differently on): score more items (raise --limit)"
        ]
    )
    verdict = next(
        m
        for m in json.loads((pytester.path / "r.json").read_text())["measurements"]
        if m["benchmark"] == "verdict:gsm8k"
    )
    assert verdict["params"]["verdict"] == "inconclusive"


def test_margin_turns_a_wide_match_into_inconclusive(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bench("[0, 1, 1, 0, 1, 0, 1, 0] * 25"))
    result = pytester.runpytest(
        "--modelsweep-dir", "work", "--margin", "0.02", "--fail-on", "worse,inconclusive", *PAIR
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*on gsm8k: inconclusive (difference +0.000*"])


def test_a_users_hook_replaces_the_rule(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(
        """
        from pytest_modelsweep.core.stats import Verdict
        def pytest_modelsweep_verdict(candidate, reference, metric, interval, margin, config):
            return Verdict.WORSE if interval.difference < 0.2 else Verdict.BETTER
        """
    )
    pytester.makepyfile(bench("[0, 1, 1, 0, 1, 0, 1, 0] * 25"))
    result = pytester.runpytest("--modelsweep-dir", "work", *PAIR)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*on gsm8k: worse (difference +0.000*"])


def test_missing_reference_is_a_skip_naming_the_fix(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bench("[1] * 200"))
    result = pytester.runpytest(
        "--modelsweep-dir", "work", "--model", "smollm2-135m", "-rs", "-k", "not gemma3-270m"
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [("*no gsm8k items of gemma3-270m in this run or in the store*add --model gemma3-270m*")]
    )


def test_the_reference_comes_with_a_candidate_on_an_empty_store(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(bench("[1] * 200"))
    result = pytester.runpytest(
        "--modelsweep-dir", "work", "--model", "smollm2-135m", "-s", "--results", "r.json"
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "modelsweep: measuring the reference gemma3-270m's gsm8k too: the comparisons need it "
            "and the store holds no like run of it (add --model gemma3-270m to name it yourself)",
            "*on gsm8k: better (difference +0.500*",
        ]
    )
    measured = json.loads((pytester.path / "r.json").read_text())["measurements"]
    assert [row["model"] for row in measured if row["benchmark"] == "gsm8k"] == [
        "gemma3-270m",
        "smollm2-135m",
    ]


def test_reference_from_an_earlier_run_in_the_store(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bench("[1] * 200"))
    first = pytester.runpytest(
        "--modelsweep-dir", "work", "--model", "gemma3-270m", "--results", "r.json"
    )
    first.assert_outcomes(passed=1, skipped=1)  # no candidate to judge: an empty parameter set
    run = json.loads((pytester.path / "r.json").read_text())["run"]["run_id"]
    second = pytester.runpytest("--modelsweep-dir", "work", "--model", "smollm2-135m", "-s")
    second.assert_outcomes(passed=2)
    second.stdout.fnmatch_lines(
        [
            f"modelsweep: the reference gemma3-270m's gsm8k comes from the store (run {run})",
            "*on gsm8k: better (difference +0.500*",
        ]
    )


def test_verdicts_under_two_workers(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(bench("[0] * 200"))
    result = pytester.runpytest_subprocess("--modelsweep-dir", "work", *TWO_WORKERS, *PAIR)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*on gsm8k: worse*"])


def test_many_candidates_under_two_workers_never_wait_on_their_own_queue(
    pytester: pytest.Pytester,
) -> None:
    names = ["ref", "c1", "c2", "c3"]
    sweep = write_sweep(pytester.path / "four.toml", names)
    pytester.makepyfile(
        """
        import pytest
        from pytest_modelsweep.core.records import ItemRecord

        PROV = {"server_name": "s", "server_version": "1", "server_settings": {}}

        @pytest.mark.gsm8k
        def test_gsm8k(model_name, modelsweep_run, record_measurement):
            store = modelsweep_run.store
            store.add_endpoint(modelsweep_run.config.run_id, model_name, PROV)
            for i in range(50):
                store.add_item(modelsweep_run.config.run_id, model_name, "gsm8k", "k-" + model_name,
                               ItemRecord(item_id=f"q{i}", prompt_hash="p", correct=i % 2 == 0,
                                          response="", data_hash="d"))
            record_measurement("gsm8k", 0.5, "accuracy", 50)

        @pytest.mark.parametrize("i", range(6))
        def test_small(model_name, i):
            pass

        @pytest.mark.parametrize("i", range(5))
        def test_plain(i):
            pass

        @pytest.mark.verdict
        @pytest.mark.gsm8k
        @pytest.mark.parametrize("extra", range(4))
        def test_verdict(candidate_name, extra, judge_against_reference):
            judge_against_reference("gsm8k")
        """
    )
    result = pytester.runpytest_subprocess(
        *TWO_WORKERS,
        "--sweep",
        str(sweep),
        "--modelsweep-dir",
        "work",
        "--verdict-wait",
        "60",
        timeout=300,
    )
    result.assert_outcomes(passed=4 + 24 + 5 + 12)


def test_a_candidate_test_that_failed_stops_the_wait_at_once(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        FAKE_BENCH.replace("CANDIDATE", "[1] * 200").replace(
            "    store = modelsweep_run.store\n",
            "    store = modelsweep_run.store\n"
            "    assert model_name != 'smollm2-135m', 'the server answered garbage'\n",
        )
    )
    result = pytester.runpytest_subprocess(
        "--modelsweep-dir", "work", *TWO_WORKERS, *PAIR, timeout=120
    )
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            (
                "*smollm2-135m recorded no gsm8k result in this run (*test_gsm8k?smollm2-135m? failed); "
                "its own test's failure says why*"
            )
        ]
    )
    assert float(result.stdout.lines[-1].split(" in ")[1].split("s")[0]) < 60


def test_holm_widens_each_candidates_interval_to_its_step_down_level(
    pytester: pytest.Pytester,
) -> None:
    names = ["ref", "bad", "close", "same"]
    sweep = write_sweep(pytester.path / "holm.toml", names)
    pytester.makepyfile(
        """
        import pytest
        from pytest_modelsweep.core.records import ItemRecord

        # each candidate differs from "ref" on 10 or more items (stats.MIN_DISCORDANT)
        RIGHT = {"ref": range(0, 120), "bad": range(0, 60), "close": range(10, 127),
                 "same": range(10, 130)}

        @pytest.mark.gsm8k
        def test_gsm8k(model_name, modelsweep_run, record_measurement):
            store = modelsweep_run.store
            store.add_endpoint(modelsweep_run.config.run_id, model_name, {"server_name": "s"})
            for i in range(200):
                store.add_item(modelsweep_run.config.run_id, model_name, "gsm8k", "k-" + model_name,
                               ItemRecord(item_id=f"q{i:03d}", prompt_hash="p",
                                          correct=i in RIGHT[model_name], response="",
                                          data_hash="d"))
            record_measurement("gsm8k", len(RIGHT[model_name]) / 200, "accuracy", 200)

        @pytest.mark.verdict
        @pytest.mark.gsm8k
        def test_verdict(candidate_name, judge_against_reference):
            judge_against_reference("gsm8k")
        """
    )
    result = pytester.runpytest(
        "--sweep", str(sweep), "--modelsweep-dir", "work", "--holm", "--results", "r.json"
    )
    result.assert_outcomes(passed=6, failed=1)  # only "bad" is measurably worse
    verdicts = {
        m["model"]: m["stats"]
        for m in json.loads((pytester.path / "r.json").read_text())["measurements"]
        if m["benchmark"] == "verdict:gsm8k"
    }
    assert {m: v["verdict"] for m, v in verdicts.items()} == {
        "bad": "worse",
        "close": "matches",
        "same": "matches",
    }
    assert all(v["rule"] == "holm+covers-zero" for v in verdicts.values())
    # the smallest p-value is tested at 1 - 0.05/3, the next (if the first was rejected) at 1 - 0.05/2
    assert verdicts["bad"]["interval"]["confidence"] == pytest.approx(1 - 0.05 / 3)
    assert verdicts["close"]["interval"]["confidence"] == pytest.approx(1 - 0.05 / 2)


# --------------------------------------------------------------------------- throughput ratios


@pytest.fixture
def slow_candidate() -> Iterator[list[str]]:
    """``--endpoint`` options: the reference sleeping 0.4 ms a token, the candidate 5 ms (a
    paced reference: at full speed its rate is timing noise). asyncio's timer makes the
    reference's pause about 1.1 ms, so the ratio is about 0.25, and a stall of the machine
    moves a reference window of 0.6 s by a sixth (CV 11% and 16% seen between two repeats):
    see :func:`run_throughput_bench` for the repeats that keep its interval below 1."""
    with (
        ListingServer("gemma3-270m", chunk_delay_s=0.0004) as reference,
        ListingServer("smollm2-135m", chunk_delay_s=0.005) as candidate,
    ):
        yield [
            "--endpoint",
            f"gemma3-270m={reference.base_url}",
            "--endpoint",
            f"smollm2-135m={candidate.base_url}",
        ]


def run_throughput_bench(pytester: pytest.Pytester, endpoints: list[str], *args: str) -> Any:
    """The real benches/test_throughput.py at concurrency 1, three repeats of two timed
    requests: with two, the ratio's interval (one degree of freedom where the reference's
    spread leads, t = 12.7) covered 1 once the reference's repeats differed by 16%; with
    three (t = 4.3) a ratio of 0.25 stays below 1 up to a spread of about 50%."""
    pytester.makepyfile(test_throughput=(ROOT / "benches" / "test_throughput.py").read_text())
    return pytester.runpytest(
        "-k",
        "c1 and not c16",
        "--repeats",
        "3",
        "--timed-requests",
        "2",
        # the fake servers' CPU is this process's, "other" to the contention meter, and two
        # 2-request windows may differ by more than 10%: no machine noise in the ratio lines
        "--contended-cores=64",
        "--contended-steal=1",
        "--unstable-cv=1000",
        "--modelsweep-dir",
        "work",
        "--results",
        "r.json",
        "-s",
        "-p",
        "no:cacheprovider",
        *endpoints,
        *args,
    )


def ratio_of(pytester: pytest.Pytester) -> dict[str, Any]:
    measurements = json.loads((pytester.path / "r.json").read_text())["measurements"]
    return next(m for m in measurements if m["benchmark"] == "throughput_ratio")


def test_a_significantly_slower_candidate_fails_its_throughput_ratio(
    pytester: pytest.Pytester,
    slow_candidate: list[str],
) -> None:
    result = run_throughput_bench(pytester, [*PAIR, *slow_candidate])
    result.assert_outcomes(passed=2, failed=1)  # --fail-on worse applies to ratios too
    ratio = ratio_of(pytester)
    assert ratio["stats"]["interval"]["high"] < 1.0 - 0.10
    assert ratio["params"]["verdict"] == ratio["stats"]["verdict"] == "worse"
    assert ratio["stats"]["rule"] == "ratio-covers-one"
    assert ratio["stats"]["tolerance"] == 0.10
    assert ratio["stats"]["candidate_run"] == ratio["stats"]["reference_run"]
    result.stdout.fnmatch_lines(
        [
            (
                "*smollm2-135m ÷ gemma3-270m, throughput c1: 0.*x, worse "
                "(95% interval 0.*, tolerance ±10%, repeats 3/3)"
            )
        ]
    )


def test_fail_on_decides_whether_a_slower_candidate_fails(
    pytester: pytest.Pytester,
    slow_candidate: list[str],
) -> None:
    result = run_throughput_bench(pytester, [*PAIR, *slow_candidate], "--fail-on", "better")
    result.assert_outcomes(passed=3)
    assert ratio_of(pytester)["params"]["verdict"] == "worse"


def test_a_users_hook_sets_the_throughput_rule(
    pytester: pytest.Pytester,
    slow_candidate: list[str],
) -> None:
    pytester.makeconftest(
        """
        from pytest_modelsweep.core.stats import Verdict

        SLOWEST = 0.0001  # this project accepts any slowdown short of 10,000x
        SEEN = []

        def pytest_modelsweep_verdict(metric, interval, kind):
            SEEN.append((kind, metric, type(interval).__name__))
            if kind != "throughput":
                return None
            return Verdict.WORSE if interval.high < SLOWEST else Verdict.MATCHES

        def pytest_sessionfinish(session):
            print("hook saw:", "; ".join("/".join(call) for call in SEEN))
        """
    )
    result = run_throughput_bench(pytester, [*PAIR, *slow_candidate])
    result.assert_outcomes(passed=3)
    ratio = ratio_of(pytester)
    assert ratio["stats"]["interval"]["high"] < 1.0  # the default rule would have said worse
    assert ratio["params"]["verdict"] == "matches"
    result.stdout.fnmatch_lines(
        [
            "*throughput c1: 0.*x, matches (95% interval*",
            "*hook saw: throughput/throughput/RatioInterval",
        ]
    )


def test_ratio_under_two_workers_waits_for_the_settings_own_tests(
    pytester: pytest.Pytester,
    slow_candidate: list[str],
) -> None:
    result = run_throughput_bench(
        pytester, [*PAIR, *slow_candidate], *TWO_WORKERS, "--verdict-wait", "120"
    )
    result.assert_outcomes(passed=2, failed=1)  # the slower candidate's ratio is worse
    ratio = ratio_of(pytester)
    assert ratio["params"] == {
        "benchmark": "throughput",
        "concurrency": 1,
        "prompt_tokens": None,
        "reference": "gemma3-270m",
        "verdict": "worse",
        "design": "back-to-back",
    }
    assert (
        ratio["stats"]["interval"]["reference_n"] == ratio["stats"]["interval"]["candidate_n"] == 3
    )


def test_a_stored_reference_flagged_unstable_is_named_with_the_candidates_ratio(
    pytester: pytest.Pytester,
    slow_candidate: list[str],
) -> None:
    pytester.makepyfile(test_throughput=(ROOT / "benches" / "test_throughput.py").read_text())

    def c16(*args: str) -> Any:
        return pytester.runpytest(
            "-k",
            "c16 and not long",
            "--repeats=2",
            "--timed-requests=16",
            "--contended-cores=64",
            "--contended-steal=1",  # a hypervisor's steal (15% once) is not what this is about
            "--modelsweep-dir=work",
            "--results=r.json",
            "--md=r.md",
            "-s",
            "-p",
            "no:cacheprovider",
            *slow_candidate,
            *args,
        )

    # the reference alone, in an earlier run, with a limit no two repeats stay under
    c16("--model=gemma3-270m", "--unstable-cv=0.000001")
    (reference,) = [
        m
        for m in json.loads((pytester.path / "r.json").read_text())["measurements"]
        if m["benchmark"] == "throughput"
    ]
    assert reference["stats"]["unstable"] is True
    cv = reference["stats"]["cv"]
    result = c16("--model=smollm2-135m")
    ratio = ratio_of(pytester)
    assert ratio["stats"]["reference_run"] != ratio["stats"]["candidate_run"]
    assert ratio["stats"]["reference_flags"] == [f"unstable (CV {cv:.0%})"]
    result.stdout.fnmatch_lines(
        [
            f"*smollm2-135m ÷ gemma3-270m, throughput c16: *repeats 2/2;*"
            f"the reference's measurement is flagged unstable (CV {cv:.0%}))"
        ]
    )
    # the candidate's row on the decision page carries the stored reference's flag
    page = (pytester.path / "r.md").read_text().split("### Decision: which model to serve", 1)[1]
    page = page.split("\n### ", 1)[0]
    (row,) = [line for line in page.splitlines() if line.startswith("| smollm2-135m")]
    assert f"reference unstable (CV {cv:.0%}) (c16)" in row
    # and the reference's own cell says where its figure is, not that it was never measured
    assert (
        f"the reference gemma3-270m's c16 throughput comes from earlier run "
        f"{ratio['stats']['reference_run']} (the ratios use it)"
    ) in page.replace("\\", "")


def test_a_ratio_whose_reference_setting_was_never_measured_is_a_skip(
    pytester: pytest.Pytester,
    slow_candidate: list[str],
) -> None:
    result = run_throughput_bench(
        pytester,
        slow_candidate,
        "--model",
        "smollm2-135m",
        "-rs",
        "--deselect",
        "test_throughput.py::test_throughput[gemma3-270m-c1]",
    )
    result.assert_outcomes(passed=1, skipped=1)
    result.stdout.fnmatch_lines(
        [
            (
                "*no throughput result of gemma3-270m at concurrency 1 in this "
                "run or the store*; run it too (add --model gemma3-270m)*"
            )
        ]
    )


def test_a_ratio_whose_reference_test_ended_without_a_result_fails_naming_it(
    pytester: pytest.Pytester,
) -> None:
    # the reference's server lists no models: its test fails attaching, before measuring
    with SseServer() as reference, ListingServer("smollm2-135m") as candidate:
        result = run_throughput_bench(
            pytester,
            [
                *PAIR,
                "--endpoint",
                f"gemma3-270m={reference.base_url}",
                "--endpoint",
                f"smollm2-135m={candidate.base_url}",
            ],
        )
    result.assert_outcomes(passed=1, failed=1, errors=1)  # the ratio fails; it used to skip
    result.stdout.fnmatch_lines(
        [
            (
                "*gemma3-270m recorded no throughput result at concurrency 1 in this run "
                "(test_throughput.py::test_throughput?gemma3-270m-c1? failed); "
                "its own test's failure says why*"
            )
        ]
    )


def test_the_documented_rules_decide_as_their_text_says() -> None:
    from pytest_modelsweep.core.stats import Verdict
    from pytest_modelsweep.core.stats.bootstrap import paired_bootstrap
    from pytest_modelsweep.core.stats.intervals import ratio_interval

    text = (ROOT / "docs" / "verdicts.md").read_text()
    blocks = [block.split("```", 1)[0] for block in text.split("```python\n")[1:]]
    accuracy_rule: dict[str, Any] = {}
    throughput_rule: dict[str, Any] = {}
    exec(blocks[0], accuracy_rule)
    exec(blocks[1], throughput_rule)
    accuracy, throughput = (
        accuracy_rule["pytest_modelsweep_verdict"],
        throughput_rule["pytest_modelsweep_verdict"],
    )
    slightly_slower = ratio_interval([95.0, 96.0, 94.0], [100.0, 101.0, 99.0])
    much_slower = ratio_interval([80.0, 81.0, 79.0], [100.0, 101.0, 99.0])
    assert slightly_slower.high < 1.0 and much_slower.high < 0.9
    assert throughput(kind="throughput", interval=slightly_slower) == Verdict.MATCHES
    assert throughput(kind="throughput", interval=much_slower) == Verdict.WORSE
    same = paired_bootstrap({"a": 1.0, "b": 0.0}, {"a": 1.0, "b": 0.0}, resamples=100)
    assert throughput(kind="accuracy", interval=same) is None
    # no differing item: the example leaves it to the default rule (inconclusive)
    assert accuracy(metric="gsm8k", interval=same, kind="accuracy") is None
    ids = [f"q{i}" for i in range(40)]
    fixed_ten = paired_bootstrap(
        dict.fromkeys(ids, 1.0), {i: float(n < 30) for n, i in enumerate(ids)}, resamples=100
    )
    assert fixed_ten.discordant == 10 and fixed_ten.low > -0.01
    assert accuracy(metric="gsm8k", interval=fixed_ten, kind="accuracy") == Verdict.MATCHES
    assert accuracy(metric="gsm8k", interval=slightly_slower, kind="throughput") is None
