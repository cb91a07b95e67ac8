"""Models as knobs, measured: a faithfulness study on amnesty_qa whose space holds generator ∈ {0.5B, 1.5B}.

The judge is the project's and stays fixed (default the 1.5B: it is then also one of the generators, which the
report says). A grid runs both generators on the search questions (trial 0, the baseline, answers with the 1.5B;
trial 1 with the 0.5B); the verdict scores both on the held-out questions (half of them by default). Printed per
model: faithfulness in-sample and held-out, seconds and tokens per question; the held-out difference 0.5B − 1.5B with
its paired bootstrap 95 % CI; which trial the report calls the cheapest within noise of the best; and the peak
resident memory of the whole process (models, embedder, index). The study is an ordinary resumable one under
--studies: run again, finished trials are read back and cached calls cost nothing.

    python bench/models.py                                            # 20 questions, 1.5B judge (about an hour)
    python bench/models.py --limit 4 --judge qwen2.5-0.5b --studies /tmp/m   # a smoke run
"""

from __future__ import annotations

import argparse
import resource
import time
from dataclasses import replace
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.analysis import analyze
from tuner.analysis.stats import compare, per_question
from tuner.analysis.verdict import give_verdict
from tuner.config import LlamaCppConfig, ProjectConfig
from tuner.study.holdout import score_held_out
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study
from tuner.study.session import Session, StudySpec

ROOT = Path(__file__).resolve().parents[1]
AMNESTY = ROOT.parent / "shared" / "datasets" / "amnesty_qa" / "amnesty_qa.jsonl"
GENERATORS = ["qwen2.5-1.5b", "qwen2.5-0.5b"]  # the first is the project's generator: trial 0, the baseline
console = Console(width=200)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=20, help="amnesty_qa questions (it has 20)")
    parser.add_argument("--holdout", type=float, default=0.5, help="share held out for the verdict")
    parser.add_argument("--judge", default="qwen2.5-1.5b", help="the fixed judge")
    parser.add_argument("--studies", type=Path, default=Path("studies") / "bench-models")
    args = parser.parse_args()
    if not AMNESTY.is_file():
        raise SystemExit(f"amnesty_qa not found at {AMNESTY}")
    args.studies.mkdir(parents=True, exist_ok=True)
    space = args.studies / "generators.yaml"
    space.write_text(yaml.safe_dump({"params": {"generator": {"type": "categorical", "choices": GENERATORS}}}))
    project = ProjectConfig(generator=LlamaCppConfig(model=GENERATORS[0]), judge=LlamaCppConfig(model=args.judge),
                            cache_dir=args.studies / ".cache")
    started = time.perf_counter()
    session = Session.open(StudySpec("amnesty-generators", StudySettings(["faithfulness"], sampler="grid"), space,
                                     project, dataset=AMNESTY, limit=args.limit, holdout=args.holdout,
                                     studies_dir=args.studies))
    session.run(len(GENERATORS))
    view = give_verdict(read_study(session.folder), session.runner())
    trials = {t.pipeline["generator"]: t for t in view.trials if t.result is not None}
    for name, trial in trials.items():  # the verdict scores its contenders; here both models are wanted
        if trial.holdout is None:
            trials[name] = replace(trial, holdout=score_held_out(session.runner(), view.folder, view.split, trial,
                                                                 list(view.meta.metrics)))
    minutes = (time.perf_counter() - started) / 60

    held_out = len(view.split.holdout_ids)
    table = Table(title=f"amnesty_qa, {len(session.search_questions)} search + {held_out} held-out questions, judge "
                        f"{args.judge} (fixed)")
    for column in ("generator", "trial", "faithfulness in-sample", "held-out", "seconds / question",
                   "tokens / question"):
        table.add_column(column)
    for name, trial in trials.items():
        held = trial.holdout.result.metrics.get("faithfulness") if trial.holdout else None
        table.add_row(name, str(trial.number), f"{trial.result.metrics.get('faithfulness'):.3f}",
                      f"{held:.3f}" if held is not None else "—",
                      f"{trial.result.value('seconds_per_question'):.1f}",
                      f"{trial.result.value('tokens_per_question'):.0f}")
    console.print(table)
    small, large = (trials.get(name) for name in reversed(GENERATORS))
    if small and large and small.holdout and large.holdout:
        difference = compare("faithfulness", per_question(large.holdout.result, "faithfulness"),
                             per_question(small.holdout.result, "faithfulness"))
        console.print("held-out, 0.5B − 1.5B: " + difference.sentence("the 0.5B", "the 1.5B"), highlight=False)
    cheapest = analyze(view).cheapest
    console.print(f"cheapest within noise: {cheapest.sentence() if cheapest else '— (not measurable)'}",
                  highlight=False)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1 << 20)  # kB on Linux
    console.print(f"peak resident memory: {peak:.2f} GiB; {minutes:.0f} min (cached calls cost nothing)",
                  highlight=False)


if __name__ == "__main__":
    main()
