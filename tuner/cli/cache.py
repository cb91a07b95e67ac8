"""`tuner cache info|prune`: what the shared cache of LLM calls and embeddings holds, and trimming it."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.table import Table

from tuner.cache import redact
from tuner.cli._app import app
from tuner.cli._options import STUDIES, CacheStudyOption, ConfigOption, StorageOption, StudiesDirOption
from tuner.errors import ConfigError
from tuner.ui import console

cache_app = typer.Typer(help="The shared cache of LLM calls and embeddings: show and trim it.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("info")
def cache_info(config: ConfigOption = None, study: CacheStudyOption = None, storage: StorageOption = None,
               studies_dir: StudiesDirOption = STUDIES) -> None:
    """What the cache holds per model: LLM calls and embedded texts, their size and when they were last used."""
    import datetime

    from tuner.models.embedders._cache import cache_stores
    from tuner.study.storage import cache_location

    location = cache_location(config, study, storage, studies_dir)
    shown = redact(location) if isinstance(location, str) else location
    console.print(f"cache: {shown}", highlight=False, soft_wrap=True)  # a long path: never cut like a title
    table = Table()
    for column in ("kind", "model", "entries", "MB", "last used"):
        table.add_column(column, justify="right" if column in ("entries", "MB") else "left")
    for kind, store in cache_stores(location).items():
        for group in store.summary():
            table.add_row(kind, group.tag or "(untagged)", str(group.entries), f"{group.bytes / 1e6:.1f}",
                          datetime.date.fromtimestamp(group.last_used * 86400).isoformat() if group.last_used
                          else "not recorded")
    if not table.rows:
        table.caption = "empty"
    console.print(table)
    own = sorted(p.parent.name for p in studies_dir.glob("*/cache") if p.is_dir()) if study is None else []
    if own:
        console.print(f"studies with their own cache (tuner cache info --study NAME): {', '.join(own)}",
                      highlight=False)


@cache_app.command("prune")
def cache_prune(
    unused_days: Annotated[Optional[int], typer.Option(
        "--unused-days", min=0, help="drop LLM calls and embeddings not used for this many days")] = None,
    model: Annotated[Optional[str], typer.Option(
        "--model", help="drop what a model produced: LLM calls and embeddings whose model name contains this")] = None,
    config: ConfigOption = None, study: CacheStudyOption = None, storage: StorageOption = None,
    studies_dir: StudiesDirOption = STUDIES,
) -> None:
    """Trim the cache (what is dropped is paid again if needed) and compact its files. Run it while no study uses
    the cache."""
    if model is not None and not model.strip():
        raise ConfigError("--model: give part of a model name (tuner cache info lists them)")
    from tuner.models.embedders._cache import cache_stores
    from tuner.study.storage import cache_location

    location = cache_location(config, study, storage, studies_dir)
    dropped = {kind: store.prune(unused_days, model) for kind, store in cache_stores(location).items()}
    shown = redact(location) if isinstance(location, str) else location
    console.print(f"{shown}: dropped {dropped.get('LLM calls', 0)} LLM calls and {dropped.get('embeddings', 0)} "
                  f"embeddings", highlight=False)
