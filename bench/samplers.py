"""TPE vs random vs grid on the realistic retrieval space, over several seeds: trials until the best-so-far is within
0.02 of the best any of them found, as a user runs them (pruner on, held-out split, repeats skipped).

Retrieval targets load no LLM, so 60-trial studies on a few hundred questions take minutes: the space
(search_spaces/retrieval.yaml: its query-time knobs alone make thousands of configurations, and its index knobs,
added since the figures in docs/performance.md were measured, multiply them by 144, each new chunking embedding
the corpus once) is large enough that a sampler has to search instead of enumerating it. Every study shares one
cache per set (embeddings are computed once). Studies are ordinary resumable studies under --studies: run again and
finished ones are only read back.

    python bench/samplers.py                                    # vaswani_npl, ndcg@10, 60 trials, seeds 0 1 2
    python bench/samplers.py --dataset clapnq_dev --trials 80 --seeds 0 1 2 3 4 --within 0.005

When the baseline (trial 1 of every study) is already within reach of the best, every sampler "reaches" it at
trial 1 and the figure says nothing: vaswani_npl's default pipeline is such a case; tighten --within or pick a set
where the search matters.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import optuna
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import ProjectConfig
from tuner.study.optimize import StudySettings
from tuner.study.session import Session, StudySpec

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
SPACE = ROOT / "search_spaces" / "retrieval.yaml"
SAMPLERS = ("tpe", "random", "grid")
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="vaswani_npl", help="a folder of ../shared/datasets")
    parser.add_argument("--target", default="ndcg@10")
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--within", type=float, default=0.02, help="how close to the best found counts as reached")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--studies", type=Path, default=Path("studies/bench-samplers"))
    args = parser.parse_args()
    if not (DATASETS / args.dataset).is_dir():
        raise SystemExit(f"skipped: {DATASETS / args.dataset} not found")
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    runs: dict[str, list[tuple[list[float], float]]] = {name: [] for name in SAMPLERS}
    for seed in args.seeds:
        for name in SAMPLERS:
            started = time.perf_counter()
            spec = StudySpec(f"{args.dataset}-{name}-{seed}", StudySettings([args.target], sampler=name, seed=seed),
                             SPACE, ProjectConfig(cache_dir=args.studies / f".cache-{args.dataset}"),
                             DATASETS / args.dataset, studies_dir=args.studies)
            session = Session.open(spec)
            session.run(args.trials)
            runs[name].append((values(session.study), time.perf_counter() - started))
            console.print(f"{name} seed {seed}: best {max(runs[name][-1][0], default=float('nan')):.4f}, "
                          f"{runs[name][-1][1] / 60:.1f} min", highlight=False)

    goal = max(v for studies in runs.values() for run, _ in studies for v in run)
    baseline = runs[SAMPLERS[0]][0][0][0]  # trial 0 of every study: the config's own pipeline
    table = Table(title=f"{args.dataset}, {args.target}, {args.trials} trials x {len(args.seeds)} seeds on "
                        f"{SPACE.name}: trials until the best-so-far is within {args.within} of the best found "
                        f"({goal:.4f}; the baseline, trial 1 of each, scores {baseline:.4f})")
    for column in ("sampler", "best per seed", f"trials to within {args.within} per seed", "median", "reached",
                   "minutes per study"):
        table.add_column(column, justify="left" if column == "sampler" else "right")
    for name, studies in runs.items():
        reached = [to_within(run, goal - args.within) for run, _ in studies]
        hit = [r for r in reached if r is not None]
        table.add_row(name, " ".join(f"{max(run, default=float('nan')):.4f}" for run, _ in studies),
                      " ".join(str(r) if r is not None else "—" for r in reached),
                      f"{statistics.median(hit):.0f}" if hit else "—", f"{len(hit)}/{len(studies)}",
                      f"{statistics.mean(s for _, s in studies) / 60:.1f}")
    table.caption = ("trials counted as the study counts them: complete and pruned, repeats of a tried "
                     "configuration not; a pruned trial never holds the best-so-far")
    console.print(table)


def values(study: optuna.Study) -> list[float]:
    """The target value of each counted trial in order (pruned: -inf, it never becomes the best-so-far)."""
    from tuner.study.attrs import DUPLICATE

    counted = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
               and DUPLICATE not in t.user_attrs]
    return [t.value if t.state == optuna.trial.TrialState.COMPLETE else float("-inf") for t in counted]


def to_within(run: list[float], threshold: float) -> int | None:
    """1-based count of trials until one reaches the threshold."""
    return next((i + 1 for i, value in enumerate(run) if value >= threshold), None)


if __name__ == "__main__":
    main()
