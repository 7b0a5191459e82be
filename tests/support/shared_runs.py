"""Expensive runs made once per test session and read by every module that needs them.

A module-scoped fixture is made once per module; the decision page's runs are read by two
modules (``test_decision_page``, ``test_report_tables``), which xdist may give to two
workers. :func:`once_per_session` makes a run once under the session's base folder (the
controller's, shared by its workers), behind a file lock, and hands every later caller the
pickled value.
"""

from __future__ import annotations

import fcntl
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")


def session_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every process of this test session sees (an xdist worker's base folder is
    ``popen-gwN`` inside the controller's)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if base.name.startswith("popen-gw") else base
    folder = root / "shared-runs"
    folder.mkdir(exist_ok=True)
    return folder


def once_per_session(
    tmp_path_factory: pytest.TempPathFactory, name: str, make: Callable[[Path], T]
) -> T:
    """``make(folder)`` the first time ``name`` is asked for in this session, its value
    read back after; a ``make`` that raises leaves the next caller to try again."""
    folder = session_folder(tmp_path_factory)
    made = folder / f"{name}.pickle"
    with (folder / f"{name}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if made.is_file():
                value: T = pickle.loads(made.read_bytes())
                return value
            where = folder / name
            shutil.rmtree(where, ignore_errors=True)  # a failed attempt's files are not this run's
            where.mkdir()
            value = make(where)
            made.write_bytes(pickle.dumps(value))
            return value
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
