"""Option builders shared by the pytest plugin and the ``modelsweep`` command.

Each takes an ``addoption`` callable — pytest's ``group.addoption`` or argparse's
``parser.add_argument`` — so that an option reads the same in ``pytest --help``
and ``modelsweep … --help``. Pure: nothing here imports pytest.
"""

from __future__ import annotations

from argparse import ArgumentTypeError
from collections.abc import Callable
from typing import Any

from .store_location import StoreLocation, StoreLocationError, parse_store_location

AddOption = Callable[..., Any]

DEFAULT_STORE = ".modelsweep/store.sqlite"
DEFAULT_IDLE_TIMEOUT_S = 300.0  # serving.breaker.DEFAULT_IDLE_TIMEOUT_S says why
DEFAULT_REQUEST_TIMEOUT_S = 1800.0


def add_sweep_option(addoption: AddOption) -> None:
    addoption("--sweep", default=None, metavar="PATH",
              help="sweep file (TOML), or a built-in sweep: embedded (default), tpu-v5e, vllm-cpu")


def store_location_type(value: str) -> StoreLocation:
    """``--store``'s ``type=``: a SQLite path, ``sqlite:///PATH`` or ``postgresql://…``."""
    try:
        return parse_store_location(value)
    except StoreLocationError as error:  # argparse shows this message alone (no value echoed)
        raise ArgumentTypeError(str(error)) from None


def add_store_option(addoption: AddOption, default: str | None = None) -> None:
    addoption("--store", default=default, metavar="PATH|URL", type=store_location_type,
              help="store of runs, measurements and items: a SQLite file, sqlite:///PATH or "
                   f"postgresql://USER@HOST:PORT/DATABASE (default: {DEFAULT_STORE})")


def add_regression_option(addoption: AddOption) -> None:
    addoption("--fail-on-regression", default=None, metavar="RULES",
              help="how much worse is a regression (default: accuracy:1pp,throughput:10%%)")


def add_timeout_options(addoption: AddOption) -> None:
    addoption("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S, metavar="SECONDS",
              help="fail a request after this long without a byte from the server (for a "
                   "non-streamed answer, from a server with work counters: without a byte and "
                   "without its counters moving); a stalled server is found sooner by a health "
                   "check "
                   f"(default: {DEFAULT_IDLE_TIMEOUT_S:g})")
    addoption("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT_S,
              metavar="SECONDS",
              help=f"fail a request after this long in all (default: {DEFAULT_REQUEST_TIMEOUT_S:g})")


def add_resamples_option(addoption: AddOption) -> None:
    addoption("--resamples", type=int, default=10_000, metavar="N",
              help="bootstrap resamples of paired comparisons (default: 10000)")


DEFAULT_REPEATS = 3
DEFAULT_REPEATS_TARGET = 0.05
DEFAULT_REPEATS_MAX = 10
MIN_AUTO_REPEATS = 3
DEFAULT_UNSTABLE_CV = 0.10
DEFAULT_CONTENDED_CORES = 0.25  # workloads.contention.DEFAULT_CONTENDED_CORES


def parse_repeats(value: object) -> int | None:
    """``--repeats``: a positive count, or ``auto`` (None: repeat to a target half-width).

    Raises ValueError with a one-line message for anything else.
    """
    text = str(value).strip()
    if text.lower() == "auto":
        return None
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise ValueError(f"--repeats: expected a positive integer or 'auto', got {text!r}")
    return count


def add_noise_options(addoption: AddOption) -> None:
    """``--repeats`` (a count or ``auto``) and the limits that mark noisy or contended settings."""
    addoption("--repeats", default=str(DEFAULT_REPEATS), metavar="N|auto",
              help=f"timed repeats of each throughput setting (default: {DEFAULT_REPEATS}); "
                   "auto: repeat until the 95%% interval of the mean tokens/s is within "
                   f"--repeats-target, at least {MIN_AUTO_REPEATS} and at most --repeats-max")
    addoption("--repeats-target", type=float, default=DEFAULT_REPEATS_TARGET, metavar="X",
              help="--repeats auto: the 95%% interval's half-width to reach, as a share of "
                   f"the mean (default: {DEFAULT_REPEATS_TARGET:g})")
    addoption("--repeats-max", type=int, default=DEFAULT_REPEATS_MAX, metavar="N",
              help=f"--repeats auto: stop after N repeats (default: {DEFAULT_REPEATS_MAX})")
    addoption("--unstable-cv", type=float, default=DEFAULT_UNSTABLE_CV, metavar="X",
              help="mark a throughput setting unstable when its repeats' coefficient of "
                   f"variation exceeds X (default: {DEFAULT_UNSTABLE_CV:g})")
    addoption("--contended-cores", type=float, default=DEFAULT_CONTENDED_CORES, metavar="X",
              help="mark a timed window contended when other processes used more than X "
                   f"CPU cores during it (default: {DEFAULT_CONTENDED_CORES:g})")


def check_noise_options(option: Any) -> str | None:
    """A one-line usage error for a bad value of the options above, else None."""
    try:
        parse_repeats(option.repeats)
    except ValueError as exc:
        return str(exc)
    if not 0 < option.repeats_target < 1:
        return "--repeats-target: expected a share in (0, 1), e.g. 0.05"
    if option.repeats_max < MIN_AUTO_REPEATS:
        return f"--repeats-max: expected an integer of at least {MIN_AUTO_REPEATS}"
    if not option.unstable_cv > 0:
        return "--unstable-cv: expected a positive share, e.g. 0.10"
    if not option.contended_cores >= 0:
        return "--contended-cores: expected a number of CPU cores >= 0, e.g. 0.25"
    return None


def add_slo_cost_options(addoption: AddOption) -> None:
    """``--slo`` (latency targets per request) and ``--usd-per-hour`` (the machine's price)."""
    addoption("--slo", default=None, metavar="TARGETS",
              help="latency targets a good request meets, e.g. ttft=500ms,tpot=50ms (also "
                   "e2e=): every throughput window records goodput and SLO attainment, and "
                   "the capacity benchmark searches the highest concurrency meeting them")
    addoption("--slo-attainment", type=float, default=0.90, metavar="X",
              help="capacity: the share of requests that must meet --slo (default: 0.90)")
    addoption("--usd-per-hour", type=float, default=None, metavar="X",
              help="price of the machine one model is served on, US dollars per hour, for "
                   "$/1M output tokens (default: the sweep's [pricing]; none: no cost shown)")


def check_slo_cost_options(option: Any) -> str | None:
    """A one-line usage error for a bad ``--slo``, ``--slo-attainment`` or ``--usd-per-hour``."""
    from .slo import SloError, parse_slo

    if option.slo is not None:
        try:
            parse_slo(option.slo)
        except SloError as exc:
            return str(exc)
    if not 0 < option.slo_attainment <= 1:
        return "--slo-attainment: expected a share in (0, 1], e.g. 0.90"
    if option.usd_per_hour is not None and not 0 < option.usd_per_hour < float("inf"):
        return "--usd-per-hour: expected a positive price in US dollars, e.g. 1.20"
    return None


def add_noisy_option(addoption: AddOption) -> None:
    addoption("--fail-on-noisy", action="store_true", default=False,
              help="gate rows measured unstable (CV above --unstable-cv) or contended (others "
                   "used the CPU) fail the session too (default: shown as 're-run', not failing)")
