"""`tuner data [DATASET]`, `tuner data ingest DIR --out DATASET`, `tuner data generate DATASET -n N`: datasets
shown, made from a folder of files, and given questions."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table
from typer.core import TyperGroup

from tuner.cli._app import app
from tuner.cli._display import index_progress, print_notes
from tuner.cli._options import ConfigOption
from tuner.errors import ConfigError
from tuner.testset import DEFAULT_SHARES, read_scorecards
from tuner.ui import console, err_console, note, progress


class ShowByDefault(TyperGroup):
    """`tuner data PATH` (and bare `tuner data`: the demo) mean `tuner data show PATH`, as before the group."""

    def parse_args(self, ctx, args):
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["show", *args]
        return super().parse_args(ctx, args)


data_app = typer.Typer(cls=ShowByDefault, help="Datasets: `tuner data [PATH]` shows one (the demo without PATH); "
                       "ingest and generate make one from a folder of documents.")
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
    runs = read_scorecards(data.source) if data.format == "beir" else []
    if runs:
        show_scorecard(runs[-1])
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
        show_left_out(report)
    if report.hidden:
        err_console.print(f"note: {report.hidden} hidden files or folders (names starting with '.') were not read",
                          highlight=False)


#: left-out files listed one by one up to this many; beyond, grouped by reason (ingest.json lists them all)
LISTED = 20


def show_left_out(report) -> None:
    from collections import Counter, defaultdict

    from tuner.data.ingest import BY_SUFFIX, MANIFEST

    table = Table(title=f"{len(report.left_out)} files left out")
    if len(report.left_out) <= LISTED:
        table.add_column("file")
        table.add_column("why")
        for left in report.left_out:
            table.add_row(left.path, left.reason)
    else:  # grouped by the reason's kind ("unknown type"), its details (".gz", "no suffix") counted
        groups = defaultdict(list)
        for left in report.left_out:
            groups[left.reason.split(" (")[0]].append(left)
        table.add_column("why")
        table.add_column("files", justify="right")
        table.add_column("e.g.")
        for kind, group in sorted(groups.items(), key=lambda item: -len(item[1])):
            details = Counter(left.reason for left in group)
            examples = (", ".join(left.path for left in group[:2]) if len(details) == 1 else
                        ", ".join(f"{reason.removeprefix(kind).strip()} {n}" for reason, n in details.most_common(4))
                        + (", …" if len(details) > 4 else ""))
            table.add_row(kind, str(len(group)), examples)
    console.print(table)
    listed = "" if len(report.left_out) <= LISTED else f"; every one is listed in {report.out / MANIFEST}"
    console.print(f"tuner reads {', '.join(sorted(BY_SUFFIX))}{listed}", highlight=False)


@data_app.command("generate")
def data_generate(
    dataset: Annotated[Path, typer.Argument(help="dataset folder with a corpus.jsonl (what `tuner data ingest` "
                                                 "writes)")],
    questions: Annotated[int, typer.Option("--questions", "-n", help="questions to write")],
    config: ConfigOption = None,
    multi_hop: Annotated[float, typer.Option("--multi-hop", help="share of multi-hop questions (two linked "
                                                                  "documents)")] = DEFAULT_SHARES["multi-hop"],
    unanswerable: Annotated[float, typer.Option("--unanswerable", help="share of questions the corpus does not "
                                                                        "answer")] = DEFAULT_SHARES["unanswerable"],
    seed: Annotated[int, typer.Option(help="which chunks are drawn, in which order")] = 0,
    append: Annotated[bool, typer.Option("--append", help="add to the questions already there")] = False,
    replace: Annotated[bool, typer.Option("--replace", help="write over the questions already there")] = False,
    anchor_questions: Annotated[Optional[Path], typer.Option(
        "--anchor-questions", help="JSON Lines of ~10 questions people wrote, each with the ids of the documents "
        "that answer it: the new questions are held to their lexical overlap, and the scorecard says whether both "
        "rank keyword, hybrid and vector search alike")] = None,
) -> None:
    """Write a test set from the corpus with the configured generator, checked by the judge: questions, reference
    answers and gold document ids, and a scorecard of what the quality gates kept and rejected."""
    from tuner.config import load_config
    from tuner.testset import generate_testset

    if append and replace:
        raise ConfigError("--append and --replace: choose one")
    if not 0 <= multi_hop + unanswerable <= 1 or min(multi_hop, unanswerable) < 0:
        raise ConfigError(f"--multi-hop {multi_hop:g} and --unanswerable {unanswerable:g}: each ≥ 0, together ≤ 1 "
                          f"(the rest are single-hop)")
    shares = {"single-hop": 1 - multi_hop - unanswerable, "multi-hop": multi_hop, "unanswerable": unanswerable}
    project = load_config(config)
    with index_progress() as on_index, progress() as bar:
        task = bar.add_task("writing questions", total=questions)
        made = generate_testset(project, dataset, questions, shares, "append" if append else "replace" if replace
                                else "new", seed, on_index=on_index,
                                on_progress=lambda kept, total: bar.update(task, completed=kept),
                                anchors=anchor_questions)
    console.print(f"{made.written} questions written to {dataset / 'queries.jsonl'} ({made.total} in all)",
                  highlight=False)
    show_scorecard(made.scorecard)


def _two(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def show_scorecard(card: dict) -> None:
    """What a generation run kept and rejected, by kind and by gate."""
    table = Table(title="test set scorecard")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("questions asked", str(card["asked"]))
    for kind, kept in card["kept"].items():
        table.add_row(f"kept {kind}", f"{kept} of {card['drawn'][kind]} drawn")
    for gate, count in card["rejected"].items():
        table.add_row(f"rejected: {gate}", str(count))
    table.add_row("documents covered (gold)", f"{card['documents_covered']} of {card['documents']}")
    words = card.get("question_words") or {}
    if words:
        table.add_row("question words (min / median / max)", f"{words['min']} / {words['median']} / {words['max']}")
    overlap = card.get("overlap")
    if overlap:  # scorecards from before the overlap gate have none
        table.add_row("lexical overlap with sources (kept mean / target)",
                      f"{_two(overlap['kept'])} / {overlap['target']:.2f} ({overlap['from']})")
        table.add_row("rewritten twice to get under it", str(card["rewritten_twice"]))
        table.add_row("gold documents added by pooling (others that answer a question)", str(card["pooled_gold"]))
        table.add_row("styles kept", ", ".join(f"{n} {s}" for s, n in card["styles"].items()) or "—")
        if card.get("styles_from"):
            table.add_row("styles asked", card["styles_from"])
        split = card["discriminating"]
        table.add_row(f"discriminating (nDCG@10 spread ≥ {split['spread']:g} over {len(split['configurations'])} "
                      f"retrieval configurations)", f"{split['questions']} of {split['of']}"
                      + (f" ({split['questions'] / split['of']:.0%})" if split["of"] else ""))
    table.add_row("LLM calls (paid / from the cache)", f"{card['llm_calls']} / {card['cache_hits']}")
    if "calls_per_question" in card:
        table.add_row("LLM calls per kept question (paid or cached)", f"{card['calls_per_question']:.1f}")
    table.add_row("seconds", f"{card['seconds']:.0f}")
    console.print(table)
    console.print(f"written by {card['generator']}, checked by {card['judge']}", highlight=False)
    if card.get("anchors"):
        from tuner.testset.anchors import AnchorCheck

        console.print(AnchorCheck.from_json(card["anchors"]).sentence().replace("**", ""), highlight=False,
                      soft_wrap=True)
    for said in card.get("notes", []):
        note(said)
