"""The one run-state object of a pytest session (kept in ``config.stash``).

It is made on first need (see :func:`pytest_modelsweep.context.run_state`): a
pytest run that collects no modelsweep test and gives no modelsweep option
never builds it. The endpoint pool (httpx, subprocesses) is imported only when
a test first asks for an endpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.settings import BenchSettings as BenchSettings
from ..core.store_location import StoreLocation
from ..core.sweep import Selection, Sweep, load_sweep, parse_endpoint_option
from ..store.database import Store
from ..store.results import ResultsWriter

if TYPE_CHECKING:
    from ..core.cost import Pricing
    from ..core.measurements import Measurement
    from ..core.options import Thresholds
    from ..judging.comparisons import ComparisonFinder
    from ..serving.pool import EndpointPool


@dataclass
class Options:
    """The run-wide options the plugin itself reads, picked once from ``config.option``.

    Every value was parsed and checked by its option's ``type=`` parser and defaulted
    from ``core.options.DEFAULTS``, so nothing here parses or defaults; the measuring
    options are :class:`BenchSettings`, a view of ``parsed``.
    """

    sweep: str
    models: list[str]
    reference: str | None
    endpoints: list[str]
    results: str | None
    workdir: str | None
    store: StoreLocation | None
    """``--store``; None: ``store.sqlite`` in the work folder."""
    gsm8k_path: str | None
    bfcl_path: str | None
    margin: float | None
    ratio_tolerance: float
    allow_unjudged: bool
    fail_on_noisy: bool
    interleave: bool
    fail_on: frozenset[str]
    holm: bool
    resamples: int
    verdict_wait_s: float
    baseline: str | None
    save_baseline: str | None
    thresholds: Thresholds
    usd_per_hour: float | None
    """``--usd-per-hour``; None: the sweep's ``[pricing]`` decides."""
    parsed: Any = field(default=None, repr=False, compare=False)
    """``config.option`` itself."""

    def __repr__(self) -> str:
        from ..core.secrets import redact

        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items()
                           if k not in ("thresholds", "parsed"))
        return redact(f"Options({fields})")

    @classmethod
    def from_namespace(cls, option: Any) -> Options:
        """The options of ``config.option`` (already parsed and checked)."""
        return cls(
            sweep=option.sweep, models=list(option.model), reference=option.reference,
            endpoints=list(option.endpoint), results=option.results,
            workdir=option.modelsweep_dir, store=option.store, gsm8k_path=option.gsm8k_path,
            bfcl_path=option.bfcl_path, margin=option.margin,
            ratio_tolerance=option.ratio_tolerance, allow_unjudged=option.allow_unjudged,
            fail_on_noisy=option.fail_on_noisy, interleave=option.interleave,
            fail_on=option.fail_on, holm=option.holm, resamples=option.resamples,
            verdict_wait_s=option.verdict_wait, baseline=option.baseline,
            save_baseline=option.save_baseline, thresholds=option.fail_on_regression,
            usd_per_hour=option.usd_per_hour, parsed=option,
        )


@dataclass
class RunState:
    """Everything run-wide: the sweep, the selection, endpoints, measurements.

    On the controller (or a plain run) it collects measurements from test
    reports and writes the results; on an xdist worker it owns that worker's
    endpoints only.
    """

    options: Options
    rootdir: Path
    run_id: str
    is_worker: bool
    worker_id: str
    write_line: Callable[[str], None]
    args: list[str] = field(default_factory=list)
    _sweep: Sweep | None = None
    _selection: Selection | None = None
    _only: list[str] = field(default_factory=list)
    _attach: dict[str, str] | None = None
    _pool: EndpointPool | None = None
    _writer: ResultsWriter | None = None
    _store: Store | None = None
    _run: dict[str, Any] | None = None
    measurements: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    unjudged: list[tuple[str, str]] = field(default_factory=list)
    """(test id, why) of comparison tests that found nothing to compare with."""
    session_errors: list[str] = field(default_factory=list)
    """One-line reasons the session fails although its tests may pass (baseline, unjudged)."""
    tests_reported: bool = False
    gate_rows: list[Any] = field(default_factory=list)
    gate_error: str = ""

    @cached_property
    def bench_settings(self) -> BenchSettings:
        """The narrow view of this run that benchmark tests receive (made once)."""
        return BenchSettings.from_options(self.options.parsed, run_id=self.run_id,
                                          pricing=self.pricing,
                                          gsm8k_max_tokens=self.gsm8k_max_tokens,
                                          round_size=self.round_size)

    def __repr__(self) -> str:
        from ..core.secrets import redact

        return redact(f"RunState(run_id={self.run_id!r}, worker_id={self.worker_id!r}, "
                      f"rootdir={str(self.rootdir)!r}, options={self.options!r}, "
                      f"args={self.args!r})")

    @property
    def gsm8k_max_tokens(self) -> int:
        """``--gsm8k-max-tokens``, else the sweep's ``[benchmarks.gsm8k] max_tokens``."""
        given: int | None = self.options.parsed.gsm8k_max_tokens
        return self.sweep.benchmarks.gsm8k_max_tokens if given is None else given

    @property
    def round_size(self) -> int | None:
        """Items per round of a sequential accuracy benchmark (``--round-size``); None unless
        ``--until-decided`` (or the sweep's ``[verdicts] until_decided``) is on."""
        if not (self.options.parsed.until_decided or self.sweep.verdicts.until_decided):
            return None
        size: int = self.options.parsed.round_size
        return size

    @property
    def pricing(self) -> Pricing | None:
        """``--usd-per-hour`` (as the user's own price), else the sweep's ``[pricing]``."""
        from ..core.cost import Pricing

        if self.options.usd_per_hour is not None:
            return Pricing(self.options.usd_per_hour, source="--usd-per-hour")
        return self.sweep.pricing

    # -- the sweep -------------------------------------------------------------
    @property
    def sweep(self) -> Sweep:
        if self._sweep is None:
            self._sweep = load_sweep(self.options.sweep)
        return self._sweep

    @property
    def selection(self) -> Selection:
        """The models this run measures (``--model`` narrows it; default: all)."""
        if self._selection is None:
            sweep = self.sweep
            reference = self.options.reference or sweep.reference
            for name in [reference, *self.options.models, *self.attach]:
                sweep.model(name)
            if self.options.models:
                chosen = list(dict.fromkeys(self.options.models))
                self._selection = Selection(
                    reference=reference,
                    candidates=tuple(m for m in chosen if m != reference),
                )
                self._only = chosen
            else:
                self._selection = sweep.select([], reference)
                self._only = list(self._selection.models)
        return self._selection

    @property
    def models_to_run(self) -> list[str]:
        """Model names whose tests are collected, in run order."""
        self.selection
        return list(self._only)

    @property
    def attach(self) -> dict[str, str]:
        """``--endpoint`` NAME → root URL, checked against the sweep."""
        if self._attach is None:
            self._attach = parse_endpoint_option(self.options.endpoints, self.sweep)
        return self._attach

    # -- places ----------------------------------------------------------------
    @property
    def workdir(self) -> Path:
        return Path(self.options.workdir) if self.options.workdir else self.rootdir / ".modelsweep"

    @property
    def run_dir(self) -> Path:
        return self.workdir / "runs" / self.run_id

    @property
    def results_path(self) -> Path:
        return Path(self.options.results) if self.options.results else self.run_dir / "results.json"

    @property
    def store_location(self) -> StoreLocation:
        return self.options.store or StoreLocation.file(self.workdir / "store.sqlite")

    @property
    def store(self) -> Store:
        """The store every process of the run shares (items, measurements): a SQLite file
        or a PostgreSQL database."""
        if self._store is None:
            self._store = Store(self.store_location)
        return self._store

    @cached_property
    def comparisons(self) -> ComparisonFinder:
        """The run's one finder of comparison sides (it waits once per model and benchmark)."""
        from ..judging.comparisons import ComparisonFinder

        return ComparisonFinder(self.store, self.run_id, wait_s=self.options.verdict_wait_s)

    # -- endpoints -------------------------------------------------------------
    @property
    def pool(self) -> EndpointPool:
        """This process's endpoints; the pool module (httpx, subprocesses) is imported here."""
        if self._pool is None:
            from ..serving.pool import EndpointPool

            self._pool = EndpointPool(
                self.sweep,
                attach=self.attach,
                run_dir=self.run_dir,
                worker_id=self.worker_id,
                progress=self.write_line,
                models=self.models_to_run,
            )
        return self._pool

    def release_endpoint(self, model: str) -> None:
        """Stop ``model``'s server if this process started one (its last test is done)."""
        if self._pool is not None:
            self._pool.release(model)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        if self._store is not None:
            self._store.close()

    # -- results (controller only) ---------------------------------------------
    @property
    def run(self) -> dict[str, Any]:
        """Run-level provenance (commit, machine, software, sweep), computed once."""
        if self._run is None:
            from ..core.runinfo import run_provenance

            run = run_provenance(self.rootdir, self.sweep.path, self.args)
            run.update(run_id=self.run_id, sweep_name=self.sweep.name,
                       reference=self.selection.reference,
                       serving=self.sweep.serving.as_dict())
            self._run = run
        return self._run

    def _results_writer(self) -> ResultsWriter:
        if self._writer is None:
            self._writer = ResultsWriter(self.results_path, self.run)
            self.store.add_run(self.run_id, self.sweep.name, self.run)
        return self._writer

    def add_measurement(self, measurement: dict[str, Any]) -> None:
        self.measurements.append(measurement)
        self._results_writer().add(measurement)
        self.store.add_measurement(self.run_id, measurement)

    def add_failure(self, test_id: str, when: str, outcome: str, message: str) -> None:
        """A modelsweep test that failed or errored: listed in the results and the reports."""
        self.failures.append({"test_id": test_id, "when": when, "outcome": outcome,
                              "message": message})

    def baseline_measurements(self) -> list[Measurement]:
        """The measurements of ``--baseline``: a stored baseline's name, or a results file."""
        from ..core.errors import DataError
        from ..core.measurements import measurements_of
        from ..judging.gate import baseline_history
        from ..store.results import load_results

        name = self.options.baseline or ""
        run_ids = self.store.baseline_runs(name)
        if run_ids:
            return baseline_history(measurements_of(self.store.measurements(run_id))
                                    for run_id in run_ids)
        path = Path(name)
        if path.is_file() or path.with_name(path.name + ".partial.jsonl").is_file():
            return measurements_of(load_results(path)["measurements"])
        known = ", ".join(self.store.baselines()) or "none saved yet"
        raise DataError(
            f"--baseline {name!r}: no such baseline in {self.store_location} ({known}) and no "
            "results file there; save one with --save-baseline NAME"
        )

    def gate(self) -> list[Any]:
        """Compare this run with ``--baseline`` (no-op without it)."""
        if not self.options.baseline or not self.measurements:
            return []
        from ..core.measurements import measurements_of
        from ..judging.gate import compare_with_baseline

        self.gate_rows = compare_with_baseline(
            measurements_of(self.measurements), self.baseline_measurements(),
            self.options.thresholds,
            resamples=self.options.resamples, noisy_fails=self.options.fail_on_noisy,
        )
        return self.gate_rows

    def save_baseline_if_asked(self) -> str | None:
        """Save this run as ``--save-baseline NAME``; a run with a failed test is refused.

        Returns the one-line refusal (the session then fails), or None.
        """
        name = self.options.save_baseline
        if not name:
            return None
        from ..core.measurements import measurements_of
        from ..judging.gate import unsound_reason

        unsound = [f"{f['test_id']} {f['outcome']}: {f['message']}" for f in self.failures]
        failed_tests = {f["test_id"] for f in self.failures}
        unsound += [reason for m in measurements_of(self.measurements)
                    if m.test_id not in failed_tests and (reason := unsound_reason(m, "now"))]
        if unsound:
            return (f"--save-baseline {name}: refused, a baseline is made only from a run whose "
                    f"every modelsweep test passed; {len(unsound)} did not (first: {unsound[0]}); "
                    "fix them and run again")
        if not self.measurements:
            return f"--save-baseline {name}: refused, this run measured nothing"
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        history = self.store.save_baseline(name, self.run_id, stamp)
        self.write_line(f"saved this run as baseline {name!r} "
                        f"({len(history)} run{'s' if len(history) != 1 else ''} in its history)")
        return None

    def finish_results(self, summary: dict[str, Any]) -> Path:
        """Write the results file; also when every test failed (it then lists the failures)."""
        self._results_writer().finish({**summary, "failures": self.failures})
        return self.results_path
