"""`tuner compile`: the DSPy answer program compiled for a metric, judged on held-out questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from tuner.cli._app import app
from tuner.cli._display import index_progress
from tuner.cli._options import (
    STUDIES,
    ConfigOption,
    DatasetOption,
    LimitOption,
    StorageOption,
    StudiesDirOption,
    study_option,
)
from tuner.config import PipelineConfig, load_config
from tuner.ui import console, err_console, progress, terminal_kept


@app.command("compile")
def compile_command(
    target: Annotated[str, typer.Option("--target", "-t", help="what the program is tuned for: faithfulness or "
                                        "answer_relevancy")] = "faithfulness",
    guard: Annotated[Optional[str], typer.Option("--guard", help='veto, e.g. "answer_relevancy>=0.5": an answer '
                                                 "below it scores 0")] = None,
    optimizer: Annotated[str, typer.Option("--optimizer", help="bootstrap (few-shot demos), mipro (instructions + "
                                           "demos) or gepa (instructions rewritten from the judge's feedback)")]
    = "bootstrap",
    budget: Annotated[int, typer.Option("--budget", min=1, help="LLM calls the compile may pay (cached calls are "
                                        "free)")] = 300,
    train: Annotated[Optional[int], typer.Option("--train", min=1, help="training questions (the rest are held "
                                                 "out); default: --split")] = None,
    split: Annotated[float, typer.Option("--split", min=0, max=0.95, help="share of questions held out to judge "
                                         "the compiled program")] = 0.5,
    study: Annotated[Optional[str], study_option(
        "compile for a study: its project, its best trial's retrieval, its search questions "
        "(never its held-out ones); saved in its programs/, which its search space then offers")] = None,
    config: ConfigOption = None,
    dataset: DatasetOption = None,
    limit: LimitOption = None,
    seed: Annotated[int, typer.Option(help="optimizer seed")] = 0,
    storage: StorageOption = None,
    studies_dir: StudiesDirOption = STUDIES,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="folder for the program and its sidecar "
                                                "(default: the study's programs/, else studies/programs)")] = None,
) -> None:
    """Compile the DSPy answer program for a metric with a DSPy optimizer; judge it on held-out questions."""
    from tuner.compile.run import CompileSettings, compile_program, compile_questions
    from tuner.evaluation.records import Constraint

    guarded = Constraint.parse(guard, option="--guard") if guard else None
    settings = CompileSettings(optimizer, target, guarded, budget, seed)
    project, pipeline, recorded, cache = load_config(config), None, None, None
    if study is not None:
        from tuner.study.results import read_study
        from tuner.study.storage import open_existing_study

        folder, _ = open_existing_study(studies_dir, study, storage)
        view = read_study(folder)
        project = project if config else view.project
        recorded = view.split
        best = view.best
        pipeline = PipelineConfig.from_record(best.pipeline) if best else None
        out = out or folder.root / "programs"
        cache = folder.cache_in_use(view.meta)
    from tuner.evaluation.answerers import answerer_kind
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    answerer_kind(project).refusal(project, "compile")
    with index_progress() as shown:
        workspace = open_workspace(project, dataset, limit, cache=cache, on_progress=shown)
    runner = RagRunner(workspace)
    pipeline = pipeline or project.pipeline
    train_questions, held_out = compile_questions(workspace.dataset.questions, recorded, train, split)
    err_console.print(f"compiling program {pipeline.program!r} for {target} with {optimizer} on "
                      f"{len(train_questions)} training questions of {workspace.dataset.name} "
                      f"({len(held_out)} held out), budget {budget} LLM calls", highlight=False)
    with terminal_kept(), progress() as bar:
        task = bar.add_task(f"compiling ({optimizer})", total=budget)
        paid = runner.meter.paid
        compiled = compile_program(runner, pipeline, train_questions, held_out, settings,
                                   out or STUDIES / "programs",
                                   on_score=lambda _: bar.update(task, completed=runner.meter.paid - paid))
    sidecar = compiled.sidecar
    console.print(f"saved {compiled.path} (program_id {sidecar.program_id}, {sidecar.demos} demo(s)); "
                  f"{sidecar.calls} LLM calls ({sidecar.calls_paid} paid now of a budget of {budget}, the rest "
                  f"from the cache); training score {sidecar.train_score:.3f}",
                  highlight=False)
    if held_out:
        judge_programs(runner, pipeline, compiled, held_out, settings)


def judge_programs(runner, pipeline: PipelineConfig, compiled, held_out, settings) -> None:
    """The compiled program against the one it started from, on the held-out questions (the same contexts)."""
    from tuner.analysis.programs import judge_compiled

    with progress() as bar:
        tasks: dict[str, int] = {}

        def on_progress(name: str, index: int, stage: str) -> None:
            if name not in tasks:
                tasks[name] = bar.add_task(f"held-out: {name}", total=len(held_out))
            bar.update(tasks[name], completed=index + (stage == "done"))

        table = judge_compiled(runner, pipeline, compiled, held_out, settings, on_progress)
    metrics = settings.metrics
    view = Table(title=f"held-out: {len(held_out)} questions, the same contexts")
    for column in ("program", *metrics, "refusals", "citing", "LLM calls"):
        view.add_column(column, justify="left" if column == "program" else "right")
    for name, row in table.items():
        view.add_row(name, *("—" if row.means[m] is None else f"{row.means[m]:.3f}" for m in metrics),
                     f"{row.refusal_rate:.0%}", f"{row.citation_rate:.0%}", str(row.llm_calls))
    console.print(view)
    console.print(table["compiled"].vs_reference[settings.target].sentence, highlight=False, soft_wrap=True)
