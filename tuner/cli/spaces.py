"""`tuner spaces show`: a search space as a table, validated."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from tuner.cli._app import app
from tuner.cli._options import ConfigOption
from tuner.config import load_config
from tuner.ui import console

spaces_app = typer.Typer(help="Search spaces: show and check them.", no_args_is_help=True)
app.add_typer(spaces_app, name="spaces")


@spaces_app.command("show")
def spaces_show(space: Annotated[str, typer.Argument(help="YAML file, or a name in search_spaces/")],
                config: ConfigOption = None) -> None:
    """Print a search space as a table, checked as `tuner optimize` checks it before any trial (against --config's
    pipeline, else the defaults)."""
    from tuner.study.space import load_space, resolve_space

    path = resolve_space(space)
    project = load_config(config)
    loaded = load_space(path, project)
    loaded.check_for(project, str(path), baseline={})
    table = Table(title=str(path), caption=loaded.description.strip() or None)
    for column in ("knob", "type", "values", "when"):
        table.add_column(column)
    for name, param in loaded.params.items():
        when = ", ".join(f"{k} in {v}" for k, v in param.when.items())
        table.add_row(name, param.type, param.describe(), when)
    console.print(table)
