"""A server that dies at start or never gets ready fails with its command line and log tail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pytest_modelsweep.core.errors import ServerStartError
from pytest_modelsweep.serving.process import ServerProcess, free_port


def test_server_that_exits_at_start(tmp_path: Path) -> None:
    script = (
        "import sys\nfor i in range(60): print(f'line {i}')\nprint('fatal: no model'); sys.exit(3)"
    )
    process = ServerProcess(
        [sys.executable, "-c", script],
        ready_url=f"http://127.0.0.1:{free_port()}/health",
        log_path=tmp_path / "server.log",
        timeout_s=30,
        name="test server",
    )
    with pytest.raises(ServerStartError) as info:
        process.start()
    message = str(info.value)
    first_line = message.splitlines()[0]
    assert "test server exited with code 3 before it was ready" in first_line
    assert sys.executable in first_line and str(tmp_path / "server.log") in first_line
    assert "last 40 log lines" in message
    assert "fatal: no model" in message
    assert "line 21" in message and "line 20\n" not in message  # exactly the last 40


def test_server_that_never_gets_ready(tmp_path: Path) -> None:
    process = ServerProcess(
        [sys.executable, "-c", "import time; print('loading', flush=True); time.sleep(60)"],
        ready_url=f"http://127.0.0.1:{free_port()}/health",
        log_path=tmp_path / "server.log",
        timeout_s=1.5,
        name="slow server",
    )
    with pytest.raises(ServerStartError) as info:
        process.start()
    assert "was not ready" in str(info.value) and "within 2s" in str(info.value)
    assert "loading" in str(info.value)
    assert not process.alive()  # the timed-out process was stopped


def test_missing_binary(tmp_path: Path) -> None:
    process = ServerProcess(
        [str(tmp_path / "no-such-server")],
        ready_url="http://127.0.0.1:1/health",
        log_path=tmp_path / "server.log",
        timeout_s=5,
        name="ghost",
    )
    with pytest.raises(ServerStartError, match="ghost could not be started: No such file"):
        process.start()


def test_ready_server_is_stopped(tmp_path: Path) -> None:
    port = free_port()
    process = ServerProcess(
        [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
        ready_url=f"http://127.0.0.1:{port}/",
        log_path=tmp_path / "server.log",
        timeout_s=30,
    )
    process.start()
    assert process.alive()
    process.stop()
    assert not process.alive()
