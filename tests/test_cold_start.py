"""Cold start: launch → ready → first token, with the cache state said; one real llama-server."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from pytest_modelsweep.core.sweep import load_sweep
from pytest_modelsweep.serving.cold_start import (
    WARM_SHARE,
    cold_start_refusal,
    compile_cache_state,
    measure_cold_starts,
    vllm_cache_dirs,
)


def test_attached_endpoints_cannot_be_cold_started() -> None:
    assert cold_start_refusal("qwen", {"qwen": "http://10.0.0.1:8000"}) == (
        "cold start needs a server this run launches: qwen is attached (--endpoint), so its "
        "start is not ours to time"
    )
    assert cold_start_refusal("qwen", {}) is None and cold_start_refusal("qwen", None) is None


def test_vllm_compile_caches_are_found_as_vllm_finds_them(tmp_path: Path) -> None:
    env = {"VLLM_CACHE_ROOT": str(tmp_path / "root"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    dirs = vllm_cache_dirs(env)
    assert dirs == {
        "torch.compile": tmp_path / "root" / "torch_compile_cache",
        "XLA": tmp_path / "xdg" / "vllm" / "xla_cache",
    }
    cold = compile_cache_state("vllm", env)
    assert cold.warm is False and cold.detail.endswith("absent or empty (cold)")
    (dirs["torch.compile"] / "abc123").mkdir(parents=True)
    warm = compile_cache_state("vllm", env)
    assert warm.warm is True
    assert f"torch.compile cache {dirs['torch.compile']}: 1 entries" in warm.detail
    docker = compile_cache_state("vllm-docker", env)
    assert docker.warm is False and "inside the container" in docker.detail


@pytest.mark.integration
@pytest.mark.timing
def test_cold_start_of_the_embedded_server(tmp_path: Path, real_cache: Path) -> None:
    """Two fresh launches: the first after dropping the model file's pages, the second warm
    (the first one read the file). Alone (``timing``): a test beside it that serves the same
    model keeps the file's pages resident, and its readiness is polled in real time."""
    sweep = load_sweep("embedded")
    sweep = replace(sweep, serving=replace(sweep.serving, max_num_seqs=1, threads=1))
    lines: list[str] = []
    evicted = measure_cold_starts(
        sweep,
        "smollm2-135m",
        launches=1,
        log_dir=tmp_path / "a",
        progress=lines.append,
        evict_page_cache=True,
    ).stats
    warm = measure_cold_starts(
        sweep, "smollm2-135m", launches=1, log_dir=tmp_path / "b", progress=lines.append
    ).stats
    for series in (evicted, warm):
        assert series.backend == "llamacpp" and series.errors == []
        start = series.launches[0]
        assert start.first_token_s is not None and start.first_request_ttft_s is not None
        assert 0 < start.ready_s < start.first_token_s < 120
        assert 0 < start.ready_within_s <= 0.3  # polled every 50 ms at first
        cache = start.cache
        assert cache.kind == "page-cache" and cache.resident_share is not None
        assert cache.warm == (cache.resident_share >= WARM_SHARE)
        assert "SmolLM2-135M-Instruct" in cache.detail
    assert (
        evicted.launches[0].cache.evicted and "after eviction" in evicted.launches[0].cache.detail
    )
    second = warm.launches[0].cache
    assert not second.evicted and second.warm, second.detail
    assert any(line.startswith("cold start smollm2-135m: launch 1/1, ready ") for line in lines)
    record = warm.to_dict()
    assert record["launches"][0]["cache"]["warm"] is True
    assert warm.ready_s_interval is None  # one launch: no interval claimed
    assert len(list((tmp_path / "a").glob("cold-start-1/*.log"))) == 1
