"""Option builders shared by the pytest plugin and the ``modelsweep`` command.

Each takes an ``addoption`` callable — pytest's ``group.addoption`` or argparse's
``parser.add_argument`` — so that an option reads the same in ``pytest --help``
and ``modelsweep … --help``. Pure: nothing here imports pytest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

AddOption = Callable[..., Any]

DEFAULT_STORE = ".modelsweep/store.sqlite"
DEFAULT_IDLE_TIMEOUT_S = 300.0  # serving.breaker.DEFAULT_IDLE_TIMEOUT_S says why
DEFAULT_REQUEST_TIMEOUT_S = 1800.0


def add_sweep_option(addoption: AddOption) -> None:
    addoption("--sweep", default=None, metavar="PATH",
              help="sweep file (TOML), or a built-in sweep: embedded (default), tpu-v5e, vllm-cpu")


def add_store_option(addoption: AddOption, default: str | None = None) -> None:
    addoption("--store", default=default, metavar="PATH",
              help=f"SQLite store of runs, measurements and items (default: {DEFAULT_STORE})")


def add_regression_option(addoption: AddOption) -> None:
    addoption("--fail-on-regression", default=None, metavar="RULES",
              help="how much worse is a regression (default: accuracy:1pp,throughput:10%%)")


def add_timeout_options(addoption: AddOption) -> None:
    addoption("--idle-timeout", type=float, default=DEFAULT_IDLE_TIMEOUT_S, metavar="SECONDS",
              help="fail a request after this long without a byte from the server; a stalled "
                   "server is found sooner by a health check "
                   f"(default: {DEFAULT_IDLE_TIMEOUT_S:g})")
    addoption("--request-timeout", type=float, default=DEFAULT_REQUEST_TIMEOUT_S,
              metavar="SECONDS",
              help=f"fail a request after this long in all (default: {DEFAULT_REQUEST_TIMEOUT_S:g})")


def add_resamples_option(addoption: AddOption) -> None:
    addoption("--resamples", type=int, default=10_000, metavar="N",
              help="bootstrap resamples of paired comparisons (default: 10000)")
