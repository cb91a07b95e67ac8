"""Does a synthetic test set rank configurations like real questions? Kendall τ per shared set.

For each shared set with human questions and gold ids: a synthetic set of the same size (≤ --questions) is written
from the same corpus by --model (generator and judge, the gates of `tuner data generate`), then a fixed grid of
retrieval configurations (alpha × fusion, chunk size, stemming: 13) is scored by nDCG@10 on the human questions and
on the synthetic ones (unanswerable questions have no gold ids and are not ranked). Printed: the scorecard, Kendall τ
between the two rankings with a bootstrap 95 % CI (questions resampled), the best configuration by each set and the
human-set score of the synthetic set's best, the yardstick (τ between two random halves of the human questions,
beside τ between as many synthetic questions and a half: what another set of people's questions would reach) — and
what differs between the sets (question lengths, lexical overlap with the gold documents). The goal is τ ≥ 0.6.

Calls and embeddings are cached under --cache-root (per set), so a stopped run resumes without paying twice.

    python bench/testset.py --sets squad2_dev_normans clapnq_dev vaswani_npl --model qwen2.5-1.5b
    python bench/testset.py --sets demo --model qwen2.5-0.5b --questions 10     # a smoke run
    python bench/testset.py --yardstick     # τ between halves of the human questions only: no LLM, minutes
"""

from __future__ import annotations

import argparse
import statistics
from dataclasses import replace
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import LlamaCppConfig, PipelineConfig, ProjectConfig
from tuner.data import load_dataset
from tuner.evaluation.rag_eval import RagRunner
from tuner.testset import DEFAULT_SHARES
from tuner.testset.generate import QuestionWriter, ndcg
from tuner.testset.styles import StyleMix
from tuner.testset.validity import discriminating, overlap_target, overlaps, rank_agreement, split_halves
from tuner.workspace import open_workspace

DATASETS = Path(__file__).resolve().parents[2] / "shared" / "datasets"
SETS = ("squad2_dev_normans", "clapnq_dev", "vaswani_npl", "cmu_qa_wikipedia_v1.2")
#: the fixed grid both sets rank: the query-time pair every study searches, and the index knobs that moved scores
GRID: dict[str, dict] = {
    **{f"alpha {a:g}, {f}": {"alpha": a, "fusion": f} for f in ("relative_score", "ranked")
       for a in (0.0, 0.3, 0.5, 0.7, 1.0)},
    "chunk_size 100": {"chunk_size": 100},
    "chunk_size 400": {"chunk_size": 400},
    "stemmer english": {"stemmer": "english"},
}
console = Console(width=220)  # the tables are the result: never squeezed to 80 columns in a log


def scores(runner: RagRunner, questions: list) -> np.ndarray:
    """Per question (rows) and GRID configuration (columns): nDCG@10."""
    return np.stack([ndcg(runner, PipelineConfig(**knobs), questions) for knobs in GRID.values()], axis=1)


def open_set(name: str, model: str, cache_root: Path):
    """The set, its corpus without questions, a runner over it, and its human questions with gold ids."""
    human = load_dataset(None if name == "demo" else DATASETS / name)
    corpus = replace(human, questions=[])
    cache = cache_root / f".cache-{name}"
    cache.mkdir(parents=True, exist_ok=True)
    project = ProjectConfig(cache_dir=cache, generator=LlamaCppConfig(model=model))
    labelled = [q for q in human.questions if q.relevant_ids]
    return human, corpus, RagRunner(open_workspace(project, dataset=corpus)), labelled


def yardstick(name: str, model: str, size: int, cache_root: Path) -> None:
    """τ between two random halves of the human questions alone (no generation): what a set of people's questions
    reaches against another, the bar a synthetic set is read against."""
    _, _, runner, labelled = open_set(name, model, cache_root)
    asked = labelled[:size]
    human_scores = scores(runner, asked)
    halves = split_halves(human_scores, human_scores)
    console.print(f"{name}: {len(asked)} human questions; two random halves ({halves.half} each, 1,000 splits) agree "
                  f"at τ {halves.human:+.2f} [{halves.human_range[0]:+.2f}, {halves.human_range[1]:+.2f}]",
                  highlight=False)


def measure(name: str, model: str, size: int, cache_root: Path, anchors: int = 0) -> tuple[list[str], list[str]]:
    human, corpus, runner, labelled = open_set(name, model, cache_root)
    # anchors come after the ranked questions: what the generator learns from them is not scored on them
    asked, people = labelled[:size], labelled[size:size + anchors]
    shown = set()

    def progress(kept: int, total: int) -> None:  # a line per 10 kept: a 1.5B run takes most of an hour
        if kept % 10 == 0 and kept not in shown:
            shown.add(kept)
            console.print(f"  {name}: {kept} of {total} questions kept", highlight=False)

    writer = QuestionWriter(runner, corpus, mix=StyleMix.of(people),
                            overlap=overlap_target(people, human.documents))
    written, card = writer.write(len(asked), DEFAULT_SHARES, on_progress=progress)
    console.print(f"{name}: scorecard {card.to_json()}", highlight=False)
    ranked = [q for q in written if q.relevant_ids]
    human_scores, synthetic_scores = scores(runner, asked), scores(runner, ranked)
    for label, h, s in zip(GRID, human_scores.mean(axis=0), synthetic_scores.mean(axis=0)):
        console.print(f"  {label}: human {h:.3f}  synthetic {s:.3f}", highlight=False)
    agreement = rank_agreement(human_scores, synthetic_scores)
    halves = split_halves(human_scores, synthetic_scores)
    labels = list(GRID)
    kinds = ", ".join(f"{card.kept[k]} {k}" for k in card.kept if card.kept[k])
    validity = [name + (f" ({len(people)} anchors)" if people else ""), str(len(asked)), f"{len(written)} ({kinds})",
                f"{agreement.tau:+.2f} [{agreement.ci[0]:+.2f}, {agreement.ci[1]:+.2f}]",
                labels[agreement.best_human], labels[agreement.best_synthetic] + (
                    f" (cannot be told from {', '.join(labels[j] for j in agreement.tied_synthetic)})"
                    if agreement.tied_synthetic else ""),
                f"{agreement.human_of_best_human:.3f} / {agreement.human_of_best_synthetic:.3f}",
                f"{discriminating(human_scores).mean():.0%} / {discriminating(synthetic_scores).mean():.0%}",
                f"{halves.human:+.2f} [{halves.human_range[0]:+.2f}, {halves.human_range[1]:+.2f}] / "
                f"{halves.synthetic:+.2f} ({halves.half} q each)",
                "meets τ ≥ 0.6" if agreement.tau >= 0.6 else "misses τ ≥ 0.6"]
    overlap, synthetic_overlap = overlaps(asked, human.documents), overlaps(ranked, human.documents)
    differs = [name, f"{statistics.median(len(q.text.split()) for q in asked):.0f} / "
                     f"{statistics.median(len(q.text.split()) for q in written):.0f}",
               f"{statistics.mean(overlap):.2f} / {statistics.mean(synthetic_overlap):.2f}",
               f"{card.kept['multi-hop']} of {len(written)}",
               f"{sum(card.kept.values())} of {sum(card.drawn.values())}",
               ", ".join(f"{g} {n}" for g, n in card.rejected.most_common()) or "—",
               f"{card.llm_calls} calls ({card.llm_calls / max(len(written), 1):.1f} per kept question), "
               f"{card.seconds / 60:.0f} min"]
    return validity, differs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=list(SETS), help="shared set names, or demo")
    parser.add_argument("--model", default="qwen2.5-1.5b", help="generator and judge of the synthetic set")
    parser.add_argument("--questions", type=int, default=100, help="human questions (with gold ids) per set, at most")
    parser.add_argument("--anchors", type=int, default=0,
                        help="human questions (after the ranked ones) given as --anchor-questions: the generated "
                             "questions take their styles, length and lexical overlap")
    parser.add_argument("--cache-root", type=Path, default=Path("studies") / "bench-testset",
                        help="caches per set under DIR/.cache-NAME (a rerun pays nothing twice)")
    parser.add_argument("--yardstick", action="store_true",
                        help="only τ between two halves of the human questions (no generation, no LLM): how far "
                             "people's questions agree with each other on the set")
    args = parser.parse_args()
    sets = [n for n in args.sets if n == "demo" or (DATASETS / n).is_dir()]
    for name in sorted(set(args.sets) - set(sets)):
        console.print(f"[yellow]skipped {name}: not in {DATASETS}[/]")
    if args.yardstick:
        for name in sets:
            yardstick(name, args.model, args.questions, args.cache_root)
        return
    validity = Table(title=f"do synthetic questions ({args.model}) rank {len(GRID)} retrieval configurations like "
                           f"human ones? nDCG@10, Kendall τ [bootstrap 95 % CI]")
    for column in ("set", "human q", "synthetic q (kinds)", "τ [95 % CI]", "best by human", "best by synthetic",
                   "human nDCG@10: human's best / synthetic's best",
                   "discriminating human / synthetic", "τ with a human half: another human half / synthetic",
                   "reading"):
        validity.add_column(column)
    differs = Table(title="what differs: human / synthetic")
    for column in ("set", "median words", "lexical overlap with gold docs", "multi-hop", "kept of drawn",
                   "rejected by gate", "generation cost"):
        differs.add_column(column)
    for name in sets:
        row, diff = measure(name, args.model, args.questions, args.cache_root, args.anchors)
        # each set's rows as soon as they are known: a run stopped in a later set keeps them in its log
        console.print(" | ".join(row), "\n", " | ".join(diff), highlight=False)
        validity.add_row(*row)
        differs.add_row(*diff)
    console.print(validity)
    console.print(differs)


if __name__ == "__main__":
    main()
