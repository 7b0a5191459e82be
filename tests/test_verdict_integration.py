"""A real paired verdict on the embedded default, and the refusal to pair unlike serving."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REAL_CACHE, SHARED_DATA, embedded_sweep_with
from support.requirements import SHARED_DATA_HINT, need

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[1]
GSM8K = SHARED_DATA / "gsm8k" / "test.jsonl"


def sweep_with_slots(tmp: Path, slots: int) -> Path:
    """One thread a server: one of two threads spins on its barrier whenever another test
    takes a core, and the suite runs other tests beside this one."""
    return embedded_sweep_with(tmp / f"slots{slots}.toml", threads=1, max_num_seqs=slots)


def run(tmp: Path, model: str, sweep: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        sys.executable,
        "-m",
        "pytest",
        str(ROOT / "benches" / "test_accuracy.py"),  # its verdict tests too
        "-m",
        "gsm8k",
        "--model",
        model,
        "--limit",
        "2",
        "--gsm8k-max-tokens",
        "16",
        "--gsm8k-path",
        str(GSM8K),
        "--sweep",
        str(sweep),
        "--store",
        str(tmp / "store.sqlite"),
        "--modelsweep-dir",
        str(tmp / "work"),
        "-p",
        "no:cacheprovider",
        "-s",
    ]
    env = {**os.environ, "MODELSWEEP_CACHE": str(REAL_CACHE)}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def test_real_verdict_and_refusal_of_unlike_serving(tmp_path: Path) -> None:
    need(GSM8K.is_file(), f"GSM8K data not found at {GSM8K}; {SHARED_DATA_HINT}")
    # the pair with four slots each, the unlike run with two
    four, two = sweep_with_slots(tmp_path, 4), sweep_with_slots(tmp_path, 2)
    reference = run(tmp_path, "gemma3-270m", four)
    assert reference.returncode == 0, reference.stdout[-3000:]

    unlike = run(tmp_path, "smollm2-135m", two)
    assert unlike.returncode == 1, unlike.stdout[-3000:]
    assert (
        "refusing to pair smollm2-135m with gemma3-270m: serving setting total_slots differs "
        "(smollm2-135m: 2, gemma3-270m: 4); serve every model with identical settings"
        in unlike.stdout
    )

    paired = run(tmp_path, "smollm2-135m", four)
    assert paired.returncode == 0, paired.stdout[-3000:]
    line = next(
        line
        for line in paired.stdout.splitlines()
        if "smollm2-135m vs gemma3-270m on gsm8k" in line
    )
    assert "95% interval [" in line and "n=2" in line
