"""Retrieval benchmark: index build, embedding throughput, query latency, re-fusion latency, and quality.

    python bench/retrieval.py                      # speed on cmu_qa_wikipedia and vaswani_npl
    python bench/retrieval.py --quality            # also the quality table below, on every shared set
    python bench/retrieval.py --quality-only --sets demo squad2_dev_normans
    python bench/retrieval.py --quality-only --sets path/to/your/dataset  # which BM25 and fusion suit your data

Quality: per set, recall@5 / nDCG@10 / recall@10 (unique documents) of BM25 with Weaviate's tokenisation and
with English stemming, dense, the best hybrid per fusion method (alpha 0.1-0.9, each BM25 index; ranked fusion
also its k), the best hybrid tuner offered before (Weaviate's fusions, k 60, no stemming), then graph-expansion
hops 0 / 1 / 2 at the best of them all. "Best" is chosen on the same questions for every method
alike (top_k 5, no reranker): it compares methods, it is no held-out estimate. Speed runs embed into a fresh
temporary cache, so embeddings/s is real model throughput. Figures are printed, never asserted: record them in
docs/performance.md.
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
from tuner.config import WEAVIATE_FUSIONS, BackendConfig, Bm25Config, PipelineConfig, ProjectConfig
from tuner.data import load_dataset
from tuner.evaluation.rag_eval import RagRunner
from tuner.pipeline.fusion import FUSIONS, hybrid
from tuner.workspace import Workspace, open_workspace

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SPEED_SETS = ("cmu_qa_wikipedia_v1.2", "vaswani_npl")
QUALITY_SETS = ("demo", "squad2_dev_normans", "clapnq_dev", "vaswani_npl", "cmu_qa_wikipedia_v1.2")
ALPHAS = [round(0.1 * step, 1) for step in range(1, 10)]
RANK_CONSTANTS = (10, 30, 60, 100)
STEMMERS = {"none": "BM25", "english": "BM25 stemmed"}
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


Figures = tuple[float, float, float]  # recall@5, nDCG@10, recall@10


def scores(workspace: Workspace, config: PipelineConfig) -> Figures:
    summary = RagRunner(workspace).evaluate(config, answer=False).retrieval
    return summary["recall@5"], summary["ndcg@10"], summary["recall@10"]


def best_of(tried: list[tuple[Figures, str, PipelineConfig]]) -> tuple[Figures, str, PipelineConfig]:
    return max(tried, key=lambda t: (t[0][1], t[0][0]))  # nDCG@10, then recall@5


def quality(name: str) -> list[list[str]]:
    """One set's rows: method, setting, recall@5, nDCG@10, recall@10."""
    dataset = load_dataset(None if name == "demo" else DATASETS / name if (DATASETS / name).exists() else Path(name))
    workspaces = {stemmer: open_workspace(ProjectConfig(backend=BackendConfig(bm25=Bm25Config(stemmer=stemmer))),
                                          dataset=dataset) for stemmer in STEMMERS}
    found: list[tuple[str, str, Figures]] = []
    for stemmer, label in STEMMERS.items():
        found.append((label, "alpha 0", scores(workspaces[stemmer], PipelineConfig(alpha=0.0))))
    found.append(("dense", "alpha 1", scores(workspaces["none"], PipelineConfig(alpha=1.0))))
    tried = {fusion: [(scores(workspaces[stemmer], config), stemmer, config)
                      for stemmer in STEMMERS for alpha in ALPHAS
                      for config in [PipelineConfig(alpha=alpha, fusion=fusion, rank_constant=k)
                                     for k in (RANK_CONSTANTS if fusion == "ranked" else (60,))]]
             for fusion in FUSIONS}
    for fusion in FUSIONS:
        figures, stemmer, config = best_of(tried[fusion])
        weaviate = "" if fusion in WEAVIATE_FUSIONS else " (not in Weaviate)"
        found.append((f"hybrid {fusion}{weaviate}", setting(stemmer, config), figures))
    # what tuner offered before BM25 options and the other fusions: Weaviate's two fusions, k 60, word tokens
    before = best_of([t for fusion in WEAVIATE_FUSIONS for t in tried[fusion]
                      if t[1] == "none" and t[2].rank_constant == 60])
    found.append(("best hybrid before (Weaviate's fusions only)", setting(before[1], before[2]), before[0]))
    _, stemmer, config = best_of([t for runs in tried.values() for t in runs])
    for hops in (0, 1, 2):
        found.append((f"hops {hops} at the best hybrid", setting(stemmer, config),
                      scores(workspaces[stemmer], config.model_copy(update={"hops": hops}))))
    questions = sum(1 for q in dataset.questions if q.relevant_ids)
    return [[f"{name} ({questions} q)", method, where, *[f"{value:.3f}" for value in figures]]
            for method, where, figures in found]


def multi_hop() -> list[list[str]]:
    """The demo's questions with two gold documents: recall@5 of the ranking (the top_k seeds, then what links or
    retrieval put after them) for hops 0 / 1 / 2, at each alpha and a top_k below 5, where a linked document can
    earn a place."""
    workspace = open_workspace(ProjectConfig())
    runner = RagRunner(workspace)
    questions = [q for q in workspace.dataset.questions if len(q.relevant_ids) > 1]
    rows = []
    for alpha in (0.0, 0.5, 1.0):
        for top_k in (2, 3):
            found = [runner.evaluate(PipelineConfig(alpha=alpha, top_k=top_k, hops=hops), questions, answer=False)
                     .retrieval["recall@5"] for hops in (0, 1, 2)]
            rows.append([f"{len(questions)} q", f"{alpha}", str(top_k), *[f"{r:.3f}" for r in found]])
    return rows


def setting(stemmer: str, config: PipelineConfig) -> str:
    k = f", k {config.rank_constant}" if config.fusion == "ranked" else ""
    return f"alpha {config.alpha}{k}, {STEMMERS[stemmer]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=200, help="questions timed per dataset")
    parser.add_argument("--quality", action="store_true", help="also measure recall@5 / nDCG@10 per method")
    parser.add_argument("--quality-only", action="store_true", help="the quality table alone")
    parser.add_argument("--sets", nargs="+", default=list(QUALITY_SETS), help="shared set names, demo, or "
                        "paths to your own data (compare the BM25 and fusion variants on it)")
    args = parser.parse_args()
    if not DATASETS.is_dir():
        console.print(f"datasets not found at {DATASETS}")
        return 1

    if not args.quality_only:
        table = Table(title="retrieval speed (2-core CPU, all-MiniLM-L6-v2, embedded numpy + bm25s backend)")
        for column in ("dataset", "chunks", "build s", "embed/s", "bm25+vec s", "graph s", "full ms/q",
                       "re-fuse ms/q (pipeline)", "re-fuse ms/q (fusion)", "queries"):
            table.add_column(column, justify="right")
        for name in SPEED_SETS:
            table.add_row(*speed(name, args.queries))
        console.print(table)

    if args.quality or args.quality_only:
        table = Table(title="retrieval quality (chunk 150/30 words, top_k 5, no reranker; documents ranked at their "
                            "best chunk; best settings chosen on the same questions for every method)")
        for column in ("set", "method", "setting", "recall@5", "nDCG@10", "recall@10"):
            table.add_column(column)
        for name in args.sets:
            for row in quality(name):
                table.add_row(*row)
            table.add_section()
        console.print(table)
        table = Table(title="demo questions with two gold documents: recall@5, no reranker")
        for column in ("questions", "alpha", "top_k", "hops 0", "hops 1", "hops 2"):
            table.add_column(column)
        for row in multi_hop():
            table.add_row(*row)
        console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
