"""The room that keeps timing tests away from the others under xdist (tests/room.py), with
real processes: one kind at a time, first come first served, a dead holder blocks nobody.
Each visitor starts once the one before it is inside or waiting, so that the order holds on
a loaded machine."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

from room import ALONE, CONFINED, Room, compatible

CONTEXT = multiprocessing.get_context("fork")


def visit(path: str, kind: str, stay_s: float, log: str, first: tuple[str, ...] = ()) -> None:
    """Enter the room (its ``first`` kinds) as ``kind``, note when, stay ``stay_s``, note when
    leaving."""
    room = Room(Path(path), first=first)
    with room.held(kind):
        with open(log, "a") as out:
            out.write(f"in {kind} {os.getpid()} {time.monotonic()}\n")
        time.sleep(stay_s)
        with open(log, "a") as out:
            out.write(f"out {kind} {os.getpid()} {time.monotonic()}\n")


def spans(log: Path) -> dict[int, tuple[str, float, float]]:
    """Each visitor's kind and time in the room."""
    seen: dict[int, list[float]] = {}
    kinds: dict[int, str] = {}
    for line in log.read_text().splitlines():
        _, kind, pid, at = line.split()
        kinds[int(pid)] = kind
        seen.setdefault(int(pid), []).append(float(at))
    return {pid: (kinds[pid], times[0], times[1]) for pid, times in seen.items()}


def start(path: Path, kind: str, stay_s: float, log: Path,
          first: tuple[str, ...] = ()) -> multiprocessing.process.BaseProcess:
    """A visitor, returned once the room shows it inside or waiting."""
    process = CONTEXT.Process(target=visit, args=(str(path), kind, stay_s, str(log), first))
    process.start()
    deadline = time.monotonic() + 10
    while not any(entry[0] == process.pid for entry in entries(path)):
        assert process.exitcode is None and time.monotonic() < deadline, "never reached the room"
        time.sleep(0.005)
    return process


def entries(path: Path) -> list[list[object]]:
    """Who is in the room and who waits for it."""
    try:
        state = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        return []
    return [*state.get("inside", []), *state.get("queue", [])]


def joined(*processes: multiprocessing.process.BaseProcess) -> None:
    for process in processes:
        process.join(20)
        assert process.exitcode == 0


def test_kinds_never_overlap_and_a_waiting_kind_is_not_starved(tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    timing = start(room, "timing", 0.6, log)
    others = start(room, "others", 0.3, log)  # waits for the timing test ...
    second_timing = start(room, "timing", 0.3, log)  # ... and keeps this later one out
    joined(timing, others, second_timing)
    visits = spans(log)
    first_out = visits[timing.pid][2]
    other_in, other_out = visits[others.pid][1:]
    later_in = visits[second_timing.pid][1]
    assert other_in >= first_out  # never beside a test of another kind
    assert later_in >= other_out  # came after the waiting kind: goes after it


def test_one_kind_shares_and_alone_waits_for_everyone(tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    first = start(room, "others", 2.0, log)
    second = start(room, "others", 0.5, log)
    alone = start(room, ALONE, 0.1, log)
    joined(first, second, alone)
    visits = spans(log)
    assert visits[second.pid][1] < visits[first.pid][2]  # side by side
    assert visits[alone.pid][1] >= max(visits[first.pid][2], visits[second.pid][2])


def test_a_holder_that_died_blocks_nobody(tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    crashed = CONTEXT.Process(target=Room(room).enter, args=(ALONE,))  # enters, never leaves
    crashed.start()
    crashed.join(10)
    started = time.monotonic()
    visitor = CONTEXT.Process(target=visit, args=(str(room), "others", 0.0, str(log)))
    visitor.start()
    joined(visitor)
    assert time.monotonic() - started < 5


FIRST = ("timing",)


def test_a_kind_that_goes_first_passes_the_waiting_others_but_not_a_lone_test(
        tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    first = start(room, "timing", 2.0, log, FIRST)
    others = start(room, "others", 0.1, log, FIRST)  # waits for the timing test ...
    second = start(room, "timing", 0.6, log, FIRST)  # ... which lets a later one in beside it
    joined(first, others, second)
    visits = spans(log)
    assert visits[second.pid][1] < visits[first.pid][2]
    assert visits[others.pid][1] >= visits[second.pid][2]

    lone_log = tmp_path / "lone-log"
    timing = start(room, "timing", 0.5, lone_log, FIRST)
    alone = start(room, ALONE, 0.1, lone_log, FIRST)  # waits for the timing test ...
    later = start(room, "timing", 0.1, lone_log, FIRST)  # ... and a later one waits behind it
    joined(timing, alone, later)
    visits = spans(lone_log)
    assert visits[alone.pid][1] >= visits[timing.pid][2]
    assert visits[later.pid][1] >= visits[alone.pid][2]


def test_a_confined_test_runs_beside_any_kind_but_a_lone_one(tmp_path: Path) -> None:
    assert [compatible(CONFINED, kind) for kind in ("timing", "others", CONFINED, ALONE)] == [
        True, True, True, False]
    assert not compatible("timing", "others") and not compatible(ALONE, ALONE)
    room, log = tmp_path / "room", tmp_path / "log"
    timing = start(room, "timing", 2.0, log, FIRST)
    confined = start(room, CONFINED, 0.1, log, FIRST)  # beside the timing test
    joined(confined)
    alone = start(room, ALONE, 0.5, log, FIRST)  # waits for the timing test ...
    later = start(room, CONFINED, 0.1, log, FIRST)  # ... and a later confined one behind it
    joined(timing, alone, later)
    visits = spans(log)
    assert visits[confined.pid][2] < visits[timing.pid][2]
    assert visits[alone.pid][1] >= visits[timing.pid][2]
    assert visits[later.pid][1] >= visits[alone.pid][2]


def test_a_lone_test_that_goes_first_passes_a_confined_one_that_waited_longer(
        tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    run_first = ("timing", ALONE)  # as in the test run's room (tests/conftest.py)
    holder = start(room, ALONE, 1.0, log, run_first)
    confined = start(room, CONFINED, 0.1, log, run_first)  # waits for the lone test ...
    alone = start(room, ALONE, 0.5, log, run_first)  # ... and for this later one too
    joined(holder, confined, alone)
    visits = spans(log)
    assert visits[alone.pid][1] >= visits[holder.pid][2]
    assert visits[confined.pid][1] >= visits[alone.pid][2]
