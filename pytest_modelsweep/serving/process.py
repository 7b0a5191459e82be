"""A server process owned by exactly one object, which also stops it."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shlex
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from ..client.tls import DeadlineClient
from ..core.errors import ServerStartError

HOST = "127.0.0.1"
"""Where a launched server listens."""
LOG_TAIL_LINES = 40
POLL_S = 0.25
FAST_POLL_S = 0.05
FAST_POLL_FOR_S = 10.0

_SERVING: dict[str, ServerProcess] = {}
"""Ready servers of this process by the host:port of their ready URL (:func:`server_pids_at`)."""


def _address(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


def server_pids_at(base_url: str) -> list[int]:
    """The pid of the live server this process started at ``base_url``'s host:port (not its
    children), or []."""
    process = _SERVING.get(_address(base_url))
    return [] if process is None or process.pid is None or not process.alive() else [process.pid]


def free_port(host: str = HOST) -> int:
    """A TCP port that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _set_parent_death_signal(sig: int) -> None:  # pragma: no cover - runs in the child
    """Ask Linux to send ``sig`` to this process if its parent (pytest) dies, even by SIGKILL:
    the pre-exec hook of a server."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, sig)  # 1: PR_SET_PDEATHSIG


class ServerProcess:
    """Starts one server command, waits until it is ready, keeps its log, stops it; if pytest
    dies, Linux sends it ``death_signal``. ``launched_at`` and ``ready_at`` (perf clock) time
    the start, ``ready_within_s`` is the gap since the poll before."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        ready_url: str,
        log_path: Path,
        timeout_s: float,
        env: dict[str, str] | None = None,
        name: str = "server",
        death_signal: int = signal.SIGTERM,
    ) -> None:
        self.argv = tuple(argv)
        self.ready_url = ready_url
        self.log_path = log_path
        self.timeout_s = timeout_s
        self.env = env
        self.name = name
        self.death_signal = death_signal
        self._proc: subprocess.Popen[bytes] | None = None
        self.launched_at: float | None = None
        self.ready_at: float | None = None
        self.ready_within_s: float | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def command_line(self) -> str:
        """The command as one shell-quoted line (newlines shown as ``\\n``)."""
        return shlex.join(self.argv).replace("\n", "\\n")

    def log_text(self) -> str:
        """The whole log; '' where it cannot be read."""
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def _failure(self, what: str) -> ServerStartError:
        tail = self.log_text().splitlines()[-LOG_TAIL_LINES:]
        shown = "\n".join(f"    {line}" for line in tail) or "    (the log is empty)"
        return ServerStartError(
            f"{self.name} {what}; command: {self.command_line}; log: "
            f"{self.log_path}\n  last {len(tail)} log lines:\n{shown}"
        )

    def start(self) -> None:
        """Start the process and block until ``ready_url`` answers 200."""
        if self._proc is not None:
            raise RuntimeError(f"{self.name} was already started")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            launched = self.launched_at = time.perf_counter()
            try:
                self._proc = subprocess.Popen(
                    self.argv,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **(self.env or {})},
                    start_new_session=True,
                    preexec_fn=functools.partial(_set_parent_death_signal, self.death_signal),
                )
            except OSError as exc:
                raise ServerStartError(
                    f"{self.name} could not be started: "
                    f"{exc.strerror or exc}; command: {self.command_line}"
                ) from None
        deadline = time.monotonic() + self.timeout_s
        previous = launched
        with DeadlineClient(min(5.0, self.timeout_s)) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    raise self._failure(f"exited with code {code} before it was ready")
                polled = time.perf_counter()
                with contextlib.suppress(httpx.HTTPError):
                    if client.request("GET", self.ready_url).status_code == 200:
                        self.ready_at = time.perf_counter()
                        self.ready_within_s = self.ready_at - previous
                        _SERVING[_address(self.ready_url)] = self
                        return
                previous = polled
                if time.monotonic() > deadline:
                    self.stop()
                    raise self._failure(
                        f"was not ready at {self.ready_url} within {self.timeout_s:.0f}s "
                        "(raise serving.startup_timeout_s in the sweep if it is just slow)"
                    )
                fast = time.perf_counter() - launched < FAST_POLL_FOR_S
                time.sleep(FAST_POLL_S if fast else POLL_S)

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_code(self) -> int | None:
        return None if self._proc is None else self._proc.poll()

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the process group, then SIGKILL after ``grace_s``."""
        proc = self._proc
        if _SERVING.get(_address(self.ready_url)) is self:
            del _SERVING[_address(self.ready_url)]
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=grace_s)


def start_local_server(
    argv: Sequence[str],
    port: int,
    log_path: Path,
    timeout_s: float,
    progress: Callable[[str], None],
    starting: str,
    **options: Any,
) -> tuple[ServerProcess, str]:
    """Start a server that listens on ``HOST:port``, say ``starting``, and wait until its
    ``/health`` answers: the process (the caller owns and stops it) and its base URL."""
    base_url = f"http://{HOST}:{port}"
    process = ServerProcess(
        argv, ready_url=f"{base_url}/health", log_path=log_path, timeout_s=timeout_s, **options
    )
    progress(starting)
    process.start()
    return process, base_url
