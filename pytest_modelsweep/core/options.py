"""Every modelsweep option's default and rule, written once; the one table of options.

:data:`DEFAULTS` is the one table of defaults. Each option with a rule has an argparse
``type=`` parser raising a one-line :class:`argparse.ArgumentTypeError`, so a bad value is a
usage error at once. :data:`OPTIONS` holds each option's keywords for pytest's
``group.addoption`` and argparse's ``add_argument``, so an option reads the same in ``pytest``
and ``modelsweep``. Imported by
every pytest run: a parser imports what it needs only when its option is given.
"""

from __future__ import annotations

import math
import re
from argparse import ArgumentTypeError
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from .slo import Slo

from .store_location import StoreLocation, StoreLocationError, parse_store_location

T = TypeVar("T")


@dataclass(frozen=True)
class Thresholds:
    """``--fail-on-regression``: how much worse a metric may get before the gate fails."""

    accuracy_points: float = 0.01
    throughput_fraction: float = 0.10
    startup_fraction: float = 0.25
    """Wider than throughput's: a launch's time moves with the page cache and the load."""

    def __str__(self) -> str:
        return (
            f"accuracy:{self.accuracy_points * 100:g}pp,"
            f"throughput:{self.throughput_fraction * 100:g}%,"
            f"startup:{self.startup_fraction * 100:g}%"
        )


@dataclass(frozen=True)
class RateSweep:
    """``--rate-sweep START:MAX``: the request rates (req/s) the capacity sweep may try."""

    start_rps: float
    max_rps: float

    def __str__(self) -> str:
        return f"{self.start_rps:g}:{self.max_rps:g}"


@dataclass(frozen=True)
class OptionDefaults:
    """The default of every modelsweep option that has a value, by argparse ``dest``."""

    sweep: str = "embedded"
    store: StoreLocation = field(
        default_factory=lambda: StoreLocation.file(".modelsweep/store.sqlite")
    )
    """The ``modelsweep`` command's store; pytest's is ``<--modelsweep-dir>/store.sqlite``."""
    ratio_tolerance: float = 0.10
    fail_on: frozenset[str] = frozenset({"worse"})
    resamples: int = 10_000
    idle_timeout: float = 300.0
    """No byte for this long fails a request. It outlasts a legitimate silence: a CPU server
    prefilling 16 × 3,072 tokens is silent 100-250 s; the breaker finds dead servers sooner."""
    request_timeout: float = 1800.0
    """The total bound of one request, connect to last byte."""
    verdict_wait: float = 7200.0
    fail_on_regression: Thresholds = field(default_factory=Thresholds)
    repeats: int | None = 3
    """None: ``--repeats auto``."""
    repeats_target: float = 0.05
    repeats_max: int = 10
    unstable_cv: float = 0.10
    contended_cores: float = 0.25
    contended_steal: float = 0.05
    slo_attainment: float = 0.90
    round_size: int = 50
    """``--until-decided``: items each model scores between two looks at its comparisons."""
    burstiness: float = 1.0
    """``--burstiness``: 1 is Poisson arrivals (vllm bench serve's default)."""
    rate_sweep: RateSweep = field(default_factory=lambda: RateSweep(0.25, 64.0))
    startup_launches: int = 3


DEFAULTS = OptionDefaults()
"""The one table of option defaults."""

TIMED_REQUESTS_PER_SLOT = 2
MIN_TIMED_REQUESTS = 4
AUTO_FIRST_STAGE = 4
"""``--repeats auto``: the repeats whose spread fixes the total (see :mod:`.repeats`)."""


OPEN_LOOP_TIMED_REQUESTS = 32
"""``--timed-requests`` not given: requests per open-loop window at ``--request-rate``."""


def default_timed_requests(concurrency: int) -> int:
    """``--timed-requests`` not given: 2 × concurrency, at least 4."""
    return max(MIN_TIMED_REQUESTS, TIMED_REQUESTS_PER_SLOT * concurrency)


# --------------------------------------------------------------------------- parsers


def _checked(
    convert: Callable[[str], T], ok: Callable[[T], bool], expected: str
) -> Callable[[str], T]:
    """A ``type=`` parser: ``convert`` the text, keep it when ``ok``, else ``expected``."""

    def parse(text: str) -> T:
        try:
            value = convert(text)
        except ValueError:
            raise ArgumentTypeError(expected.format(text=text)) from None
        if not ok(value):
            raise ArgumentTypeError(expected.format(text=text))
        return value

    return parse


_parse_count = _checked(
    int, lambda n: n >= 1, "expected a positive integer or 'auto', got {text!r}"
)


def parse_repeats(text: str) -> int | None:
    """``--repeats``: a positive count, or ``auto`` (None: the policy's two-stage rule)."""
    return None if text.strip().lower() == "auto" else _parse_count(text)


parse_repeats_target = _checked(float, lambda x: 0 < x < 1, "expected a share in (0, 1), e.g. 0.05")
parse_repeats_max = _checked(
    int, lambda n: n >= AUTO_FIRST_STAGE, f"expected an integer of at least {AUTO_FIRST_STAGE}"
)
parse_unstable_cv = _checked(float, lambda x: x > 0, "expected a positive share, e.g. 0.10")
parse_contended_cores = _checked(
    float, lambda x: x >= 0, "expected a number of CPU cores >= 0, e.g. 0.25"
)
parse_contended_steal = _checked(
    float, lambda x: 0 <= x <= 1, "expected a share of the CPU time in [0, 1], e.g. 0.05"
)
parse_slo_attainment = _checked(
    float, lambda x: 0 < x <= 1, "expected a share in (0, 1], e.g. 0.90"
)
parse_usd_per_hour = _checked(
    float, lambda x: 0 < x < math.inf, "expected a positive price in US dollars, e.g. 1.20"
)
parse_seconds = _checked(
    float, lambda s: s > 0, "expected a positive number of seconds, got {text}"
)
parse_wait_seconds = _checked(
    float, lambda s: s >= 0, "expected a number of seconds >= 0, e.g. 7200"
)
parse_resamples = _checked(int, lambda n: n >= 100, "expected at least 100")
parse_positive_int = _checked(int, lambda n: n >= 1, "expected a positive integer")
parse_margin = _checked(
    float, lambda x: 0 <= x < 1, "expected an accuracy difference in [0, 1), e.g. 0.02"
)
parse_ratio_tolerance = _checked(
    float, lambda x: 0 <= x < 1, "expected a share in [0, 1), e.g. 0.10"
)
_parse_rate = _checked(
    float, lambda x: 0 < x < math.inf, "expected a positive number of requests per second, e.g. 2.5"
)
parse_burstiness = _checked(
    float,
    lambda x: 0 < x < math.inf,
    "expected a finite positive number (1: Poisson; below 1 burstier, "
    "above 1 more even; 1e6: evenly spaced), e.g. 1.0",
)
parse_startup_launches = _checked(
    int, lambda n: n >= 2, "expected at least 2 launches (an interval needs two)"
)


MIN_REQUEST_RATE = 0.01
"""The lowest open-loop rate (req/s): a window of 32 requests at it takes 53 minutes."""


def _waitable(rate: float, what: str) -> float:
    """``rate`` when a window of :data:`OPEN_LOOP_TIMED_REQUESTS` at it is one a run can wait
    for (at least :data:`MIN_REQUEST_RATE`), else a one-line error giving its length."""
    if rate >= MIN_REQUEST_RATE:
        return rate
    span = OPEN_LOOP_TIMED_REQUESTS / rate
    unit, size = next(
        ((u, s) for u, s in (("days", 86400), ("hours", 3600), ("minutes", 60)) if span >= 2 * s),
        ("s", 1),
    )
    raise ArgumentTypeError(
        f"at {rate:g} req/s a window of {OPEN_LOOP_TIMED_REQUESTS} requests "
        f"takes {span / size:,.0f} {unit}; pass {what} of at least "
        f"{MIN_REQUEST_RATE:g} req/s"
    )


def parse_request_rate(text: str) -> float:
    """``--request-rate``: requests per second, finite and at least :data:`MIN_REQUEST_RATE`."""
    return _waitable(_parse_rate(text), "a rate")


def _rate_range(text: str) -> RateSweep:
    start, _, end = text.partition(":")
    return RateSweep(float(start), float(end))


_parse_rate_range = _checked(
    _rate_range,
    lambda sweep: 0 < sweep.start_rps <= sweep.max_rps < math.inf,
    "{text!r}: expected START:MAX in requests per second with 0 < START <= MAX, e.g. 0.25:64",
)


def parse_rate_sweep(text: str) -> RateSweep:
    """``--rate-sweep``: ``START:MAX`` in requests per second, MIN_REQUEST_RATE <= START <=
    MAX < inf."""
    sweep = _parse_rate_range(text)
    _waitable(sweep.start_rps, "a START")
    return sweep


SWEEP_RUN_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
"""A sweep run's name: what CI ids, Job names and dates are made of (no spaces, no ``/``)."""


parse_sweep_run = _checked(
    str.strip,
    lambda name: SWEEP_RUN_PATTERN.fullmatch(name) is not None,
    "{text!r}: expected a name of letters, digits, '.', '_', ':' or '-' (at most 128, "
    "starting with a letter or digit), e.g. a CI run id or 2026-11-30-a",
)
"""``--sweep-run``: the name runs on different hosts share (e.g. a CI run id)."""
parse_baseline_name = _checked(
    str,
    lambda text: bool(text.strip()),
    "expected a baseline name (or, for --baseline, a results file), got an empty one",
)
"""``--baseline`` / ``--save-baseline``: a name (or a results file), not empty."""


def parse_slo(text: str) -> Slo:
    """``--slo``: latency targets (:func:`.slo.parse_slo`'s rule and message)."""
    from .slo import SloError
    from .slo import parse_slo as parse

    try:
        return parse(text)
    except SloError as error:
        raise ArgumentTypeError(str(error).removeprefix("--slo: ")) from None


def parse_fail_on(text: str) -> frozenset[str]:
    """``--fail-on``: ``"worse,inconclusive"`` → the verdicts that fail a comparison test."""
    from .stats import Verdict

    known = [verdict.value for verdict in Verdict]
    if text.strip() == "none":
        return frozenset()
    chosen = frozenset(part.strip() for part in text.split(",") if part.strip())
    if not chosen or chosen - set(known):
        raise ArgumentTypeError(
            f"{text!r}: expected a comma-separated list of {', '.join(known)}, or none"
        )
    return chosen


_THRESHOLDS = {
    "accuracy": ("accuracy_points", "pp"),
    "throughput": ("throughput_fraction", "%"),
    "startup": ("startup_fraction", "%"),
}


def parse_thresholds(text: str) -> Thresholds:
    """``--fail-on-regression``: ``"accuracy:1pp,throughput:10%"`` → :class:`Thresholds`;
    a kind not given keeps its default."""
    given = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        kind, _, amount = part.partition(":")
        match = re.fullmatch(r"(\d+(?:\.\d+)?)(pp|%)", amount.strip())
        if kind not in _THRESHOLDS or not match or match.group(2) != _THRESHOLDS[kind][1]:
            raise ArgumentTypeError(
                f"{text!r}: expected e.g. accuracy:1pp,throughput:10% (accuracy in percentage "
                f"points, throughput and startup in percent); {part!r} is not that"
            )
        given[_THRESHOLDS[kind][0]] = float(match.group(1)) / 100
    return replace(DEFAULTS.fail_on_regression, **given)


# --------------------------------------------------------------------------- the option table


def store_location_type(value: str) -> StoreLocation:
    """``--store``'s ``type=``: a SQLite path, ``sqlite:///PATH`` or ``postgresql://…``."""
    try:
        return parse_store_location(value)
    except StoreLocationError as error:  # argparse shows this message alone (no value echoed)
        raise ArgumentTypeError(str(error)) from None


OPTIONS: dict[str, dict[str, Any]] = {
    "--model": {
        "action": "append",
        "default": [],
        "metavar": "NAME",
        "help": "model of the sweep to run (repeatable; default: every model)",
    },
    "--reference": {
        "default": None,
        "metavar": "NAME",
        "help": "reference model the candidates are compared with (default: the sweep's reference)",
    },
    "--sweep": {
        "default": DEFAULTS.sweep,
        "metavar": "PATH",
        "help": "sweep file (TOML), or a built-in sweep: embedded, tpu-v5e, vllm-cpu "
        f"(default: {DEFAULTS.sweep})",
    },
    "--endpoint": {
        "action": "append",
        "default": [],
        "metavar": "NAME=URL",
        "help": "attach model NAME to a running OpenAI-compatible server at URL "
        "instead of starting one (repeatable)",
    },
    "--results": {
        "default": None,
        "metavar": "PATH",
        "help": "write the results (JSON) here (default: .modelsweep/runs/<run>/results.json)",
    },
    "--md": {
        "default": None,
        "metavar": "PATH",
        "help": "write a Markdown summary (also appended to $GITHUB_STEP_SUMMARY when that is set)",
    },
    "--llm-d-report": {
        "default": None,
        "metavar": "FILE",
        "help": "write llm-d's Benchmark Report v0.2.1 (JSON) here: one report per "
        "measured throughput setting (docs/results-schema.md)",
    },
    "--modelsweep-dir": {
        "default": None,
        "metavar": "DIR",
        "help": "where runs keep logs and results (default: <rootdir>/.modelsweep)",
    },
    "--store": {  # pytest's: <--modelsweep-dir>/store.sqlite; modelsweep's: DEFAULTS.store
        "default": None,
        "metavar": "PATH|URL",
        "type": store_location_type,
        "help": "store of runs, measurements and items: a SQLite file, sqlite:///PATH or "
        f"postgresql://USER@HOST:PORT/DATABASE (default: {DEFAULTS.store})",
    },
    "--sweep-run": {
        "type": parse_sweep_run,
        "default": None,
        "metavar": "NAME",
        "help": "join the runs of other hosts under one logical sweep NAME (e.g. "
        "the CI run id): comparisons find a model measured by any run of "
        "NAME in the store, waiting for one still running (--verdict-wait), "
        "and the gate and reports cover every run of NAME "
        "(docs/multihost.md)",
    },
    "--no-reuse": {
        "action": "store_true",
        "default": False,
        "help": "send every item again instead of reusing stored answers "
        "of the same model, server, settings and prompt",
    },
    "--margin": {
        "type": parse_margin,
        "default": None,
        "metavar": "X",
        "help": "equivalence margin for accuracy differences (e.g. 0.02 = 2 points): "
        "verdicts become equivalent/inconclusive instead of matches",
    },
    "--ratio-tolerance": {
        "type": parse_ratio_tolerance,
        "default": DEFAULTS.ratio_tolerance,
        "metavar": "X",
        "help": "a candidate whose throughput ratio interval lies wholly below 1 - X "
        f"is worse (above 1 + X: better; default: {DEFAULTS.ratio_tolerance:.2f})",
    },
    "--interleave": {
        "action": "store_true",
        "default": False,
        "help": "throughput ratio tests measure both models themselves, their windows "
        "alternating A B B A ..., so that drift in machine speed cancels "
        "(both servers stay up; not with -n)",
    },
    "--allow-unjudged": {
        "action": "store_true",
        "default": False,
        "help": "pass a run whose comparison tests found nothing to compare with "
        "(default: such a run fails, since it judged nothing)",
    },
    "--fail-on": {
        "type": parse_fail_on,
        "default": DEFAULTS.fail_on,
        "metavar": "VERDICTS",
        "help": "comma-separated verdicts that fail a comparison test "
        "(better, worse, matches, equivalent, inconclusive; none: every "
        "verdict is recorded, none fails; "
        f"default: {','.join(sorted(DEFAULTS.fail_on))})",
    },
    "--holm": {
        "action": "store_true",
        "default": False,
        "help": "Holm-correct the candidates' intervals for multiple comparisons",
    },
    # --until-decided and --round-size (items between two looks)
    "--until-decided": {
        "action": "store_true",
        "default": False,
        "help": "accuracy benchmarks send items in one seeded random order, in rounds, and "
        "stop for a model once every comparison it takes part in (verdicts, and "
        "with --baseline its gate row) is decided by an anytime-valid confidence "
        "sequence (default: the sweep's [verdicts] until_decided, else off)",
    },
    "--round-size": {
        "type": parse_positive_int,
        "default": DEFAULTS.round_size,
        "metavar": "N",
        "help": "--until-decided: items each model scores between two looks at its "
        f"comparisons (default: {DEFAULTS.round_size})",
    },
    "--resamples": {
        "type": parse_resamples,
        "default": DEFAULTS.resamples,
        "metavar": "N",
        "help": f"bootstrap resamples of paired comparisons (default: {DEFAULTS.resamples})",
    },
    "--idle-timeout": {
        "type": parse_seconds,
        "default": DEFAULTS.idle_timeout,
        "metavar": "SECONDS",
        "help": "fail a request after this long without a byte from the server (for a "
        "non-streamed answer, from a server with work counters: without a byte and "
        "without its counters moving); a stalled server is found sooner by a health "
        f"check (default: {DEFAULTS.idle_timeout:g})",
    },
    "--request-timeout": {
        "type": parse_seconds,
        "default": DEFAULTS.request_timeout,
        "metavar": "SECONDS",
        "help": f"fail a request after this long in all (default: {DEFAULTS.request_timeout:g})",
    },
    "--verdict-wait": {
        "type": parse_wait_seconds,
        "default": DEFAULTS.verdict_wait,
        "metavar": "SECONDS",
        "help": "how long a comparison waits for the reference's result when it runs "
        f"on another xdist worker (default: {DEFAULTS.verdict_wait:g})",
    },
    "--save-baseline": {
        "type": parse_baseline_name,
        "default": None,
        "metavar": "NAME",
        "help": "save this run in the store as baseline NAME (refused unless every "
        "modelsweep test passed and it measured accuracy or throughput)",
    },
    "--baseline": {
        "type": parse_baseline_name,
        "default": None,
        "metavar": "NAME|PATH",
        "help": "compare every model x metric with a stored baseline (or a results "
        "file), checked before any test runs; the session fails when one "
        "regressed, or when nothing could be compared (see --allow-ungated)",
    },
    "--fail-on-regression": {
        "type": parse_thresholds,
        "default": DEFAULTS.fail_on_regression,
        "metavar": "RULES",
        "help": "how much worse is a regression "
        f"(default: {str(DEFAULTS.fail_on_regression).replace('%', '%%')})",
    },
    "--allow-ungated": {
        "action": "store_true",
        "default": False,
        "help": "pass when nothing could be compared with the baseline (every row new: "
        "other models, benchmarks or settings); default: that fails, since "
        "nothing was gated",
    },
    "--fail-on-noisy": {
        "action": "store_true",
        "default": False,
        "help": "gate rows measured unstable (CV above --unstable-cv) or contended (others "
        "used the CPU) fail the session too (default: shown as 're-run', not failing)",
    },
    # --repeats (a count or auto) and the limits that mark noisy or contended settings
    "--repeats": {
        "type": parse_repeats,
        "default": DEFAULTS.repeats,
        "metavar": "N|auto",
        "help": f"timed repeats of each throughput setting (default: {DEFAULTS.repeats}); "
        f"auto: Stein's two-stage rule, the spread of a first {AUTO_FIRST_STAGE} "
        "repeats fixes how many the 95%% interval of the mean tokens/s needs to be "
        "within --repeats-target, at most --repeats-max",
    },
    "--repeats-target": {
        "type": parse_repeats_target,
        "default": DEFAULTS.repeats_target,
        "metavar": "X",
        "help": "--repeats auto: the 95%% interval's half-width to reach, as a share of "
        f"the mean (default: {DEFAULTS.repeats_target:.2f})",
    },
    "--repeats-max": {
        "type": parse_repeats_max,
        "default": DEFAULTS.repeats_max,
        "metavar": "N",
        "help": f"--repeats auto: at most N repeats (default: {DEFAULTS.repeats_max})",
    },
    "--unstable-cv": {
        "type": parse_unstable_cv,
        "default": DEFAULTS.unstable_cv,
        "metavar": "X",
        "help": "mark a throughput setting unstable when its repeats' coefficient of "
        f"variation exceeds X (default: {DEFAULTS.unstable_cv:.2f})",
    },
    "--contended-cores": {
        "type": parse_contended_cores,
        "default": DEFAULTS.contended_cores,
        "metavar": "X",
        "help": "mark a timed window contended when other processes used more than X "
        f"CPU cores during it (default: {DEFAULTS.contended_cores:.2f})",
    },
    "--contended-steal": {
        "type": parse_contended_steal,
        "default": DEFAULTS.contended_steal,
        "metavar": "X",
        "help": "mark a timed window contended when the hypervisor stole more than this "
        f"share of the machine's CPU time during it (default: {DEFAULTS.contended_steal:.2f})",
    },
    # --slo (latency targets per request) and --usd-per-hour (the machine's price)
    "--slo": {
        "type": parse_slo,
        "default": None,
        "metavar": "TARGETS",
        "help": "latency targets a good request meets, e.g. ttft=500ms,tpot=50ms (also "
        "e2e=): every throughput window records goodput and SLO attainment, and "
        "the capacity benchmark searches the highest concurrency meeting them",
    },
    "--slo-attainment": {
        "type": parse_slo_attainment,
        "default": DEFAULTS.slo_attainment,
        "metavar": "X",
        "help": "capacity: the share of requests that must meet --slo "
        f"(default: {DEFAULTS.slo_attainment:.2f})",
    },
    "--usd-per-hour": {
        "type": parse_usd_per_hour,
        "default": None,
        "metavar": "X",
        "help": "price of the machine one model is served on, US dollars per hour, for "
        "$/1M output tokens (default: the sweep's [pricing]; none: no cost shown)",
    },
    # --request-rate, --burstiness (open-loop arrivals) and --rate-sweep
    "--request-rate": {
        "type": parse_request_rate,
        "default": None,
        "metavar": "RPS",
        "help": "open loop: send requests at this mean rate whatever is in flight, latency "
        "from each request's scheduled time (-m open_loop needs it; "
        f"{OPEN_LOOP_TIMED_REQUESTS} requests per window unless --timed-requests)",
    },
    "--burstiness": {
        "type": parse_burstiness,
        "default": DEFAULTS.burstiness,
        "metavar": "B",
        "help": "open loop: gaps between requests are gamma-distributed with shape B, as "
        f"vllm bench serve draws them (1: Poisson; default: {DEFAULTS.burstiness:g})",
    },
    "--rate-sweep": {
        "type": parse_rate_sweep,
        "default": DEFAULTS.rate_sweep,
        "metavar": "START:MAX",
        "help": "capacity in req/s (-m rate_capacity, needs --slo): the rates the sweep may "
        "try, doubling from START, then bisecting; it stops at a miss or when the "
        f"server falls behind the offered rate (default: {DEFAULTS.rate_sweep})",
    },
    "--startup-launches": {
        "type": parse_startup_launches,
        "default": DEFAULTS.startup_launches,
        "metavar": "N",
        "help": "cold start (-m startup): fresh launches of each model's server "
        f"(default: {DEFAULTS.startup_launches})",
    },
    "--timed-requests": {
        "type": parse_positive_int,
        "default": None,
        "metavar": "N",
        "help": "timed requests per throughput repeat (default: "
        f"{TIMED_REQUESTS_PER_SLOT} x concurrency, at least {MIN_TIMED_REQUESTS})",
    },
    "--limit": {
        "type": parse_positive_int,
        "default": None,
        "metavar": "N",
        "help": "run only the first N items of accuracy benchmarks (a subset)",
    },
    "--gsm8k-path": {
        "default": None,
        "metavar": "PATH",
        "help": "GSM8K test split as local JSONL (default: openai/gsm8k from the Hub)",
    },
    "--gsm8k-max-tokens": {
        "type": parse_positive_int,
        "default": None,
        "metavar": "N",
        "help": "GSM8K answer length limit (default: the sweep's [benchmarks.gsm8k] "
        "max_tokens; 256 in the embedded sweep, 2048 where a sweep sets none)",
    },
    "--bfcl-path": {
        "default": None,
        "metavar": "DIR",
        "help": "folder with BFCL simple records and possible answers "
        "(default: the BFCL dataset from the Hub)",
    },
}
"""Every option of pytest's modelsweep group, in ``--help`` order: flag → the keywords of
pytest's ``group.addoption`` and argparse's ``add_argument``, which ``modelsweep``'s
sub-commands take from here for the options they share (:func:`shared`)."""


def shared(flag: str, **changed: Any) -> dict[str, Any]:
    """``flag``'s keywords from :data:`OPTIONS`, with those a ``modelsweep`` sub-command
    ``changed`` (its default or help)."""
    return {**OPTIONS[flag], **changed}
