"""API keys and URL credentials: where a key comes from, how it is sent, and the one redaction.

A key for an endpoint comes from, in order: the credentials in its ``--endpoint`` URL
(``http://user:KEY@host`` is sent as HTTP Basic auth; ``http://:KEY@host``, with an empty
user, as ``Authorization: Bearer KEY``), the model's ``api_key_env`` variable in the sweep,
then ``OPENAI_API_KEY``. Every URL or command line we write anywhere goes through
:func:`redact` first.
"""

from __future__ import annotations

import base64
import os
import re
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["Credentials", "auth_headers", "redact", "split_credentials", "wants_key_message"]

_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]*)@")
_PASSWORD_PARAM = re.compile(r"([?&]password=)[^&#\s]*")
"""A ``password=`` URL parameter (libpq takes one in a ``postgresql://`` URL)."""
_MARK = "***"

# Secrets seen in this process (keys from the environment, URL passwords): also
# redacted where they appear outside a URL.
_KNOWN: set[str] = set()


def remember_secret(secret: str | None) -> None:
    """Redact ``secret`` wherever it appears from now on (not for very short strings)."""
    if secret and len(secret) >= 4:
        _KNOWN.add(secret)


def redact(text: str) -> str:
    """``text`` with URL credentials (``user:pass@``, ``?password=``) and every known key
    replaced by ``***``."""
    out = _USERINFO.sub(lambda m: f"{m.group('scheme')}{_MARK}@", text)
    out = _PASSWORD_PARAM.sub(lambda m: f"{m.group(1)}{_MARK}", out)
    for secret in sorted(_KNOWN, key=len, reverse=True):
        out = out.replace(secret, _MARK)
    return out


class Credentials:
    """How to authenticate to one endpoint; the repr never shows the secret."""

    __slots__ = ("scheme", "value")

    def __init__(self, scheme: str, value: str) -> None:
        self.scheme, self.value = scheme, value
        remember_secret(value)

    @property
    def bearer(self) -> str | None:
        """The API key when this is a Bearer key (for ``--api-key`` of a launched server)."""
        return self.value if self.scheme == "Bearer" else None

    def header(self) -> str:
        if self.scheme == "Basic":
            return "Basic " + base64.b64encode(self.value.encode()).decode("ascii")
        return f"Bearer {self.value}"

    def __repr__(self) -> str:
        return f"Credentials({self.scheme}, ***)"


def split_credentials(url: str) -> tuple[str, Credentials | None]:
    """``url`` without its ``user:password@`` part, and the credentials it carried."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    user, password = unquote(user), unquote(password)
    remember_secret(password)
    remember_secret(user if not password else None)
    clean = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    if not user and password:
        return clean, Credentials("Bearer", password)
    if user or password:
        return clean, Credentials("Basic", f"{user}:{password}")
    return clean, None


def key_from_env(api_key_env: str | None) -> Credentials | None:
    """The Bearer key of ``api_key_env`` (when set in the sweep) else ``OPENAI_API_KEY``."""
    value = os.environ.get(api_key_env) if api_key_env else None
    value = value or os.environ.get("OPENAI_API_KEY")
    return Credentials("Bearer", value) if value else None


def auth_headers(credentials: Credentials | None) -> dict[str, str]:
    return {"Authorization": credentials.header()} if credentials is not None else {}


def wants_key_message(model: str) -> str:
    return f"the server wants an API key: set OPENAI_API_KEY or api_key_env for {model}"
