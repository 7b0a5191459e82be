"""Shared by the tests: moved from test_public_api.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from typing import Any

from support.sse_server import ListingServer

SWEEP = """
[sweep]
name = "mine"
reference = "ref"
[serving]
backend = "llamacpp"
[models.ref]
source = "embedded:x"
license = "mit"
served_name = "ref-served"
prompting = "completion"
[models.cand]
source = "embedded:x"
license = "mit"
served_name = "cand-served"
prompting = "chat"
"""


QUESTION = re.compile(r"What is (\d+) \+ (\d+)\?")


class ArithmeticServer(ListingServer):
    """The fake server, answering the last ``What is A + B?`` of a request with the sum (or,
    for the ``wrong`` values of A, the sum plus one), as one non-streamed JSON answer naming
    the model asked for, or for the values of A in ``answered_by`` that model (a proxy that
    routes those questions to another model)."""

    def __init__(
        self,
        served_name: str,
        wrong: tuple[int, ...] = (),
        answered_by: Mapping[int, str] | None = None,
    ) -> None:
        super().__init__(served_name)
        self.wrong = wrong
        self.answered_by = dict(answered_by or {})

    async def _dispatch(
        self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter
    ) -> bool:
        if method != "POST" or path not in ("/v1/completions", "/v1/chat/completions"):
            return await super()._dispatch(method, path, body, writer)
        data = json.loads(body)
        self.stats.bodies.append(data)
        prompt = data.get("prompt") or data["messages"][-1]["content"]
        a, b = (int(n) for n in QUESTION.findall(prompt)[-1])
        text = f" {a + b + (a in self.wrong)}"
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop"}
        if path == "/v1/completions":
            choice["text"] = text
        else:
            choice["message"] = {"role": "assistant", "content": text}
        answer = {
            "choices": [choice],
            "usage": {"prompt_tokens": 10, "completion_tokens": 1},
            "model": self.answered_by.get(a, data.get("model")),
        }
        return await self._respond(writer, 200, "application/json", json.dumps(answer).encode())


def options(servers: tuple[ListingServer, ListingServer], *args: str) -> list[str]:
    reference, candidate = servers
    return [
        "--sweep=mine.toml",
        f"--endpoint=ref={reference.base_url}",
        f"--endpoint=cand={candidate.base_url}",
        "--store=store.sqlite",
        "--strict-markers",
        "-W",
        "error::pytest.PytestUnknownMarkWarning",
        "-p",
        "no:cacheprovider",
        *args,
    ]
