"""Who else used the machine's CPUs during a timed window (Linux ``/proc``).

A window is ``contended`` when others (busy minus server and client) used more than
``max_other_cores`` or steal exceeded :data:`STEAL_LIMIT`, beyond the counters' resolution (a
jiffy per CPU). Without ``/proc`` every figure is None; the meter never raises.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from ..core.measurements import Contention
from ..core.options import DEFAULTS

if TYPE_CHECKING:
    from ..core.settings import BenchSettings

DEFAULT_CONTENDED_CORES = DEFAULTS.contended_cores
"""Others' CPU use (cores) above which a window is contended (``--contended-cores``)."""

STEAL_LIMIT = DEFAULTS.contended_steal
"""Share of CPU time stolen above which a window is contended (``--contended-steal``)."""

PROC = Path("/proc")


@dataclass(frozen=True)
class CpuSnapshot:
    """One reading: machine jiffies (busy, total, steal), CPU jiffies per pid, wall time."""

    wall: float
    busy: int
    total: int
    steal: int
    server: dict[int, int] | None
    client: int


def _clock_ticks() -> int:
    try:
        return int(os.sysconf("SC_CLK_TCK"))
    except (AttributeError, ValueError, OSError):
        return 100


def machine_jiffies(proc: Path = PROC) -> tuple[int, int, int]:
    """(busy, total, steal) jiffies over all CPUs from ``/proc/stat`` (guest time is inside
    user and nice; busy is total − idle − iowait − steal)."""
    with open(proc / "stat") as f:
        line = f.readline().split()
    if not line or line[0] != "cpu":
        raise OSError("no cpu line in /proc/stat")
    values = [int(v) for v in line[1:9]] + [0] * max(0, 9 - len(line))
    user, nice, system, idle, iowait, irq, softirq, steal = values[:8]
    total = user + nice + system + idle + iowait + irq + softirq + steal
    return total - idle - iowait - steal, total, steal


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        raw = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    _, _, rest = raw.rpartition(")")
    fields = rest.split()
    return fields if len(fields) >= 13 else None


def process_jiffies(pid: int, proc: Path = PROC) -> int | None:
    """utime + stime of ``pid`` (all its threads), or None when it is gone."""
    fields = _stat_fields(pid, proc)
    if fields is None:
        return None
    return int(fields[11]) + int(fields[12])  # stat fields 14 and 15


def descendants(pids: Iterable[int], proc: Path = PROC) -> set[int]:
    """``pids`` that are alive and every process below them (by parent pid in ``/proc``)."""
    roots = {pid for pid in pids if (proc / str(pid)).exists()}
    if not roots:
        return set()
    children: dict[int, list[int]] = {}
    try:
        entries = [entry.name for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return roots
    for name in entries:
        fields = _stat_fields(int(name), proc)
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    found, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def snapshot(server_pids: Iterable[int] | None, proc: Path = PROC) -> CpuSnapshot:
    """Read the machine, the server's processes (and descendants) and our own process."""
    busy, total, steal = machine_jiffies(proc)
    server = (
        None
        if server_pids is None
        else {
            pid: jiffies
            for pid in descendants(server_pids, proc)
            if (jiffies := process_jiffies(pid, proc)) is not None
        }
    )
    client = process_jiffies(os.getpid(), proc)
    if client is None:
        raise OSError("cannot read our own /proc/<pid>/stat")
    return CpuSnapshot(time.monotonic(), busy, total, steal, server, client)


def _load1() -> float | None:
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def unknown(window_s: float | None = None) -> Contention:
    """The record of a window whose CPU accounting could not be read."""
    return Contention(window_s=window_s, load1_end=_load1())


def contention(
    start: CpuSnapshot,
    end: CpuSnapshot,
    *,
    max_other_cores: float = DEFAULT_CONTENDED_CORES,
    steal_limit: float = STEAL_LIMIT,
    hz: int | None = None,
    load1: float | None = None,
) -> Contention:
    """The window's record (see the module) from its two snapshots."""
    ticks = hz or _clock_ticks()
    window = end.wall - start.wall
    if window <= 0:
        return unknown(window)
    client = max(0, end.client - start.client)
    server = (
        None
        if end.server is None
        else sum(max(0, j - (start.server or {}).get(pid, 0)) for pid, j in end.server.items())
    )
    total = end.total - start.total
    other_cores = max(0, end.busy - start.busy - client - (server or 0)) / ticks / window
    stolen = end.steal - start.steal
    # each CPU's counter moves in whole jiffies, so a difference of two readings may be up to
    # one jiffy per CPU more than was stolen: a short window's few jiffies prove no steal
    cpus = max(1, round(total / ticks / window))
    stolen_for_certain = max(0, stolen - cpus) / total if total > 0 else 0.0
    return Contention(
        window_s=window,
        other_cpu_cores=other_cores,
        server_cpu_cores=None if server is None else server / ticks / window,
        client_cpu_cores=client / ticks / window,
        steal_share=stolen / total if total > 0 else 0.0,
        load1_end=load1,
        contended=other_cores > max_other_cores or stolen_for_certain > steal_limit,
    )


class ContentionMeter:
    """Context manager around one timed window; :attr:`result` is the window's record.
    ``server_pids`` None or empty: the server is not ours, its CPU use counts as others'."""

    def __init__(
        self,
        server_pids: Iterable[int] | None = None,
        *,
        max_other_cores: float = DEFAULT_CONTENDED_CORES,
        steal_limit: float = STEAL_LIMIT,
        proc: Path = PROC,
    ) -> None:
        self.server_pids: list[int] | None = list(server_pids or ()) or None
        self.max_other_cores = max_other_cores
        self.steal_limit = steal_limit
        self.proc = proc
        self._start: CpuSnapshot | None = None
        self._wall = 0.0
        self.result: Contention = unknown()

    @classmethod
    def of(cls, server_pids: Iterable[int] | None, settings: BenchSettings) -> Self:
        """A meter with the run's limits (``--contended-cores``, ``--contended-steal``)."""
        return cls(
            server_pids,
            max_other_cores=settings.contended_cores,
            steal_limit=settings.contended_steal,
        )

    def __enter__(self) -> Self:
        self._wall = time.monotonic()
        try:
            self._start = snapshot(self.server_pids, self.proc)
        except (OSError, ValueError, IndexError):
            self._start = None
        return self

    def __exit__(self, *exc: object) -> None:
        self.result = self.read()

    @property
    def started(self) -> bool:
        """Whether the window has begun (the meter was entered)."""
        return self._wall > 0

    def read(self) -> Contention:
        """The record from the window's start until now."""
        start = self._start
        if start is None:
            return unknown(time.monotonic() - self._wall)
        try:
            pids = (
                None
                if self.server_pids is None
                else set(self.server_pids) | set(start.server or {})
            )
            end = snapshot(pids, self.proc)
        except (OSError, ValueError, IndexError):
            return unknown(time.monotonic() - self._wall)
        return contention(
            start,
            end,
            max_other_cores=self.max_other_cores,
            steal_limit=self.steal_limit,
            load1=_load1(),
        )


# --------------------------------------------------------------------------- repeat noise


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    """Sample standard deviation ÷ mean; None with fewer than two values or a mean ≤ 0."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return statistics.stdev(values, mean) / mean if mean > 0 else None
