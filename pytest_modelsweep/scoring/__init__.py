"""Scoring rules, exactly as lm-evaluation-harness (GSM8K) and BFCL (simple) apply them.

Each benchmark's scorer is a public-API :data:`~..api.evaluation.Scorer`:
``(completion, item) -> Score`` (``score_gsm8k_answer``, ``score_bfcl_answer``), with a
``summarise_*`` of its records' own figures. Scorers read the
:class:`~..core.records.Completion` the client parsed, never the wire format, so a stored
item is scored again from the completion its record keeps; the ``evaluate`` fixture's
:func:`~..api.evaluation.scored_record` turns a score into the item's
:class:`~..core.records.ItemRecord` (and never calls a scorer for a failed item).
"""
