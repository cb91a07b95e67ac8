"""`tuner eval`, `tuner index`: one configuration scored, an index built."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from tuner.cli._app import app
from tuner.cli._display import index_progress, print_notes, print_rag_tables, print_retrieval_table, write_out
from tuner.cli._options import ConfigOption, DatasetOption, LimitOption, metric_list
from tuner.config import TrialConfig, load_config, with_overrides
from tuner.errors import ConfigError
from tuner.ui import console, err_console, note, progress


@app.command("eval")
def eval_command(
    config: ConfigOption = None,
    dataset: DatasetOption = None,
    limit: LimitOption = None,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="score retrieval with gold ids; no LLM needed")
    ] = False,
    metrics: Annotated[
        Optional[str], typer.Option("--metrics", "-m", help="comma-separated RAGAS metrics (default: the config's)")
    ] = None,
    set_: Annotated[
        Optional[list[str]],
        typer.Option("--set", help="override a pipeline knob, e.g. --set alpha=0.3 --set program=strict"),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="call the models even for cached prompts")] = False,
    split: Annotated[str, typer.Option("--split", help="all, search or holdout: the questions a study searched on "
                                       "or held out (the config's dataset.holdout, as `tuner best` writes it)")]
    = "all",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="write results JSON here")] = None,
) -> None:
    """Score one pipeline configuration over every question: retrieval, answers and RAGAS metrics."""
    from tuner.evaluation.answerers import answerer_kind
    from tuner.evaluation.records import eval_json

    project = load_config(config)
    pipeline_config = with_overrides(project.pipeline, set_ or [])
    project = project.model_copy(update={"pipeline": pipeline_config})
    workspace = open_split(project, dataset, limit, split)
    data = workspace.dataset
    part = "" if split == "all" else f" ({split} part)"
    kind = answerer_kind(project)
    answers = escape(kind.what(project, versioned=True) if workspace.index is None else
                     f"{len(workspace.index.chunks)} chunks")
    console.print(f"[bold]{escape(data.name)}[/] ({data.format}): {len(data.documents)} documents, "
                  f"{answers}, {len(data.questions)} questions{part}", markup=True)
    print_notes(data)

    trial = kind.base(project)
    started = time.perf_counter()
    evaluated = run_evaluation(workspace, trial, metric_list(metrics), no_cache,
                               answer=not retrieval_only)
    elapsed = time.perf_counter() - started

    chunks = len(workspace.index.chunks) if workspace.index is not None else 0
    report = eval_json(project.model_dump(mode="json"), data, chunks, split, evaluated.to_json(), elapsed)
    print_retrieval_table(evaluated, "pipeline" if project.system is None else kind.what(project), trial.knobs(),
                          data.questions)
    if not retrieval_only:
        print_rag_tables(evaluated)
    if out:
        write_out(out, report)
        err_console.print(f"results written to {out}")


def open_split(project, dataset: Optional[Path], limit: Optional[int], split: str):
    """The project's workspace (index built, with a progress bar), its questions cut to `split`: all, or the part a
    study searched on or held out (the config's dataset.holdout, as `tuner best` writes it)."""
    from tuner.data.split import Split
    from tuner.workspace import open_workspace

    if split not in ("all", "search", "holdout"):
        raise ConfigError(f"--split {split!r}: choose all, search or holdout")
    with index_progress() as shown:
        workspace = open_workspace(project, dataset, limit, on_progress=shown)
    data = workspace.dataset
    if split != "all":
        parts = Split.auto([q.id for q in data.questions], project.dataset.holdout)
        if not parts.active:
            raise ConfigError(f"--split {split}: these {len(data.questions)} questions hold none out (set "
                              f"dataset.holdout in the config, as `tuner best` does, or use --split all)")
        data.questions = parts.part(data.questions, split)
    return workspace


def run_evaluation(workspace, config: TrialConfig, requested: Optional[list[str]], no_cache: bool,
                   answer: bool = True, label: str = ""):
    """The configuration scored question by question on `requested` metrics (None: the config's); `answer=False`:
    retrieval alone (no model loads)."""
    from tuner.evaluation.rag_eval import RagRunner, held_back

    runner = RagRunner(workspace, use_cache=not no_cache)
    if answer:
        for metric, why in runner.metrics_for(requested)[1].items():
            note(f"skipping {metric}: {why}")
        if slower := held_back(workspace.config, config):
            note(slower)
        runner.require_endpoints()
    questions = workspace.dataset.questions
    with progress() as bar:
        task = bar.add_task(label + ("evaluating" if answer else "retrieving"), total=len(questions))

        def on_progress(index: int, question_id: str, stage: str) -> None:
            bar.update(task, completed=index + (stage == "done"), description=f"{label}{question_id}: {stage}")

        return runner.evaluate(config, metrics=requested, on_progress=on_progress, answer=answer)


@app.command("index")
def index_command(
    config: ConfigOption = None, dataset: DatasetOption = None,
    check_hybrid: Annotated[bool, typer.Option(
        "--check-hybrid", help="weaviate backend: ask Weaviate's own hybrid query for each question and check that its "
        "order equals tuner's fusion of the same candidates")] = False,
    questions: Annotated[int, typer.Option("--questions", min=1, help="questions --check-hybrid asks")] = 20,
) -> None:
    """Chunk, embed (cached) and index a dataset; prints sizes and timings."""
    from tuner.evaluation.answerers import answerer_kind
    from tuner.workspace import open_workspace

    project = load_config(config)
    answerer_kind(project).refusal(project, "index")
    if check_hybrid and project.backend.type != "weaviate":
        raise ConfigError("--check-hybrid compares Weaviate's fusion with tuner's: set backend.type: weaviate")
    with index_progress() as shown:
        workspace = open_workspace(project, dataset, on_progress=shown)
    index = workspace.index
    table = Table(title=f"index of {workspace.dataset.name}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("documents", str(len(workspace.dataset.documents)))
    table.add_row("chunks", str(len(index.chunks)))
    table.add_row("chunks embedded now", f"{index.embedded} (the rest from {workspace.config.cache_dir})")
    table.add_row("embedding dim", str(index.vectors.shape[1]))
    table.add_row("linking entities", str(index.graph.entity_count))
    if project.backend.type == "weaviate":
        table.add_row("Weaviate collection", index.backend.name)
    for step, seconds in index.timings.items():
        table.add_row(f"{step} seconds", f"{seconds:.2f}")
    console.print(table)
    if check_hybrid:
        check_weaviate_fusion(workspace, questions)


def check_weaviate_fusion(workspace, count: int) -> None:
    """Weaviate's hybrid vs tuner's fusion per fusion and alpha; exits 1 when an order differs beyond a near tie."""
    from tuner.config import WEAVIATE_FUSIONS
    from tuner.pipeline.fusion_check import check_fusion, require_agreement

    asked = [q.text for q in workspace.dataset.questions[:count]]
    vectors = workspace.embedder.encode(asked)
    alphas = (0.0, 0.25, 0.5, 0.75, 1.0)
    with progress() as bar:
        task = bar.add_task(f"hybrid queries: Weaviate vs tuner ({len(asked)} questions)", total=len(asked))
        checks = check_fusion(workspace.index.backend, vectors, asked, alphas, WEAVIATE_FUSIONS, limit=10,
                              window=workspace.config.backend.candidates, on_question=lambda: bar.advance(task))
    table = Table(title="Weaviate's hybrid order vs tuner's fusion (top 10)")
    for column in ("fusion", "alpha", "same order", "near-tie swaps", "different", "largest score gap"):
        table.add_column(column, justify="left" if column == "fusion" else "right")
    for fusion in WEAVIATE_FUSIONS:
        for alpha in alphas:
            group = [c for c in checks if c.fusion == fusion and c.alpha == alpha]
            table.add_row(fusion, f"{alpha:g}", f"{sum(c.same_order for c in group)}/{len(group)}",
                          str(sum(c.near_tie for c in group)),
                          str(sum(not c.same_order and not c.near_tie for c in group)),
                          f"{max(c.score_gap for c in group):.1e}")
    console.print(table)
    require_agreement(checks)
    console.print(f"Weaviate and tuner agree on all {len(checks)} hybrid queries"
                  + (f" ({sum(c.near_tie for c in checks)} differ only among scores within 1e-6)"
                     if any(c.near_tie for c in checks) else ""), highlight=False)
