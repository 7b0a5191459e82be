"""Reading a data file as UTF-8 text: a file that is not says so in one line, naming its line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import DataError

__all__ = ["read_jsonl", "read_utf8_text"]


def read_utf8_text(path: Path, kind: str, fix: str) -> str:
    """The text of ``path``, a ``kind`` file (``GSM8K``, ``BFCL``...); a :class:`DataError`
    with the OS's reason and ``fix``, or the line and column of its first non-UTF-8 byte."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DataError(f"{path}: cannot read {kind} file ({exc.strerror}); {fix}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise DataError(
            f"{path}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at column {column}); "
            f"{kind} files are UTF-8: convert it (e.g. iconv -f latin1 -t utf-8)"
        ) from None


def read_jsonl(
    path: Path, kind: str, fix: str, shape: str, invalid: str = "not valid JSON"
) -> Iterator[tuple[int, str, Any]]:
    """(line number, line, value) of each non-blank line of a JSON-lines ``kind`` file; a line
    that is not JSON is a :class:`DataError` ``PATH:LINE: <invalid> (why); <shape>``."""
    for lineno, line in enumerate(read_utf8_text(path, kind, fix).splitlines(), start=1):
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise DataError(f"{path}:{lineno}: {invalid} ({exc.msg}); {shape}") from None
            yield lineno, line, value
