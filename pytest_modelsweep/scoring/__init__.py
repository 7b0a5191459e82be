"""Scoring rules, exactly as lm-evaluation-harness (GSM8K) and BFCL (simple) apply them.

Scorers take ``(item, request, completion)`` and return an :class:`~..records.ItemRecord`;
they read the :class:`~..records.Completion` the client parsed, never the wire format,
so a stored item is scored again from the completion its record keeps.
"""
