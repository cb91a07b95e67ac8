"""Study benchmark on the bundled demo with the 0.5B model, everything measured side by side in one run:

1. LLM calls per trial with tuner's caches vs with caches disabled (naive), same sampler seed -> same trials;
2. tuner's own time (everything but model calls) as a fraction of trial wall time;
3. the LLM calls a resume repeats after a real SIGKILL mid-trial (`tuner optimize` in a subprocess);
4. TPE vs random vs grid on search_spaces/quick.yaml: LLM calls spent until the best-so-far is within 0.02 of
   the best any sampler found.

    python bench/study.py                    # 4 questions, 6 trials (cache vs naive), 8 trials per sampler
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
import yaml
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.cache import DiskCache
from tuner.config import LLMConfig, ProjectConfig
from tuner.evaluation.rag_eval import RagRunner
from tuner.study.optimize import Objective, StudySettings, enqueue_baseline, open_study, run_study
from tuner.study.space import load_space
from tuner.study.storage import study_folder
from tuner.workspace import open_workspace

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "search_spaces" / "quick.yaml"
console = Console()


def run(root: Path, name: str, questions: int, trials: int, sampler: str, use_cache: bool) -> optuna.Study:
    folder = study_folder(root, name)
    project = ProjectConfig(cache_dir=folder.cache, generator=LLMConfig(model="qwen2.5-0.5b"))
    space = load_space(QUICK)
    settings = StudySettings(["faithfulness"], sampler=sampler, seed=0)
    study = open_study(folder, settings, space, None, project.model_dump(mode="json"), str(QUICK))
    enqueue_baseline(study, space, project.pipeline)
    runner = RagRunner(open_workspace(project, limit=questions), use_cache=use_cache)
    run_study(study, Objective(runner, space, project.pipeline, settings, folder), trials, None)
    return study


def finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]


def calls(trial: optuna.trial.FrozenTrial) -> int:
    return int(trial.user_attrs.get("cost", {}).get("llm_calls", 0))


def own_fraction(study: optuna.Study) -> float:
    wall = model = 0.0
    for trial in finished(study):
        wall += (trial.datetime_complete - trial.datetime_start).total_seconds()
        model += trial.user_attrs.get("cost", {}).get("model_seconds", 0.0)
    return (wall - model) / wall


def resume_repeats(root: Path, questions: int) -> tuple[int, int, int]:
    """(calls cached before the kill, calls the resumed run paid, calls paid twice)."""
    (root / "tuner.yaml").write_text(yaml.safe_dump({"generator": {"model": "qwen2.5-0.5b"},
                                                     "dataset": {"limit": questions}}))
    command = [sys.executable, "-m", "tuner", "optimize", "--trials", "3", "--search-space", str(QUICK),
               "--config", "tuner.yaml", "--study", "killed", "--sampler", "random"]
    cache_file = root / "studies" / "killed" / "cache" / "llm_calls.sqlite"
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (root / "studies" / "killed" / "trials" / "0000.json").is_file():
        time.sleep(0.5)
    baseline = len(DiskCache(cache_file))
    while len(DiskCache(cache_file)) < baseline + 2:  # mid-trial: the second trial has paid for two calls
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    before = len(DiskCache(cache_file))
    subprocess.run(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    cache = DiskCache(cache_file)
    return before, len(cache) - before, cache.repeated()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=4)
    parser.add_argument("--trials", type=int, default=6, help="trials for the cached vs naive comparison")
    parser.add_argument("--sampler-trials", type=int, default=8)
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        cached = run(root, "cached", args.questions, args.trials, "random", use_cache=True)
        naive = run(root, "naive", args.questions, args.trials, "random", use_cache=False)
        cached_calls = [calls(t) for t in finished(cached)]
        naive_calls = [calls(t) for t in finished(naive)]
        table = Table(title=f"caches vs naive: {args.trials} random-sampler trials (seed 0), "
                            f"{args.questions} demo questions, target faithfulness, 0.5B")
        for column in ("", "LLM calls per trial", "mean", "total", "tuner's own time / trial wall"):
            table.add_column(column, justify="right")
        table.add_row("cached", " ".join(map(str, cached_calls)), f"{sum(cached_calls) / len(cached_calls):.1f}",
                      str(sum(cached_calls)), f"{own_fraction(cached):.2%}")
        table.add_row("naive", " ".join(map(str, naive_calls)), f"{sum(naive_calls) / len(naive_calls):.1f}",
                      str(sum(naive_calls)), f"{own_fraction(naive):.2%}")
        table.caption = f"cached / naive = {sum(cached_calls) / sum(naive_calls):.3f} (goal <= 0.35)"
        console.print(table)

        before, paid, repeated = resume_repeats(root, args.questions)
        console.print(f"resume after SIGKILL mid-trial: {before} calls cached before the kill, the resumed run "
                      f"paid {paid} new calls, calls paid twice: {repeated} (goal 0)")

        studies = {name: run(root, f"s-{name}", args.questions, args.sampler_trials, name, use_cache=True)
                   for name in ("tpe", "random", "grid")}
        target = max(t.value for s in studies.values() for t in s.trials if t.value is not None)
        table = Table(title=f"samplers on quick.yaml ({args.sampler_trials} trials each): LLM calls until best-so-far "
                            f"is within 0.02 of the best found ({target:.3f})")
        for column in ("sampler", "best", "calls to within 0.02", "trials to within 0.02", "total calls"):
            table.add_column(column, justify="right")
        for name, study in studies.items():
            spent, reached = 0, None
            for trial in finished(study):
                spent += calls(trial)
                if reached is None and trial.value is not None and trial.value >= target - 0.02:
                    reached = (spent, trial.number + 1)
            best = max(t.value for t in study.trials if t.value is not None)
            table.add_row(name, f"{best:.3f}", str(reached[0]) if reached else "not reached",
                          str(reached[1]) if reached else "—", str(spent))
        console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
