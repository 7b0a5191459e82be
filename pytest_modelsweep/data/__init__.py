"""The data sets the built-in benchmarks read: their record types and loaders. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.errors import DataError


def expect_full_set(records: Sequence[Any], size: int, what: str, whole: str) -> None:
    """Raise DataError unless a full (un-limited) run has exactly ``size`` records of the
    ``what`` set (its records' ``source`` named), whose ``whole`` the message asks for."""
    if len(records) != size:
        raise DataError(
            f"{records[0].source if records else what + ' set'}: {len(records)} {what} records, "
            f"expected {size}; use the complete {whole} (or limit the run explicitly)"
        )
