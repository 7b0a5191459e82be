"""The one run-state object of a pytest session (``config.stash``), made on first need
(:func:`.context.run_state`); the endpoint pool is imported when a test first asks for one."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.cost import Pricing
from ..core.errors import DataError, ModelsweepError
from ..core.measurements import Measurement, measurements_of
from ..core.outputs import OutputError, check_output_files, check_output_folder
from ..core.runinfo import run_provenance
from ..core.secrets import redact, redacted, remember_env_keys
from ..core.settings import BenchSettings as BenchSettings
from ..core.store_location import StoreLocation
from ..core.sweep import Selection, Sweep, load_sweep, parse_endpoint_option
from ..store.database import Store
from ..store.results import ResultsWriter, load_results
from ..store.sweep_run import sweep_run_heading, unsettled_failures

if TYPE_CHECKING:
    from ..core.options import Thresholds
    from ..judging.comparisons import ComparisonFinder, FinishedTest
    from ..judging.kinds import ExpectedTests
    from ..serving.pool import EndpointPool
    from ..store.sweep_run import SweepRunMember
    from ..workloads.accuracy import Rounds


def attempted(
    writes: Iterable[Callable[[], object]], errors: type[Exception] | None = None
) -> list[str]:
    """Every write tried; the one-line errors (``OutputError`` by default) of those that failed."""
    from ..core.outputs import OutputError

    problems: list[str] = []
    for write in writes:
        try:
            write()
        except errors or OutputError as error:  # noqa: B030 (one class, OutputError by default)
            problems.append(str(error))
    return problems


@dataclass
class Options:
    """The run-wide options the plugin reads, picked once from ``config.option`` (parsed and
    defaulted there); the measuring options are :class:`BenchSettings`, a view of ``parsed``."""

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
    allow_ungated: bool
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
    sweep_run: str | None = None
    """``--sweep-run``: the logical sweep whose runs on other hosts this run joins."""
    parsed: Any = field(default=None, repr=False, compare=False)
    """``config.option`` itself."""

    def __repr__(self) -> str:

        fields = ", ".join(
            f"{k}={v!r}" for k, v in vars(self).items() if k not in ("thresholds", "parsed")
        )
        return redact(f"Options({fields})")

    @classmethod
    def from_namespace(cls, option: Any) -> Options:
        """The options of ``config.option``, each from its namesake or :data:`_OPTION_OF`."""
        values = {
            f.name: getattr(option, _OPTION_OF.get(f.name, f.name))
            for f in fields(cls)
            if f.name != "parsed"
        }
        return cls(
            **{**values, "models": list(option.model), "endpoints": list(option.endpoint)},
            parsed=option,
        )


STORE_FAILURE_MARK = "store-failure.txt"
"""In the run folder: the one line of the store's failure in one process of the run, which the
run's other processes on this host read (a comparison then stops waiting for a side)."""

_OPTION_OF = {
    "models": "model",
    "endpoints": "endpoint",
    "workdir": "modelsweep_dir",
    "verdict_wait_s": "verdict_wait",
    "thresholds": "fail_on_regression",
}
"""The ``config.option`` names of the :class:`Options` fields named otherwise."""


@dataclass(frozen=True)
class RunConfig:
    """What a run is asked to do, made once from the parsed options (:meth:`of`): the options,
    the sweep, the models, the places it writes, the benchmarks' settings."""

    options: Options
    rootdir: Path
    run_id: str
    is_worker: bool
    worker_id: str
    args: tuple[str, ...]
    sweep: Sweep
    attach: dict[str, str]
    """``--endpoint`` NAME → root URL, checked against the sweep."""
    selection: Selection
    """The models this run measures (``--model`` narrows it; default: all)."""
    models_to_run: tuple[str, ...]
    """Model names whose tests are collected, in run order: ``--model``'s (the reference first
    where they name only candidates: :attr:`reference_added`), else all."""
    reference_added: bool
    """Whether ``--model`` named only candidates, so that the reference's tests are collected
    for their comparisons (those the store has a like run of are deselected); not with
    ``--sweep-run``, where another host measures it."""
    bench_settings: BenchSettings
    """The narrow view of this run that benchmark tests receive."""

    @classmethod
    def of(
        cls,
        options: Options,
        *,
        rootdir: Path,
        run_id: str,
        is_worker: bool,
        worker_id: str,
        args: Iterable[str] = (),
    ) -> RunConfig:
        """The run of ``options``; a bad ``--sweep``, ``--model``, ``--reference`` or
        ``--endpoint`` is a one-line ModelsweepError."""

        sweep = load_sweep(options.sweep)
        # every process redacts the keys (xdist's controller never sends with them)
        remember_env_keys(spec.api_key_env for spec in sweep.models.values())
        attach = parse_endpoint_option(options.endpoints, sweep)
        reference = options.reference or sweep.reference
        for name in [reference, *options.models, *attach]:
            sweep.model(name)
        named = list(dict.fromkeys(options.models))
        added = bool(named) and reference not in named and options.sweep_run is None
        models = [reference] * added + named if named else sweep.select([], reference).models
        parsed, usd = options.parsed, options.usd_per_hour
        return cls(
            options,
            rootdir,
            run_id,
            is_worker,
            worker_id,
            tuple(args),
            sweep,
            attach,
            Selection(reference, tuple(m for m in models if m != reference)),
            tuple(models),
            added,
            BenchSettings.from_options(
                parsed,
                run_id=run_id,
                pricing=sweep.pricing if usd is None else Pricing(usd, source="--usd-per-hour"),
                gsm8k_max_tokens=parsed.gsm8k_max_tokens or sweep.benchmarks.gsm8k_max_tokens,
                round_size=int(parsed.round_size)
                if parsed.until_decided or sweep.verdicts.until_decided
                else None,
            ),
        )

    def __repr__(self) -> str:

        return redact(
            f"RunConfig(run_id={self.run_id!r}, worker_id={self.worker_id!r}, "
            f"rootdir={str(self.rootdir)!r}, options={self.options!r}, args={self.args!r})"
        )

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
    def store_identity(self) -> str:
        """The store as a run's results name it (``run.store``): an absolute file path, or the
        URL without its password."""
        where = self.store_location
        return str(where.path.absolute()) if where.path is not None else str(where)

    def check_outputs(self, others: dict[str, str | None]) -> None:
        """Every place this run writes (work folder, results, ``others``: option → path),
        checked before any test; an OutputError names the first that cannot be written."""

        check_output_folder(self.workdir, "--modelsweep-dir")
        check_output_files({"--results": self.options.results or None, **others})


@dataclass
class RunState:
    """The run's services on its :class:`RunConfig`: the store and its failure, the endpoint
    pool, the comparisons, what it measured and concluded (results, baseline, gate), its sweep
    run. The controller (or a plain run) collects measurements and writes; an xdist worker
    owns its endpoints."""

    config: RunConfig
    write_line: Callable[[str], None]
    measurements: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)
    unjudged: list[tuple[str, str]] = field(default_factory=list)
    """(test id, why) of comparison tests that found nothing to compare with."""
    session_errors: list[str] = field(default_factory=list)
    """One-line reasons the session fails although its tests may pass (baseline, unjudged)."""
    tests_reported: bool = False
    gate_rows: list[Any] = field(default_factory=list)
    gate_error: str = ""
    gate_ungated: str = ""
    """Why the gate compared nothing (every row new), or ``""``."""
    _run_recorded: bool = False
    """Whether the run's row is in the store (:meth:`_record_run`), to be marked ended."""
    finished: dict[str, Callable[[], FinishedTest]] = field(default_factory=dict)
    """Node id → how each modelsweep test run in this process ended: a call that reads its
    report when a comparison needs its side (a write the controller failed it for shows then)."""
    _store_refusal: str | None = None
    """Why a worker could not open the store (it is not tried again)."""

    def __repr__(self) -> str:
        return f"RunState(config={self.config!r})"

    @cached_property
    def store(self) -> Store:
        """The store every process of the run shares (SQLite file or PostgreSQL); the
        controller first takes back what earlier runs kept only in their results."""

        if self._store_refusal is not None:
            raise DataError(self._store_refusal)
        try:
            store = Store(self.config.store_location)
        except ModelsweepError as error:
            if self.config.is_worker:  # mid-run: every later test fails in this line at once
                self._store_refusal = str(error)
            raise
        store.on_failure = self._mark_store_failed
        if not self.config.is_worker:
            self._take_back_kept_items(store)
        return store

    def store_for_items(self) -> tuple[Store | None, str | None]:
        """The store and why it failed before (then items are measured, not stored); no store
        where a worker could not open it."""

        try:
            return self.store, self.store.failure
        except ModelsweepError as error:
            return None, str(error)

    def until_decided(self, model: str, tests_of: ExpectedTests) -> Rounds | None:
        """``--until-decided``'s rounds of ``model``'s accuracy benchmarks (None: without)."""
        from ..judging.rounds import until_decided

        round_size = self.config.bench_settings.round_size
        if round_size is None:
            return None
        options = self.config.options
        return partial(
            until_decided,
            store=self.store,
            run_id=self.config.run_id,
            model=model,
            round_size=round_size,
            wait_s=options.verdict_wait_s,
            reference=self.config.selection.reference,
            candidates=self.config.selection.candidates,
            tests_of=tests_of,
            margin=options.margin,
            baseline=(lambda: self.baseline_measurements) if options.baseline else None,
            threshold=options.thresholds.accuracy_points,
            progress=self.write_line,
        )

    def stored_reference_run(self, benchmark: str, setting: dict[str, Any]) -> str | None:
        """A stored run with the reference's like ``benchmark`` measurement at ``setting``
        (:func:`stored_like_run`); None where there is none or the store cannot be read
        (then the reference is measured, and the store's failure shows in its tests)."""
        from ..judging.comparisons import stored_like_run

        try:
            return stored_like_run(
                self.store,
                self.config.selection.reference,
                benchmark,
                setting,
                limit=self.config.bench_settings.limit,
            )
        except ModelsweepError:
            return None

    def store_failure(self) -> str | None:
        """Why the store failed in this run: in this process, or in another of the run on this
        host (its mark in the run folder); None while it works."""
        if self._store_refusal is not None:
            return self._store_refusal
        if "store" in vars(self) and self.store.failure is not None:
            return self.store.failure
        try:
            return (
                (self.config.run_dir / STORE_FAILURE_MARK).read_text(encoding="utf-8").strip()
                or f"the store {self.config.store_location} failed in another process of this run"
            )
        except OSError:
            return None

    def _mark_store_failed(self, line: str) -> None:
        """Leave the failure's line in the run folder for the run's other processes."""
        try:
            self.config.run_dir.mkdir(parents=True, exist_ok=True)
            (self.config.run_dir / STORE_FAILURE_MARK).write_text(line + "\n", encoding="utf-8")
        except OSError:
            with contextlib.suppress(OSError):  # a full disk may still take an empty file
                (self.config.run_dir / STORE_FAILURE_MARK).touch()

    def _take_back_kept_items(self, store: Store) -> None:
        """Store the answered items that earlier runs kept only in their results, so that this
        run sends none of them again: from ``--results``'s file (or journal) and from the work
        folder's runs; only a run whose results say its store failed, or a run of this store
        (``run.store``) that it does not list as ended (killed). A healthy run of another
        store gives nothing: a new store measures afresh."""

        from ..serving.endpoint import model_serving_key  # (httpx: only where items are taken back)

        ended = {run["run_id"] for run in store.runs() if run["status"] != "interrupted"}
        places = [Path(self.config.options.results)] if self.config.options.results else []
        places += [  # (no runs folder: no folder in it)
            folder / "results.json"
            for folder in sorted((self.config.workdir / "runs").glob("*"))
            if folder.name not in ended and folder.name != self.config.run_id
        ]
        taken, failed = 0, False
        for path in places:
            if not (path.is_file() or path.with_name(path.name + ".partial.jsonl").is_file()):
                continue
            try:
                kept = load_results(path)
            except ModelsweepError as error:
                self.write_line(f"not taking answered items back from {path}: {error}")
                continue
            run_id = str(kept["run"].get("run_id") or path.parent.name)
            store_failed = "store_failure" in kept["summary"]
            if not store_failed and (
                kept["run"].get("store") != self.config.store_identity or run_id in ended
            ):
                continue  # another store's run, or one this store holds whole
            failed = failed or store_failed
            for m in measurements_of(kept["measurements"]):
                if m.unit == "accuracy" and m.provenance:
                    taken += store.take_back_items(
                        run_id,
                        m.model,
                        m.benchmark,
                        model_serving_key(m.provenance),
                        m.item_records(),
                    )
        if taken:
            why = "their store had failed" if failed else "they were not ended in it"
            self.write_line(
                f"took {taken} answered items back into the store {store.path} from "
                f"earlier runs' results ({why}): they are not sent again"
            )

    def finished_here(self, test_id: str) -> FinishedTest | None:
        """How ``test_id`` ended in this process (None: not run here, or not finished)."""
        how = self.finished.get(test_id)
        return None if how is None else how()

    @cached_property
    def comparisons(self) -> ComparisonFinder:
        """The run's one finder of comparison sides (it waits once per model and benchmark)."""
        from ..judging.comparisons import ComparisonFinder

        return ComparisonFinder(
            self.store,
            self.config.run_id,
            wait_s=self.config.options.verdict_wait_s,
            sweep_run=self.config.options.sweep_run,
            finished_here=self.finished_here,
            store_failure=self.store_failure,
            progress=self.write_line,
        )

    # -- endpoints -------------------------------------------------------------
    @cached_property
    def pool(self) -> EndpointPool:
        """This process's endpoints; the pool module (httpx, subprocesses) is imported here."""
        from ..serving.pool import EndpointPool

        return EndpointPool(
            self.config.sweep,
            attach=self.config.attach,
            run_dir=self.config.run_dir,
            worker_id=self.config.worker_id,
            progress=self.write_line,
            models=self.config.models_to_run,
        )

    def release_endpoint(self, model: str) -> None:
        """Stop ``model``'s server if this process started one (its last test is done)."""
        if "pool" in vars(self):
            self.pool.release(model)

    def close(self) -> None:
        if "pool" in vars(self):
            self.pool.close()
        if "store" in vars(self):
            self.store.close()

    # -- the sweep run (--sweep-run) -------------------------------------------
    def join_sweep_run(self) -> None:
        """Record this run as one of ``--sweep-run``'s before any test (other hosts then wait
        for its models); a sweep run of another sweep is a DataError."""

        name = self.config.options.sweep_run
        if name is None:
            return
        others = {m.sweep_name for m in self.store.sweep_run_members(name)} - {
            self.config.sweep.name
        }
        if others:
            raise DataError(
                f"--sweep-run {name}: its runs in {self.config.store_location} measured sweep "
                f"{sorted(others)[0]}, this run measures sweep {self.config.sweep.name}; one sweep "
                "run holds one sweep: pass the same --sweep, or another --sweep-run name"
            )
        self._record_run()

    def sweep_run_members(self) -> list[SweepRunMember]:
        """The runs of ``--sweep-run`` in the store (empty without one, or when the store
        failed: its line is told once already)."""
        name = self.config.options.sweep_run
        if name is None or self.store_failure() is not None:
            return []
        return list(self.store.sweep_run_members(name))

    def judged_measurements(self) -> list[dict[str, Any]]:
        """What the gate and reports read: this run's measurements, or its sweep run's (this
        run's when the store failed)."""
        if self.config.options.sweep_run is None or self.store_failure() is not None:
            return self.measurements
        return self.store.sweep_run_measurements(
            self.config.options.sweep_run, last=self.config.run_id
        )

    def report_run(self) -> dict[str, Any]:
        """The run dict the reports show: this run's, or named after its sweep run."""
        name = self.config.options.sweep_run
        return (
            self.run
            if name is None
            else sweep_run_heading(name, self.sweep_run_members(), self.run)
        )

    # -- results (controller only) ---------------------------------------------
    @cached_property
    def run(self) -> dict[str, Any]:
        """Run-level provenance (commit, machine, software, sweep), computed once."""

        run = run_provenance(self.config.rootdir, self.config.sweep.path, list(self.config.args))
        run.update(
            run_id=self.config.run_id,
            sweep_name=self.config.sweep.name,
            reference=self.config.selection.reference,
            serving=self.config.sweep.serving.as_dict(),
            store=self.config.store_identity,
        )
        if self.config.options.sweep_run is not None:
            run["sweep_run"] = self.config.options.sweep_run
        return run

    @cached_property
    def _results(self) -> ResultsWriter:
        return ResultsWriter(self.config.results_path, self.run)

    def start_run(self) -> None:
        """Record the run (store row, journal head) at its first report, so a killed run is
        listed; OutputError in one line once each write was tried."""
        self.tests_reported = True
        self._each(lambda: self._results.start(), self._record_run)

    def _record_run(self) -> None:
        """The run's row in the store: listed as interrupted until :meth:`finish_run`."""
        self.store.add_run(
            self.config.run_id,
            self.config.sweep.name,
            self.run,
            sweep_run=self.config.options.sweep_run,
        )
        self._run_recorded = True

    def finish_run(self, exitstatus: int) -> None:
        """Mark a recorded run ended with its exit status (one never marked was killed)."""
        if self._run_recorded:
            self.store.finish_run(
                self.config.run_id,
                datetime.now(UTC).isoformat(timespec="seconds"),
                exit_status=exitstatus,
            )

    def add_measurement(self, measurement: dict[str, Any]) -> None:
        """Keep, journal and store a measurement; OutputError in one line once both were tried
        (it is kept and written at the end)."""

        measurement = redacted(measurement)  # every report of the run reads this copy
        self.measurements.append(measurement)
        self._each(
            lambda: self._results.add(measurement),
            lambda: self.store.add_measurement(self.config.run_id, measurement),
        )

    @staticmethod
    def _each(*writes: Callable[[], None]) -> None:

        if problems := attempted(writes):
            raise OutputError("; ".join(problems))

    @cached_property
    def baseline_measurements(self) -> list[Measurement]:
        """The measurements of ``--baseline`` (a stored baseline, or a results file), read once;
        DataError when it holds nothing the gate compares (read again at the next use)."""
        from ..judging.gate import baseline_history, gateable

        name = self.config.options.baseline or ""
        runs = self.store.baseline_measurements(name)
        path = Path(name)
        if runs:
            found = baseline_history(measurements_of(run) for run in runs)
            where = f"baseline {name!r} in {self.config.store_location}"
        elif path.is_file() or path.with_name(path.name + ".partial.jsonl").is_file():
            found = measurements_of(load_results(path)["measurements"])
            where = f"results file {path}"
        else:
            known = ", ".join(self.store.baselines()) or "none saved yet"
            raise DataError(
                f"--baseline {name!r}: no such baseline in {self.config.store_location} ({known}) and "
                "no results file there; save one with --save-baseline NAME"
            )
        if not gateable(found):
            raise DataError(
                f"--baseline {name!r}: the {where} holds no measurement the gate compares "
                f"({len(found)} measurements, none of accuracy or throughput: an interrupted "
                "or comparison-only run); give a baseline saved from a run of the benchmarks"
            )
        return found

    def gate(self) -> list[Any]:
        """Compare this run (or its sweep run) with ``--baseline``; a gate that compared nothing
        is a session error unless ``--allow-ungated``."""
        if not self.config.options.baseline:
            return []
        from ..judging.gate import compare_with_baseline, ungated_reason

        measurements = measurements_of(self.judged_measurements())
        self.gate_rows = compare_with_baseline(
            measurements,
            self.baseline_measurements,
            self.config.options.thresholds,
            resamples=self.config.options.resamples,
            noisy_fails=self.config.options.fail_on_noisy,
        )
        reason = ungated_reason(self.gate_rows, measurements)
        self.gate_ungated = reason or ""
        if reason is not None and not self.config.options.allow_ungated:
            self.session_errors.append(
                f"--baseline {self.config.options.baseline}: {reason}; run the baseline's benchmarks "
                "(same models and settings), or pass --allow-ungated"
            )
        return self.gate_rows

    def save_baseline_if_asked(self) -> str | None:
        """Save this run as ``--save-baseline NAME``; the one-line refusal, or None."""
        name = self.config.options.save_baseline
        if not name:
            return None
        from ..judging.gate import gateable, unsound_reason

        judged = measurements_of(self.judged_measurements())
        unsound = [f"{f['test_id']} {f['outcome']}: {f['message']}" for f in self.failures]
        failed_tests = {f["test_id"] for f in self.failures}
        if self.config.options.sweep_run is not None:
            others = [m.run_id for m in self.sweep_run_members() if m.run_id != self.config.run_id]
            unsound += [
                f"{test} {outcome} in run {run}"
                for run, test, outcome in unsettled_failures(
                    self.store.test_outcomes(others), others
                )
            ]
        unsound += [
            reason
            for m in judged
            if m.test_id not in failed_tests and (reason := unsound_reason(m, "now"))
        ]
        if unsound:
            return (
                f"--save-baseline {name}: refused, a baseline is made only from a run whose "
                f"every modelsweep test passed; {len(unsound)} did not (first: {unsound[0]}); "
                "fix them and run again"
            )
        if not gateable(judged):
            measured = sorted({m.benchmark for m in judged})
            return (
                f"--save-baseline {name}: refused, this run holds no measurement the gate "
                "compares (accuracy or throughput; it measured "
                f"{', '.join(measured) or 'nothing'}); save a run of the benchmarks "
                "themselves"
            )
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            history = self.store.save_baseline(
                name, self.config.run_id, stamp, sweep_run=self.config.options.sweep_run
            )
        except OutputError as error:
            return f"--save-baseline {name}: not saved: {error}"
        what = (
            "this run"
            if self.config.options.sweep_run is None
            else f"sweep run {self.config.options.sweep_run} ({len(self.sweep_run_members())} runs)"
        )
        self.write_line(
            f"saved {what} as baseline {name!r} "
            f"({len(history)} run{'s' if len(history) != 1 else ''} in its history)"
        )
        return None

    def finish_results(self, summary: dict[str, Any]) -> Path:
        """Write the results file; also when every test failed (it then lists the failures)."""
        failure = self.store_failure()
        self._results.finish(
            {
                **summary,
                "failures": self.failures,
                **({"store_failure": failure} if failure is not None else {}),
            }
        )
        return self.config.results_path
