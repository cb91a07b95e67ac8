"""Models tuner runs: embedders (sentence-transformers, cached per text), LLM backends (in-process llama.cpp,
OpenAI-compatible endpoints) behind the cached LLM contract, and named local models assembled from registry parts."""
