"""Retrieval-study throughput: question-settings per second of a real study, first trial and later ones.

A retrieval-target study (ndcg@10, TPE, no LLM) over query-time knobs only (top_k, alpha, fusion and its k, graph
hops, autocut: one index, as a peer's grid over retrieval settings) on each set's search questions (70 %; 30 % held
out). Measured through `Session.run`, as `tuner optimize` runs it: each trial's wall time from Optuna's records and
the questions it evaluated; side by side, the default (no pruning for a retrieval target) and the former default (a
pruner after 30 questions, every question's score reported to it), and the first trial's question vectors embedded
one at a time (as before) and in batches (now). The one-time index build (its
chunk embeddings uncached on a fresh --studies folder) is timed apart and excluded from the rates. `--profile`
prints where the study's time went (cProfile, by cumulative time) for the first trial and for the rest.

The peer measured on these machines evaluates 483 settings × 300 questions of a 5k-document set in about 20 minutes
(≈ 122 question-settings per second), selecting on its test questions.

    python bench/throughput.py                                     # cmu_qa (800 questions) and vaswani, 20 trials
    python bench/throughput.py --sets vaswani_npl --trials 40 --profile
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import statistics
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import ProjectConfig
from tuner.study.attrs import DUPLICATE
from tuner.study.optimize import StudySettings
from tuner.study.session import Session, StudySpec

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
#: the largest BEIR-layout sets (cmu_qa: its first 800 of 2,462 questions, as bench/verdict.py)
SETS = {"cmu_qa_wikipedia_v1.2": 800, "vaswani_npl": None}
PEER = 122  # question-settings per second
QUERY_TIME_SPACE = {
    "description": "query-time retrieval knobs only: one index, every trial re-fuses the same candidates",
    "params": {
        "top_k": {"type": "int", "low": 2, "high": 10},
        "alpha": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.1},
        "fusion": {"type": "categorical", "choices": ["relative_score", "ranked", "zscore", "dbsf"]},
        "rank_constant": {"type": "int", "low": 10, "high": 100, "step": 10, "when": {"fusion": ["ranked"]}},
        "hops": {"type": "int", "low": 0, "high": 2},
        "hop_decay": {"type": "float", "low": 0.2, "high": 0.8, "step": 0.1, "when": {"hops": [1, 2]}},
        "autocut": {"type": "categorical", "choices": [None, 1, 2]},
    },
}
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def measure(name: str, limit: int | None, trials: int, studies: Path, prune_after: int | None,
            profile: bool) -> tuple[list[str], Session]:
    space = studies / "query_time.yaml"
    space.write_text(yaml.safe_dump(QUERY_TIME_SPACE, sort_keys=False), encoding="utf-8")
    study = f"throughput-{name}" + ("" if prune_after is None else f"-p{prune_after}")
    spec = StudySpec(study, StudySettings(["ndcg@10"], prune_after=prune_after), space, ProjectConfig(),
                     DATASETS / name, limit, studies_dir=studies, cache_dir=studies / f".cache-{name}")
    session = Session.open(spec)
    started = time.perf_counter()
    runner = session.runner()
    # the one-time build: chunk embeddings (uncached on a fresh folder), BM25, graph
    runner.built_in.index_for(session.base)
    build = time.perf_counter() - started
    questions = len(session.search_questions)
    done = {t.number for t in session.study.trials if t.state.is_finished()}
    for part, upto in (("the first trial", session.finished + 1), ("the later trials", session.finished + trials)):
        profiler = cProfile.Profile() if profile else None
        if profiler:
            profiler.enable()
        session.run(upto)
        if profiler:
            profiler.disable()
            console.print(f"[bold]{study}: where {part}' time went[/]")
            pstats.Stats(profiler).sort_stats("cumulative").print_stats(40)
    ran = [t for t in session.study.trials if t.number not in done and t.datetime_complete and t.datetime_start
           and DUPLICATE not in t.user_attrs]
    seconds = [(t.datetime_complete - t.datetime_start).total_seconds() for t in ran]
    pruning = "none" if prune_after is None else f"after {prune_after} questions"
    if not seconds:
        return [name, pruning, str(questions), f"{build:.0f}", "no trial ran (the study already held them: use a "
                "fresh --studies folder)", "", "", ""], session
    first, later = seconds[0], seconds[1:]
    evaluated = sum(len(session.folder.read_trial(t.number).result.questions) for t in ran)
    rate = evaluated / sum(seconds)  # a pruned trial counts the questions it evaluated
    return [name, pruning, f"{questions} × {len(seconds)}", f"{build:.0f}", f"{first:.2f} s = {questions / first:.0f}",
            f"{statistics.median(later):.2f} s" if later else "—", f"{rate:.0f}", f"{rate / PEER:.1f}×"], session


def question_embedding(session: Session) -> list[str]:
    """The first trial's question vectors, embedded one at a time (as every question was before) and in batches,
    side by side with the model itself (no cache)."""
    texts = [q.text for q in session.search_questions]
    inner = session.runner().workspace.embedder.inner
    started = time.perf_counter()
    for text in texts:
        inner.encode([text])
    one = time.perf_counter() - started
    started = time.perf_counter()
    inner.encode(texts)
    batched = time.perf_counter() - started
    return [session.runner().workspace.dataset.name, str(len(texts)), f"{one:.1f}", f"{batched:.1f}",
            f"{one / batched:.0f}×"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="BEIR-layout shared sets")
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--studies", type=Path, default=Path("studies") / "bench-throughput",
                        help="studies and caches; a fresh folder times the first embedding too")
    parser.add_argument("--profile", action="store_true", help="print where the study's time went")
    args = parser.parse_args()
    args.studies.mkdir(parents=True, exist_ok=True)
    table = Table(title=f"retrieval-study throughput, question-settings per second (TPE, ndcg@10, {args.trials} "
                        f"trials of query-time knobs; peer ≈ {PEER})")
    for column in ("set", "pruning", "questions × trials", "index build s (once)", "first trial",
                   "later trial (median)", "question-settings/s, all trials", "vs peer"):
        table.add_column(column)
    embedding = Table(title="the first trial's question vectors: one at a time (before) vs in batches (now), s")
    for column in ("set", "questions", "one at a time", "batched", "ratio"):
        embedding.add_column(column)
    for name in args.sets:
        if not (DATASETS / name).is_dir():
            console.print(f"[yellow]skipped {name}: not in {DATASETS}[/]")
            continue
        # the default (no pruning for a retrieval target) beside the former default, a pruner after 30 questions
        for prune_after in (None, 30):
            row, session = measure(name, SETS.get(name), args.trials, args.studies, prune_after, args.profile)
            table.add_row(*row)
        embedding.add_row(*question_embedding(session))
    console.print(table)
    console.print(embedding)


if __name__ == "__main__":
    main()
