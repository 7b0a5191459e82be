"""The PostgreSQL database of a store: connected with psycopg 3, refusals in one line each.

What the URL leaves out libpq takes from ``PG*`` variables and ``PGPASSFILE``, as ``psql``
does. No password is ever shown. Connection failures are told apart by libpq's words
(it gives them no SQLSTATE).
"""

from __future__ import annotations

import os
import re
from urllib.parse import parse_qsl, urlsplit

from sqlalchemy import Engine, create_engine
from sqlalchemy.engine import make_url

from ..core.errors import DataError
from ..core.secrets import redact, remember_secret
from ..core.store_location import StoreLocation

CONNECT_TIMEOUT_S = 10
"""libpq's ``connect_timeout`` unless the URL sets one: a silent host fails in this long."""

INSTALL_FIX = "pip install 'pytest-modelsweep[postgres]' (psycopg 3)"


def postgres_engine(location: StoreLocation) -> Engine:
    """An engine for ``location`` (nothing is connected yet); no driver is a DataError."""
    remember_secret(os.environ.get("PGPASSWORD"))
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise DataError(
            f"{location}: the PostgreSQL driver is not installed; {INSTALL_FIX}"
        ) from None
    url = make_url(location.url).set(drivername="postgresql+psycopg")
    query = dict(parse_qsl(urlsplit(location.url).query))
    connect_args: dict[str, object] = {
        "application_name": "pytest-modelsweep",
        **({} if "connect_timeout" in query else {"connect_timeout": CONNECT_TIMEOUT_S}),
    }
    # pre-ping: a connection the server closed meanwhile (a restart) is replaced, not used
    return create_engine(
        url,
        connect_args=connect_args,
        pool_pre_ping=True,
        pool_size=2,
        max_overflow=2,
        hide_parameters=True,
    )


_CONNECT_FIXES = (
    (
        r'password authentication failed for user "([^"]*)"',
        "the server {server} refused the "
        "password of user {0!r}; fix the password in --store, PGPASSWORD or PGPASSFILE",
    ),
    (
        r"no password supplied",
        "the server {server} wants a password; put it in PGPASSWORD, "
        "PGPASSFILE or the URL (postgresql://USER:PASSWORD@HOST/DB)",
    ),
    (
        r'role "([^"]*)" does not exist',
        "the server {server} has no user {0!r}; fix the user in "
        "--store (or PGUSER), or create it (createuser)",
    ),
    (
        r'database "([^"]*)" does not exist',
        "the server {server} has no database {0!r}; create "
        "it (createdb {0}) or fix the database in --store",
    ),
    (
        r"Connection refused|No such file or directory",
        "no PostgreSQL server answers at {server} "
        "(connection refused); start it, or fix the host and port in --store (or PGHOST, PGPORT)",
    ),
    (
        r"timeout expired",
        "no answer from {server} within the connect timeout ({timeout} s); "
        "check that the server is up and reachable, or the host in --store",
    ),
)


def connect_error(location: StoreLocation, message: str) -> DataError:
    """libpq's message on a failed connection → one line naming the fix."""
    text = redact(" ".join(message.split()))
    timeout = dict(parse_qsl(urlsplit(location.url).query)).get(
        "connect_timeout", str(CONNECT_TIMEOUT_S)
    )
    for pattern, line in _CONNECT_FIXES:
        if m := re.search(pattern, text):
            return DataError(
                f"{location}: "
                + line.format(*m.groups(), server=_server(text, location), timeout=timeout)
            )
    detail = text.removeprefix("connection failed: ")
    return DataError(
        f"{location}: cannot connect ({detail}); check the server and the URL in --store"
    )


def _server(text: str, location: StoreLocation) -> str:
    """``HOST:PORT`` (or the socket) of libpq's message, else the URL's host and port, else
    the environment's."""
    if m := re.search(r'connection to server at "([^"]*)"(?: \([^)]*\))?, port (\d+)', text):
        return f"{m.group(1)}:{m.group(2)}"
    if m := re.search(r'connection to server on socket "([^"]*)"', text):
        return m.group(1)
    url = urlsplit(location.url)
    return (
        f"{url.hostname}:{url.port or os.environ.get('PGPORT') or 5432}"
        if url.hostname
        else "(PGHOST or the default socket)"
    )
