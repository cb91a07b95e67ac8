"""Retrieval benchmark: index build, embedding throughput, query latency, re-fusion latency, and quality.

    python bench/retrieval.py                      # speed on cmu_qa_wikipedia and vaswani_npl
    python bench/retrieval.py --quality            # also recall@5 / nDCG@10 at alpha 0, 0.5, 1

Speed runs embed into a fresh temporary cache, so embeddings/s is real model throughput. Figures are printed,
never asserted: record them in the README's performance section.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import PipelineConfig, ProjectConfig
from tuner.evaluation.retrieval_eval import evaluate_retrieval
from tuner.pipeline.fusion import hybrid
from tuner.workspace import open_workspace

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SPEED_SETS = ("cmu_qa_wikipedia_v1.2", "vaswani_npl")
QUALITY_SETS = ("squad2_dev_normans", "clapnq_dev", "vaswani_npl")
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def median_ms(samples: list[float]) -> float:
    return 1000 * statistics.median(samples)


def speed(name: str, queries: int) -> list[str]:
    with tempfile.TemporaryDirectory() as cache:
        workspace = open_workspace(ProjectConfig(cache_dir=Path(cache)), DATASETS / name)
    index, pipeline = workspace.index, workspace.pipeline
    questions = [q.text for q in workspace.dataset.questions[:queries]]
    base = PipelineConfig(top_k=10, alpha=0.5)

    full = []
    for text in questions:  # cold: query embedding + BM25 + dense + fusion + selection
        started = time.perf_counter()
        pipeline.run(text, base)
        full.append(time.perf_counter() - started)
    refuse_pipeline, refuse_only = [], []
    for text in questions:  # warm: candidates cached, a new alpha re-fused from memory
        started = time.perf_counter()
        pipeline.run(text, base.model_copy(update={"alpha": 0.3}))
        refuse_pipeline.append(time.perf_counter() - started)
        found = pipeline.retriever.candidates(text)
        started = time.perf_counter()
        hybrid(found.bm25, found.dense, 0.7, "relative_score", 10)
        refuse_only.append(time.perf_counter() - started)
    build = sum(index.timings.values())
    return [
        name, str(len(index.chunks)), f"{build:.1f}", f"{len(index.chunks) / index.timings['embed']:.0f}",
        f"{index.timings['index']:.2f}", f"{index.timings['graph']:.2f}", f"{median_ms(full):.2f}",
        f"{median_ms(refuse_pipeline):.3f}", f"{median_ms(refuse_only):.3f}", str(len(questions)),
    ]


def quality(name: str) -> list[list[str]]:
    workspace = open_workspace(ProjectConfig(), DATASETS / name)
    rows = []
    for alpha in (0.0, 0.5, 1.0):
        summary = evaluate_retrieval(workspace.dataset, workspace.pipeline, PipelineConfig(alpha=alpha))["retrieval"]
        rows.append([name, f"{alpha:.1f}", f"{summary['recall@5']:.3f}", f"{summary['ndcg@10']:.3f}",
                     f"{summary['mrr']:.3f}", str(summary["questions_scored"])])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="questions timed per dataset")
    parser.add_argument("--quality", action="store_true", help="also measure recall@5 / nDCG@10 per alpha")
    args = parser.parse_args()
    if not DATASETS.is_dir():
        console.print(f"datasets not found at {DATASETS}")
        return 1

    table = Table(title="retrieval speed (2-core CPU, all-MiniLM-L6-v2, embedded numpy + bm25s backend)")
    for column in ("dataset", "chunks", "build s", "embed/s", "bm25+vec s", "graph s", "full ms/q",
                   "re-fuse ms/q (pipeline)", "re-fuse ms/q (fusion)", "queries"):
        table.add_column(column, justify="right")
    for name in SPEED_SETS:
        table.add_row(*speed(name, args.queries))
    console.print(table)

    if args.quality:
        table = Table(title="retrieval quality (chunk 150/30 words, top_k 5, relative_score fusion, no reranker)")
        for column in ("dataset", "alpha", "recall@5", "nDCG@10", "MRR", "questions"):
            table.add_column(column, justify="right")
        for name in QUALITY_SETS:
            for row in quality(name):
                table.add_row(*row)
        console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
