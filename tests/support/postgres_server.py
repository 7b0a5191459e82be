"""A private PostgreSQL server for the tests: its own cluster in a temporary folder.

Debian's ``postgresql`` package (``.ci/run`` installs it) gives ``initdb``,
``pg_ctl`` and ``postgres``. PostgreSQL refuses to run as root, so under root the
cluster belongs to the package's ``postgres`` user and every server command runs
through ``runuser``. The server listens on 127.0.0.1 at a free port (and on a unix
socket in its folder) and asks for a password (SCRAM) on TCP; its one role,
:data:`ADMIN`, is a superuser that makes one fresh database per test.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

ADMIN = "modelsweep_admin"
ADMIN_PASSWORD = "pg-admin-5172-sekrit"
INSTALL_HINT = (
    "PostgreSQL's server programs (initdb, pg_ctl) were not found: apt-get install -y postgresql"
)
RUN_AS = "postgres"
"""Under root the cluster runs as this user (made by Debian's postgresql package)."""


def server_bin_dir() -> Path | None:
    """The folder of ``initdb`` and ``pg_ctl``: on PATH, else Debian's versioned folder."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).resolve().parent
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0,
    )
    return Path(found[-1]).parent if found else None


def missing_reason() -> str | None:
    """Why no server can be started here (None: it can)."""
    if server_bin_dir() is None:
        return INSTALL_HINT
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            return (
                f"running as root, the test server needs the user {RUN_AS!r} (made by "
                "Debian's postgresql package): apt-get install -y postgresql"
            )
        if shutil.which("runuser") is None:
            return "running as root, the test server needs runuser (util-linux)"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One cluster: :meth:`start`, :meth:`create_database` per test, :meth:`stop`."""

    def __init__(self) -> None:
        bin_dir = server_bin_dir()
        if bin_dir is None:
            raise RuntimeError(INSTALL_HINT)
        self.bin_dir = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="modelsweep-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self._databases = 0
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            user = pwd.getpwnam(RUN_AS)
            os.chown(self.root, user.pw_uid, user.pw_gid)
            self._as_user = ["runuser", "-u", RUN_AS, "--"]

    def _run(self, *command: str) -> None:
        result = subprocess.run(
            [*self._as_user, *command],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=self.root,
        )
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed: {result.stdout}{result.stderr}")

    def start(self) -> PostgresServer:
        pwfile = self.root / "pwfile"
        pwfile.write_text(ADMIN_PASSWORD + "\n")
        if self._as_user:
            user = pwd.getpwnam(RUN_AS)
            os.chown(pwfile, user.pw_uid, user.pw_gid)
        pwfile.chmod(0o600)
        self._run(
            str(self.bin_dir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            ADMIN,
            f"--pwfile={pwfile}",
            "--auth-host=scram-sha-256",
            "--auth-local=trust",
            "--encoding=UTF8",
            "--no-sync",
            "--locale=C",
        )
        pwfile.unlink()
        for attempt in range(5):  # a free port can be taken by someone else meanwhile
            self.port = free_port()
            options = (
                f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                "-c fsync=off -c max_connections=100 -c shared_buffers=16MB"
            )
            try:
                self._run(
                    str(self.bin_dir / "pg_ctl"),
                    "-D",
                    str(self.data),
                    "-o",
                    options,
                    "-l",
                    str(self.root / "server.log"),
                    "-w",
                    "-t",
                    "60",
                    "start",
                )
                return self
            except RuntimeError:
                if attempt == 4:
                    raise RuntimeError(
                        f"the test PostgreSQL server did not start: {self.log_tail()}"
                    ) from None
                time.sleep(0.2)
        return self

    def log_tail(self) -> str:
        with contextlib.suppress(OSError):
            return (self.root / "server.log").read_text()[-2000:]
        return ""

    def url(
        self,
        database: str = "postgres",
        *,
        user: str = ADMIN,
        password: str | None = ADMIN_PASSWORD,
    ) -> str:
        auth = f"{user}:{password}" if password is not None else user
        return f"postgresql://{auth}@127.0.0.1:{self.port}/{database}"

    def admin_sql(self, sql: str, database: str = "postgres") -> None:
        """Run ``sql`` as the superuser (autocommit, so CREATE DATABASE works)."""
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)  # type: ignore[arg-type]

    def create_database(self, prefix: str = "store") -> str:
        """A new empty database; its name."""
        self._databases += 1
        name = f"{prefix}_{os.getpid()}_{self._databases}"
        self.admin_sql(f'CREATE DATABASE "{name}"')
        return name

    def stop(self) -> None:
        with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
            self._run(
                str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
            )
        shutil.rmtree(self.root, ignore_errors=True)
