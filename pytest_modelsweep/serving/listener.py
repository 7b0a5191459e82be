"""The process that serves an endpoint on this host, found from Linux ``/proc``: the
listening socket of its port (``/proc/net/tcp``, ``tcp6``) → the socket's inode → the process
holding it (``/proc/PID/fd``). Nothing found (another host, no ``/proc``, another user's
process): []."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..core.secrets import redact

PROC = Path("/proc")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
SECRET_FLAG = re.compile(r"^--?[\w-]*(?:key|token|pass|secret|auth|credential)[\w-]*$", re.I)
"""A flag whose value (the next argument) is a secret: ``--api-key VALUE``."""
LOCAL_NAMES = {"localhost", "127.0.0.1", "::1", "0.0.0.0", "::"}


@functools.lru_cache(maxsize=64)
def _is_this_host(host: str) -> bool:
    """Whether ``host`` names this machine: loopback, or an address of its own."""
    if host in LOCAL_NAMES or host.startswith("127."):
        return True
    with (
        contextlib.suppress(OSError, UnicodeError),
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe,
    ):
        for address in {info[4][0] for info in socket.getaddrinfo(host, None)}:
            with contextlib.suppress(OSError):
                probe.bind((address, 0))  # only an address of this machine binds
                return True
    return False


def listening_inodes(port: int, proc: Path = PROC) -> set[str]:
    """The inodes of the sockets listening on TCP ``port`` (any address, IPv4 or IPv6)."""
    inodes: set[str] = set()
    for table in ("tcp", "tcp6"):
        try:
            lines = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if (
                len(fields) > 9
                and fields[3] == LISTEN
                and int(fields[1].rsplit(":", 1)[1], 16) == port
            ):
                inodes.add(fields[9])
    return inodes


def pids_holding(inodes: set[str], proc: Path = PROC) -> list[int]:
    """The processes (other than this one) with an open descriptor on one of ``inodes``."""
    wanted = {f"socket:[{inode}]" for inode in inodes}
    try:
        entries = list(proc.iterdir()) if wanted else []
    except OSError:
        entries = []
    return sorted(
        int(entry.name)
        for entry in entries
        if entry.name.isdigit() and int(entry.name) != os.getpid() and _holds(entry, wanted)
    )


def _holds(process: Path, wanted: set[str]) -> bool:
    """Whether the process folder ``process`` has a descriptor on one of ``wanted``."""
    try:
        return any(os.readlink(fd) in wanted for fd in (process / "fd").iterdir())
    except OSError:  # gone, or not ours to read
        return False


def listening_pids(base_url: str, proc: Path = PROC) -> list[int]:
    """The pids of the processes on this host listening on ``base_url``'s port; [] when the
    endpoint is elsewhere or none is found."""
    parts = urlsplit(base_url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        return []
    return (
        []
        if not parts.hostname or not _is_this_host(parts.hostname)
        else pids_holding(listening_inodes(port, proc), proc)
    )


def process_record(pid: int, proc: Path = PROC) -> dict[str, Any] | None:
    """``{"pid", "command"}`` of a process, its command line redacted; None when unreadable."""
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return None
    parts = [part.decode(errors="replace") for part in raw.split(b"\0") if part]
    return {
        "pid": pid,
        "command": redact(
            " ".join(
                "***" if index and SECRET_FLAG.search(parts[index - 1]) else part
                for index, part in enumerate(parts)
            )
        ),
    }


def serving_process(base_url: str, proc: Path = PROC) -> dict[str, Any] | None:
    """The record of the process serving ``base_url`` on this host, or None."""
    pids = listening_pids(base_url, proc)
    return process_record(pids[0], proc) if pids else None
