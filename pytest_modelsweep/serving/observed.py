"""Serving facts read from what ran, beside what the sweep declared.

A vLLM server publishes part of its configuration on ``/metrics`` as info gauges
(``vllm:cache_config_info{block_size="16",enable_prefix_caching="True",...} 1.0``); a
launched server's log says more (``non-default args: {...}``, its KV-cache size and, on TPU,
the model implementation tpu-inference resolved). Each serving flag of a provenance says
whether it was **observed** (read from the server) or only **declared** (the sweep's), and a
declared flag that the server contradicts is refused in one line naming both values.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ..core.errors import EndpointError
from ..core.sweep import ModelSpec, ServingSettings
from .endpoint import SERVING_FLAGS

Source = Literal["observed", "declared"]

INFO_GAUGE = re.compile(r"^vllm:(\w+_config_info)\{(.*)\}\s+\S+\s*$", re.MULTILINE)
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
NON_DEFAULT_ARGS = re.compile(r"non-default args: (\{.*\})\s*$", re.MULTILINE)
KV_CACHE_TOKENS = re.compile(r"(?:GPU|CPU|TPU)?\s*KV cache size:\s*([\d,]+)\s*tokens")
MODEL_IMPL = re.compile(
    r"Loading model with MODEL_IMPL_TYPE=(?P<given>\w+)"
    r"|Resolved MODEL_IMPL_TYPE '\w+' to '(?P<resolved>\w+)'"
    r"|(?P<fallback>Falling back to vLLM-native Pytorch definition)"
)
"""tpu-inference's lines on the implementation it loads: the type given, what ``auto``
resolved to, and the fallback to vLLM's PyTorch model when an architecture has no JAX one."""


def config_gauges(metrics_text: str) -> dict[str, dict[str, str]]:
    """Every ``vllm:*_config_info`` gauge of a ``/metrics`` page: its name → its labels."""
    gauges: dict[str, dict[str, str]] = {}
    for name, labels in INFO_GAUGE.findall(metrics_text):
        gauges.setdefault(name, {}).update(
            {
                key: value.replace('\\"', '"')
                for key, value in LABEL.findall(labels)
                if key not in ("engine", "model_name")
            }
        )
    return gauges


def log_facts(log_text: str) -> dict[str, Any]:
    """What a vLLM startup log says: ``non_default_args`` (dict), ``kv_cache_tokens`` and
    ``model_impl`` (tpu-inference's resolved ``MODEL_IMPL_TYPE``), those it says."""
    facts: dict[str, Any] = {}
    if match := NON_DEFAULT_ARGS.search(log_text):
        try:
            args = ast.literal_eval(match.group(1))
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            args = None
        if isinstance(args, dict):
            facts["non_default_args"] = {str(k): v for k, v in args.items()}
    if match := KV_CACHE_TOKENS.search(log_text):
        facts["kv_cache_tokens"] = int(match.group(1).replace(",", ""))
    for match in MODEL_IMPL.finditer(log_text):
        impl = match.group("resolved") or (
            "vllm" if match.group("fallback") else match.group("given")
        )
        if impl and impl != "auto":
            facts["model_impl"] = impl
    return facts


def _arg(args: Sequence[str], flag: str) -> str | None:
    """The value of ``--flag V`` or ``--flag=V`` in ``args``, the last one given."""
    value = None
    for index, arg in enumerate(args):
        if arg == flag and index + 1 < len(args):
            value = args[index + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def declared_flags(serving: ServingSettings) -> dict[str, Any]:
    """The serving flags the sweep asks every vLLM server for."""
    flags: dict[str, Any] = {
        "max_model_len": serving.context_length,
        "max_num_seqs": serving.max_num_seqs,
        "prefix_caching": serving.prefix_caching,
        **({"dtype": serving.dtype} if serving.dtype else {}),
    }
    for name, flag in (
        ("kv_cache_dtype", "--kv-cache-dtype"),
        ("max_num_batched_tokens", "--max-num-batched-tokens"),
        ("block_size", "--block-size"),
        ("gpu_memory_utilization", "--gpu-memory-utilization"),
    ):
        if (value := _arg(serving.extra_args, flag)) is not None:
            flags[name] = value
    return flags


# Where each flag is published: (gauge, label) on /metrics, else the launch log's
# non-default args (whose names are vLLM's argument names).
GAUGE_LABELS = {
    "prefix_caching": ("cache_config_info", "enable_prefix_caching"),
    "kv_cache_dtype": ("cache_config_info", "cache_dtype"),
    "block_size": ("cache_config_info", "block_size"),
    "gpu_memory_utilization": ("cache_config_info", "gpu_memory_utilization"),
    "max_num_seqs": ("scheduler_config_info", "max_num_seqs"),
    "max_num_batched_tokens": ("scheduler_config_info", "max_num_batched_tokens"),
    "dtype": ("model_config_info", "dtype"),
}
LOG_ARGS = {
    "max_num_seqs": "max_num_seqs",
    "prefix_caching": "enable_prefix_caching",
    "dtype": "dtype",
    "kv_cache_dtype": "kv_cache_dtype",
    "max_num_batched_tokens": "max_num_batched_tokens",
    "block_size": "block_size",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "max_model_len": "max_model_len",
}


def observed_flags(observed: Mapping[str, Any]) -> dict[str, Any]:
    """The serving flags an endpoint's observed facts show (normalised values)."""
    flags: dict[str, Any] = {}
    model = observed.get("model") or {}
    if model.get("max_model_len") is not None:
        flags["max_model_len"] = normalised(model["max_model_len"])
    gauges = observed.get("config_gauges") or {}
    for flag, (gauge, label) in GAUGE_LABELS.items():
        if label in (gauges.get(gauge) or {}):
            flags[flag] = normalised(gauges[gauge][label])
    args = (observed.get("log") or {}).get("non_default_args") or {}
    for flag, arg in LOG_ARGS.items():
        if flag not in flags and arg in args:
            flags[flag] = normalised(args[arg])
    return flags


def normalised(value: Any) -> Any:
    """A flag's value as compared: ``"True"`` → True, ``"16"`` → 16, ``"torch.bfloat16"`` →
    ``"bfloat16"``; anything else as it is."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value).strip()
    if text in ("True", "true", "False", "false"):
        return text.lower() == "true"
    for kind in (int, float):
        with contextlib.suppress(ValueError):
            return kind(text)
    return text.removeprefix("torch.")


def check_declared(
    model: str, url: str, declared: Mapping[str, Any], observed: Mapping[str, Any]
) -> None:
    """Raise :class:`EndpointError` in one line when the server contradicts the sweep: ``flag:
    declared X, server says Y`` for each such flag (``auto`` declares nothing)."""
    found = [
        f"{flag}: the sweep declares {normalised(value)!r}, the server says {observed[flag]!r}"
        for flag, value in declared.items()
        if flag in observed and str(value) != "auto" and normalised(value) != observed[flag]
    ]
    if found:
        raise EndpointError(
            f"{model} at {url} does not serve with the sweep's settings ({'; '.join(found)}); "
            "restart the server with the sweep's [serving] flags, or fix the sweep"
        )


def flag_record(
    declared: Mapping[str, Any], observed: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Each flag's value (the observed one where there is one) and where it came from
    (:data:`Source`): the declared flags and the observed serving flags (a block size the
    server chose per model is no serving flag; it stays under ``observed``)."""
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for flag in list(declared) + [f for f in observed if f not in declared and f in SERVING_FLAGS]:
        values[flag], sources[flag] = (
            (observed[flag], "observed")
            if flag in observed
            else (normalised(declared[flag]), "declared")
        )
    return values, sources


def read_back_sources(settings: Mapping[str, Any]) -> dict[str, str]:
    """Each serving flag of settings read back from the server itself (llama.cpp's
    ``/props``): observed."""
    return {k: "observed" for k in SERVING_FLAGS if settings.get(k) is not None}


IMPL_GROUPS = {"flax_nnx": "jax", "jax": "jax", "vllm": "torchax"}
"""The sweep's ``group`` an implementation belongs to (``vllm``: tpu-inference's PyTorch
fallback)."""


def check_group(spec: ModelSpec, model_impl: str | None, where: str) -> None:
    """Raise :class:`EndpointError` when the server resolved another implementation than the
    model's ``group`` says."""
    group = IMPL_GROUPS.get(model_impl or "")
    if spec.group and group and group != spec.group:
        raise EndpointError(
            f"{spec.name}: its group is {spec.group!r} but the server resolved "
            f'MODEL_IMPL_TYPE={model_impl} ({group}, {where}); set group = "{group}" in the '
            f"sweep, or pin MODEL_IMPL_TYPE for the server"
        )
