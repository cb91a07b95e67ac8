"""The `tuner` Typer application every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="tuner",
    help="Auto-tune a RAG pipeline: retrieval knobs, reranking, dynamic K, scored on your questions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
