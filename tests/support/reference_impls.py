"""lm-evaluation-harness and BFCL's own code, installed aside, to check our scoring against.

``lm-eval`` and ``bfcl-eval`` are far too heavy to be dependencies of the plugin (bfcl-eval
pins numpy 1.26 and pulls every vendor's SDK), yet "scored exactly as they score" is only
proven by running their code on the same inputs. So the conformance tests install the
pinned wheels with ``--no-deps``, plus the few small packages the modules we call import,
into a folder of the machine's cache (once; a file lock serialises workers), and run the
reference code in a subprocess whose ``sys.path`` starts with that folder. Nothing of it
leaks into the test process.

The scripts under ``tests/reference/`` read one JSON document on stdin and write one on
stdout.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from support.paths import REAL_CACHE

REFERENCE_REQUIREMENTS: tuple[str, ...] = (
    "bfcl-eval==2026.3.23",  # the release the shared BFCL data was taken from
    "lm-eval==0.4.13",
    # imported by the modules we call, absent from this project's environment:
    "tenacity==9.2.1",
    "tree-sitter==0.21.3",
    "tree-sitter-java==0.21.0",
    "tree-sitter-javascript==0.21.4",
    "sacrebleu==2.6.0",
    "portalocker==4.4.2",
    "tabulate==0.10.0",
    "colorama==0.4.6",
    "lxml==6.1.3",
    "aiohttp==3.14.5",  # lm-eval's API models, which build the requests
    "aiohappyeyeballs==2.7.1",
    "aiosignal==1.4.0",
    "frozenlist==1.8.0",
    "multidict==7.2.1",
    "yarl==1.25.1",
    "propcache==0.5.4",
    "openai==3.57.0",  # BFCL's OpenAI handler, which decodes tool calls
    "jiter==0.19.0",
    "distro==1.9.0",
    "overrides==7.7.0",
    # and what a fresh environment with only this project's dependencies lacks:
    "python-dotenv==1.2.4",
    "pydantic==2.14.4",
    "pydantic-core==2.50.5",
    "typing-inspection==0.4.5",
    "annotated-types==0.8.0",
    "sniffio==1.3.1",
    "requests==2.34.2",
    "urllib3==2.8.0",
    "charset-normalizer==3.5.3",
    "attrs==26.1.0",
)
SCRIPTS = Path(__file__).resolve().parents[1] / "reference"


def reference_site() -> Path:
    """The folder holding the reference packages, installed on first use."""
    key = hashlib.sha256("\n".join((sys.version, *REFERENCE_REQUIREMENTS)).encode()).hexdigest()[
        :12
    ]
    site = REAL_CACHE / "reference-impls" / key
    done = site / ".installed"
    if done.is_file():
        return site
    site.parent.mkdir(parents=True, exist_ok=True)
    with open(site.parent / f".{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.is_file():
            _install(site)
            done.write_text("\n".join(REFERENCE_REQUIREMENTS) + "\n")
    return site


def _install(site: Path) -> None:
    argv = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        "--target",
        str(site),
        *REFERENCE_REQUIREMENTS,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(
            f"could not install the reference implementations into {site} ({tail[0]}); "
            "these tests need a reachable package index"
        )


def run_reference(script: str, payload: Any, *, timeout: float = 600) -> Any:
    """Run ``tests/reference/<script>`` on ``payload`` (JSON) with the reference packages importable."""
    site = reference_site()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(SCRIPTS)])}
    env.pop("PYTHONSAFEPATH", None)
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / script)],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"reference script {script} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout)
