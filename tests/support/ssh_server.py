"""A loopback OpenSSH server for the tests: "hosts" that pytest-xdist reaches with ``--tx ssh=…``.

Debian's ``openssh-server`` (``.ci/run`` installs it) gives ``sshd``. The server runs in
the foreground on a free 127.0.0.1 port with a host key, an authorized key and a
configuration made for the test in a temporary folder; it takes public keys only and
accepts ``PYTHONPATH`` and ``PGPASSWORD`` from the client, so a remote worker imports the
same checkout and reaches the store as the controller does.
The client side is an ``ssh_config`` file naming each "host" as an alias of that port,
with the test's key and ``StrictHostKeyChecking no`` against a throwaway known-hosts
file, which execnet passes to ``ssh -F``. sshd checks its privilege separation folder
(``/run/sshd``) when it runs as root, as here: it is made when missing, as the Debian
service does on start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

INSTALL_HINT = "OpenSSH's server (sshd) was not found: apt-get install -y openssh-server"
PRIVSEP_DIR = Path("/run/sshd")


def sshd_path() -> str | None:
    return shutil.which("sshd") or next(
        (p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.access(p, os.X_OK)), None
    )


def missing_reason() -> str | None:
    """Why no test sshd can be started here (None: it can)."""
    if sshd_path() is None:
        return INSTALL_HINT
    if shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "OpenSSH's client (ssh, ssh-keygen) was not found: apt-get install -y openssh-client"
    if os.geteuid() != 0:
        return (
            "the test sshd runs as root (the remote workers log in as root on 127.0.0.1); "
            "run the tests as root, as .ci/run does"
        )
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class SshServer:
    """One sshd; :meth:`start`, :meth:`tx` for each worker, :meth:`stop`."""

    def __init__(self, hosts: tuple[str, ...] = ("host-a", "host-b")) -> None:
        sshd = sshd_path()
        if sshd is None:
            raise RuntimeError(INSTALL_HINT)
        self.sshd = sshd
        self.hosts = hosts
        self.root = Path(tempfile.mkdtemp(prefix="modelsweep-ssh-"))
        self.client_config = self.root / "ssh_config"
        self.log = self.root / "sshd.log"
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None

    def _keys(self) -> None:
        for name in ("host_key", "client_key"):
            subprocess.run(
                [
                    "ssh-keygen",
                    "-q",
                    "-t",
                    "ed25519",
                    "-N",
                    "",
                    "-C",
                    f"modelsweep-{name}",
                    "-f",
                    str(self.root / name),
                ],
                check=True,
                capture_output=True,
                timeout=60,
            )
        shutil.copy(self.root / "client_key.pub", self.root / "authorized_keys")

    def _configs(self) -> Path:
        server = self.root / "sshd_config"
        server.write_text(
            "\n".join(
                [
                    f"ListenAddress 127.0.0.1:{self.port}",
                    f"HostKey {self.root / 'host_key'}",
                    f"AuthorizedKeysFile {self.root / 'authorized_keys'}",
                    f"PidFile {self.root / 'sshd.pid'}",
                    "PermitRootLogin prohibit-password",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "StrictModes no",
                    "UsePAM no",
                    "PrintMotd no",
                    "AcceptEnv PYTHONPATH PGPASSWORD",
                ]
            )
            + "\n"
        )
        self.client_config.write_text(
            "\n".join(
                [
                    f"Host {' '.join(self.hosts)}",
                    "  HostName 127.0.0.1",
                    f"  Port {self.port}",
                    "  User root",
                    f"  IdentityFile {self.root / 'client_key'}",
                    "  IdentitiesOnly yes",
                    "  StrictHostKeyChecking no",
                    f"  UserKnownHostsFile {self.root / 'known_hosts'}",
                    "  BatchMode yes",
                    "  LogLevel ERROR",
                    "  SendEnv PYTHONPATH PGPASSWORD",
                ]
            )
            + "\n"
        )
        return server

    def start(self) -> SshServer:
        self._keys()
        if not PRIVSEP_DIR.is_dir():
            PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        for attempt in range(5):  # a free port can be taken by someone else meanwhile
            self.port = _free_port()
            config = self._configs()
            with open(self.log, "ab") as log:
                self._process = subprocess.Popen(
                    [self.sshd, "-D", "-e", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT
                )
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self._process.poll() is None:
                with (
                    contextlib.suppress(OSError),
                    socket.create_connection(("127.0.0.1", self.port), timeout=1),
                ):
                    return self
                time.sleep(0.05)
            self.stop_process()
            if attempt == 4:
                raise RuntimeError(f"the test sshd did not start: {self.log_text()[-2000:]}")
        return self

    def log_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace")
        return ""

    def logins(self) -> int:
        """How many sessions the server accepted so far."""
        return self.log_text().count("Accepted publickey for root")

    def tx(self, host: str, *, python: str, chdir: Path, env: dict[str, str] | None = None) -> str:
        """pytest-xdist's ``--tx`` for one worker on ``host`` (execnet's spec: ``ssh_config``
        for ``ssh -F``, the remote ``python``, its working folder, its environment)."""
        parts = [
            f"ssh_config={self.client_config}",
            f"ssh={host}",
            f"python={python}",
            f"chdir={chdir}",
        ]
        parts += [f"env:{name}={value}" for name, value in (env or {}).items()]
        return "//".join(parts)

    def stop_process(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None

    def stop(self) -> None:
        self.stop_process()
        shutil.rmtree(self.root, ignore_errors=True)
