"""The embedded backend: llama.cpp's llama-server on the CPU."""

from __future__ import annotations

import re
import signal
from collections.abc import Sequence
from pathlib import Path

from ..core.errors import EndpointError
from ..core.sweep import ModelSpec, ServingSettings
from .endpoint import Endpoint, Provenance
from .gguf import read_gguf_header
from .listener import serving_process
from .observed import read_back_sources
from .probe import probe_server
from .process import HOST, ServerProcess, free_port, start_local_server
from .provision import (
    LlamaServer,
    Progress,
    ensure_embedded_model,
    ensure_llama_server,
    file_sha256,
)


def llamacpp_argv(
    server: Sequence[str],
    model_file: Path,
    spec: ModelSpec,
    serving: ServingSettings,
    port: int,
    host: str = HOST,
) -> list[str]:
    """llama-server's command line for one model after the ``server`` command; every model
    gets the same settings (``--ctx-size`` is over all slots: ``context_length`` ×
    ``max_num_seqs``)."""
    return [
        *server,
        "--model",
        str(model_file),
        "--alias",
        spec.served_name,
        "--host",
        host,
        "--port",
        str(port),
        "--ctx-size",
        str(serving.context_length * serving.max_num_seqs),
        "--parallel",
        str(serving.max_num_seqs),
        "--metrics",
        "--slots",
        "--no-webui",
        "--jinja",
        *(
            ["--threads", str(serving.threads), "--threads-batch", str(serving.threads)]
            if serving.threads
            else []
        ),
        *([] if serving.prefix_caching else ["--no-cache-prompt"]),
        *(["--chat-template", spec.chat_template] if spec.chat_template else []),
        *serving.extra_args,
    ]


def cpu_features(log: str) -> str | None:
    """The CPU features ggml runs with, from the server log's ``system_info`` line
    (``CPU : SSE3 = 1 | AVX = 1 | ...``), or None where it has none."""
    line = re.search(r"CPU : ((?:[A-Z0-9_]+ = \d+ \| ?)+)", log)
    return (
        None
        if line is None
        else (
            " ".join(
                name for name, on in re.findall(r"([A-Z0-9_]+) = (\d+)", line.group(1)) if on != "0"
            )
        )
    )


def launch_llamacpp(
    spec: ModelSpec,
    serving: ServingSettings,
    log_dir: Path,
    progress: Progress,
    server: LlamaServer | None = None,
) -> tuple[Endpoint, ServerProcess]:
    """Provision, start and probe llama.cpp's server for one model (``server``, else the one
    :func:`ensure_llama_server` chooses); its file is checked first."""
    if spec.source.kind == "embedded":
        model = ensure_embedded_model(spec.source.id, progress)
        model_path, model_sha, package, header = (
            model.path,
            model.sha256,
            model.package,
            model.header,
        )
    elif spec.source.kind == "path":
        model_path = Path(spec.source.id)
        if not model_path.is_file():
            raise EndpointError(
                f'model {spec.name}: {model_path} is not a file; source = "path:FILE" names a '
                "GGUF file for llama-server"
            )
        header = read_gguf_header(model_path)
        model_sha, package = file_sha256(model_path), ""
    else:
        raise EndpointError(
            f"model {spec.name}: llama-server serves GGUF files, not {spec.source}; use "
            'source = "embedded:ID" or "path:FILE.gguf", or a vLLM backend'
        )
    server = server or ensure_llama_server(progress)
    port = free_port(HOST)
    argv = llamacpp_argv(server.command, model_path, spec, serving, port)
    process, base_url = start_local_server(
        argv,
        port,
        log_dir / f"{spec.name}.llama-server.log",
        serving.startup_timeout_s,
        progress,
        f"starting llama.cpp's server ({server.origin}) for {spec.name} on port {port}",
        name=f"llama.cpp server ({server.origin}) for {spec.name}",
        death_signal=signal.SIGKILL,  # nothing to save: if pytest dies, it goes at once
    )
    try:
        facts = probe_server(base_url, spec.served_name)
    except BaseException:
        process.stop()
        raise
    log = process.log_text()  # its startup log: the server's system_info line
    threads = re.search(r"n_threads[ \t]*=[ \t]*(\d+)", log)
    settings = {
        **facts.settings,
        "n_threads": int(threads.group(1)) if threads else None,
        "cache_prompt": "--no-cache-prompt" not in argv,
        "cpu_features": cpu_features(log) or server.cpu_features,
    }
    return facts.endpoint(
        spec,
        base_url,
        Provenance(
            server_name=facts.server_name,
            # the build the server reports (/props build_info), and where it came from
            server_version=f"{facts.server_version} ({server.origin})",
            served_name=spec.served_name,
            server_settings=settings,
            model_source=f"{spec.source}" + (f" ({package})" if package else ""),
            model_sha256=model_sha,
            model_header=header.as_dict(),
            launch_argv=tuple(argv),
            how="llamacpp",
            # its flags are read back from /props and its log (n_threads); cache_prompt is the
            # command line's (llama-server does not say it)
            flag_sources={**read_back_sources(settings), "cache_prompt": "declared"},
            server_process=serving_process(base_url),
        ),
    ), process
