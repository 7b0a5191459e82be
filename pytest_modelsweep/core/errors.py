"""Errors that reach the user as one line that names the fix.

Every failure the plugin can predict is a :class:`ModelsweepError`; the plugin turns it into
a usage error or a failed or skipped test with exactly that line.
"""

from __future__ import annotations


class ModelsweepError(Exception):
    """A problem the user can fix; ``str(error)`` is the whole message."""


class SweepError(ModelsweepError):
    """The sweep file is missing, not TOML, or has a key of the wrong shape."""


class UnknownModelError(ModelsweepError):
    """A model name that the sweep does not define."""


class EndpointError(ModelsweepError):
    """An endpoint could not be attached to, started, or read back."""


class ServerStartError(EndpointError):
    """A server process exited or never became ready; the message carries its log tail."""


class ServerStartedTwiceError(EndpointError):
    """One model's server was asked to start a second time in one run."""


class DataError(ModelsweepError):
    """A benchmark data file is missing, malformed or has the wrong record count."""


class ProvisionError(ModelsweepError):
    """The embedded default could not be provisioned (server build or model files)."""


class MeasurementError(ModelsweepError):
    """A measurement broke its own rules (short answer, cut stream, counter mismatch)."""


class ScorerError(ModelsweepError):
    """A benchmark's scorer returned something that is not a score."""


class BenchmarkDeclarationError(ModelsweepError):
    """A test evaluates a benchmark it does not declare (or declares another)."""
