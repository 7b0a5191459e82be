"""What ran is what is recorded: the image Docker ran (``modelsweep pin``, the digest of a
run from a tag), serving flags observed or declared, TPU pitfalls refused before any
request, and the process that serves an endpoint on this host.

Docker is the ``docker`` shim of ``tests/docker_shim`` (a stand-in for the command line,
never for vLLM); servers are the fake ones of ``tests/support/sse_server.py`` and
``tests/support/fake_llama_server.py``, started in this process or as a process of their own.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.docker_images import DockerShim, image_entry
from support.fake_launcher import FAKE
from support.sse_server import ListingServer

from pytest_modelsweep.api.evaluation import EvalItem, request_for, scored_record
from pytest_modelsweep.cli import main
from pytest_modelsweep.core.errors import DataError, EndpointError
from pytest_modelsweep.core.sweep import Sweep, load_sweep
from pytest_modelsweep.judging.pairing import PairingError, check_same_serving
from pytest_modelsweep.report.markdown import escape_markdown
from pytest_modelsweep.serving.docker import observed_image
from pytest_modelsweep.serving.endpoint import Endpoint
from pytest_modelsweep.serving.listener import listening_pids, serving_process
from pytest_modelsweep.serving.observed import check_group, log_facts
from pytest_modelsweep.serving.pool import EndpointPool
from pytest_modelsweep.serving.process import free_port
from pytest_modelsweep.store.database import Store
from pytest_modelsweep.workloads.accuracy import run_accuracy
from pytest_modelsweep.workloads.contention import ContentionMeter

pytest_plugins = ("pytester",)
ROOT = Path(__file__).resolve().parents[1]
TPU_SWEEP = ROOT / "pytest_modelsweep" / "sweeps" / "tpu-v5e.toml"
TAG = "vllm/vllm-tpu:v0.21.0"


# --------------------------------------------------------------------------- modelsweep pin


def test_pin_writes_the_sweep_with_the_digest_docker_resolved(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    shim = DockerShim(tmp_path, monkeypatch)
    entry = shim.hold(TAG)
    out = tmp_path / "tpu-v5e.pinned.toml"
    assert main(["pin", "--sweep", "tpu-v5e", "-o", str(out)]) == 0
    (repo_digest,) = entry["RepoDigests"]
    assert capsys.readouterr().out.splitlines()[0] == f"{TAG} -> {repo_digest}"
    assert shim.calls() == [["pull", TAG], ["image", "inspect", TAG]]
    pinned, builtin = load_sweep(out), load_sweep("tpu-v5e")
    assert pinned.serving.image == repo_digest and repo_digest.startswith("vllm/vllm-tpu@sha256:")
    assert pinned.models == builtin.models and pinned.name == builtin.name
    assert pinned.serving.extra_args == builtin.serving.extra_args


def test_pin_without_the_tag_or_without_docker_says_so_in_one_line(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    DockerShim(tmp_path, monkeypatch)  # holds nothing
    out = tmp_path / "pinned.toml"
    assert main(["pin", "--sweep", "tpu-v5e", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"modelsweep: error: docker pull {TAG} failed (Error response from daemon: "
        f"manifest for {TAG} not found); check the tag and that this machine "
        "reaches the registry\n"
    )
    monkeypatch.setenv("PATH", str(tmp_path / "no-docker-here"))
    assert main(["pin", "--sweep", "tpu-v5e", "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        "modelsweep: error: docker not found; install Docker (and let this user run it "
        "without sudo) to serve or pin the sweep's image\n"
    )
    assert not out.exists()


def test_a_run_from_a_tag_records_the_digest_docker_ran_and_a_rebuilt_tag_never_pairs(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shim = DockerShim(tmp_path, monkeypatch)
    with pytest.raises(EndpointError, match=f"pull it first: docker pull {TAG}$"):
        observed_image(TAG)
    shim.hold(TAG)
    first = observed_image(TAG)  # what the image actually run is, read from Docker
    shim.hold(TAG, image_entry(TAG, build="2"))  # the tag rebuilt and pulled again
    second = observed_image(TAG)
    assert first.digest() != second.digest()
    assert f"vllm/vllm-tpu@{first.digest()}" == image_entry(TAG)["RepoDigests"][0]
    assert shim.calls()[-1] == ["image", "inspect", TAG]
    a = {"server_name": "vllm", "server_version": "0.21.0", "image_digest": first.digest()}
    b = {**a, "image_digest": second.digest()}
    with pytest.raises(PairingError) as info:
        check_same_serving("cand", a, "ref", b)
    assert str(info.value) == (
        f"refusing to pair cand with ref: image_digest differs (cand: {first.digest()!r}, "
        f"ref: {second.digest()!r}); measure both with the same server build and image"
    )


def test_an_image_pinned_by_digest_that_docker_ran_otherwise_is_refused(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shim = DockerShim(tmp_path, monkeypatch)
    wanted = image_entry(TAG)["RepoDigests"][0]
    shim.images[wanted] = image_entry(TAG, build="other")  # a registry that moved the name
    shim.save()
    with pytest.raises(EndpointError) as info:
        observed_image(wanted)
    assert str(info.value).startswith(
        f"the sweep pins {wanted} but Docker ran an image whose digests are vllm/vllm-tpu@sha256:"
    )
    assert str(info.value).endswith(f"; docker pull {wanted}")


# --------------------------------------------------------------------------- TPU pitfalls


def tpu_sweep(tmp_path: Path, edit: tuple[str, str] = ("", "")) -> Sweep:
    """The built-in tpu-v5e sweep, with one edit of its text."""
    path = tmp_path / "tpu.toml"
    text = TPU_SWEEP.read_text(encoding="utf-8")
    assert edit[0] in text
    path.write_text(text.replace(*edit, 1) if edit[0] else text, encoding="utf-8")
    return load_sweep(path)


@pytest.fixture
def fake_vllm() -> Iterator[ListingServer]:
    """A server that answers as vLLM does (``/version``) and publishes no config gauge."""
    with ListingServer("qwen3-4b", vllm_version="0.21.0") as server:
        yield server


def attached(
    sweep: Sweep, server: ListingServer, tmp_path: Path, model: str = "qwen3-4b"
) -> Endpoint:
    pool = EndpointPool(
        sweep,
        attach={model: server.base_url},
        run_dir=tmp_path,
        worker_id="main",
        progress=lambda _: None,
        models=(model,),
    )
    return pool.get(model)


EXTRA = 'extra_args = ["--max-num-batched-tokens", "512"]'


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        (
            (EXTRA, 'extra_args = ["--max-num-batched-tokens", "512", "--kv-cache-dtype", "fp8"]'),
            "qwen3-4b: kv_cache_dtype fp8 on TPU v5e: the server logs fp8 but allocates bf16 "
            "(tpu-inference #3126), so the KV cache is not what the sweep says; drop "
            "--kv-cache-dtype from serving.extra_args",
        ),
        (
            (EXTRA, "extra_args = []"),
            "qwen3-4b: a TPU sweep must give --max-num-batched-tokens in serving.extra_args: vLLM's "
            'v5e defaults may silently not apply (the device reads "TPU V5E", not "V5E"), so the '
            "server's batch size would be whatever it chose",
        ),
    ],
    ids=["fp8-kv-cache-on-v5e", "no-max-num-batched-tokens"],
)
def test_a_tpu_serving_pitfall_is_refused_in_one_line_before_any_request(
    tmp_path: Path,
    fake_vllm: ListingServer,
    edit: tuple[str, str],
    line: str,
) -> None:
    sweep = tpu_sweep(tmp_path, edit)
    with pytest.raises(EndpointError) as info:
        attached(sweep, fake_vllm, tmp_path)
    assert str(info.value) == line
    assert fake_vllm.stats.connections == 0  # refused before the probe


def test_a_sampled_request_with_a_seed_on_a_tpu_sweep_is_refused_before_any_request(
    tmp_path: Path,
    fake_vllm: ListingServer,
) -> None:
    endpoint = attached(tpu_sweep(tmp_path), fake_vllm, tmp_path)
    assert endpoint.accelerator == "tpu-v5e"
    probed = fake_vllm.stats.connections
    items = [
        EvalItem(id="greedy", prompt="Say hi", seed=7),  # as our GSM8K sends: greedy
        EvalItem(id="sampled", prompt="Say hi", temperature=0.7, seed=7),
    ]

    def evaluate(chosen: list[EvalItem]) -> int:
        run = run_accuracy(
            endpoint,
            "my_eval",
            chosen,
            lambda item: request_for(item, "chat"),
            lambda item, sent, done: scored_record("my_eval", lambda *_: True, item, sent, done),
            store=None,
            run_id="r1",
        )
        return len(run.records)

    with pytest.raises(DataError) as info:
        evaluate(items)
    assert str(info.value) == (
        "my_eval qwen3-4b: item sampled: temperature 0.7 with seed 7 on a TPU sweep (tpu-v5e): "
        "JAX does not support a per-request seed; drop the seed, or sample greedily "
        "(temperature 0)"
    )
    assert fake_vllm.stats.connections == probed  # no request was sent
    assert evaluate(items[:1]) == 1  # a seeded greedy request is sent


TPU_LOG = """\
(EngineCore_DP0 pid=7) INFO [model_loader.py:381] Loading model with MODEL_IMPL_TYPE=auto
(EngineCore_DP0 pid=7) INFO [model_loader.py:384] Resolved MODEL_IMPL_TYPE 'auto' to 'flax_nnx'
(EngineCore_DP0 pid=7) WARNING [model_loader.py:402] Model architectures ['Phi3ForCausalLM'] \
not registered in tpu-inference. Falling back to vLLM-native Pytorch definition.
"""


def test_a_group_other_than_the_implementation_the_server_resolved_is_refused(
    tmp_path: Path,
    fake_vllm: ListingServer,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sweep = tpu_sweep(tmp_path)
    # a launched server: its log says which implementation tpu-inference loaded
    assert log_facts(TPU_LOG)["model_impl"] == "vllm"  # resolved to JAX, then fell back
    with pytest.raises(EndpointError) as info:
        check_group(sweep.model("qwen3-4b"), log_facts(TPU_LOG)["model_impl"], "its log x.log")
    assert str(info.value) == (
        "qwen3-4b: its group is 'jax' but the server resolved MODEL_IMPL_TYPE=vllm (torchax, "
        'its log x.log); set group = "torchax" in the sweep, or pin MODEL_IMPL_TYPE for the '
        "server"
    )
    check_group(sweep.model("phi-4-mini"), "vllm", "its log x.log")  # torchax: as declared
    # `modelsweep k8s`: the bench reads the implementation its Job gave the server
    monkeypatch.setenv("MODEL_IMPL_TYPE", "vllm")
    with pytest.raises(EndpointError) as info:
        attached(sweep, fake_vllm, tmp_path)
    assert (
        "its group is 'jax' but the server resolved MODEL_IMPL_TYPE=vllm (torchax, its "
        "Job's env)" in str(info.value)
    )
    monkeypatch.setenv("MODEL_IMPL_TYPE", "flax_nnx")
    assert attached(sweep, fake_vllm, tmp_path).served_name == "qwen3-4b"


# --------------------------------------------------------------------------- observed, declared


def test_a_vllm_server_without_config_gauges_keeps_working_its_flags_marked_declared(
    tmp_path: Path,
    fake_vllm: ListingServer,
) -> None:
    provenance = attached(tpu_sweep(tmp_path), fake_vllm, tmp_path).provenance
    assert provenance.server_name == "vllm" and provenance.observed["config_gauges"] == {}
    assert provenance.flag_sources == {
        "max_model_len": "declared",
        "max_num_seqs": "declared",
        "prefix_caching": "declared",
        "dtype": "declared",
        "max_num_batched_tokens": "declared",
    }
    settings = provenance.server_settings
    assert (
        settings["max_model_len"],
        settings["max_num_seqs"],
        settings["prefix_caching"],
        settings["dtype"],
        settings["max_num_batched_tokens"],
    ) == (4096, 16, True, "bfloat16", 512)


def test_a_llama_servers_flags_are_observed(tmp_path: Path) -> None:
    sweep = load_sweep("embedded")
    name = sweep.reference
    with ListingServer(sweep.model(name).served_name, build_info="b1", slots=3) as server:
        pool = EndpointPool(
            sweep,
            attach={name: server.base_url},
            run_dir=tmp_path,
            worker_id="main",
            progress=lambda _: None,
            models=(name,),
        )
        provenance = pool.get(name).provenance
    assert provenance.flag_sources == {"total_slots": "observed", "n_ctx_per_slot": "observed"}
    assert provenance.server_settings["total_slots"] == 3


# --------------------------------------------------------------------------- the serving process

BUSY_SERVER = textwrap.dedent("""\
    import socket, sys, time
    listener = socket.socket()
    listener.bind(("127.0.0.1", int(sys.argv[1])))
    listener.listen()
    print("listening", flush=True)
    sys.stdin.readline()  # the window begins
    end = time.process_time() + float(sys.argv[2])
    while time.process_time() < end:
        pass
    print("done", flush=True)
    sys.stdin.readline()
""")


def test_the_process_listening_on_an_endpoints_port_is_the_server_not_others(
    tmp_path: Path,
) -> None:
    """A server started by hand on this host (here: by the test, not by modelsweep): the
    process listening on the endpoint's port is found, named, and its CPU is the server's."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    assert listening_pids(url) == []
    server = subprocess.Popen(
        [sys.executable, "-c", BUSY_SERVER, str(port), "1.0", "--api-key", "sk-hidden-1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None and server.stdin is not None
        assert server.stdout.readline() == "listening\n"
        assert listening_pids(url) == [server.pid]
        assert listening_pids(f"http://127.0.0.1:{free_port()}") == []
        named = serving_process(url)
        assert named is not None and named["pid"] == server.pid
        assert named["command"].endswith(f"{port} 1.0 --api-key ***")
        server_side = ContentionMeter(listening_pids(url), max_other_cores=0.5)
        others_side = ContentionMeter(None, max_other_cores=0.5)
        with server_side, others_side:
            server.stdin.write("go\n")
            server.stdin.flush()
            assert server.stdout.readline() == "done\n"
        ours, theirs = server_side.result, others_side.result
        assert ours.server_cpu_cores is not None and theirs.server_cpu_cores is None
        assert ours.server_cpu_cores * ours.window_s == pytest.approx(1.0, abs=0.15)  # type: ignore[operator]
        # the same window: what the server burned is no longer others'
        assert ours.other_cpu_cores is not None and theirs.other_cpu_cores is not None
        assert ours.other_cpu_cores <= theirs.other_cpu_cores - 0.5 * ours.server_cpu_cores
    finally:
        server.kill()
        server.wait()


def test_an_attached_fake_llama_server_process_is_named_in_the_provenance(
    tmp_path: Path,
) -> None:
    sweep = load_sweep("embedded")
    name = sweep.reference
    port = free_port()
    script = FAKE
    process = subprocess.Popen(
        [
            sys.executable,
            str(script),
            "--port",
            str(port),
            "--alias",
            sweep.model(name).served_name,
        ],
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        pool = EndpointPool(
            sweep,
            attach={name: f"http://127.0.0.1:{port}"},
            run_dir=tmp_path,
            worker_id="main",
            progress=lambda _: None,
            models=(name,),
        )
        endpoint = pool.get(name)
        assert endpoint.server_pids() == [process.pid]
        named = endpoint.provenance.server_process
        assert named is not None and named["pid"] == process.pid
        assert named["command"] == (
            f"{sys.executable} {script} --port {port} --alias {sweep.model(name).served_name}"
        )
        assert endpoint.provenance.as_dict()["server_process"] == named
    finally:
        process.terminate()
        process.wait()


@pytest.fixture
def hand_started() -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """A llama-server stand-in started by hand on this host (a process of its own that
    answers /props as llama-server does), as a user starts a server to attach to."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            str(FAKE),
            "--port",
            str(port),
            "--alias",
            "smollm2-135m",
        ],
        env={**os.environ, "FAKE_BUILD_INFO": "b1"},
        stdout=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 20
        while listening_pids(f"http://127.0.0.1:{port}") != [process.pid]:
            assert time.monotonic() < deadline and process.poll() is None
            time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", process
    finally:
        process.terminate()
        process.wait()


def test_a_bench_run_against_a_hand_started_server_counts_its_cpu_as_the_servers(
    pytester: pytest.Pytester,
    hand_started: tuple[str, subprocess.Popen[bytes]],
) -> None:
    """The real throughput bench attached to the hand-started server: every window meters the
    server's process as the server's (not others'), the results name that process and mark
    its flags observed, and the report shows them."""
    from support.throughput_bench_run import run_bench

    url, process = hand_started
    run_bench(pytester, url, "--repeats", "2", "--store", "s.sqlite").assert_outcomes(passed=1)
    results = json.loads((pytester.path / "r.json").read_text())
    (throughput,) = [m for m in results["measurements"] if m["benchmark"] == "throughput"]
    windows = [r["contention"] for r in throughput["stats"]["repeats"]]
    assert len(windows) == 2 and all(w["server_cpu_cores"] is not None for w in windows)
    provenance = results["endpoints"]["smollm2-135m"]
    assert provenance["server_process"]["pid"] == process.pid
    assert "fake_llama_server.py --port" in provenance["server_process"]["command"]
    assert provenance["flag_sources"] == {"total_slots": "observed", "n_ctx_per_slot": "observed"}
    (stored,) = [
        m
        for m in Store(pytester.path / "s.sqlite", create=False).measurements(
            results["run"]["run_id"]
        )
        if m["benchmark"] == "throughput"
    ]
    assert stored["provenance"]["flag_sources"] == provenance["flag_sources"]
    assert stored["provenance"]["server_process"]["pid"] == process.pid
    assert (
        main(["report", str(pytester.path / "r.json"), "--llm-d", str(pytester.path / "llmd.json")])
        == 0
    )
    (report,) = json.loads((pytester.path / "llmd.json").read_text())["reports"]
    native = report["scenario"]["stack"][0]["native"]["config"]
    assert native["flag_sources"] == provenance["flag_sources"]
    assert main(["report", str(pytester.path / "r.json"), "--md", str(pytester.path / "r.md")]) == 0
    line = (pytester.path / "r.md").read_text().splitlines()[2]
    assert line.startswith(
        escape_markdown(
            "llama.cpp llama-server b1, observed: total_slots 1, n_ctx_per_slot 4096 · run "
        )
    )


def test_a_launched_llama_servers_flags_are_observed_and_its_process_named(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The llama.cpp launch path, llama-server being the fake of tests/support/fake_llama_server.py:
    the flags read back from its /props are marked observed."""
    import struct

    launcher = tmp_path / "llama-server"
    launcher.write_text(f'#!/bin/sh\nexec {sys.executable} {FAKE} "$@"\n')
    launcher.chmod(0o755)
    monkeypatch.setenv("MODELSWEEP_LLAMA_SERVER", str(launcher))
    monkeypatch.setenv("MODELSWEEP_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_BUILD_INFO", "b1")
    model = tmp_path / "fake.gguf"  # a GGUF v3 header without tensors: the fake reads nothing
    key, value = b"general.architecture", b"fake"
    model.write_bytes(
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 1)
        + struct.pack("<Q", len(key))
        + key
        + struct.pack("<IQ", 8, len(value))
        + value
        + b"\0" * 4096
    )
    sweep_file = tmp_path / "fake.toml"
    sweep_file.write_text(
        '[sweep]\nname = "fake"\nreference = "m"\n[serving]\n'
        'backend = "llamacpp"\nstartup_timeout_s = 60\n[models.m]\n'
        f'source = "path:{model}"\nlicense = "mit"\nprompting = "completion"\n'
    )
    pool = EndpointPool(
        load_sweep(sweep_file),
        attach={},
        run_dir=tmp_path,
        worker_id="main",
        progress=lambda _: None,
        models=("m",),
    )
    try:
        endpoint = pool.get("m")
        provenance = endpoint.provenance
        assert provenance.how == "llamacpp"
        assert provenance.flag_sources == {
            "total_slots": "observed",
            "n_ctx_per_slot": "observed",
            "cache_prompt": "declared",
        }
        (pid,) = endpoint.server_pids()
        assert provenance.server_process is not None and provenance.server_process["pid"] == pid
    finally:
        pool.close()
