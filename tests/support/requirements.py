"""What a test needs from the machine (a tool, a data folder): a skip locally, a failure in CI.

Under ``CI=true`` a missing requirement fails the test with the same line a
local run shows as its skip reason, so a moved data path or a tool that did not
install cannot turn part of the suite into silent skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

SHARED_DATA_HINT = "put the shared data folder at ../shared/data beside the checkout (see README)"


def running_in_ci() -> bool:
    """``CI=true`` (set by CI services and ``.ci/run``)."""
    return os.environ.get("CI", "").strip().lower() in ("true", "1")


def need(condition: bool, what: str) -> None:
    """Go on when ``condition`` holds; otherwise skip with ``what`` locally, fail with it in CI.

    ``what`` names what is missing and how to get it.
    """
    if condition:
        return
    if running_in_ci():
        pytest.fail(f"CI=true, so this does not skip: {what}", pytrace=False)
    pytest.skip(what)


def module_needs(condition: bool, what: str) -> Any:
    """An autouse module fixture applying :func:`need` to every test of a module.

    Assign it to a module global; it runs before the module's other module-scoped
    fixtures, so none of them reads a missing file first.
    """

    def requirement() -> Iterator[None]:
        need(condition, what)
        yield

    return pytest.fixture(autouse=True, scope="module", name="module_requirement")(requirement)
