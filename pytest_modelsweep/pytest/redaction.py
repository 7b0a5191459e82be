"""pytest's own outputs of a modelsweep run (terminal, junit, pytest-html) carry no secret:
every text of a test report is redacted before any reporter reads it (on an xdist worker,
before the report travels), its structure left as it was."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ..core.secrets import redact


def _redacted(value: Any) -> Any:
    """``value`` with every string in it redacted (lists and pytest's dataclasses in place)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        value[:] = [_redacted(v) for v in value]
        return value
    if isinstance(value, tuple):
        return tuple(_redacted(v) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):  # (frozen ones too)
            object.__setattr__(value, field.name, _redacted(getattr(value, field.name)))
        return value
    if hasattr(value, "longrepr") and isinstance(value.longrepr, str):  # CollectErrorRepr
        value.longrepr = redact(value.longrepr)
    return value


def redact_report(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Redact the report's failure representation and captured sections in place."""
    if report.longrepr is not None:
        report.longrepr = _redacted(report.longrepr)
    report.sections = [(title, redact(content)) for title, content in report.sections]
