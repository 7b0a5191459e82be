"""Options parsed once: one table of defaults, shown by ``pytest --help`` and ``modelsweep --help``
as they are; each rule an argparse ``type=`` parser, a bad value a usage error in one line."""

from __future__ import annotations

import re
from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import FrozenInstanceError, fields
from typing import Any

import pytest

from pytest_modelsweep.cli import build_parser, main
from pytest_modelsweep.core.errors import UnknownModelError
from pytest_modelsweep.core.options import (
    DEFAULTS,
    MIN_TIMED_REQUESTS,
    TIMED_REQUESTS_PER_SLOT,
    Thresholds,
    parse_burstiness,
    parse_fail_on,
    parse_rate_sweep,
    parse_repeats,
    parse_request_rate,
    parse_slo,
    parse_thresholds,
    store_location_type,
)
from pytest_modelsweep.core.slo import Slo
from pytest_modelsweep.core.stats import Verdict
from pytest_modelsweep.core.store_location import StoreLocation
from pytest_modelsweep.core.sweep import Selection
from pytest_modelsweep.pytest.state import Options, RunConfig

pytest_plugins = ("pytester",)

# How a default shown in --help reads back: the option's own parser where it has words.
READ_BACK: dict[str, Callable[[str], Any]] = {
    "fail_on": parse_fail_on,
    "fail_on_regression": parse_thresholds,
    "repeats": parse_repeats,
    "sweep": str,
    "store": store_location_type,
    "rate_sweep": parse_rate_sweep,
}


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def help_entries(text: str) -> dict[str, str]:
    """``--flag`` → its help text on one line, from an argparse help screen."""
    entries: dict[str, str] = {}
    current = None
    for line in text.splitlines():
        match = re.match(r"^\s{2}(--[a-z0-9-]+)(?:[ =]\S+)?(?:\s{2,}(.*))?$", line)
        if match:
            current = match.group(1)
            entries[current] = match.group(2) or ""
        elif current is not None and line.startswith(" " * 10):
            entries[current] += " " + line.strip()
        else:
            current = None
    return entries


def shown_default(help_text: str) -> str:
    """What a help text says after ``default:`` (up to its closing parenthesis or ``;``)."""
    match = re.search(r"default: ([^);]+)", help_text)
    assert match, f"no default shown in {help_text!r}"
    return match.group(1).strip()


def read_back(name: str, shown: str) -> Any:
    """The default a help text shows, read as the table's type (a number: its first word)."""
    value = getattr(DEFAULTS, name)
    if name in READ_BACK:
        return READ_BACK[name](shown)
    return type(value)(shown.split(",")[0])


def our_group(text: str) -> str:
    """The modelsweep group of ``pytest --help``."""
    start = text.index("LLM serving benchmarks (pytest-modelsweep):")
    end = text.find("\n\n", start)
    return text[start:end]


def test_pytest_help_shows_each_default_of_the_table(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    entries = help_entries(our_group(result.stdout.str()))
    for field in fields(DEFAULTS):
        help_text = entries[flag(field.name)]
        assert read_back(field.name, shown_default(help_text)) == getattr(DEFAULTS, field.name), (
            field.name,
            help_text,
        )
    timed = entries["--timed-requests"]
    assert (
        f"default: {TIMED_REQUESTS_PER_SLOT} x concurrency, at least {MIN_TIMED_REQUESTS}" in timed
    )
    # every other number shown as a default in our group is the table's: none is a literal
    ours = {flag(f.name) for f in fields(DEFAULTS)} | {"--timed-requests"}
    for name, help_text in entries.items():
        if name not in ours and "default:" in help_text:
            assert not re.search(r"default: [0-9]", help_text), (name, help_text)


def test_pytest_parses_to_the_table(pytester: pytest.Pytester) -> None:
    option = pytester.parseconfig().option
    for field in fields(DEFAULTS):
        if field.name == "store":
            assert option.store is None  # pytest's store is <--modelsweep-dir>/store.sqlite
            continue
        assert getattr(option, field.name) == getattr(DEFAULTS, field.name), field.name
    assert option.repeats == 3 and option.fail_on == frozenset({"worse"})
    assert option.fail_on_regression == Thresholds(0.01, 0.10)


def test_the_run_config_is_made_once_from_the_parsed_options(pytester: pytest.Pytester) -> None:
    """Naming only a candidate adds the reference (its comparisons need it); --until-decided's
    round size, --limit and --usd-per-hour reach the benchmarks' settings; nothing changes later."""

    def run_config(*args: str) -> RunConfig:
        return RunConfig.of(
            Options.from_namespace(pytester.parseconfig(*args).option),
            rootdir=pytester.path,
            run_id="r1",
            is_worker=False,
            worker_id="main",
            args=args,
        )

    run = run_config(
        "--model=smollm2-135m",
        "--until-decided",
        "--round-size=7",
        "--limit=5",
        "--usd-per-hour=2.5",
    )
    assert run.models_to_run == ("gemma3-270m", "smollm2-135m") and run.reference_added
    assert run.selection == Selection("gemma3-270m", ("smollm2-135m",))
    settings = run.bench_settings
    assert (settings.run_id, settings.round_size, settings.limit) == ("r1", 7, 5)
    assert settings.pricing is not None and settings.pricing.usd_per_hour == 2.5
    assert run.store_location == StoreLocation.file(pytester.path / ".modelsweep" / "store.sqlite")
    assert run.results_path == pytester.path / ".modelsweep" / "runs" / "r1" / "results.json"
    with pytest.raises(FrozenInstanceError):
        run.run_id = "r2"  # type: ignore[misc]
    every = run_config()
    assert every.models_to_run == every.selection.models and not every.reference_added
    assert every.bench_settings.round_size is None
    with pytest.raises(UnknownModelError, match=r"unknown model 'nosuch' in sweep 'embedded'"):
        run_config("--model=nosuch")


@pytest.mark.parametrize(
    ("command", "names"),
    [
        (["compare", "a", "b"], ["fail_on_regression", "store"]),
        (["runs"], ["store"]),
        (["models"], ["sweep"]),
        (["provision"], ["sweep"]),
        (["report", "r"], ["store"]),
    ],
)
def test_modelsweep_help_and_parsing_show_the_table(
    command: list[str],
    names: list[str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = build_parser().parse_args(command)
    with pytest.raises(SystemExit) as exit_info:
        main([command[0], "--help"])
    assert exit_info.value.code == 0
    entries = help_entries(capsys.readouterr().out)
    for name in names:
        assert getattr(args, name) == getattr(DEFAULTS, name)
        assert read_back(name, shown_default(entries[flag(name)])) == getattr(DEFAULTS, name)


def test_the_verdicts_fail_on_reads_are_the_verdicts() -> None:
    every = ",".join(v.value for v in Verdict)
    assert parse_fail_on(every) == frozenset(v.value for v in Verdict)
    assert parse_fail_on(" worse , inconclusive") == frozenset({"worse", "inconclusive"})
    assert parse_fail_on("none") == frozenset()  # verdicts recorded, none fails its test


def test_parsers_read_good_values() -> None:
    assert parse_repeats("auto") is None and parse_repeats(" AUTO ") is None
    assert parse_repeats("5") == 5
    assert parse_thresholds("throughput:20%") == Thresholds(
        DEFAULTS.fail_on_regression.accuracy_points, 0.20
    )
    assert parse_thresholds(str(DEFAULTS.fail_on_regression)) == DEFAULTS.fail_on_regression
    assert parse_thresholds("startup:100%") == Thresholds(0.01, 0.10, 1.0)
    assert parse_rate_sweep("0.5:8") == DEFAULTS.rate_sweep.__class__(0.5, 8.0)
    assert parse_slo("ttft=1s") == Slo(ttft_ms=1000.0)


def test_open_loop_rates_are_ones_a_run_can_wait_for() -> None:
    """A rate (or a sweep's START) whose window of 32 requests outlasts any run is refused in
    one line giving its length and the lowest rate; burstiness is finite and positive."""
    with pytest.raises(
        ArgumentTypeError,
        match=r"^at 1e-06 req/s a window of 32 requests takes "
        r"370 days; pass a rate of at least 0\.01 req/s$",
    ):
        parse_request_rate("1e-6")
    assert parse_request_rate("0.01") == 0.01
    with pytest.raises(
        ArgumentTypeError,
        match=r"^at 0\.001 req/s a window of 32 requests "
        r"takes 9 hours; pass a START of at least 0\.01 req/s$",
    ):
        parse_rate_sweep("0.001:4")
    assert parse_rate_sweep("0.01:4").start_rps == 0.01
    for text in ("inf", "nan", "0"):
        with pytest.raises(ArgumentTypeError, match="expected a finite positive number"):
            parse_burstiness(text)
    assert parse_burstiness("1e6") == 1e6


BAD = [
    (["--repeats", "often"], "--repeats: expected a positive integer or 'auto', got 'often'"),
    (["--repeats", "0"], "--repeats: expected a positive integer or 'auto', got '0'"),
    (["--repeats-max", "3"], "--repeats-max: expected an integer of at least 4"),
    (["--repeats-target", "0"], "--repeats-target: expected a share in (0, 1), e.g. 0.05"),
    (["--repeats-target", "nan"], "--repeats-target: expected a share in (0, 1), e.g. 0.05"),
    (["--unstable-cv", "-1"], "--unstable-cv: expected a positive share, e.g. 0.10"),
    (
        ["--contended-cores", "-0.5"],
        "--contended-cores: expected a number of CPU cores >= 0, e.g. 0.25",
    ),
    (
        ["--contended-steal", "5"],
        "--contended-steal: expected a share of the CPU time in [0, 1], e.g. 0.05",
    ),
    (
        ["--slo", "ttft"],
        "--slo: cannot read 'ttft'; expected e.g. ttft=500ms,tpot=50ms (also e2e=; units ms or s)",
    ),
    (["--slo-attainment", "1.5"], "--slo-attainment: expected a share in (0, 1], e.g. 0.90"),
    (
        ["--usd-per-hour", "inf"],
        "--usd-per-hour: expected a positive price in US dollars, e.g. 1.20",
    ),
    (["--usd-per-hour", "0"], "--usd-per-hour: expected a positive price in US dollars, e.g. 1.20"),
    (["--idle-timeout", "0"], "--idle-timeout: expected a positive number of seconds, got 0"),
    (
        ["--request-timeout", "soon"],
        "--request-timeout: expected a positive number of seconds, got soon",
    ),
    (["--verdict-wait", "-1"], "--verdict-wait: expected a number of seconds >= 0, e.g. 7200"),
    (
        ["--baseline="],
        "--baseline: expected a baseline name (or, for --baseline, a results "
        "file), got an empty one",
    ),
    (
        ["--save-baseline", " "],
        "--save-baseline: expected a baseline name (or, for --baseline, "
        "a results file), got an empty one",
    ),
    (["--resamples", "10"], "--resamples: expected at least 100"),
    (["--limit", "0"], "--limit: expected a positive integer"),
    (["--timed-requests", "two"], "--timed-requests: expected a positive integer"),
    (["--gsm8k-max-tokens", "0"], "--gsm8k-max-tokens: expected a positive integer"),
    (["--margin", "1"], "--margin: expected an accuracy difference in [0, 1), e.g. 0.02"),
    (["--ratio-tolerance", "-0.1"], "--ratio-tolerance: expected a share in [0, 1), e.g. 0.10"),
    (
        ["--fail-on", "worst"],
        "--fail-on: 'worst': expected a comma-separated list of better, "
        "worse, matches, equivalent, inconclusive, or none",
    ),
    (
        ["--fail-on-regression", "accuracy:1%"],
        "--fail-on-regression: 'accuracy:1%': expected e.g. accuracy:1pp,throughput:10% "
        "(accuracy in percentage points, throughput and startup in percent); 'accuracy:1%' is "
        "not that",
    ),
    (
        ["--request-rate", "0"],
        "--request-rate: expected a positive number of requests per second, e.g. 2.5",
    ),
    (
        ["--burstiness", "-1"],
        "--burstiness: expected a finite positive number (1: Poisson; below 1 burstier, above 1 "
        "more even; 1e6: evenly spaced), e.g. 1.0",
    ),
    (
        ["--rate-sweep", "4:1"],
        "--rate-sweep: '4:1': expected START:MAX in requests per second with 0 < START <= MAX, "
        "e.g. 0.25:64",
    ),
    (
        ["--startup-launches", "1"],
        "--startup-launches: expected at least 2 launches (an interval needs two)",
    ),
]


@pytest.mark.parametrize(("args", "message"), BAD, ids=[" ".join(a) for a, _ in BAD])
def test_a_bad_value_is_a_usage_error_naming_the_option(
    pytester: pytest.Pytester,
    args: list[str],
    message: str,
) -> None:
    pytester.makepyfile("def test_nothing(): pass")
    result = pytester.runpytest(*args, "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if ": error: " in line]
    assert len(errors) == 1 and errors[0].endswith(f": error: argument {message}"), errors


def test_the_modelsweep_command_shares_the_parsers(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "a", "b", "--fail-on-regression", "latency:5%"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert (
        "modelsweep compare: error: argument --fail-on-regression: 'latency:5%': expected "
        "e.g. accuracy:1pp,throughput:10%"
    ) in err
    with pytest.raises(ArgumentTypeError):
        parse_thresholds("latency:5%")
