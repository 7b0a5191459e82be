"""Scoring rules, exactly as lm-evaluation-harness (GSM8K) and BFCL (simple) apply them."""
