"""The embedded default for real: llama-server with the packaged models, on this CPU.

The first run on a fresh machine builds llama-server (a few minutes); later runs
reuse the cached binary.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import httpx
import pytest

from pytest_modelsweep.core.errors import ServerStartedTwiceError, ServerStartError
from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.serving.endpoint import Endpoint
from pytest_modelsweep.serving.llamacpp import launch_llamacpp
from pytest_modelsweep.serving.pool import EndpointPool
from pytest_modelsweep.serving.process import ServerProcess

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
        json={"model": smollm2.served_name, "prompt": "One, two, three,", "max_tokens": 8,
              "temperature": 0, "ignore_eos": True},
        timeout=120,
    )
    assert response.status_code == 200
    body = response.json()
    assert body["choices"][0]["text"].strip()
    assert body["usage"]["completion_tokens"] == 8  # ignore_eos forces the full length


def test_provenance_is_read_back_from_the_server(smollm2: Endpoint) -> None:
    prov = smollm2.provenance
    assert prov.server_name == "llama.cpp llama-server"
    assert prov.server_version.startswith("b")  # llama.cpp build_info, e.g. b1-0c1e570
    assert prov.server_settings["total_slots"] == 2
    assert prov.server_settings["n_ctx_per_slot"] == 4096
    assert prov.server_settings["n_threads"] == 1
    assert smollm2.context_length == 4096
    assert prov.model_sha256 is not None and len(prov.model_sha256) == 64
    assert prov.launch_argv[prov.launch_argv.index("--ctx-size") + 1] == "8192"


def test_server_that_exits_at_start_shows_command_and_log_tail(tmp_path: Path) -> None:
    from pytest_modelsweep.serving.provision import llama_server_path

    bad_model = tmp_path / "broken.gguf"
    bad_model.write_bytes(b"GGUF" + b"\x00" * 64)
    process = ServerProcess(
        [str(llama_server_path()), "--model", str(bad_model), "--port", "1", "--host", "127.0.0.1"],
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
                               "port": endpoint.base_url.rsplit(":", 1)[1]},
                       stats={"started": started, "ended": time.time()})
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
        "-n", "2", "--sweep", str(sweep), "--results", "results.json",
        "--modelsweep-dir", str(pytester.path / "work"),
    )
    result.assert_outcomes(passed=6)
    data = json.loads((pytester.path / "results.json").read_text())
    seen: dict[str, set[tuple[str, str]]] = {}
    for m in data["measurements"]:
        seen.setdefault(m["model"], set()).add((m["params"]["worker"], m["params"]["port"]))
    # one worker and one server (port) per model, and the two models ran on different workers
    assert {model: len(s) for model, s in seen.items()} == {"gemma3-270m": 1, "smollm2-135m": 1}
    assert len({w for s in seen.values() for w, _ in s}) == 2
    # and the two models were measured at the same time, each on its own server
    spans = {
        model: (min(m["stats"]["started"] for m in data["measurements"] if m["model"] == model),
                max(m["stats"]["ended"] for m in data["measurements"] if m["model"] == model))
        for model in seen
    }
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values()), spans
    runs = list((pytester.path / "work" / "runs").iterdir())
    assert len(runs) == 1
    assert sorted(p.name for p in (runs[0] / "started").iterdir()) == ["gemma3-270m", "smollm2-135m"]
    logs = sorted(p.name for p in (runs[0] / "logs").iterdir())
    assert logs == ["gemma3-270m.llama-server.log", "smollm2-135m.llama-server.log"]
    for log in (runs[0] / "logs").iterdir():
        assert log.read_text().count("llama_server: listening on") == 1
