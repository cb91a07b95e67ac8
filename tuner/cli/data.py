"""`tuner data [DATASET]`, `tuner data ingest DIR --out DATASET`: datasets shown, and made from a folder of files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table
from typer.core import TyperGroup

from tuner.cli._app import app
from tuner.cli._display import print_notes
from tuner.errors import ConfigError
from tuner.ui import console, err_console, progress


class ShowByDefault(TyperGroup):
    """`tuner data PATH` (and bare `tuner data`: the demo) mean `tuner data show PATH`, as before the group."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["show", *args]
        return super().parse_args(ctx, args)


data_app = typer.Typer(cls=ShowByDefault, help="Datasets: show one, or make one from a folder of documents.")
app.add_typer(data_app, name="data")


@data_app.command("show")
def data_show(
    dataset: Annotated[Optional[Path], typer.Argument(help="dataset folder or file (default: the demo)")] = None,
    format: Annotated[str, typer.Option(help="auto, beir, ragas or hotpotqa")] = "auto",
) -> None:
    """Show what a dataset holds: format, documents, questions, references and gold ids."""
    from tuner.data import FORMATS, load_dataset

    if format != "auto" and format not in FORMATS:
        raise ConfigError(f"--format: expected auto, {', '.join(FORMATS)}; got {format!r}")
    data = load_dataset(dataset, format, require_questions=False)
    table = Table(title=f"{data.name} ({data.format})")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("documents", str(len(data.documents)))
    table.add_row("questions", str(len(data.questions)))
    table.add_row("with reference answers", str(sum(bool(q.answers) for q in data.questions)))
    table.add_row("with gold document ids", str(sum(bool(q.relevant_ids) for q in data.questions)))
    console.print(table)
    if not data.questions:
        console.print(f"a corpus without questions: write a test set with `tuner data generate {dataset} "
                      f"--questions 50`", highlight=False)
    print_notes(data)


@data_app.command("ingest")
def data_ingest(
    folder: Annotated[Path, typer.Argument(help="folder of .txt, .md, .html, .pdf and .docx files (read recursively)")],
    out: Annotated[Path, typer.Option("--out", "-o", help="dataset folder to write corpus.jsonl into")],
) -> None:
    """Read a folder of documents into a BEIR-layout corpus; a re-run reads only the files that changed."""
    from tuner.data.ingest import ingest

    with progress(transient=True) as bar:
        task = bar.add_task("reading files", total=None)
        report = ingest(folder, out, on_file=lambda done, total: bar.update(task, completed=done, total=total))
    console.print(f"{report.documents} documents in {report.out / 'corpus.jsonl'} ({report.read} read now, "
                  f"{report.unchanged} unchanged since the last ingest"
                  + (f", {report.removed} removed: their files are gone" if report.removed else "") + ")",
                  highlight=False)
    if report.left_out:
        table = Table(title=f"{len(report.left_out)} files left out")
        table.add_column("file")
        table.add_column("why")
        for left in report.left_out:
            table.add_row(left.path, left.reason)
        console.print(table)
    if report.hidden:
        err_console.print(f"note: {report.hidden} hidden files or folders (names starting with '.') were not read",
                          highlight=False)
