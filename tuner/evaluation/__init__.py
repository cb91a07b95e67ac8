"""Scoring: id-based retrieval metrics now; RAGAS metrics and cost accounting join them here."""
