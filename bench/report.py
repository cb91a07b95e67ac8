"""Report generation time on a 40-trial study of realistic size, no model needed:

    python bench/report.py                 # 40 trials x 22 questions, 5 contexts each, all four RAGAS metrics

Builds a study on the bundled demo with the default search space: trial parameters drawn by Optuna's TPE
sampler, a real retrieval run per trial (so contexts, traces and trial files have their real size), scores drawn
at random (seeded) — the judge is not what is being timed. Then times reading the study back, the analysis,
the plots and the Markdown (`write_report`), and the whole `tuner report` command in a subprocess (start-up
included). Prints the figures; docs/performance.md quotes them.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import optuna
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import ProjectConfig
from tuner.cost import Cost
from tuner.evaluation.records import EvalResult, Failure, QuestionResult, TrialFile
from tuner.evaluation.retrieval_eval import passage, trace
from tuner.metrics import SCORED_METRICS
from tuner.study.meta import StudyMeta
from tuner.study.space import load_space
from tuner.study.storage import make_storage, study_folder
from tuner.workspace import open_workspace

ROOT = Path(__file__).resolve().parents[1]
console = Console(width=200)  # the table is the result: never squeezed to 80 columns in a log


def build(root: Path, trials: int, seed: int) -> Path:
    space = load_space(ROOT / "search_spaces" / "default.yaml")
    project = ProjectConfig(cache_dir=root / "cache")
    workspace = open_workspace(project)
    folder = study_folder(root / "studies", "bench")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="bench", storage=make_storage(folder), direction="maximize",
                                sampler=optuna.samplers.TPESampler(seed=seed))
    rng = random.Random(seed)
    for number in range(trials):
        trial = study.ask()
        params = space.suggest(trial)
        # no model here: the LLM reranker's trials retrieve with the embedding reranker (same trial-file shape)
        config = project.pipeline.tuners().with_params(
            {**params, "reranker": params["reranker"].replace("llm", "embedding")})
        questions = []
        for q in workspace.dataset.questions:
            found = workspace.pipeline.run(q.text, config)
            scores = {m: rng.choice([None, 0.0, 0.5, 0.75, 1.0, 1.0, 1.0]) for m in SCORED_METRICS}
            questions.append(QuestionResult(
                id=q.id, question=q.text, reference=q.reference, answer="An answer citing [1] and [2].",
                contexts=tuple(c.chunk.text for c in found.selected),
                selected=tuple(passage(c) for c in found.selected),
                retrieval=trace(found, q.relevant_ids, config.top_k),
                scores=scores, failures={m: Failure("nan") for m, v in scores.items() if v is None},
                cost={s: Cost(llm_calls=2, prompt_tokens=900, seconds=20.0) for s in ("generate", *SCORED_METRICS)},
                refusal=rng.random() < 0.05))
        result = EvalResult.summarise(questions, list(SCORED_METRICS), {}, Cost(llm_calls=60, seconds=1200.0),
                                      {s: Cost(seconds=240.0) for s in ("generate", *SCORED_METRICS)},
                                      {"generator": "bench", "judge": "bench"})
        trial.set_user_attr("baseline", number == 0)
        folder.write_trial(TrialFile(trial.number, trial.params, config.model_dump(), False, result))
        study.tell(trial, result.value("faithfulness"))
    folder.write_meta(StudyMeta(("faithfulness",), metrics=tuple(SCORED_METRICS), search_space="default.yaml",
                                space=space.model_dump(mode="json"), project=project.model_dump(mode="json")))
    return folder.root


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    from tuner.analysis import analyze
    from tuner.reports import write_report
    from tuner.study.results import read_study

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        folder_path = build(root, args.trials, args.seed)
        folder = study_folder(root / "studies", "bench")
        size = sum(p.stat().st_size for p in folder.trials.iterdir()) / 1e6
        timings = {}
        started = time.perf_counter()
        view = read_study(folder)
        timings["read storage + trial files"] = time.perf_counter() - started
        started = time.perf_counter()
        analyze(view)
        timings["analysis (stats, stages, importances, proposals)"] = time.perf_counter() - started
        started = time.perf_counter()
        write_report(view, root / "reports" / "bench")
        timings["write_report (analysis + 5 plots + Markdown)"] = time.perf_counter() - started
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "tuner", "report", "--study", "bench"], cwd=root,
                              capture_output=True, text=True)
        timings["`tuner report` command, start-up included"] = time.perf_counter() - started
        if done.returncode != 0:
            console.print(done.stderr)
            return 1
        table = Table(title=f"report generation: {args.trials} trials x {len(view.trials[0].result.questions)} "
                            f"questions, trial files {size:.1f} MB ({folder_path.name})")
        table.add_column("step")
        table.add_column("seconds", justify="right")
        for step, seconds in timings.items():
            table.add_row(step, f"{seconds:.2f}")
        console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
