"""The room that keeps timing tests away from the others under xdist (tests/room.py), with
real processes: one kind at a time, first come first served, a dead holder blocks nobody."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

from room import ALONE, Room

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
    process = CONTEXT.Process(target=visit, args=(str(path), kind, stay_s, str(log), first))
    process.start()
    return process


def test_kinds_never_overlap_and_a_waiting_kind_is_not_starved(tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    timing = start(room, "timing", 0.6, log)
    time.sleep(0.2)
    others = start(room, "others", 0.3, log)  # waits for the timing test ...
    time.sleep(0.2)
    second_timing = start(room, "timing", 0.3, log)  # ... and keeps this later one out
    for process in (timing, others, second_timing):
        process.join(10)
        assert process.exitcode == 0
    visits = spans(log)
    first_out = visits[timing.pid][2]
    other_in, other_out = visits[others.pid][1:]
    later_in = visits[second_timing.pid][1]
    assert other_in >= first_out  # never beside a test of another kind
    assert later_in >= other_out  # came after the waiting kind: goes after it


def test_one_kind_shares_and_alone_waits_for_everyone(tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    first = start(room, "others", 0.5, log)
    time.sleep(0.1)
    second = start(room, "others", 0.5, log)
    time.sleep(0.1)
    alone = start(room, ALONE, 0.1, log)
    for process in (first, second, alone):
        process.join(10)
        assert process.exitcode == 0
    visits = spans(log)
    assert visits[second.pid][1] < visits[first.pid][2]  # side by side
    assert visits[alone.pid][1] >= max(visits[first.pid][2], visits[second.pid][2])


def test_a_holder_that_died_blocks_nobody(tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    crashed = CONTEXT.Process(target=Room(room).enter, args=(ALONE,))  # enters, never leaves
    crashed.start()
    crashed.join(10)
    started = time.monotonic()
    visitor = start(room, "others", 0.0, log)
    visitor.join(10)
    assert visitor.exitcode == 0 and time.monotonic() - started < 5


FIRST = ("timing",)


def test_a_kind_that_goes_first_passes_the_waiting_others_but_not_a_lone_test(
        tmp_path: Path) -> None:
    room, log = tmp_path / "room", tmp_path / "log"
    first = start(room, "timing", 0.6, log, FIRST)
    time.sleep(0.2)
    others = start(room, "others", 0.1, log, FIRST)  # waits for the timing test ...
    time.sleep(0.2)
    second = start(room, "timing", 0.6, log, FIRST)  # ... which lets a later one in beside it
    for process in (first, others, second):
        process.join(10)
        assert process.exitcode == 0
    visits = spans(log)
    assert visits[second.pid][1] < visits[first.pid][2]
    assert visits[others.pid][1] >= visits[second.pid][2]

    lone_log = tmp_path / "lone-log"
    timing = start(room, "timing", 0.5, lone_log, FIRST)
    time.sleep(0.1)
    alone = start(room, ALONE, 0.1, lone_log, FIRST)  # waits for the timing test ...
    time.sleep(0.1)
    later = start(room, "timing", 0.1, lone_log, FIRST)  # ... and a later one waits behind it
    for process in (timing, alone, later):
        process.join(10)
        assert process.exitcode == 0
    visits = spans(lone_log)
    assert visits[alone.pid][1] >= visits[timing.pid][2]
    assert visits[later.pid][1] >= visits[alone.pid][2]
