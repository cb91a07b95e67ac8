"""The `tuner` command line. Heavy libraries are imported inside commands, after tuner set its offline env."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

import tuner  # noqa: F401  (sets offline environment defaults first)
from tuner.config import PipelineConfig, ProjectConfig, describe_validation_error, load_config
from tuner.errors import ConfigError, TunerError
from tuner.ui import console, err_console, progress

app = typer.Typer(
    name="tuner",
    help="Auto-tune a RAG pipeline: retrieval knobs, reranking, dynamic K, scored on your questions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOption = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="project config YAML (default: built-in defaults)")
]
DatasetOption = Annotated[
    Optional[Path], typer.Option("--dataset", "-d", help="dataset folder or file (default: the config's, else the demo)")
]
LimitOption = Annotated[Optional[int], typer.Option("--limit", "-n", min=1, help="use only the first N questions")]


@app.command("eval")
def eval_command(
    config: ConfigOption = None,
    dataset: DatasetOption = None,
    limit: LimitOption = None,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="score retrieval with gold ids; no LLM needed")
    ] = False,
    set_: Annotated[
        Optional[list[str]],
        typer.Option("--set", help="override a pipeline knob, e.g. --set alpha=0.3 --set reranker=embedding"),
    ] = None,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="write results JSON here")] = None,
) -> None:
    """Score one pipeline configuration over every question."""
    if not retrieval_only:
        raise TunerError("full evaluation (generation + RAGAS) needs an LLM backend, not available yet: "
                         "run with --retrieval-only")
    from tuner.evaluation.retrieval_eval import evaluate_retrieval
    from tuner.workspace import open_workspace

    project = load_config(config)
    pipeline_config = apply_overrides(project.pipeline, set_ or [])
    project = project.model_copy(update={"pipeline": pipeline_config})
    workspace = open_workspace(project, dataset, limit)
    data = workspace.dataset
    console.print(f"[bold]{data.name}[/] ({data.format}): {len(data.documents)} documents, "
                  f"{len(workspace.index.chunks)} chunks, {len(data.questions)} questions")
    for note in data.notes:
        err_console.print(f"[yellow]note:[/] {note}")

    started = time.perf_counter()
    with progress() as bar:
        task = bar.add_task("retrieving", total=len(data.questions))
        results = evaluate_retrieval(data, workspace.pipeline, pipeline_config, lambda: bar.advance(task))
    elapsed = time.perf_counter() - started

    report = {
        "config": project.model_dump(mode="json"),
        "dataset": {"name": data.name, "format": data.format, "source": str(data.source),
                    "documents": len(data.documents), "chunks": len(workspace.index.chunks),
                    "questions": len(data.questions)},
        **results,
        "seconds": round(elapsed, 3),
    }
    print_retrieval_table(report["retrieval"], pipeline_config)
    if out:
        write_json(out, report)
        err_console.print(f"results written to {out}")


@app.command("index")
def index_command(config: ConfigOption = None, dataset: DatasetOption = None) -> None:
    """Chunk, embed (cached) and index a dataset; prints sizes and timings."""
    from tuner.workspace import open_workspace

    workspace = open_workspace(load_config(config), dataset)
    index = workspace.index
    table = Table(title=f"index of {workspace.dataset.name}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("documents", str(len(workspace.dataset.documents)))
    table.add_row("chunks", str(len(index.chunks)))
    table.add_row("embedding dim", str(index.vectors.shape[1]))
    table.add_row("linking entities", str(index.graph.entity_count))
    for step, seconds in index.timings.items():
        table.add_row(f"{step} seconds", f"{seconds:.2f}")
    console.print(table)


@app.command("data")
def data_command(
    dataset: Annotated[Optional[Path], typer.Argument(help="dataset folder or file (default: the demo)")] = None,
    format: Annotated[str, typer.Option(help="auto, beir, ragas or hotpotqa")] = "auto",
) -> None:
    """Show what a dataset holds: format, documents, questions, references and gold ids."""
    from tuner.data import FORMATS, load_dataset

    if format != "auto" and format not in FORMATS:
        raise ConfigError(f"--format: expected auto, {', '.join(FORMATS)}; got {format!r}")
    data = load_dataset(dataset, format)
    table = Table(title=f"{data.name} ({data.format})")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("documents", str(len(data.documents)))
    table.add_row("questions", str(len(data.questions)))
    table.add_row("with reference answers", str(sum(bool(q.answers) for q in data.questions)))
    table.add_row("with gold document ids", str(sum(bool(q.relevant_ids) for q in data.questions)))
    console.print(table)
    for note in data.notes:
        err_console.print(f"[yellow]note:[/] {note}")


def apply_overrides(pipeline: PipelineConfig, assignments: list[str]) -> PipelineConfig:
    """`key=value` pairs (values parsed as YAML scalars) applied to a pipeline config, validated."""
    import yaml
    from pydantic import ValidationError

    values: dict[str, Any] = pipeline.model_dump()
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or key.strip() not in values:
            known = ", ".join(values)
            raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE with KEY one of {known}")
        values[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
    try:
        return PipelineConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"--set: {describe_validation_error(exc)}") from None


def print_retrieval_table(summary: dict[str, Any], pipeline: PipelineConfig) -> None:
    knobs = ", ".join(f"{k}={v}" for k, v in pipeline.model_dump().items() if v is not None)
    console.print(f"pipeline: {knobs}", highlight=False)
    table = Table(title="retrieval")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    if summary.get("questions_scored", 0) == 0:
        table.caption = "no gold document ids in this dataset: only mean_k is meaningful"
    console.print(table)


def write_json(path: Path, data: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise TunerError(f"{path}: cannot write ({exc.strerror})") from None


def main() -> None:
    """Console entry point: user errors become one line on stderr and a non-zero exit."""
    try:
        app()
    except TunerError as exc:
        err_console.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/]")
        sys.exit(130)


if __name__ == "__main__":
    main()
