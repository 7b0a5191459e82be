"""Where the store is: a SQLite file or a PostgreSQL database, told apart by the ``--store`` value.

``PATH`` or ``sqlite:///PATH`` is a SQLite file; ``postgresql://…`` (also ``postgres://``,
``postgresql+psycopg://``) a PostgreSQL database, libpq's ``PG*`` variables filling what it
leaves out; any other scheme is refused. A password in the URL is remembered as a secret
the moment it is read, and the location shows itself without it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from .errors import ModelsweepError
from .secrets import remember_secret

StoreKind = Literal["sqlite", "postgresql"]

POSTGRES_SCHEMES = ("postgresql", "postgres", "postgresql+psycopg")
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]+)://")
FORMS = "a file path (SQLite), sqlite:///PATH or postgresql://USER@HOST:PORT/DATABASE"


class StoreLocationError(ModelsweepError):
    """A ``--store`` value that names no store this version can use."""


@dataclass(frozen=True)
class StoreLocation:
    """A SQLite file (``path``) or a PostgreSQL database (``url``, with its credentials)."""

    kind: StoreKind
    path: Path | None = None
    url: str = field(default="", repr=False)
    """``postgresql://…`` as given (password included): only for connecting."""

    @classmethod
    def file(cls, path: Path | str) -> StoreLocation:
        return cls("sqlite", path=Path(path))

    @property
    def shown(self) -> str:
        """How messages name the store: the path, or the URL without its password."""
        return str(self.path) if self.path is not None else _without_password(self.url)

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"StoreLocation({self.kind}, {self.shown!r})"


def parse_store_location(value: str | Path | StoreLocation) -> StoreLocation:
    """The store ``value`` names; a form no store has raises :class:`StoreLocationError`."""
    if isinstance(value, StoreLocation):
        return value
    if isinstance(value, Path):
        return StoreLocation.file(value)
    text = value.strip()
    if not text:
        raise StoreLocationError(f"an empty store location; give {FORMS}")
    match = _SCHEME.match(text)
    if match is None:
        return StoreLocation.file(os.path.expanduser(text))
    scheme = match.group("scheme").lower()
    rest = text[match.end() :]
    if scheme == "sqlite":
        return _sqlite_location(rest)
    if scheme in POSTGRES_SCHEMES:
        return _postgres_location(rest)
    raise StoreLocationError(f"{scheme}:// is not a store this version can use; give {FORMS}")


def _sqlite_location(rest: str) -> StoreLocation:
    """``sqlite:///relative/path`` or ``sqlite:////absolute/path`` (SQLAlchemy's forms)."""
    path = rest[1:] if rest.startswith("/") else ""
    if not path or path == ":memory:" or "?" in path:
        raise StoreLocationError(
            "sqlite:// needs a file, written sqlite:///relative/path or "
            "sqlite:////absolute/path (an in-memory database keeps nothing across the "
            "run's processes; URL parameters are not taken)"
        )
    return StoreLocation.file(os.path.expanduser(path))


def _postgres_location(rest: str) -> StoreLocation:
    """A password holding ``/``, ``?``, ``#`` or ``@`` (an ``@`` that no URL parser reads as
    the end of the credentials) is refused without showing any of it."""
    url = "postgresql://" + rest
    parts = urlsplit(url)
    if "@" in (
        parts.netloc.partition("@")[2]
        + parts.path
        + parts.fragment
        + ("" if "@" in parts.netloc else parts.query)
    ):
        raise StoreLocationError(
            "the --store URL's user name or password holds a '/', '?', '#' or '@', which a URL "
            "reads as the end of it: percent-encode them (/ as %2F, ? as %3F, # as %23, @ as "
            "%40), or give the password in PGPASSWORD"
        )
    userinfo = parts.netloc.rpartition("@")[0]
    remember_secret(unquote(userinfo.partition(":")[2]) or None)
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "password":
            remember_secret(value)
    try:
        _ = parts.port  # a port that is no number raises here
    except ValueError:
        raise StoreLocationError(
            f"{_without_password(url)}: the port is not a number; write "
            "postgresql://USER@HOST:PORT/DATABASE"
        ) from None
    if parts.path.count("/") > 1:
        raise StoreLocationError(
            f"{_without_password(url)}: a database name has no '/'; write "
            "postgresql://USER@HOST:PORT/DATABASE"
        )
    return StoreLocation("postgresql", url=url)


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    userinfo, at, hostport = parts.netloc.rpartition("@")
    user = userinfo.partition(":")[0]
    netloc = f"{user}{at}{hostport}" if at else hostport
    query = urlencode(
        [
            (k, "***" if k == "password" else v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
        ],
        safe="*",
    )
    # by hand: urlunsplit drops the "//" of an empty host (postgresql:///db, host from PGHOST)
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
