"""A pytest run of a pytester project, in this process unless a timing test needs its own."""

from __future__ import annotations

import pytest


def run_pytest(
    pytester: pytest.Pytester, *args: str, own_process: bool = False
) -> pytest.RunResult:
    """In process (pytester's ``runpytest``); with ``own_process``, in a process of its own,
    for a timing test whose figures must not share this process's interpreter lock with the
    fake servers that it measures (they run in this process)."""
    if own_process:
        return pytester.runpytest_subprocess(*args, timeout=300)
    return pytester.runpytest(*args)
