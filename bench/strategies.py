"""Retrieval strategies one at a time: what each index knob does to recall and nDCG, and what it costs.

From the project defaults (words 150/30, title first, BM25 unstemmed, alpha 0.5, top_k 5, no reranker), one knob is
changed at a time and every question of the set is retrieved (no LLM): recall@5, nDCG@10, recall@10 by gold
document ids, the seconds the index took to build (chunk embeddings computed now; the cache is a fresh folder per
set, so every index embeds its new chunks) and the LLM calls per question. A study searches these knobs jointly;
this table says which of them can matter on a set, and what a study pays to try them.

With --query-model, each query strategy (hyde, decomposition, multi_query) is measured the same way on the first
--query-limit questions, the generator writing the rewrites (calls per question, seconds per question, fallbacks),
and the two-document questions of each set get their own recall@5 per strategy.

With --writer-model, the indexes the generator writes (contextual llm: a sentence per chunk; chunker raptor: a
summary per cluster, two levels) are built and measured beside the defaults: what they retrieve, their build
seconds and the LLM calls the build made (a fresh cache: every call paid).

    python bench/strategies.py                          # demo + the smaller shared sets, index knobs
    python bench/strategies.py --sets demo vaswani_npl  # a large corpus: every chunking embeds ~11k chunks anew
    python bench/strategies.py --sets demo squad2_dev_normans --query-model qwen2.5-1.5b --query-limit 100
    python bench/strategies.py --sets demo squad2_dev_normans --no-index --writer-model qwen2.5-1.5b
    python bench/strategies.py --sets clapnq_dev --no-index --query-model qwen2.5-1.5b --query-limit 50 \
        --queries decomposition multi_query --cache-root /tmp/bench   # resumable; shares bench/verdict.py's caches
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import LlamaCppConfig, PipelineConfig, ProjectConfig
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
QUERY_STRATEGIES = ("none", "hyde", "decomposition", "multi_query")
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log
#: --cache-root: keep each set's cache under ROOT/.cache-NAME (bench/verdict.py's layout, so the two share
#: embeddings and rewrites, and a stopped run resumes without paying a call twice); None: a fresh folder per run
CACHE_ROOT: Path | None = None


def cache_for(name: str):
    """The cache folder of a set: fresh (every build paid, the build seconds are true costs) unless --cache-root."""
    if CACHE_ROOT is None:
        return tempfile.TemporaryDirectory()
    folder = CACHE_ROOT / f".cache-{Path(name).name}"
    folder.mkdir(parents=True, exist_ok=True)
    return contextlib.nullcontext(str(folder))


def measure(name: str, limit: int | None) -> list[list[str]]:
    dataset = load_dataset(None if name == "demo" else DATASETS / name, limit=limit)
    gold = sum(1 for q in dataset.questions if q.relevant_ids)
    rows = []
    with cache_for(name) as cache:
        workspace = open_workspace(ProjectConfig(cache_dir=Path(cache)), dataset=dataset)
        runner = RagRunner(workspace)
        for label, knobs in VARIANTS.items():
            config = PipelineConfig(**knobs)
            result = runner.evaluate(config, answer=False)
            index = runner.pipeline.index_for(config)
            built = index.seconds  # the defaults' index was built by open_workspace, the others by evaluate
            calls = result.cost.llm_calls / max(1, len(result.questions))
            r = result.retrieval
            rows.append([f"{name} ({gold} q)", label, f"{r['recall@5']:.3f}", f"{r['ndcg@10']:.3f}",
                         f"{r['recall@10']:.3f}", str(len(index.chunks)), f"{built:.1f}", f"{calls:.1f}"])
            console.print(" | ".join(rows[-1]), highlight=False)
    return rows


#: the indexes an LLM writes, beside the defaults they change
WRITTEN: dict[str, dict] = {
    "defaults (words 150/30, title, BM25)": {},
    "contextual llm": {"contextual": "llm"},
    "chunker raptor": {"chunker": "raptor"},
}


def written(name: str, limit: int | None, model: str, only: list[str] | None = None) -> list[list[str]]:
    dataset = load_dataset(None if name == "demo" else DATASETS / name, limit=limit)
    gold = sum(1 for q in dataset.questions if q.relevant_ids)
    rows = []
    with cache_for(name) as cache:
        project = ProjectConfig(cache_dir=Path(cache), generator=LlamaCppConfig(model=model))
        workspace = open_workspace(project, dataset=dataset)
        runner = RagRunner(workspace)
        for label, knobs in WRITTEN.items():
            if knobs and only and not any(word in label for word in only):
                continue
            config = PipelineConfig(**knobs)
            result = runner.evaluate(config, answer=False)
            index = runner.pipeline.index_for(config)
            stage = result.cost_by_stage.get("index")
            r = result.retrieval
            summaries = sum(c.level > 0 for c in index.chunks)
            rows.append([f"{name} ({gold} q)", label, f"{r['recall@5']:.3f}", f"{r['ndcg@10']:.3f}",
                         f"{r['recall@10']:.3f}", f"{len(index.chunks)}" + (f" ({summaries} summaries)" if summaries
                                                                            else ""),
                         f"{index.seconds:.0f}", str(stage.llm_calls if stage else 0)])
            console.print(" | ".join(rows[-1]), highlight=False)
    return rows


def queries(name: str, limit: int, model: str, strategies: list[str]) -> tuple[list[list[str]], list[str]]:
    """Rows of the query-strategy table, and one row of recall@5 on the two-document questions per strategy."""
    dataset = load_dataset(None if name == "demo" else DATASETS / name, limit=limit)
    gold = sum(1 for q in dataset.questions if q.relevant_ids)
    with cache_for(name) as cache:
        project = ProjectConfig(cache_dir=Path(cache), generator=LlamaCppConfig(model=model))
        runner = RagRunner(open_workspace(project, dataset=dataset))
        rows, two = [], [f"{name}"]
        for strategy in QUERY_STRATEGIES:
            if strategy not in strategies:
                two.append("not run")
                continue
            result = runner.evaluate(PipelineConfig(query=strategy), answer=False)
            stage = result.cost_by_stage.get("query")
            asked = len(result.questions)
            calls = (stage.llm_calls + stage.cache_hits) / asked if stage else 0.0
            fell = result.failures.get("query", {}).get("fallback", 0)
            r = result.retrieval
            rows.append([f"{name} ({gold} q)", f"query {strategy}", f"{r['recall@5']:.3f}", f"{r['ndcg@10']:.3f}",
                         f"{r['recall@10']:.3f}", f"{calls:.1f}", f"{stage.seconds / asked:.2f}" if stage else "0",
                         f"{fell} of {asked}" if stage else "—"])
            console.print(" | ".join(rows[-1]), highlight=False)
            pairs = [q.retrieval.metrics["recall@5"] for q in result.questions if len(q.retrieval.gold_ids) > 1]
            two.append(f"{sum(pairs) / len(pairs):.3f} ({len(pairs)} q)" if pairs else "—")
    return rows, two


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="shared set names, demo, or paths")
    parser.add_argument("--limit", type=int, default=None, help="questions per set (documents: all of them)")
    parser.add_argument("--query-model", default=None, help="measure the query strategies with this generator")
    parser.add_argument("--query-limit", type=int, default=100, help="questions per set for the query strategies")
    parser.add_argument("--writer-model", default=None, help="measure contextual llm and raptor with this generator")
    parser.add_argument("--written", nargs="+", default=None, help="only these of them, e.g. raptor")
    parser.add_argument("--queries", nargs="+", default=list(QUERY_STRATEGIES), choices=QUERY_STRATEGIES,
                        help="only these query strategies (none, the baseline, is always measured)")
    parser.add_argument("--no-index", action="store_true", help="leave out the table of LLM-free index knobs")
    parser.add_argument("--cache-root", type=Path, default=None,
                        help="keep each set's cache under DIR/.cache-NAME (shared with bench/verdict.py --studies "
                             "DIR; a rerun pays nothing twice, but build seconds are then warm)")
    args = parser.parse_args()
    global CACHE_ROOT
    CACHE_ROOT = args.cache_root
    sets = [n for n in args.sets if n == "demo" or (DATASETS / n).is_dir() or Path(n).exists()]
    for name in sorted(set(args.sets) - set(sets)):
        console.print(f"[yellow]skipped {name}: not in {DATASETS}[/]")
    if not args.no_index:
        index_table(sets, args.limit)
    if args.writer_model:
        writer_table(sets, args.limit, args.writer_model, args.written)
    if args.query_model:
        query_table(sets, args.query_limit, args.query_model, ["none", *args.queries])


def writer_table(sets: list[str], limit: int | None, model: str, only: list[str] | None) -> None:
    table = Table(title=f"indexes the generator ({model}) writes, beside the defaults: retrieval by gold ids")
    for column in ("set", "index", "recall@5", "nDCG@10", "recall@10", "chunks", "index build s",
                   "LLM calls (build)"):
        table.add_column(column)
    for name in sets:
        for row in written(name, limit, model, only):
            table.add_row(*row)
    console.print(table)


def index_table(sets: list[str], limit: int | None) -> None:
    table = Table(title="one index knob at a time from the defaults: retrieval by gold document ids, no LLM")
    for column in ("set", "strategy", "recall@5", "nDCG@10", "recall@10", "chunks", "index build s",
                   "LLM calls / q"):
        table.add_column(column)
    for name in sets:
        for row in measure(name, limit):
            table.add_row(*row)
    console.print(table)


def query_table(sets: list[str], limit: int, model: str, strategies: list[str]) -> None:
    table = Table(title=f"query strategies (generator {model}, first {limit} questions), default index and retrieval")
    for column in ("set", "strategy", "recall@5", "nDCG@10", "recall@10", "LLM calls / q", "query s / q",
                   "fell back"):
        table.add_column(column)
    pairs = Table(title="recall@5 on the questions with two gold documents, per query strategy")
    for column in ("set", "none", "hyde", "decomposition", "multi_query"):
        pairs.add_column(column)
    for name in sets:
        rows, two = queries(name, limit, model, strategies)
        for row in rows:
            table.add_row(*row)
        pairs.add_row(*two)
    console.print(table)
    console.print(pairs)


if __name__ == "__main__":
    main()
