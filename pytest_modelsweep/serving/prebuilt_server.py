"""llama.cpp's own HTTP server from the prebuilt ``xllamacpp`` wheel, run as llama-server is.

``python -m pytest_modelsweep.serving.prebuilt_server --model F --port P ...`` takes the
llama-server flags that :func:`~.llamacpp.llamacpp_argv` writes, serves until SIGTERM, and
refuses any other flag in one line (the native build takes them all). Its first log line names
the wheel and the CPU features its ggml uses, as llama-server's ``system_info`` line does.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from importlib.metadata import version
from typing import Any, NoReturn

WHEEL = "xllamacpp"
IDENTITY_PREFIX = "prebuilt llama.cpp server:"


class _Refusal(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(
            f"{IDENTITY_PREFIX} {message}; the prebuilt server ({WHEEL}) takes only the "
            "flags pytest-modelsweep writes: drop the others from [serving] extra_args, or "
            "build llama-server, which takes them all: modelsweep provision --build",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(2)


FLAGS: dict[str, dict[str, Any]] = {
    "--model": {"required": True},
    "--alias": {},
    "--host": {"default": "127.0.0.1"},
    "--port": {"type": int, "required": True},
    "--ctx-size": {"type": int},
    "--parallel": {"type": int},
    "--threads": {"type": int},
    "--threads-batch": {"type": int},
    "--batch-size": {"type": int},
    "--ubatch-size": {"type": int},
    "--chat-template": {},
    "--metrics": {"action": "store_true"},
    "--slots": {"action": "store_true"},
    "--no-webui": {"action": "store_true"},
    "--jinja": {"action": "store_true"},
    "--no-cache-prompt": {"action": "store_true"},
}
"""The llama-server flags this runner maps onto ``xllamacpp.CommonParams``, with their
``add_argument`` options."""


def parser() -> argparse.ArgumentParser:
    """The parser of :data:`FLAGS`; any other flag is refused in one line."""
    flags = _Refusal(prog="prebuilt_server", add_help=False, allow_abbrev=False)
    for flag, options in FLAGS.items():
        flags.add_argument(flag, **options)
    return flags


def common_params(args: argparse.Namespace) -> Any:
    """``xllamacpp.CommonParams`` with what ``args`` asks for, llama-server's defaults else."""
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = args.model
    settings = (  # None: llama-server's default stays
        (params, "model_alias", {args.alias} if args.alias else None),
        (params, "hostnames", [args.host]),
        (params, "port", args.port),
        (params, "n_ctx", args.ctx_size),
        (params, "n_parallel", args.parallel),
        (params, "n_batch", args.batch_size),
        (params, "n_ubatch", args.ubatch_size),
        (params, "chat_template", args.chat_template),
        (params.cpuparams, "n_threads", args.threads),
        (params.cpuparams_batch, "n_threads", args.threads_batch),
        (params, "endpoint_metrics", args.metrics),
        (params, "endpoint_slots", args.slots),
        (params, "ui", not args.no_webui),
        (params, "use_jinja", args.jinja),
        (params, "cache_prompt", not args.no_cache_prompt),
    )
    for target, name, value in settings:
        if value is not None:
            setattr(target, name, value)
    return params


def main(argv: list[str] | None = None) -> None:
    """Serve until SIGTERM or SIGINT; exit 2 with one line on a flag it does not take."""
    args = parser().parse_args(argv)
    stop = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stop)  # the server's threads inherit the mask
    import xllamacpp

    print(
        f"{IDENTITY_PREFIX} {WHEEL} {version(WHEEL)}; system_info: "
        f"{xllamacpp.get_system_info().strip()}",
        file=sys.stderr,
        flush=True,
    )
    try:  # held until exit: dropping it stops the server; llama.cpp logs where it listens
        _server = xllamacpp.Server(common_params(args))
    except RuntimeError as error:  # llama.cpp has logged why above
        print(
            f"{IDENTITY_PREFIX} {error} (llama.cpp's lines above say why)",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(1) from None
    signal.sigwait(stop)
    os._exit(0)  # the server's threads hold no state worth a slow teardown


if __name__ == "__main__":
    main()
