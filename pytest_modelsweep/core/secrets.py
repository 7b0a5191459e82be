"""API keys and URL credentials: where a key comes from, how it is sent, and the one redaction.

A key comes from the ``--endpoint`` URL (``user:KEY@`` as Basic auth, ``:KEY@`` as Bearer),
else the model's ``api_key_env``, else ``OPENAI_API_KEY``. Every text that leaves the
process goes through :func:`redact` (:func:`redacted` for JSON-like data). The key is held
only where it is sent, in objects whose reprs never show it (not even ``pytest -l``).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

_SECRET_NAME = (
    r"[^=&#/\s'\"<>]*(?:pass|pwd|token|key|secret|auth|credential|sig)"
    r"[^=&#/\s'\"<>]*="
)
"""A parameter's or variable's name that looks like a secret's, and its ``=``."""
_SECRETS_IN_TEXT = (
    # scheme://…@ up to the last @ before a space or quote (a key holding /, # or @ too)
    # that is not an image digest's (…/vllm@sha256:…)
    re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://(?P<secret>[^\s'\"<>]*)@(?!sha\d+:)"),
    # a URL parameter named like a secret: ?api_key=, &password=, &sig=
    re.compile(rf"[?&]{_SECRET_NAME}(?P<secret>[^&#\s'\"<>]*)", re.IGNORECASE),
    # an xdist gateway's env:NAME=VALUE (up to the next //) named like a secret
    re.compile(rf"\benv:{_SECRET_NAME}(?P<secret>(?:(?!//)[^\s'\"<>])*)", re.IGNORECASE),
)
"""Where a secret sits in a text; overlapping finds are hidden together (more, never less)."""
_MARK = "***"

# Secrets seen in this process (keys from the environment, URL passwords): also
# redacted where they appear outside a URL.
_KNOWN: set[str] = set()


def remember_secret(secret: str | None) -> None:
    """Redact ``secret`` wherever it appears from now on (not for very short strings)."""
    if secret and len(secret) >= 4:
        _KNOWN.add(secret)


def remember_env_keys(names: Iterable[str | None]) -> None:
    """Remember the keys of ``OPENAI_API_KEY`` and of ``names``, so a process that never
    sends with them (xdist's controller) still redacts them."""
    for name in ("OPENAI_API_KEY", *names):
        if name:
            remember_secret(os.environ.get(name))


def redact(text: str) -> str:
    """``text`` with URL credentials (``user:pass@``, ``?api_key=``), xdist's secret
    ``env:NAME=`` values and every known key replaced by ``***``."""
    if "@" in text or "=" in text:
        pieces, at = [], 0
        for start, stop in sorted(
            m.span("secret") for pattern in _SECRETS_IN_TEXT for m in pattern.finditer(text)
        ):
            if start >= at:
                pieces += [text[at:start], _MARK]
            at = max(at, stop)
        text = "".join(pieces) + text[at:]
    for secret in sorted(_KNOWN, key=len, reverse=True):
        text = text.replace(secret, _MARK)
    return text


def redacted(value: Any) -> Any:
    """A JSON-like value with :func:`redact` applied to every string in it, keys included."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {redacted(k): redacted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redacted(v) for v in value]
    return value


class SecretHeaders(dict[str, str]):
    """Request headers that carry a key: sent as they are, shown (repr) without it."""

    def __repr__(self) -> str:
        return repr({k: (_MARK if k.lower() == "authorization" else v) for k, v in self.items()})


class SecretBytes(bytes):
    """A request on the wire that carries a key in its head: sent as it is, never shown."""

    def __repr__(self) -> str:
        return f"<request, {len(self)} bytes, credentials not shown>"


class Credentials:
    """How to authenticate to one endpoint; the repr never shows the secret."""

    __slots__ = ("scheme", "value")

    def __init__(self, scheme: str, value: str) -> None:
        __tracebackhide__ = True
        self.scheme, self.value = scheme, value
        remember_secret(value)
        if scheme == "Basic":  # a server that echoes the header echoes this form
            remember_secret(self.header().partition(" ")[2])

    @property
    def bearer(self) -> str | None:
        """The API key when this is a Bearer key (for ``--api-key`` of a launched server)."""
        return self.value if self.scheme == "Bearer" else None

    def header(self) -> str:
        __tracebackhide__ = True
        if self.scheme == "Basic":
            return "Basic " + base64.b64encode(self.value.encode()).decode("ascii")
        return f"Bearer {self.value}"

    def __repr__(self) -> str:
        return f"Credentials({self.scheme}, ***)"


def endpoint_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be used as it is, in words that never show a key; None when it
    can. Credentials holding ``/``, ``?`` or ``#`` (which end the host early), a query and a
    fragment are refused."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not url.startswith(f"{parts.scheme}://"):
        return "the URL must start with http:// or https://"
    if any(char.isspace() for char in url):
        return "the URL holds a space; percent-encode it (%20)"
    if "@" in url[len(parts.scheme) + 3 :] and "@" not in parts.netloc:
        return (
            "its credentials hold a '/', '?' or '#', which a URL reads as the end of the "
            "host: percent-encode them in the key (/ as %2F, ? as %3F, # as %23), or give "
            "the key in OPENAI_API_KEY or the model's api_key_env variable instead"
        )
    if "?" in url or "#" in url:
        return (
            "a query (?…) or fragment (#…) is not sent with the requests: drop it, and give "
            "a key as http://:KEY@HOST, in OPENAI_API_KEY or in the model's api_key_env "
            "variable"
        )
    try:
        _ = parts.port
    except ValueError:
        return "its port is not a number from 0 to 65535, e.g. http://10.0.0.5:8000"
    if not parts.hostname:
        return "it names no host, e.g. http://10.0.0.5:8000"
    return None


def split_credentials(url: str) -> tuple[str, Credentials | None]:
    """``url`` without its ``user:password@`` part, and the credentials it carried."""
    __tracebackhide__ = True
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
    __tracebackhide__ = True
    value = (os.environ.get(api_key_env) if api_key_env else None) or os.environ.get(
        "OPENAI_API_KEY"
    )
    return Credentials("Bearer", value) if value else None


def auth_headers(
    credentials: Credentials | None, others: Mapping[str, str] | None = None
) -> SecretHeaders:
    """``others`` and the ``Authorization`` header of ``credentials``; the repr hides the key."""
    __tracebackhide__ = True
    headers = SecretHeaders(others or {})
    if credentials is not None:
        headers["Authorization"] = credentials.header()
    return headers


def wants_key_message(model: str) -> str:
    return f"the server wants an API key: set OPENAI_API_KEY or api_key_env for {model}"
