"""Endpoints: one OpenAI-compatible server per model, attached to or launched."""

from __future__ import annotations

from .endpoint import Endpoint, Provenance

__all__ = ["Endpoint", "Provenance"]
