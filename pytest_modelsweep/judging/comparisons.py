"""The two sides of a comparison: found in this run or the store, missing, or failed.

:class:`ComparisonFinder` looks in this run first (under ``-n N`` waiting while this run's tests
of the side are still to come), then in the runs of ``--sweep-run`` (waiting while the run that
measures the model is going), else in the store's latest earlier run. Only a test not finished
in this process is waited for, and nothing once the store has failed.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from ..core.measurements import Measurement
from ..core.outputs import OutputError
from ..core.records import ItemRecord
from ..store.database import Store
from ..store.sweep_run import awaited
from .pairing import RequestSettings

ComparisonKind = Literal["accuracy", "throughput", "capacity", "rate_capacity"]
"""What a comparison compares: item scores, rates, or capacities under an SLO."""


@dataclass(frozen=True)
class ModelItems:
    """One model's scored items on one benchmark, and where they were measured."""

    model: str
    run_id: str
    items: list[ItemRecord]
    provenance: dict[str, Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    """The parameters of the measurement the items belong to."""
    benchmark: str = ""

    @property
    def requests(self) -> RequestSettings:
        """What the items' requests were sent with."""
        return RequestSettings.of(self.model, self.benchmark, self.params, self.items)

    def scores(self) -> dict[str, float]:
        """Item id → score (0.0 to 1.0); failed items must be refused before this."""
        return {r.item_id: r.credit for r in self.items}

    @property
    def failed(self) -> list[ItemRecord]:
        """The items that got no usable answer (never scored)."""
        return [r for r in self.items if r.failed]


@dataclass(frozen=True)
class ModelMeasurement:
    """One model's measurement of one benchmark at one setting, and where it was measured."""

    model: str
    run_id: str
    measurement: Measurement

    @property
    def requests(self) -> RequestSettings:
        """What the measurement's requests were sent with."""
        return RequestSettings.of_measurement(self.measurement)


SideT = TypeVar("SideT")
FoundT = TypeVar("FoundT", covariant=True)


@dataclass(frozen=True)
class Found(Generic[FoundT]):
    """The side was found; ``side.run_id`` says in which run."""

    side: FoundT


@dataclass(frozen=True)
class Missing:
    """Neither this run nor the store has the side: nothing to compare (a skip)."""

    reason: str


@dataclass(frozen=True)
class Failed:
    """This run should have produced the side and did not (a failure)."""

    reason: str


@dataclass(frozen=True)
class Skipped:
    """This run's tests of the side were all skipped: no comparison, and no failure."""

    reason: str


Outcome = Found[SideT] | Missing | Skipped | Failed
"""What a lookup of one side ends in."""


@dataclass(frozen=True)
class FinishedTest:
    """How a test of this run ended in this process: its outcome and, failed, its one line."""

    outcome: str
    reason: str = ""


def failed_items_reason(
    candidate: ModelItems,
    reference: ModelItems,
    benchmark: str,
) -> str | None:
    """Why two item sets cannot be compared because items failed; None when none did."""
    parts = [
        f"{len(failed)} of {len(side.items)} {role} items failed ({failed[0].error})"
        for role, side in (("candidate", candidate), ("reference", reference))
        if (failed := side.failed)
    ]  # each with its own first error
    if not parts:
        return None
    return (
        f"cannot judge {candidate.model} against {reference.model} on {benchmark}: "
        f"{', '.join(parts)}; re-run to resend them (completed items are reused)"
    )


def setting_text(params: Mapping[str, Any]) -> str:
    """``{"concurrency": 4, "prompt_tokens": 1024}`` → ``"at concurrency 4, 1024-token prompts"``."""
    parts = [
        f"{value}-token prompts" if name == "prompt_tokens" else f"{name.replace('_', ' ')} {value}"
        for name, value in params.items()
        if value is not None
    ]
    return "at " + ", ".join(parts) if parts else ""


def has_params(measurement: Measurement, params: Mapping[str, Any]) -> bool:
    """Whether a measurement was taken at ``params`` (a parameter it lacks counts as None)."""
    return all(measurement.params.get(name) == value for name, value in params.items())


def stored_like_run(
    store: Store, model: str, benchmark: str, setting: Mapping[str, Any], *, limit: int | None
) -> str | None:
    """The newest run in ``store`` whose passed ``benchmark`` measurement of ``model`` was
    taken at ``setting`` over the items ``limit`` asks for (``--limit``: the first N; None: the
    whole data set), or None: a comparison has no like side there to reuse."""
    for found in store.history(model, benchmark):
        measurement = Measurement.from_dict(found)
        params = measurement.params
        same_items = "subset" not in params or (
            params.get("subset") == (limit is not None)
            and (limit is None or params.get("limit") == limit)
        )
        if measurement.passed and same_items and has_params(measurement, setting):
            return str(found["run_id"])
    return None


@dataclass
class ComparisonFinder:
    """Finds comparison sides for one run, polling while this run's ``expected_tests`` of a
    side have no outcome (at most ``wait_s``, then never again: :attr:`gave_up`)."""

    store: Store
    run_id: str
    wait_s: float
    sweep_run: str | None = None
    """``--sweep-run``: the runs (hosts) a side not in this run is looked for in."""
    poll_s: float = 2.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    gave_up: dict[tuple[str, str], Failed] = field(default_factory=dict)
    """(model, benchmark) → the failure of the wait this finder gave up on."""
    finished_here: Callable[[str], FinishedTest | None] = lambda test_id: None
    """How a test of this run ended in this process (None: not here, or not yet)."""
    store_failure: Callable[[], str | None] | None = None
    """Why the store failed in this run (in any of its processes); None: ``store.failure``."""
    progress: Callable[[str], None] = lambda line: None
    """Where a waiting lookup says, every ``progress_s``, what it waits for."""
    progress_s: float = 30.0

    def items(
        self,
        model: str,
        benchmark: str,
        *,
        expected_tests: Sequence[str],
        match_ids: Sequence[str] | None = None,
    ) -> Outcome[ModelItems]:
        """``model``'s scored items on ``benchmark``: this run's, else another run's (the
        latest whose item ids are ``match_ids``, then the latest)."""

        def in_this_run() -> ModelItems | None:
            if self.store.measurement_of(self.run_id, model, benchmark) is None:
                return None
            return self._items_of(self.run_id, model, benchmark)

        def latest(among: list[str] | None) -> ModelItems | None:
            earlier = self.store.latest_run_with(
                model, benchmark, exclude=self.run_id, item_ids=match_ids, among=among
            )
            return None if earlier is None else self._items_of(earlier, model, benchmark)

        waited: Outcome[ModelItems] | None = self._wait(
            model, benchmark, f"{benchmark} result", expected_tests, in_this_run
        )
        if waited is None:
            waited = self._elsewhere(
                model,
                benchmark,
                f"{benchmark} items",
                latest,
                missing=(
                    f"no {benchmark} items of {model} in this run or in the store "
                    f"{self.store.path}; run its {benchmark} test too (add --model {model})"
                ),
            )
        if isinstance(waited, Found) and not waited.side.failed:  # (failed items: refused later)
            measurement = Measurement.from_dict(
                self.store.measurement_of(waited.side.run_id, model, benchmark) or {}
            )
            if not measurement.passed:
                return Failed(self._failed_test(model, f"{benchmark} result", measurement))
        return waited

    def measurement(
        self,
        model: str,
        benchmark: str,
        params: Mapping[str, Any],
        *,
        expected_tests: Sequence[str],
    ) -> Outcome[ModelMeasurement]:
        """``model``'s ``benchmark`` measurement at ``params``: this run's, else the latest."""
        setting = setting_text(params)
        what = f"{benchmark} result {setting}".strip()

        def in_this_run() -> ModelMeasurement | None:
            for found in self.store.measurements(self.run_id, model, benchmark):
                measurement = Measurement.from_dict(found)
                if has_params(measurement, params):
                    return ModelMeasurement(model, self.run_id, measurement)
            return None

        def latest(among: list[str] | None) -> ModelMeasurement | Failed | None:
            failed_earlier: Measurement | None = None
            for found in self.store.history(model, benchmark):
                measurement = Measurement.from_dict(found)
                run = measurement.run_id
                if (
                    run != self.run_id
                    and (among is None or run in among)
                    and has_params(measurement, params)
                ):
                    if measurement.passed:
                        return ModelMeasurement(model, str(run), measurement)
                    failed_earlier = failed_earlier or measurement
            if failed_earlier is not None:
                return Failed(self._failed_test(model, what, failed_earlier))
            return None

        waited = self._wait(model, benchmark, what, expected_tests, in_this_run)
        if isinstance(waited, Found) and not waited.side.measurement.passed:
            return Failed(self._failed_test(model, what, waited.side.measurement))
        if waited is not None:
            return waited
        return self._elsewhere(
            model,
            benchmark,
            what,
            latest,
            missing=(
                f"no {benchmark} result of {model}{' ' + setting if setting else ''} in "
                f"this run or the store {self.store.path}; run it too (add --model {model})"
            ),
        )

    def _elsewhere(
        self,
        model: str,
        benchmark: str,
        what: str,
        latest: Callable[[list[str] | None], SideT | Failed | None],
        *,
        missing: str,
    ) -> Found[SideT] | Missing | Failed:
        """The side from other runs: ``latest(runs)`` among ``--sweep-run``'s, waited for
        while the run that measures the model is going; else ``latest(None)`` of the store."""
        if self.sweep_run is None:
            side = latest(None)
            return (
                Missing(missing)
                if side is None
                else side
                if isinstance(side, Failed)
                else Found(side)
            )
        # a wait given up on is not waited for again
        deadline = self.clock() + (0.0 if (model, benchmark) in self.gave_up else self.wait_s)
        told = (self.clock(), self.clock())
        while True:
            members = self.store.sweep_run_members(self.sweep_run)
            side = latest([m.run_id for m in members])
            if side is not None:
                return side if isinstance(side, Failed) else Found(side)
            running = awaited(members, model, exclude=self.run_id)
            if running is None:
                break
            store_failure = self._store_failure()
            if store_failure is not None:  # the run waited for cannot record it either
                return Failed(
                    f"{model}'s {what} from {running} cannot be waited for: {store_failure}"
                )
            if self.clock() >= deadline:
                return self.gave_up.setdefault(
                    (model, benchmark),
                    Failed(
                        f"{model} has no {what} in sweep run {self.sweep_run} after waiting "
                        f"{self.wait_s:.0f}s for {running}, which has not finished; raise "
                        "--verdict-wait if it is just slow"
                    ),
                )
            told = self._tell(
                told,
                f"waiting for {model}'s {what} from {running}, which is "
                f"still going on another host",
            )
            self.sleep(self.poll_s)
        ran = [m for m in members if m.run_id != self.run_id and model in (m.models or ())]
        if ran:
            return Missing(
                f"{model} has no {what} in sweep run {self.sweep_run}: {ran[-1]} "
                f"measured {model} and recorded none (its {benchmark} test failed, "
                f"was skipped or was not selected there); measure it with "
                f"--sweep-run {self.sweep_run} --model {model}"
            )
        return Missing(
            f"no {what} of {model} in sweep run {self.sweep_run} ({len(members)} "
            f"run{'s' if len(members) != 1 else ''} in the store {self.store.path}); "
            f"measure it on a host with --sweep-run {self.sweep_run} --model {model}"
        )

    @staticmethod
    def _failed_test(model: str, what: str, measurement: Measurement) -> str:
        run, test = measurement.run_id, measurement.test_id or "its test"
        return (
            f"{model}'s {what} {f'in run {run}' if run else 'in this run'} comes from a "
            f"test that {measurement.outcome or 'failed'} ({test}): no comparison is drawn "
            "from it; fix that test's failure and re-run it"
        )

    def _items_of(self, run_id: str, model: str, benchmark: str) -> ModelItems:
        measured = self.store.measurement_of(run_id, model, benchmark) or {}
        return ModelItems(
            model,
            run_id,
            self.store.run_items(run_id, model, benchmark),
            self.store.endpoint(run_id, model) or {},
            Measurement.from_dict(measured).params,
            benchmark,
        )

    def _wait(
        self,
        model: str,
        benchmark: str,
        what: str,
        expected_tests: Sequence[str],
        in_this_run: Callable[[], SideT | None],
    ) -> Found[SideT] | Skipped | Failed | None:
        """This run's side (waited for while ``expected_tests`` are unfinished), a failure,
        or None when this run has neither the side nor a test that records it."""
        waits = expected_tests and (model, benchmark) not in self.gave_up
        deadline = self.clock() + (self.wait_s if waits else 0.0)
        told = (self.clock(), self.clock())
        while True:
            side = self._read(in_this_run)
            if side is not None:
                return Found(side)
            if not expected_tests:
                return None
            here = {test: self.finished_here(test) for test in expected_tests}
            failed_here = [
                (test, ended)
                for test, ended in here.items()
                if ended is not None and ended.outcome == "failed"
            ]
            store_failure = self._store_failure()
            if store_failure is not None:
                if failed_here:
                    _test, ended = failed_here[0]
                    return Failed(
                        f"{model}'s {what} was not recorded: its test failed ({ended.reason})"
                    )
                return Failed(f"{model}'s {what} cannot be looked for: {store_failure}")
            outcomes = {
                test: ended.outcome
                if ended is not None and ended.outcome != "passed"
                # passed here: its result reaches the store with its outcome
                else self.store.outcome_of(self.run_id, test)
                for test, ended in here.items()
            }
            if all(outcomes.values()):  # every test ended
                side = in_this_run()  # a side written between the two reads counts
                if side is not None:
                    return Found(side)
                if all(outcome == "skipped" for outcome in outcomes.values()):
                    return Skipped(
                        f"{model} has no {what}: its test was skipped in this run "
                        f"({', '.join(outcomes)}); nothing to compare"
                    )
                shown = ", ".join(f"{test} {outcome}" for test, outcome in outcomes.items())
                return Failed(
                    f"{model} recorded no {what} in this run ({shown}); "
                    "its own test's failure says why"
                )
            if self.clock() >= deadline:
                break
            pending = ", ".join(test for test, outcome in outcomes.items() if not outcome)
            told = self._tell(
                told,
                f"waiting for {model}'s {what}: {pending} has not "
                "finished in this process (it runs on another xdist "
                "worker, or is still queued)",
            )
            self.sleep(self.poll_s)
        return self.gave_up.setdefault(
            (model, benchmark),
            Failed(
                f"{model} has no {what} in this run after waiting {self.wait_s:.0f}s "
                "(is it still queued behind this comparison on the same xdist worker?); "
                "raise --verdict-wait if it is just slow"
            ),
        )

    def _read(self, read: Callable[[], SideT | None]) -> SideT | None:
        """``read()``, or None once the store has failed (:meth:`_store_failure` says why)."""
        if self.store.failure is not None:
            return None
        try:
            return read()
        except OutputError:
            if self.store.failure is None:
                raise  # it passes (a lock held too long): the test fails in its line
            return None

    def _store_failure(self) -> str | None:
        if self.store.failure is not None:
            return self.store.failure
        return None if self.store_failure is None else self.store_failure()

    def _tell(self, told: tuple[float, float], line: str) -> tuple[float, float]:
        """Say ``line`` with the time waited once ``progress_s`` passed since it was last
        said; ``told`` is (when the wait began, when it was last said)."""
        began, last = told
        now = self.clock()
        if now - last < self.progress_s:
            return told
        self.progress(f"{line}; waited {now - began:.0f}s of --verdict-wait {self.wait_s:.0f}s")
        return began, now
