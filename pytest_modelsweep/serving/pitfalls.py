"""TPU pitfalls that change what is measured without an error, refused before any request.

* ``--kv-cache-dtype fp8`` on v5e logs "Using fp8" and allocates bf16 (tpu-inference #3126);
* a sampled request (temperature > 0) with a ``seed`` is rejected: JAX has no per-request seed;
* vLLM's v5e scheduler defaults compare the device name with "V5E" while tpu-inference
  reports "TPU V5E", so they may silently not apply: ``--max-num-batched-tokens`` is given;
* a model's ``group`` must be the implementation the server resolved (``MODEL_IMPL_TYPE``),
  checked where it is known (:func:`.observed.check_group`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..core.sweep import ServingSettings
from .observed import declared_flags


def is_tpu(accelerator: str | None) -> bool:
    """A TPU sweep: its ``[serving] accelerator`` is ``tpu-…``."""
    return bool(accelerator) and str(accelerator).lower().startswith("tpu")


def serving_pitfall(
    serving: ServingSettings, observed: Mapping[str, Any] | None = None
) -> str | None:
    """The first TPU pitfall of a sweep's serving settings (and of the flags the server is
    observed with), in one line with the fix; None when there is none or it is no TPU sweep."""
    if not is_tpu(serving.accelerator):
        return None
    declared = declared_flags(serving)
    kv = str({**declared, **(observed or {})}.get("kv_cache_dtype") or "")
    pitfalls = (
        (
            str(serving.accelerator).lower() == "tpu-v5e" and kv.startswith("fp8"),
            f"kv_cache_dtype {kv} on TPU v5e: the server logs fp8 but allocates bf16 "
            "(tpu-inference #3126), so the KV cache is not what the sweep says; drop "
            "--kv-cache-dtype from serving.extra_args",
        ),
        (
            "max_num_batched_tokens" not in declared,
            "a TPU sweep must give --max-num-batched-tokens in serving.extra_args: vLLM's "
            'v5e defaults may silently not apply (the device reads "TPU V5E", not '
            '"V5E"), so the server\'s batch size would be whatever it chose',
        ),
    )
    return next((line for found, line in pitfalls if found), None)


def seeded_sampling(
    accelerator: str | None, payloads: Iterable[tuple[str, Mapping[str, Any]]]
) -> str | None:
    """One line refusing the first sampled request (temperature > 0) with a ``seed`` on a TPU
    sweep (JAX takes no per-request seed, so the server rejects it); None otherwise."""
    if not is_tpu(accelerator):
        return None
    for item_id, payload in payloads:
        temperature = payload.get("temperature")
        if (
            payload.get("seed") is not None
            and isinstance(temperature, (int, float))
            and temperature > 0
        ):
            return (
                f"item {item_id}: temperature {temperature} with seed {payload['seed']} on "
                f"a TPU sweep ({accelerator}): JAX does not support a per-request seed; "
                "drop the seed, or sample greedily (temperature 0)"
            )
    return None
