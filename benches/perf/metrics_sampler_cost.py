"""What the server-metrics sampler costs the client: CPU per scrape and share of a core.

Run: ``python benches/perf/metrics_sampler_cost.py [--seconds S] [--interval I] [--url URL]``

Without ``--url`` a page is served from a separate process (``python -m http.server``
on 127.0.0.1, so that its CPU is not ours) in two shapes:

* ``vllm``: the size of vLLM 0.32's ``/metrics`` for one model: 19 histograms of
  ~25 buckets (``_bucket``/``_sum``/``_count``/``_created`` lines), ~25 counters and
  gauges with ``engine`` and ``model_name`` labels, process and HTTP metrics: about
  650 sample lines and 55 KB;
* ``llamacpp``: llama-server's (15 counters and gauges with HELP/TYPE lines).

With ``--url`` it samples that server's ``/metrics`` (``--kind vllm|llamacpp|openai``).
The sampler runs for S seconds (default 10) at interval I (default the sampler's 0.333 s);
the figure is its own CPU (``time.thread_time`` of its thread plus the first and last
scrapes in the caller's thread) over the wall time, in cores, and per scrape in ms.
The target is under 1% of a core.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_modelsweep.serving.process import free_port
from pytest_modelsweep.serving.server_metrics import DEFAULT_INTERVAL_S, MetricsSampler

LABELS = 'engine="0",model_name="Qwen/Qwen3-4B"'


def vllm_sized_page() -> str:
    lines: list[str] = []
    for h in range(19):
        name = f"vllm:histogram_{h}_seconds"
        lines += [f"# HELP {name} A latency histogram.", f"# TYPE {name} histogram"]
        for b in range(24):
            lines.append(f'{name}_bucket{{{LABELS},le="{0.001 * 2**b:g}"}} {b * 3.0}')
        lines.append(f'{name}_bucket{{{LABELS},le="+Inf"}} 80.0')
        lines += [
            f"{name}_count{{{LABELS}}} 80.0",
            f"{name}_sum{{{LABELS}}} 12.5",
            f"{name}_created{{{LABELS}}} 1.7e9",
        ]
    gauges = [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:engine_sleep_state",
    ]
    counters = [
        "vllm:num_preemptions",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
        "vllm:prefix_cache_queries",
        "vllm:prefix_cache_hits",
        "vllm:external_prefix_cache_queries",
        "vllm:external_prefix_cache_hits",
        "vllm:mm_cache_queries",
        "vllm:mm_cache_hits",
        "vllm:prompt_tokens_cached",
        "vllm:request_success",
        "vllm:corrupted_requests",
    ]
    for name in gauges:
        lines += [f"# TYPE {name} gauge", f"{name}{{{LABELS}}} 3.0"]
    for name in counters:
        lines += [
            f"# TYPE {name} counter",
            f"{name}_total{{{LABELS}}} 12345.0",
            f"{name}_created{{{LABELS}}} 1.7e9",
        ]
    for reason in ("stop", "length", "abort", "error", "repetition"):
        lines.append(f'vllm:request_success_total{{{LABELS},finished_reason="{reason}"}} 7.0')
    for handler in ("/v1/completions", "/v1/chat/completions", "/metrics", "/health"):
        for b in range(12):
            lines.append(
                f'http_request_duration_seconds_bucket{{handler="{handler}",'
                f'method="POST",le="{0.01 * 2**b:g}"}} {b}.0'
            )
    for i in range(40):
        lines.append(f"process_metric_{i} {i}.0")
    return "\n".join(lines) + "\n"


def llamacpp_page() -> str:
    names = [
        "prompt_tokens_total",
        "prompt_tokens_cached_total",
        "prompt_seconds_total",
        "tokens_predicted_total",
        "tokens_predicted_seconds_total",
        "n_decode_total",
        "n_tokens_max",
        "spec_decode_num_draft_tokens_total",
        "spec_decode_num_accepted_tokens_total",
        "spec_decode_num_drafts_total",
        "prompt_tokens_seconds",
        "predicted_tokens_seconds",
        "requests_processing",
        "requests_deferred",
        "n_busy_slots_per_decode",
    ]
    return "".join(
        f"# HELP llamacpp:{n} x\n# TYPE llamacpp:{n} counter\nllamacpp:{n} 42\n" for n in names
    )


def measure(url: str, kind: str, seconds: float, interval: float) -> tuple[float, float, int]:
    sampler = MetricsSampler(url, kind, interval_s=interval)
    with sampler:
        time.sleep(seconds)
    window = sampler.window
    assert window is not None
    if window.unavailable:
        raise SystemExit(window.unavailable)
    cost = window.cost
    per_scrape_ms = 1e3 * cost.cpu_s / max(cost.scrapes, 1)
    return cost.cpu_cores or 0.0, per_scrape_ms, cost.scrapes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_S)
    parser.add_argument("--url", help="sample this server's /metrics instead")
    parser.add_argument("--kind", default="openai", choices=["vllm", "llamacpp", "openai"])
    args = parser.parse_args()
    if args.url:
        pages = [(args.kind, args.url, None)]
    else:
        pages = [("vllm", "", vllm_sized_page()), ("llamacpp", "", llamacpp_page())]
    print(f"sampler at {args.interval:g} s for {args.seconds:g} s; target < 1% of a core")
    print(f"{'page':>9} {'size':>8} {'scrapes':>8} {'CPU/scrape':>11} {'cores':>8}")
    worst = 0.0
    for kind, url, text in pages:
        server = None
        with tempfile.TemporaryDirectory() as tmp:
            size = "remote"
            if text is not None:
                (Path(tmp) / "metrics").write_text(text)
                port = free_port()
                server = subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "http.server",
                        str(port),
                        "--bind",
                        "127.0.0.1",
                        "--directory",
                        tmp,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                url = f"http://127.0.0.1:{port}"
                size = f"{len(text) / 1024:.0f} KB"
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:  # until it listens
                    if MetricsSampler(url, kind).start().stop().unavailable is None:
                        break
                    time.sleep(0.1)
            try:
                cores, per_scrape, scrapes = measure(url, kind, args.seconds, args.interval)
            finally:
                if server is not None:
                    server.terminate()
                    server.wait()
        worst = max(worst, cores)
        print(f"{kind:>9} {size:>8} {scrapes:>8} {per_scrape:>8.2f} ms {100 * cores:>7.2f}%")
    print("target met" if worst < 0.01 else "target missed")
    return 0 if worst < 0.01 else 1


if __name__ == "__main__":
    raise SystemExit(main())
