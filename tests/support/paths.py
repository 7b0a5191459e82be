"""Paths the project's tests share (read before pytester moves HOME)."""

from __future__ import annotations

import re
from pathlib import Path

from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.serving.provision import cache_root

# Tests that start the embedded servers use the machine's real cache: llama-server is
# built there once, never per test.
REAL_CACHE = cache_root()
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def write_sweep(path: Path, models: list[str]) -> Path:
    """A minimal valid sweep file: the first model is the reference; no server is ever started."""
    path.write_text(
        f'[sweep]\nname="{path.stem}"\nreference="{models[0]}"\n[serving]\nbackend="llamacpp"\n'
        + "".join(
            f'[models.{m}]\nsource="embedded:x"\nlicense="mit"\nprompting="chat"\n' for m in models
        )
    )
    return path


def embedded_sweep_with(path: Path, **serving: int) -> Path:
    """The embedded sweep with some of its ``[serving]`` numbers changed (e.g.
    ``max_num_seqs=1``), written to ``path``; a key the sweep does not set is an error."""
    text = Path(load_sweep("embedded").path).read_text()
    for key, value in serving.items():
        text, found = re.subn(rf"^{key} = \d+", f"{key} = {value}", text, flags=re.MULTILINE)
        assert found == 1, f"the embedded sweep sets no {key}"
    path.write_text(text)
    return path


# The embedded sweep's reference and its weak candidate: the two models that the plugin's
# tests fake with local servers (the sweep's third model, Qwen2.5-Coder, is left out).
PAIR = ("--model", "gemma3-270m", "--model", "smollm2-135m")

# The pytest runs the tests start load every pytest plugin installed beside this one. The CI
# image's hypothesis, pytest-benchmark and anyio plugins, which none of them uses, cost 0.4 CPU-s
# a process (an empty run: 0.7 s with them, 0.3 s without, on a quiet machine), hundreds of
# times a session. conftest.py puts them in PYTEST_ADDOPTS, which reaches every
# pytest the tests start but not the xdist workers those start: those read their arguments.
UNUSED_PLUGINS = ("-p", "no:hypothesispytest", "-p", "no:benchmark", "-p", "no:anyio")
TWO_WORKERS = ("-n", "2", *UNUSED_PLUGINS)
"""``-n 2`` for a pytest the tests start, its workers without the unused plugins."""
