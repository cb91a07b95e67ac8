"""Scoring one configuration: id-based retrieval metrics and traces, RAGAS metrics on the judge, and the typed
records (records.py) every result travels in."""
