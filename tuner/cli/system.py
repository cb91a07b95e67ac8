"""`tuner system check`: ask your own system (`system:` in the config) one question as a study's trial 0 would, and
show what tuner read from its reply."""

from __future__ import annotations

import time
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from tuner.cli._app import app
from tuner.cli._options import ConfigOption, DatasetOption
from tuner.config import load_config
from tuner.errors import ConfigError
from tuner.ui import console

system_app = typer.Typer(help="Your own system (system: in the config): ask it as a study would.",
                         no_args_is_help=True)
app.add_typer(system_app, name="system")

#: how much of an answer and of each context the check shows
SHOWN = 200


@system_app.command("check")
def check_command(
    config: ConfigOption = None, dataset: DatasetOption = None,
    question: Annotated[Optional[str], typer.Option("--question", help="the question id to ask (default: the "
                                                    "first)")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="ask the system even if its reply is cached")] = False,
) -> None:
    """Ask the system one question with its knobs' defaults (as trial 0 would) and show what tuner read: the answer,
    each context with its id and whether the dataset names that document, the latency and usage, and what to change
    where something a study needs is missing. Exit 2 when the reply cannot be read or the knobs are refused, 1 when
    the call failed (it raised, or timed out)."""
    from tuner.cli.evaluate import open_split
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.systems import BadReply

    project = load_config(config)
    if project.system is None:
        raise ConfigError("tuner system check asks your own system: this config has no system: (tuner's built-in "
                          "pipeline is checked by tuner eval)")
    workspace = open_split(project, dataset, None, "all")
    data = workspace.dataset
    asked = next((q for q in data.questions if q.id == question), None) if question else \
        (data.questions[0] if data.questions else None)
    if asked is None:
        raise ConfigError(f"--question {question}: no such question in {data.name}" if question else
                          f"{data.name} has no question to ask")
    runner = RagRunner(workspace, use_cache=not no_cache)
    answerer, trial = runner.answerer, runner.answerer.base(project)
    knobs = ", ".join(f"{k}={v!r}" for k, v in trial.knobs().items()) or "no knobs"
    started = time.perf_counter()
    try:
        reply = answerer.system.reply(asked.id, asked.text, trial.knobs())
    except BadReply as exc:  # its own exit code, as under eval and optimize: 2 for a shape, 1 for a failed call
        raise type(exc)(f"system {project.system.entry}, asked question {asked.id}: {exc}") from None
    seconds, paid = time.perf_counter() - started, runner.meter.total()
    cached = " (its cached reply: --no-cache asks again)" if paid.cache_hits else ""
    console.print(f"system {escape(project.system.identity)}, asked {asked.id} ({escape(asked.text)!r}) with "
                  f"{escape(knobs)}{cached}", highlight=False, soft_wrap=True)
    console.print(f"answer: {escape(_cut(reply.answer)) if reply.answer is not None else '(none: contexts only)'}",
                  highlight=False, soft_wrap=True)
    known = {d.id for d in data.documents}
    graded = any(q.relevant_ids for q in data.questions)  # qrels: which documents answer which question
    origin = f", from {reply.contexts_from}" if reply.contexts_from else ""
    table = Table(title=f"{len(reply.contexts)} context(s){escape(origin)}")
    for column in ("#", "id", "a document of the dataset", f"gold for {asked.id}", "text"):
        table.add_column(column)
    for n, context in enumerate(reply.contexts, 1):
        table.add_row(str(n), escape(context.id or "—"), _yes(context.id is not None and context.id in known),
                      _yes(context.id in asked.relevant_ids) if graded else "— (no qrels)",
                      escape(_cut(context.text, 80)))
    console.print(table)
    usage = f"{reply.prompt_tokens} prompt + {reply.completion_tokens} completion tokens" \
        if reply.prompt_tokens or reply.completion_tokens else "no usage reported"
    console.print(f"{seconds:.2f} s; {usage}", highlight=False)
    for line in findings(reply, known, project.system.answers, graded):
        console.print(line, highlight=False, soft_wrap=True)


def findings(reply, known: set[str], answers: bool, graded: bool = True) -> list[str]:
    """What a study could not score from this reply, each with what to change; or that it is ready. `graded`: the
    dataset names gold documents (qrels)."""
    found = []
    if answers and not (reply.answer or "").strip():
        found.append("missing: the answer is empty, so answer metrics score it as a refusal; return the text your "
                     "system answers with")
    if not reply.contexts:
        found.append("missing: no contexts, so faithfulness and the context metrics cannot be scored; return the "
                     "passages the answer was written from")
    bare = sum(c.id is None for c in reply.contexts)
    if bare:
        found.append(f"missing: {bare} of {len(reply.contexts)} contexts carry no id, so id targets (ndcg@10, "
                     f"recall@k) cannot be scored; return each as {{\"text\": …, \"id\": DOCUMENT_ID}}")
    foreign = [c.id for c in reply.contexts if c.id is not None and c.id not in known]
    if foreign:
        found.append(f"unknown: {len(foreign)} id(s) name no document of the dataset (e.g. {foreign[0]!r}); return "
                     f"each context's source document id (a LangChain Document's metadata key, a LlamaIndex node's "
                     f"ref_doc_id)")
    if found:
        return found
    if not graded:
        return ["ready for judged targets (faithfulness, answer_relevancy): this dataset names no gold documents "
                "(no qrels), so id targets (ndcg@10, recall@k) cannot be scored on it whatever the system returns"]
    return ["ready: an answer, contexts and document ids a study can score"]


def _yes(value: bool) -> str:
    return "yes" if value else "no"


def _cut(text: str, most: int = SHOWN) -> str:
    text = " ".join(text.split())
    return text if len(text) <= most else text[: most - 1] + "…"
