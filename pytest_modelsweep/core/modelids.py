"""Which model a test id belongs to: ``test_throughput[qwen3-4b-c16]`` → ``qwen3-4b``."""

from __future__ import annotations

from collections.abc import Iterable


class ModelIdParser:
    """Finds the model name at the start of a test id's parameters: the longest known name
    that is the whole parameter string or is followed by ``-`` (names may hold dashes)."""

    def __init__(self, model_names: Iterable[str]) -> None:
        self.names = sorted(set(model_names), key=len, reverse=True)

    def model_of(self, nodeid: str) -> str | None:
        open_at = nodeid.find("[")
        if open_at < 0 or not nodeid.endswith("]"):
            return None
        params = nodeid[open_at + 1 : -1]
        return next(
            (name for name in self.names if params == name or params.startswith(name + "-")),
            None,
        )
