"""Embedding at the CPU's limit: chunks/s per backend × precision × batch size × threads, and nDCG@10 per backend.

Speed: the first --chunks chunks of --speed-set (default chunking) embedded by each backend and precision
sentence-transformers offers here, uncached, after a warm-up batch; the ratio is to torch fp32 at batch 32 with
the default threads (the default before backends), measured in the same run. Threads: the default (one per core)
and 1 (what each of two processes sharing the cores would get). Quality: each shared set with gold ids indexed by
each backend (vectors cached per backend under --cache-root, so a rerun only evaluates) and scored by nDCG@10 at
the default retrieval settings, beside the first backend's.
A backend whose packages are not installed is said and skipped.

    python bench/embed.py                                  # both tables, every shared set
    python bench/embed.py --speed-only --chunks 500        # the speed table alone
    python bench/embed.py --backends torch:fp32 openvino:bf16 --sets vaswani_npl
    python bench/embed.py --speed-only --backends torch:auto    # the default alone, and joblib's two workers
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import EmbedderConfig, PipelineConfig, ProjectConfig
from tuner.data import load_dataset
from tuner.errors import TunerError
from tuner.evaluation.rag_eval import RagRunner
from tuner.models.embedders import SentenceTransformerEmbedder
from tuner.pipeline.chunking import chunk_documents
from tuner.workspace import open_workspace

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SETS = ("squad2_dev_normans", "clapnq_dev", "vaswani_npl", "cmu_qa_wikipedia_v1.2")
BACKENDS = tuple((b, p) for b in ("torch", "openvino") for p in ("fp32", "bf16", "int8"))
BATCHES = (16, 32, 64, 128)
THREADS = (None, 1)
console = Console(width=200)  # the tables are the result: never squeezed to 80 columns in a log


def label(backend: str, precision: str) -> str:
    return f"{backend} {precision}"


def available(wanted: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The backends that load here (the first load of an exported one pays its export, timed and said)."""
    found = []
    for backend, precision in wanted:
        started = time.perf_counter()
        try:
            SentenceTransformerEmbedder(backend=backend, precision=precision)
        except TunerError as exc:
            console.print(f"[yellow]{label(backend, precision)}: skipped — {exc}[/]", highlight=False)
            continue
        console.print(f"{label(backend, precision)}: loaded in {time.perf_counter() - started:.1f} s", highlight=False)
        found.append((backend, precision))
    return found


def speed(backends: list[tuple[str, str]], texts: list[str]) -> Table:
    table = Table(title=f"chunks/s, {len(texts)} chunks (ratio: to torch fp32, batch 32, default threads)")
    for column in ("backend", "threads", *(f"batch {b}" for b in BATCHES)):
        table.add_column(column)
    base = None
    for backend, precision in backends:
        for threads in THREADS:
            embedder = SentenceTransformerEmbedder(backend=backend, precision=precision, threads=threads)
            embedder.encode(texts[:32])  # warm-up: first-call allocation and compilation are not throughput
            row = []
            for batch in BATCHES:
                embedder.batch_size = batch
                started = time.perf_counter()
                embedder.encode(texts)
                rate = len(texts) / (time.perf_counter() - started)
                if base is None and batch == 32:
                    base = rate  # torch fp32, batch 32, default threads: the first configuration measured
                row.append(f"{rate:.0f} ({rate / base:.2f}×)" if base else f"{rate:.0f}")
                console.print(f"  {label(backend, precision)}, threads {threads or 'default'}, batch {batch}: "
                              f"{rate:.0f} chunks/s", highlight=False)
            table.add_row(label(backend, precision), str(threads or "default"), *row)
    return table


_WORKER_MODEL: dict[tuple[str, str], SentenceTransformerEmbedder] = {}


def _encode_in_worker(backend: str, precision: str, texts: list[str]):
    key = (backend, precision)
    if key not in _WORKER_MODEL:  # once per worker process (joblib's loky keeps them for the next part)
        _WORKER_MODEL[key] = SentenceTransformerEmbedder(backend=backend, precision=precision, threads=1)
    return _WORKER_MODEL[key].encode(texts)


def workers(backend: str, precision: str, texts: list[str]) -> Table:
    """One process on every core vs joblib's two worker processes of one thread each (their start and model load
    included, as a first index build would pay them), on the same texts in parts of 256 of similar lengths."""
    from joblib import Parallel, delayed

    started = time.perf_counter()
    SentenceTransformerEmbedder(backend=backend, precision=precision).encode(texts)
    alone = len(texts) / (time.perf_counter() - started)
    order = sorted(texts, key=len, reverse=True)
    started = time.perf_counter()
    Parallel(n_jobs=2)(delayed(_encode_in_worker)(backend, precision, order[i:i + 256])
                       for i in range(0, len(order), 256))
    shared = len(texts) / (time.perf_counter() - started)
    table = Table(title=f"{label(backend, precision)}: one process vs two joblib workers, chunks/s ({len(texts)} "
                        "chunks, model load included)")
    for column in ("one process, default threads", "2 joblib workers × 1 thread", "ratio"):
        table.add_column(column)
    table.add_row(f"{alone:.0f}", f"{shared:.0f}", f"{shared / alone:.2f}×")
    return table


def quality(backends: list[tuple[str, str]], sets: list[str], cache_root: Path) -> Table:
    table = Table(title="nDCG@10 at the default retrieval settings, per embedding backend (Δ: to torch)")
    for column in ("set", "questions", "chunks", *(label(*b) for b in backends), "embedding s (torch → fastest)"):
        table.add_column(column)
    for name in sets:
        dataset = load_dataset(DATASETS / name)
        dataset = replace(dataset, questions=[q for q in dataset.questions if q.relevant_ids])
        cache = cache_root / f".cache-{name}"
        cache.mkdir(parents=True, exist_ok=True)
        scores, seconds, chunks = [], [], 0
        for backend, precision in backends:
            config = ProjectConfig(cache_dir=cache, embedder=EmbedderConfig(backend=backend, precision=precision))
            started = time.perf_counter()
            workspace = open_workspace(config, dataset=dataset)
            seconds.append(time.perf_counter() - started)  # cached vectors: a rerun's seconds are not embedding
            chunks = len(workspace.index.chunks)
            result = RagRunner(workspace).evaluate(PipelineConfig(), answer=False)
            scores.append(result.retrieval["ndcg@10"])
            console.print(f"  {name}, {label(backend, precision)}: nDCG@10 {scores[-1]:.4f}, index {seconds[-1]:.0f} s",
                          highlight=False)
        cells = [f"{s:.4f}" + ("" if i == 0 else f" ({s - scores[0]:+.4f})") for i, s in enumerate(scores)]
        table.add_row(name, str(len(dataset.questions)), str(chunks), *cells,
                      f"{seconds[0]:.0f} → {min(seconds):.0f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="shared sets for the quality table")
    parser.add_argument("--speed-set", default="vaswani_npl", help="the set whose chunks the speed table embeds")
    parser.add_argument("--chunks", type=int, default=1000, help="chunks the speed table embeds")
    parser.add_argument("--speed-only", action="store_true", help="the speed table alone")
    parser.add_argument("--cache-root", type=Path, default=Path("studies") / "bench-embed",
                        help="vector caches per set under DIR/.cache-NAME (a rerun embeds nothing twice)")
    parser.add_argument("--backends", nargs="+", default=[f"{b}:{p}" for b, p in BACKENDS],
                        help="BACKEND:PRECISION pairs; the first is the reference (default: all, torch:fp32 first)")
    args = parser.parse_args()
    backends = available([tuple(b.split(":", 1)) for b in args.backends])
    source = load_dataset(DATASETS / args.speed_set if (DATASETS / args.speed_set).is_dir() else None)
    texts = [c.text for c in chunk_documents(source.documents, ProjectConfig().index_settings())][:args.chunks]
    tables = [speed(backends, texts), workers(*backends[0], texts * max(1, 4000 // max(1, len(texts))))]
    if not args.speed_only:
        sets = [n for n in args.sets if (DATASETS / n).is_dir()]
        tables.append(quality(backends, sets, args.cache_root))
    for table in tables:
        console.print(table)


if __name__ == "__main__":
    main()
