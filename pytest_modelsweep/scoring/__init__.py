"""Scoring rules, exactly as lm-evaluation-harness (GSM8K) and BFCL (simple) apply them.

Each scorer is a public-API :data:`~..api.evaluation.Scorer` with a ``summarise_*`` of its
records' figures; scorers read the parsed :class:`~..core.records.Completion`, never the
wire format, so a stored item is scored again from the completion its record keeps.
"""
