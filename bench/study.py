"""Study benchmark on the bundled demo with the 0.5B model, everything measured side by side in one run:

1. LLM calls per trial with tuner's caches vs without (naive), on a TPE study (the default sampler) of realistic
   length. A trial's naive cost is what it paid plus what its caches saved (calls + cache hits); a short study
   with the caches really disabled re-runs the first trials and checks that this equals what they pay;
2. tuner's own time (everything but model calls) as a fraction of trial wall time;
3. the LLM calls a resume repeats after a real SIGKILL mid-trial (`tuner optimize` in a subprocess);
4. TPE vs random vs grid on search_spaces/quick.yaml: LLM calls spent until the best-so-far is within 0.02 of
   the best any sampler found (the TPE study is the one from 1).

    python bench/study.py                    # 3 questions, 16 trials per sampler, 3 naive trials
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
from tuner.cache import SqliteStore
from tuner.config import LlamaCppConfig, ProjectConfig
from tuner.cost import Cost
from tuner.study.attrs import DUPLICATE
from tuner.study.optimize import StudySettings, TrialDone
from tuner.study.session import Session, StudySpec

ROOT = Path(__file__).resolve().parents[1]
QUICK = ROOT / "search_spaces" / "quick.yaml"
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def run(root: Path, name: str, questions: int, trials: int, sampler: str, use_cache: bool) -> optuna.Study:
    project = ProjectConfig(generator=LlamaCppConfig(model="qwen2.5-0.5b"), cache_dir=root / name / "cache")
    session = Session.open(StudySpec(name, StudySettings(["faithfulness"], sampler=sampler, seed=0), QUICK, project,
                                     limit=questions, studies_dir=root))
    session.runner(use_cache=use_cache)
    session.run(trials, hook=lambda event: isinstance(event, TrialDone) and COSTS.__setitem__(
        (name, event.trial.number), event.cost))
    return session.study


def finished(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    """The trials that ran (a repeated configuration is recorded but runs nothing)."""
    return [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
            and DUPLICATE not in t.user_attrs]


#: (study, trial number) -> what the trial spent, as the study's TrialDone events said
COSTS: dict[tuple[str, int], Cost] = {}


def calls(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> int:
    return COSTS[study.study_name, trial.number].llm_calls


def hits(study: optuna.Study, trial: optuna.trial.FrozenTrial) -> int:
    return COSTS[study.study_name, trial.number].cache_hits


def own_fraction(study: optuna.Study) -> float:
    wall = model = 0.0
    for trial in finished(study):
        wall += (trial.datetime_complete - trial.datetime_start).total_seconds()
        model += COSTS[study.study_name, trial.number].model_seconds
    return (wall - model) / wall


def resume_repeats(root: Path, questions: int) -> tuple[int, int, int]:
    """(calls cached before the kill, calls the resumed run paid, calls paid twice)."""
    (root / "tuner.yaml").write_text(yaml.safe_dump({"generator": {"model": "qwen2.5-0.5b"},
                                                     "dataset": {"limit": questions}}))
    command = [sys.executable, "-m", "tuner", "optimize", "--trials", "3", "--search-space", str(QUICK),
               "--config", "tuner.yaml", "--study", "killed", "--sampler", "random"]
    cache_file = root / "studies" / ".cache" / "llm_calls.sqlite"  # the shared cache
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    while not (root / "studies" / "killed" / "trials" / "0000.json").is_file():
        time.sleep(0.5)
    baseline = len(SqliteStore(cache_file))
    while len(SqliteStore(cache_file)) < baseline + 2:  # mid-trial: the second trial has paid for two calls
        time.sleep(0.2)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    before = len(SqliteStore(cache_file))
    subprocess.run(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    cache = SqliteStore(cache_file)
    return before, len(cache) - before, cache.repeated()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--trials", type=int, default=16, help="trials per sampler study")
    parser.add_argument("--naive-trials", type=int, default=3, help="trials re-run with the caches disabled")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        studies = {"tpe": run(root, "s-tpe", args.questions, args.trials, "tpe", use_cache=True)}
        naive = run(root, "naive", args.questions, args.naive_trials, "tpe", use_cache=False)
        print_cache_table(studies["tpe"], naive, args.questions)

        before, paid, repeated = resume_repeats(root, args.questions)
        console.print(f"resume after SIGKILL mid-trial: {before} calls cached before the kill, the resumed run "
                      f"paid {paid} new calls, calls paid twice: {repeated} (goal 0)")

        for name in ("random", "grid"):
            studies[name] = run(root, f"s-{name}", args.questions, args.trials, name, use_cache=True)
        print_sampler_table(studies, args.trials)
    return 0


def print_cache_table(cached: optuna.Study, naive: optuna.Study, questions: int) -> None:
    trials = finished(cached)
    paid = [calls(cached, t) for t in trials]
    without = [calls(cached, t) + hits(cached, t) for t in trials]
    really = [calls(naive, t) for t in finished(naive)]
    table = Table(title=f"caches vs naive: {len(trials)} TPE trials (seed 0), {questions} demo questions, "
                        f"target faithfulness, 0.5B")
    for column in ("", "LLM calls per trial", "total", "tuner's own time / trial wall"):
        table.add_column(column, justify="right")
    table.add_row("cached", " ".join(map(str, paid)), str(sum(paid)), f"{own_fraction(cached):.2%}")
    table.add_row("naive (calls + cache hits)", " ".join(map(str, without)), str(sum(without)), "")
    table.add_row(f"caches disabled, first {len(really)}", " ".join(map(str, really)), str(sum(really)),
                  f"{own_fraction(naive):.2%}")
    agree = really == without[:len(really)]
    checkpoints = sorted({n for n in (6, 10, len(trials)) if n <= len(trials)})
    ratios = ", ".join(f"{sum(paid[:n]) / sum(without[:n]):.3f} after {n}" for n in checkpoints)
    table.caption = (f"cached / naive = {ratios} trials (goal <= 0.35); caches-disabled run "
                     f"{'matches' if agree else 'DIFFERS FROM'} calls + cache hits")
    console.print(table)


def print_sampler_table(studies: dict[str, optuna.Study], trials: int) -> None:
    target = max(t.value for s in studies.values() for t in s.trials if t.value is not None)
    table = Table(title=f"samplers on quick.yaml ({trials} trials each): LLM calls until best-so-far "
                        f"is within 0.02 of the best found ({target:.3f})")
    for column in ("sampler", "best", "calls to within 0.02", "trials to within 0.02", "distinct params",
                   "total calls"):
        table.add_column(column, justify="right")
    for name, study in studies.items():
        spent, reached = 0, None
        for trial in finished(study):
            spent += calls(study, trial)
            if reached is None and trial.value is not None and trial.value >= target - 0.02:
                reached = (spent, trial.number + 1)
        best = max(t.value for t in study.trials if t.value is not None)
        distinct = len({tuple(sorted(t.params.items())) for t in finished(study)})
        table.add_row(name, f"{best:.3f}", str(reached[0]) if reached else "not reached",
                      str(reached[1]) if reached else "—", str(distinct), str(spent))
    console.print(table)


if __name__ == "__main__":
    sys.exit(main())
