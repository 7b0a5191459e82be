"""A stand-in for llama-server that starts slowly: the cold-start bench's fake launcher.

Run as llama-server is (``MODELSWEEP_LLAMA_SERVER`` names a script that execs this file),
it reads ``--port`` and ``--alias`` from llama-server's command line, sleeps
``$FAKE_START_DELAY_S`` seconds (its start), then serves the loopback fake server
(``sse_server.ListingServer``: ``/health``, ``/v1/models`` listing the alias, streamed
completions, ``/metrics``; with ``$FAKE_BUILD_INFO``, ``/props`` naming that build as
llama-server's does) on that port until SIGTERM or SIGKILL.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.*

from support.sse_server import ListingServer


def main(argv: list[str]) -> None:
    port = int(argv[argv.index("--port") + 1])
    alias = argv[argv.index("--alias") + 1]
    time.sleep(float(os.environ.get("FAKE_START_DELAY_S", "0")))
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server = ListingServer(
        alias, port=port, build_info=os.environ.get("FAKE_BUILD_INFO") or None
    ).start()
    print(f"fake llama-server for {alias} listening on 127.0.0.1:{port}", flush=True)
    stop.wait()
    server.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
