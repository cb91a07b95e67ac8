"""Retrieval strategies one at a time: what each index knob does to recall and nDCG, and what it costs.

From the project defaults (words 150/30, title first, BM25 unstemmed, alpha 0.5, top_k 5, no reranker), one knob is
changed at a time and every question of the set is retrieved (no LLM): recall@5, nDCG@10, recall@10 by gold
document ids, the seconds the index took to build (chunk embeddings computed now; the cache is a fresh folder per
set, so every index embeds its new chunks) and the LLM calls per question. A study searches these knobs jointly;
this table says which of them can matter on a set, and what a study pays to try them.

    python bench/strategies.py                          # demo + the smaller shared sets
    python bench/strategies.py --sets demo vaswani_npl  # a large corpus: every chunking embeds ~11k chunks anew
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import PipelineConfig, ProjectConfig
from tuner.data import load_dataset
from tuner.evaluation.rag_eval import RagRunner
from tuner.workspace import open_workspace

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SETS = ("demo", "squad2_dev_normans", "cmu_qa_wikipedia_v1.2", "clapnq_dev")
#: one knob changed at a time from the defaults (an empty change: the defaults themselves)
VARIANTS: dict[str, dict] = {
    "defaults (words 150/30, title, BM25)": {},
    "chunk_size 100": {"chunk_size": 100},
    "chunk_size 250": {"chunk_size": 250},
    "chunk_size 400": {"chunk_size": 400},
    "chunk_overlap 0": {"chunk_overlap": 0},
    "chunker sentences": {"chunker": "sentences"},
    "chunker sections": {"chunker": "sections"},
    "contextual none": {"contextual": "none"},
    "contextual title_path": {"contextual": "title_path"},
    "stemmer english": {"stemmer": "english"},
}
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def measure(name: str, limit: int | None) -> list[list[str]]:
    dataset = load_dataset(None if name == "demo" else DATASETS / name, limit=limit)
    gold = sum(1 for q in dataset.questions if q.relevant_ids)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        workspace = open_workspace(ProjectConfig(cache_dir=Path(cache)), dataset=dataset)
        runner = RagRunner(workspace)
        for label, knobs in VARIANTS.items():
            config = PipelineConfig(**knobs)
            result = runner.evaluate(config, answer=False)
            index = workspace.pipeline.index_for(config)
            built = index.seconds  # the defaults' index was built by open_workspace, the others by evaluate
            calls = result.cost.llm_calls / max(1, len(result.questions))
            r = result.retrieval
            rows.append([f"{name} ({gold} q)", label, f"{r['recall@5']:.3f}", f"{r['ndcg@10']:.3f}",
                         f"{r['recall@10']:.3f}", str(len(index.chunks)), f"{built:.1f}", f"{calls:.1f}"])
            console.print(" | ".join(rows[-1]), highlight=False)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="shared set names, demo, or paths")
    parser.add_argument("--limit", type=int, default=None, help="questions per set (documents: all of them)")
    args = parser.parse_args()
    table = Table(title="one index knob at a time from the defaults: retrieval by gold document ids, no LLM")
    for column in ("set", "strategy", "recall@5", "nDCG@10", "recall@10", "chunks", "index build s",
                   "LLM calls / q"):
        table.add_column(column)
    for name in args.sets:
        if name != "demo" and not (DATASETS / name).is_dir() and not Path(name).exists():
            console.print(f"[yellow]skipped {name}: not in {DATASETS}[/]")
            continue
        for row in measure(name, args.limit):
            table.add_row(*row)
    console.print(table)


if __name__ == "__main__":
    main()
