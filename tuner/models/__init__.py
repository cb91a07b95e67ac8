"""Models tuner runs: embedders now; LLM backends join them here."""
