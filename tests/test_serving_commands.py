"""Server command lines are argument lists built from the sweep, identical for every model."""

from __future__ import annotations

import ast
import contextlib
import os
import signal
import sys
from pathlib import Path

import pytest

from pytest_modelsweep.core.errors import EndpointError, ProvisionError
from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.serving.hf_convert import CONVERT_SCRIPT, ensure_hf_folder
from pytest_modelsweep.serving.llamacpp import llamacpp_argv
from pytest_modelsweep.serving.vllm import vllm_argv


def flag_value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def test_llamacpp_context_is_per_slot_times_slots() -> None:
    sweep = load_sweep("embedded")
    spec = sweep.model("smollm2-135m")
    argv = llamacpp_argv(("/bin/llama-server",), Path("/m.gguf"), spec, sweep.serving, 8123)
    assert argv[0] == "/bin/llama-server"
    assert flag_value(argv, "--ctx-size") == "65536"
    assert flag_value(argv, "--parallel") == "16"
    assert flag_value(argv, "--alias") == "smollm2-135m"
    assert flag_value(argv, "--port") == "8123"
    assert flag_value(argv, "--host") == "127.0.0.1"
    assert "--metrics" in argv and "--jinja" in argv
    assert "--no-cache-prompt" not in argv  # prefix caching stays on, as in production


@pytest.mark.parametrize("candidate", ["smollm2-135m", "qwen2.5-coder-0.5b"])
def test_llamacpp_models_differ_only_in_model_and_name(candidate: str) -> None:
    sweep = load_sweep("embedded")
    a = llamacpp_argv(("/s",), Path("/a.gguf"), sweep.model("gemma3-270m"), sweep.serving, 1)
    b = llamacpp_argv(("/s",), Path("/b.gguf"), sweep.model(candidate), sweep.serving, 1)
    differing = [(x, y) for x, y in zip(a, b) if x != y]
    assert len(a) == len(b)
    assert differing == [("/a.gguf", "/b.gguf"), ("gemma3-270m", candidate)]
    assert "--jinja" in b  # llama-server renders the model's own chat template


def test_vllm_docker_argv_pins_the_image_and_sets_production_flags() -> None:
    sweep = load_sweep("tpu-v5e")
    argv = vllm_argv(sweep.model("qwen3-4b"), sweep.serving, 8000, hf_cache=Path("/hf"))
    assert argv[:3] == ["docker", "run", "--rm"]
    image_at = argv.index(sweep.serving.image or "")
    assert argv[image_at + 1 : image_at + 4] == ["vllm", "serve", "Qwen/Qwen3-4B"]
    assert "/hf:/root/.cache/huggingface" in argv
    assert flag_value(argv, "--max-model-len") == "4096"
    assert flag_value(argv, "--max-num-seqs") == "16"
    assert "--enable-prefix-caching" in argv
    assert flag_value(argv, "--tool-call-parser") == "hermes"
    assert "--enable-auto-tool-choice" in argv
    assert flag_value(argv, "--served-model-name") == "qwen3-4b"
    assert all(isinstance(a, str) for a in argv)


def test_vllm_without_parser_gets_no_tool_flags() -> None:
    sweep = load_sweep("tpu-v5e")
    argv = vllm_argv(sweep.model("smollm2-1.7b"), sweep.serving, 8000)
    assert "--tool-call-parser" not in argv and "--enable-auto-tool-choice" not in argv


def test_vllm_installed_backend_runs_the_api_server_module() -> None:
    from dataclasses import replace

    sweep = load_sweep("tpu-v5e")
    serving = replace(sweep.serving, backend="vllm")
    argv = vllm_argv(sweep.model("qwen3-4b"), serving, 8001, python="/usr/bin/python3")
    assert argv[:3] == ["/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"]
    assert flag_value(argv, "--model") == "Qwen/Qwen3-4B"


def test_vllm_refuses_a_gguf_source() -> None:
    sweep = load_sweep("embedded")
    with pytest.raises(EndpointError, match="vLLM serves Hugging Face repos"):
        vllm_argv(sweep.model("smollm2-135m"), sweep.serving, 8000)


def test_one_chip_per_worker_confines_each_worker_to_its_chip() -> None:
    from dataclasses import replace

    from pytest_modelsweep.serving.vllm import one_chip_env, worker_index

    sweep = load_sweep("tpu-v5e")
    serving = replace(sweep.serving, one_chip_per_worker=True)
    env = one_chip_env("gw3")
    assert worker_index("gw3") == 3 and worker_index("main") == 0
    assert env == {
        "TPU_VISIBLE_CHIPS": "3",
        "TPU_CHIPS_PER_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_BOUNDS": "1,1,1",
        "TPU_PROCESS_PORT": "8479",
    }
    argv = vllm_argv(sweep.model("qwen3-4b"), serving, 8000, env=env)
    assert "TPU_VISIBLE_CHIPS=3" in argv and argv[argv.index("TPU_VISIBLE_CHIPS=3") - 1] == "-e"
    assert "TPU_PROCESS_PORT=8479" in argv


def test_llamacpp_refuses_a_hub_source(tmp_path: Path) -> None:
    from pytest_modelsweep.serving.llamacpp import launch_llamacpp

    sweep = load_sweep("tpu-v5e")
    embedded = load_sweep("embedded")
    with pytest.raises(EndpointError, match="llama-server serves GGUF files, not hf:Qwen/Qwen3-4B"):
        launch_llamacpp(sweep.model("qwen3-4b"), embedded.serving, tmp_path, print)


def test_the_prebuilt_server_takes_every_flag_the_sweep_writes() -> None:
    """Every flag llamacpp_argv writes for the embedded sweep maps onto xllamacpp's params."""
    pytest.importorskip("xllamacpp")
    from pytest_modelsweep.serving.prebuilt_server import common_params, parser

    sweep = load_sweep("embedded")
    argv = llamacpp_argv(
        ("server",), Path("/m.gguf"), sweep.model("qwen2.5-coder-0.5b"), sweep.serving, 8123
    )
    params = common_params(parser().parse_args(argv[1:]))
    assert (params.model.path, params.model_alias, params.port) == (
        "/m.gguf",
        {"qwen2.5-coder-0.5b"},
        8123,
    )
    assert (params.n_ctx, params.n_parallel, params.n_batch) == (4096 * 16, 16, 512)
    assert (params.cpuparams.n_threads, params.cpuparams_batch.n_threads) == (2, 2)
    assert params.endpoint_metrics and params.endpoint_slots and params.use_jinja
    assert params.cache_prompt and not params.ui


def test_the_prebuilt_server_refuses_a_flag_it_does_not_take_in_one_line() -> None:
    pytest.importorskip("xllamacpp")
    import subprocess

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_modelsweep.serving.prebuilt_server",
            "--model",
            "m.gguf",
            "--port",
            "1",
            "--flash-attn",
            "on",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "prebuilt llama.cpp server: unrecognized arguments: --flash-attn on; the prebuilt "
        "server (xllamacpp) takes only the flags pytest-modelsweep writes: drop the others from "
        "[serving] extra_args, or build llama-server, which takes them all: modelsweep "
        "provision --build"
    ]


def test_the_server_is_the_named_binary_else_a_cached_build_else_the_prebuilt_wheel(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from pytest_modelsweep.serving.provision import (
        arch_cmake_flags,
        ensure_llama_server,
        llama_server_path,
        prebuilt_llama_server,
    )

    monkeypatch.setenv("MODELSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MODELSWEEP_LLAMA_SERVER", raising=False)
    prebuilt = prebuilt_llama_server()
    if prebuilt is not None:  # (the dev extra installs it: no build, no compiler)
        assert ensure_llama_server(print) == prebuilt
        assert prebuilt.command[1:] == ("-m", "pytest_modelsweep.serving.prebuilt_server")
        assert prebuilt.origin.startswith("xllamacpp ")
    built = llama_server_path()
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    native = ensure_llama_server(print)
    assert native.command == (str(built),) and native.origin.endswith("sdist, built here")
    # what it was built for: this CPU's instruction sets that the build switched on
    assert native.cpu_features == " ".join(
        f.removeprefix("-DGGML_").removesuffix("=ON")
        for f in arch_cmake_flags()
        if f.endswith("=ON")
    )
    monkeypatch.setenv("MODELSWEEP_LLAMA_SERVER", "/bin/true")
    assert ensure_llama_server(print).origin == "MODELSWEEP_LLAMA_SERVER"


def test_cpu_features_are_read_from_the_servers_system_info_line() -> None:
    from pytest_modelsweep.serving.llamacpp import cpu_features

    # llama-server's line (llama.cpp's common.cpp format) and the prebuilt runner's
    assert (
        cpu_features(
            "main: system_info: n_threads = 2 (n_threads_batch = 2) / 2 | CPU : "
            "SSE3 = 1 | AVX = 1 | AVX2 = 1 | AVX512 = 1 | AMX_INT8 = 0 | "
            "REPACK = 1 |"
        )
        == "SSE3 AVX AVX2 AVX512 REPACK"
    )
    assert (
        cpu_features(
            "prebuilt llama.cpp server: xllamacpp 1; system_info: CPU : SSE3 = 1 | "
            "AVX2 = 1 | F16C = 1 |"
        )
        == "SSE3 AVX2 F16C"
    )
    assert cpu_features("no such line") is None


def test_llama_server_is_built_for_this_cpu_without_amx() -> None:
    from pytest_modelsweep.serving.provision import arch_cmake_flags

    sapphire = {
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "bmi2",
        "avx512f",
        "avx512cd",
        "avx512vl",
        "avx512dq",
        "avx512bw",
        "avx512_vnni",
        "amx_tile",
        "amx_int8",
        "amx_bf16",
    }
    flags = arch_cmake_flags("x86_64", sapphire)
    assert "-DGGML_NATIVE=OFF" in flags and "-DGGML_AVX512=ON" in flags
    assert "-DGGML_AVX512_VNNI=ON" in flags and "-DGGML_AVX512_VBMI=OFF" in flags
    # AMX needs the kernel to grant tile state; where it does not, ldtilecfg faults
    assert {"-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF"} <= set(flags)
    assert "-DGGML_AVX512=OFF" in arch_cmake_flags("x86_64", {"avx", "avx2", "avx512f"})
    assert arch_cmake_flags("aarch64", set()) == ["-DGGML_NATIVE=ON"]


def test_gguf_conversion_runs_the_script_by_path_and_says_why_it_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The conversion runs serving/gguf_to_hf.py in isolated mode (its folder's gguf.py off
    sys.path); here, without torch or with a file that is no GGUF, it fails in one line."""
    monkeypatch.setenv("MODELSWEEP_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"not a gguf")
    with pytest.raises(ProvisionError) as failed:
        ensure_hf_folder(gguf, python=sys.executable)
    message = str(failed.value)
    assert f"command: {sys.executable} -I {CONVERT_SCRIPT} {gguf} " in message
    assert "failed (exit 1)" in message and "serving/gguf.py" not in message
    assert not [p for p in (tmp_path / "cache" / "hf").iterdir() if p.name.startswith(".tmp-")]


def test_the_conversion_script_imports_nothing_of_the_package() -> None:
    """vLLM's environment, where it runs, has neither this package nor its dependencies."""
    tree = ast.parse(CONVERT_SCRIPT.read_text())
    imported = [
        node.module or ""
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        if node.level or (node.module or "").startswith("pytest_modelsweep")
    ]
    imported += [
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
        if alias.name.startswith("pytest_modelsweep")
    ]
    assert imported == []


def test_llamacpp_stops_a_server_whose_probe_fails(tmp_path: Path) -> None:
    """A llama-server that answers /health but does not list the model is stopped, not left
    running, when the launch raises (as vLLM's launcher does)."""
    from dataclasses import replace

    from support.fake_launcher import FAKE, gguf

    from pytest_modelsweep.core.sweep import parse_source
    from pytest_modelsweep.serving.llamacpp import launch_llamacpp
    from pytest_modelsweep.serving.provision import LlamaServer

    sweep = load_sweep("embedded")
    spec = replace(
        sweep.model("qwen2.5-coder-0.5b"), source=parse_source(f"path:{gguf(tmp_path / 'm.gguf')}")
    )
    pid_file = tmp_path / "pid"
    # the stand-in, started under another alias than the one asked for
    script = (
        "import os, runpy, sys; "
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
        "sys.argv[sys.argv.index('--alias') + 1] = 'another-model'; "
        f"runpy.run_path({str(FAKE)!r}, run_name='__main__')"
    )
    server = LlamaServer(command=(sys.executable, "-c", script), origin="fake")
    with pytest.raises(EndpointError, match="another-model"):
        launch_llamacpp(spec, sweep.serving, tmp_path, print, server)
    pid = int(pid_file.read_text())
    try:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
