"""Run-level provenance: the project commit, the machine, the software, the sweep."""

from __future__ import annotations

import contextlib
import hashlib
import os
import platform
import socket
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import __version__
from .secrets import redact


def _git(rootdir: Path, *args: str) -> str | None:
    try:
        result = subprocess.run(
            ["git", *args], cwd=rootdir, capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _proc_value(path: str, key: str) -> str | None:
    """The value after ``key:`` in a ``/proc`` file (None where there is none)."""
    with contextlib.suppress(OSError):
        for line in Path(path).read_text().splitlines():
            name, colon, value = line.partition(":")
            if colon and name.strip() == key:
                return value.strip()
    return None


def _memory_gib() -> float | None:
    total = (_proc_value("/proc/meminfo", "MemTotal") or "").split()[:1]
    return round(int(total[0]) / 1024 / 1024, 1) if total and total[0].isdigit() else None


def run_provenance(rootdir: Path, sweep_path: str, args: list[str]) -> dict[str, Any]:
    """Everything about this run that is not about one endpoint."""
    from importlib.metadata import version

    commit = _git(rootdir, "rev-parse", "HEAD")
    dirty = _git(rootdir, "status", "--porcelain", "--untracked-files=no")
    try:
        sweep_sha = hashlib.sha256(Path(sweep_path).read_bytes()).hexdigest()
    except OSError:
        sweep_sha = None
    return {
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "project": {
            "rootdir": str(rootdir),
            "commit": commit,
            "dirty": bool(dirty) if dirty is not None else None,
        },
        "machine": {
            "hostname": socket.gethostname(),
            "platform": platform.platform(),
            "cpu": _proc_value("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
            "cpu_count": os.cpu_count(),
            "memory_gib": _memory_gib(),
        },
        "software": {
            "pytest_modelsweep": __version__,
            "pytest": version("pytest"),
            "python": sys.version.split()[0],
        },
        "sweep": {"path": sweep_path, "sha256": sweep_sha},
        "args": [redact(arg) for arg in args],
    }
