"""What the pytest objects of a run tell modelsweep: its state, a test's model, its records.

Below both the plugin and the fixtures. A test's model comes from its parameters
(:func:`model_of_item`) and travels on its report (``report.modelsweep_model``).
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import sys
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from .state import RunState

run_state_key = pytest.StashKey["RunState"]()
"""``config.stash[run_state_key]``: the run's one :class:`~.state.RunState`."""

measurements_key = pytest.StashKey[list[dict[str, Any]]]()
"""``item.stash[measurements_key]``: what a test recorded, carried on its report."""

unjudged_key = pytest.StashKey[str]()
"""``item.stash[unjudged_key]``: why a comparison test found nothing to compare with."""

declared_benchmark_key = pytest.StashKey[str]()
"""``item.stash[declared_benchmark_key]``: the benchmark a test declares."""

evaluated_key = pytest.StashKey[bool]()
"""``item.stash[evaluated_key]``: the test has called ``evaluate`` (once per test)."""

run_id_key = pytest.StashKey[str]()
"""``config.stash[run_id_key]``: the run's id (the controller's, handed to xdist workers)."""

MODEL_PARAMS = ("model_name", "candidate_name")
"""The parameters that make a test a modelsweep test (the plugin parametrizes them)."""


def run_id(config: pytest.Config) -> str:
    """This run's id: made once by the controller (or a plain run), given to every worker."""
    if run_id_key not in config.stash:
        given = (getattr(config, "workerinput", None) or {}).get("modelsweep_run_id")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        config.stash[run_id_key] = given or f"{stamp}-{uuid.uuid4().hex[:6]}"
    return config.stash[run_id_key]


def active_run_state(config: pytest.Config) -> RunState | None:
    """The run state if this run has made one (None: modelsweep is dormant in this run)."""
    return config.stash.get(run_state_key, None)


def run_state(config: pytest.Config) -> RunState:
    """The run state, made on first need (an option of ours, a modelsweep test collected or
    reported); a bad option or sweep raises ``pytest.UsageError``."""
    state = active_run_state(config)
    if state is not None:
        return state
    from ..core.errors import ModelsweepError
    from .state import Options, RunConfig, RunState

    workerinput = getattr(config, "workerinput", None)
    try:
        run = RunConfig.of(
            Options.from_namespace(config.option),
            rootdir=config.rootpath,
            run_id=run_id(config),
            is_worker=workerinput is not None,
            worker_id=workerinput["workerid"]
            if workerinput
            else os.environ.get("PYTEST_XDIST_WORKER", "main"),
            args=config.invocation_params.args,
        )
    except ModelsweepError as error:  # a bad --sweep, --model, --reference or --endpoint
        raise pytest.UsageError(str(error)) from None
    state = RunState(run, progress_writer(config))
    if not run.is_worker:
        # Outputs, store, --baseline and --sweep-run are checked before any test: usage errors.
        try:
            run.check_outputs(
                {  # the files it writes besides its results, by option
                    "--md": config.option.md,
                    "--llm-d-report": config.option.llm_d_report,
                    "$GITHUB_STEP_SUMMARY": os.environ.get("GITHUB_STEP_SUMMARY") or None,
                    "--html": getattr(config.option, "htmlpath", None),
                    "--junitxml": getattr(config.option, "xmlpath", None),
                }
            )
            _ = state.store
            if run.options.baseline:
                _ = state.baseline_measurements
            state.join_sweep_run()  # last: a usage error above leaves no run to wait for
        except ModelsweepError as error:
            raise pytest.UsageError(str(error)) from None
    config.stash[run_state_key] = state
    if os.environ.get(GC_FREEZE_ENV) == "1":
        freeze_what_the_run_loaded()
    return state


GC_FREEZE_ENV = "MODELSWEEP_GC_FREEZE"
"""Set to 1 (the project's tests do, for their ~300 pytest processes): freeze what a run
loaded (:func:`freeze_what_the_run_loaded`). Off by default: a user's process is not changed
as a side effect of loading the plugin."""


@functools.cache
def freeze_what_the_run_loaded() -> None:
    """Once a process: the modules, classes and run state alive now live until it exits, so
    they leave the garbage collector's sight (``gc.freeze``). Every later full collection, and
    the five pytest makes as it exits, then skips them: 0.6 CPU-s less a run
    (benches/perf/exit_collections.py). Objects made later are collected as before."""
    gc.freeze()


def progress_writer(config: pytest.Config) -> Callable[[str], None]:
    """Progress lines shown live, past pytest's capture (on an xdist worker: on stderr)."""

    def write_line(message: str) -> None:
        from ..core.secrets import redact

        message = redact(message)
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if reporter is not None and not hasattr(config, "workerinput"):
                reporter.write_line(f"modelsweep: {message}")
                reporter.flush()  # also when the output is a file or a CI log
            else:  # an xdist worker: on stderr
                print(f"modelsweep: {message}", file=sys.stderr, flush=True)

    return write_line


def model_of_item(item: pytest.Item) -> str | None:
    """The model a collected test belongs to (its ``model_name`` or ``candidate_name`` parameter)."""
    params = getattr(getattr(item, "callspec", None), "params", {})
    return next(
        (value for param in MODEL_PARAMS if isinstance(value := params.get(param), str)), None
    )


def tests_in_session(
    session: pytest.Session,
    model: str,
    benchmark: str,
    params: Mapping[str, Any] | None = None,
) -> list[str]:
    """This session's tests that record ``model``'s own ``benchmark`` result (with ``params``,
    those whose parameters have these values; a parameter a test lacks counts as None)."""
    return [
        item.nodeid
        for item in session.items
        if model_of_item(item) == model
        and item.get_closest_marker(benchmark) is not None
        and item.get_closest_marker("verdict") is None
        and all(
            getattr(getattr(item, "callspec", None), "params", {}).get(name) == value
            for name, value in (params or {}).items()
        )
    ]
