"""The tests' RAG systems' own retriever: BM25 (bm25s) over the corpus.jsonl named by OWN_SYSTEM_CORPUS (the demo
corpus unless set), indexed once per process, as a deployed system keeps its index. Each test system wraps it the way
its framework wraps a retriever; none of it is tuner's."""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

DEMO = Path(__file__).parents[1] / "tuner/data/demo/corpus.jsonl"


def corpus() -> list[dict]:
    return _index(os.environ.get("OWN_SYSTEM_CORPUS", str(DEMO)))[0]


def search(query: str, k: int) -> list[dict]:
    """The corpus's `k` best documents for `query`, best first."""
    import bm25s

    docs, index = _index(os.environ.get("OWN_SYSTEM_CORPUS", str(DEMO)))
    found, _ = index.retrieve(bm25s.tokenize([query], show_progress=False), k=min(k, len(docs)), show_progress=False)
    return [docs[int(i)] for i in found[0]]


@functools.cache
def _index(path: str):
    import bm25s

    docs = [json.loads(line) for line in Path(path).read_text().splitlines() if line]
    index = bm25s.BM25()
    index.index(bm25s.tokenize([f"{d.get('title', '')} {d['text']}" for d in docs], show_progress=False),
                show_progress=False)
    return docs, index
