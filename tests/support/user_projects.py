"""A new user's project, as the hostile-user tests drive it: a sweep of fake-served models, a
benchmark written with the public API, small file systems that fill up.

The models are attached with ``--endpoint`` to one fake OpenAI-compatible server
(tests/support/sse_server.py) that serves them all under their own names; each answer is
``max_tokens`` words `` w0 w1 …``, so an item's answer is as long as a test needs.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

MODELS = ("ref", "cand", "third")

SWEEP = """
[sweep]
name = "mine"
reference = "ref"
[serving]
backend = "llamacpp"
""" + "".join(
    f"""[models.{name}]
source = "embedded:x"
license = "mit"
prompting = "completion"
"""
    for name in MODELS
)

# The user's benchmark: ITEMS items whose answers are ANSWER_WORDS words long; an item says
# w0 (every answer does), so every item is scored correct.
EVAL = """
import pytest
from pytest_modelsweep import EvalItem

ITEMS = [EvalItem(f"q{{i:02d}}", prompt=f"question {{i}}: say w0", answer="w0",
                  max_tokens={words}, extra_body={extra!r}) for i in range({items})]

def says_w0(completion, item):
    return (completion.text or "").strip().startswith("w0")

@pytest.mark.modelsweep_benchmark("{name}")
def test_{name}(evaluate):
    evaluate("{name}", ITEMS, says_w0, concurrency=2)
"""


def eval_bench(
    *, items: int = 4, words: int = 4, extra: dict[str, str] | None = None, name: str = "my_eval"
) -> str:
    """The source of a user's accuracy benchmark file."""
    return EVAL.format(items=items, words=words, extra=extra or {}, name=name)


# The user's throughput shape, at concurrency 2.
SHAPE = """
import pytest

PROMPTS = ["summarise the incident report", "translate the release notes",
           "draft a reply to a customer"]

@pytest.mark.modelsweep_benchmark("my_shape", kind="throughput")
@pytest.mark.parametrize("concurrency", [2], ids=lambda c: f"c{c}")
def test_my_shape(measure_throughput, concurrency):
    measure_throughput("my_shape", PROMPTS, concurrency=concurrency, output_tokens=6)
"""


def project(pytester: pytest.Pytester, **files: str) -> pytest.Pytester:
    """A fresh project: the sweep ``mine.toml`` and the given test files."""
    (pytester.path / "mine.toml").write_text(SWEEP)
    pytester.makepyfile(**files)
    return pytester


def options(base_url: str, *args: str, models: tuple[str, ...] = MODELS) -> list[str]:
    """The options of a run of ``models``, each attached to the server at ``base_url``."""
    return [
        "--sweep=mine.toml",
        *(f"--endpoint={m}={base_url}" for m in models),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:randomly",
        *args,
    ]


def output(result: pytest.RunResult) -> str:
    return result.stdout.str() + result.stderr.str()


def assert_no_traceback(result: pytest.RunResult) -> None:
    """No INTERNALERROR, no Python traceback: every failure was one line."""
    out = output(result)
    assert "INTERNALERROR" not in out, out[-3000:]
    assert "Traceback (most recent call last)" not in out, out[-3000:]


@contextlib.contextmanager
def small_disk(where: Path, size: str, *, read_only: bool = False) -> Iterator[Path]:
    """A real small file system (tmpfs of ``size``, e.g. ``96k``) mounted at ``where``: a
    disk that fills up, or refuses every write. Skips the test where nothing can be mounted
    (not root, or no CAP_SYS_ADMIN)."""
    where.mkdir(parents=True, exist_ok=True)
    options = f"size={size}" + (",ro" if read_only else "")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(
            f"cannot mount a small tmpfs here ({mounted.stderr.strip()}): a full disk needs one"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
