"""`tuner judge check` (the RAGAS judge scored on labelled cases built from your own data, or on your labels),
`tuner judge label` (people's labels of a study's answers, read by the report's PPI++ correction) and `tuner judge
align` (the graded judge's wording and demonstrations fitted to those labels)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from tuner.cli._app import app
from tuner.cli._display import index_progress, print_judge_checks
from tuner.cli._options import (
    STUDIES,
    DatasetOption,
    LimitOption,
    StorageOption,
    StudiesDirOption,
    StudyOption,
    metric_list,
    study_option,
)
from tuner.config import load_config
from tuner.errors import ConfigError
from tuner.ui import console, err_console, note, progress, status

judge_app = typer.Typer(help="Check the RAGAS judge on your own data before optimising against it.",
                        no_args_is_help=True)
app.add_typer(judge_app, name="judge")


@judge_app.command("check")
def judge_check_command(
    config: Annotated[Optional[list[Path]], typer.Option(
        "--config", "-c", help="project config YAML whose judge is checked; repeat to compare judges side by side "
        "(default: built-in defaults, or the study's project)")] = None,
    dataset: DatasetOption = None,
    n: Annotated[int, typer.Option("--n", min=2, help="questions to build cases from")] = 20,
    metrics: Annotated[Optional[str], typer.Option(
        "--metrics", "-m", help="comma-separated RAGAS metrics (default: the config's)")] = None,
    agreement: Annotated[int, typer.Option(
        "--agreement", min=0, help="cases per metric also judged under two sampled seeds (agreement)")] = 5,
    paraphrase: Annotated[bool, typer.Option(help="add the cases the generator writes: its paraphrase of each "
                                             "reference (supported) and an answer with a detail it added "
                                             "(unsupported)")] = True,
    study: Annotated[Optional[str], study_option(
        "check on a study's search questions with its project; saved in the study, shown in "
        "its report")] = None,
    storage: StorageOption = None,
    studies_dir: StudiesDirOption = STUDIES,
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="where the results JSON goes (default: "
                                                "reports/judge-check.json, or the study's folder)")] = None,
    labels: Annotated[Optional[Path], typer.Option(
        "--labels", help="check against people's labels (a labels.jsonl from `tuner judge label`) instead of cases "
        "built from the data")] = None,
    quick: Annotated[bool, typer.Option(
        "--quick", help="the check `tuner optimize --judge-check` runs before a study's first trial: 3 questions, "
        "one supported and one unsupported case each (--n, --agreement and --paraphrase do not apply)")] = False,
    limit: LimitOption = None,
    holdout: Annotated[Optional[float], typer.Option(
        "--holdout", min=0, max=0.95, help="build cases from the search part of this split only, as a study with "
        "this --holdout searches")] = None,
    settings: Annotated[bool, typer.Option(
        "--settings", help="compare the faithfulness verdict settings on the same cases (sampled, graded, graded "
        "with sentences) for each judge, and say which to use")] = False,
) -> None:
    """Score labelled supported / unsupported cases with the judge — built from your data, or your own labels: AUC,
    accuracy, NaN rates."""
    from tuner.data.split import Split
    from tuner.evaluation.judge.cases import GENERATED_KINDS, KINDS, label_cases, make_cases, quick_cases
    from tuner.evaluation.judge.check import VERDICT_SETTINGS, check_judge, save_checks
    from tuner.evaluation.judge.cut import setting_name
    from tuner.evaluation.labels import read as read_labels
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    projects = [load_config(c) for c in config] if config else [load_config(None)]
    questions_from, cache, folder = None, None, None
    if study is not None:
        from tuner.study.storage import open_existing_study

        folder, meta = open_existing_study(studies_dir, study, storage)
        if not config:
            projects = [meta.config]
        questions_from = meta.held_out
        cache = folder.cache_in_use(meta)
    requested = metric_list(metrics)

    checks, cases = [], None
    if labels is not None:
        if not labels.is_file():
            raise ConfigError(f"--labels {labels}: no such file")
        cases = label_cases(read_labels(labels).values())
    if settings:  # each judge under each faithfulness setting, RAGAS's own first
        projects = [project.model_copy(update={"evaluation": project.evaluation.model_copy(update=setting)})
                    for project in projects for setting in VERDICT_SETTINGS]
    for project in projects:
        with index_progress() as shown:
            workspace = open_workspace(project, dataset, limit, cache=cache, on_progress=shown)
        runner = RagRunner(workspace)
        if cases is None:  # one set of cases for every judge compared
            data = workspace.dataset
            if holdout is not None and questions_from is None:
                questions_from = Split.make([q.id for q in data.questions], holdout)
            questions = questions_from.search(data.questions) if questions_from else data.questions
            wanted = requested or project.evaluation.metrics
            with status("building labelled cases" + (" (paraphrasing)" if paraphrase and not quick else "")):
                kinds = [k for k in KINDS if paraphrase or k not in GENERATED_KINDS]
                cases = quick_cases(runner, questions, wanted) if quick else \
                    make_cases(runner, data, questions, wanted, n, kinds)
            agreement = 0 if quick else agreement
        with progress() as bar:
            task = bar.add_task(f"judging with {runner.judge.name} ({setting_name(project.evaluation)})",
                                total=len(cases))

            def on_progress(index: int, case) -> None:
                bar.update(task, completed=index, description=f"{case.metric} {case.question_id} {case.kind}")

            checks.append(check_judge(runner, cases, agreement, on_progress))
            bar.update(task, completed=len(cases))
    print_judge_checks(checks)
    if labels is not None:  # with labels, the judge's cut comes from them
        for check in checks:
            faithfulness = check.metrics.get("faithfulness")
            if faithfulness is not None and faithfulness.cut is not None:
                cv = "" if faithfulness.balanced_accuracy is None else \
                    f" (balanced accuracy {faithfulness.balanced_accuracy:.2f} when chosen on other labels)"
                shown = f"{faithfulness.cut:.2f}"
                note(f"your labels put {check.judge}'s cut ({check.setting}) at {shown}{cv}: " + (
                     f"set evaluation.cut: {shown} to read its scores there" if 0 < float(shown) < 1 else
                     "the end of its scale, where no evaluation.cut can be set: its scores barely move on these "
                     "answers"))
    err_console.print(f"results {save_checks(checks, out, folder, against_labels=labels is not None)}")


@judge_app.command("align")
def judge_align_command(
    labels: Annotated[Path, typer.Option("--labels", help="people's labels (a labels.jsonl from `tuner judge label`)")],
    config: Annotated[Optional[Path], typer.Option(
        "--config", "-c", help="project config YAML whose judge is aligned (default: built-in defaults)")] = None,
    folds: Annotated[int, typer.Option("--folds", min=2, max=10, help="folds of the labels: each is judged by "
                                       "the winner of a search on the others")] = 2,
    candidates: Annotated[int, typer.Option("--candidates", min=2, max=40, help="candidates per search (both "
                                            "wordings zero-shot, then balanced demo sets)")] = 6,
    out: Annotated[Path, typer.Option("--out", "-o", help="where the adopted alignment goes")] = Path(
        "judge-alignment.json"),
) -> None:
    """Align the graded judge with your labels: its wording and a few labelled demonstrations, adopted only where
    agreement rises on labels the search did not see."""
    from tuner.evaluation.judge.align import align
    from tuner.evaluation.judge.cases import label_cases
    from tuner.evaluation.labels import read as read_labels
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.files import write_json
    from tuner.workspace import open_workspace

    if not labels.is_file():
        raise ConfigError(f"--labels {labels}: no such file")
    project = load_config(config)
    if project.evaluation.verdicts != "graded":
        raise ConfigError("judge alignment shapes graded verdicts; this config judges with verdicts: sampled")
    cases = label_cases(read_labels(labels).values())
    with index_progress() as shown:
        runner = RagRunner(open_workspace(project, on_progress=shown))
    with progress() as bar:
        task = bar.add_task(f"aligning {runner.judge.name} on {len(cases)} labels", total=None)
        aligned = align(runner, project.evaluation, cases, folds, candidates,
                        lambda done, total: bar.update(task, completed=done, total=total))
    console.print(aligned.sentence(), highlight=False)
    if aligned.adopted is None:
        why = "held-out agreement did not rise" if not aligned.rose else \
            "on all the labels the judge as configured won"
        note(f"not adopted: {why}; the judge stays as configured and nothing was written")
        return
    write_json(out, aligned.adopted.model_dump(mode="json"))
    shown_demos = len(aligned.adopted.demos)
    note(f"adopted: wording {aligned.adopted.prompt}, {shown_demos} demonstration(s), cut "
         f"{aligned.adopted.cut if aligned.adopted.cut is None else round(aligned.adopted.cut, 2)}; written to {out}. "
         f"Set evaluation.alignment: {out} to judge with it (a study records it, and refuses a resume under another)")


KEYS = "[bold]y[/] supported · [bold]n[/] not supported · [bold]s[/] skip · [bold]b[/] back · [bold]q[/] quit"


@judge_app.command("label")
def judge_label_command(
    study: StudyOption = "default",
    n: Annotated[int, typer.Option("--n", min=1, help="answers to label (questions are drawn until they hold "
                                   "this many)")] = 60,
    import_file: Annotated[Optional[Path], typer.Option(
        "--import", help="read labels given elsewhere (CSV or JSONL: key, or trial and question_id; and supported "
        "y/n/s) instead of asking")] = None,
    export: Annotated[Optional[Path], typer.Option(
        "--export", help="write the answers to label as CSV (fill its supported column, then --import it)")] = None,
    storage: StorageOption = None,
    studies_dir: StudiesDirOption = STUDIES,
) -> None:
    """Say whether answers of a study are supported by their contexts (single keys): the verdict corrects the judge
    with them."""
    from tuner.analysis.corrections import keep_plan
    from tuner.analysis.labelling import answers_to_label, labelling_plan, progress
    from tuner.evaluation.labels import LABELS_FILE, import_labels
    from tuner.study.results import read_study
    from tuner.study.storage import open_existing_study

    folder, _ = open_existing_study(studies_dir, study, storage)
    view = read_study(folder)
    path = folder.documents.where(LABELS_FILE)
    if import_file is not None:
        imported = import_labels(import_file, _answers_of(view))
        for label in imported:
            folder.add_label(label)
        err_console.print(f"{len(imported)} label(s) imported into {path}")
        return
    plan = labelling_plan(view, n)
    keep_plan(folder, plan)  # before any label: the verdict reads the labels under the plan that asked them
    items = answers_to_label(view, n, plan)
    labels = dict(view.labels)
    if export is not None:
        left = [item for item in items if item.key not in labels]  # a label given is not asked for again
        _export(export, left)
        done = f" ({len(items) - len(left)} of the {len(items)} drawn are labelled already in {path})" \
            if len(left) < len(items) else ""
        err_console.print(f"{len(left)} answers to label written to {export}{done}: fill `supported` (y, n or s) "
                          f"and run `tuner judge label --study {folder.name} --import {export}`")
        return
    if not sys.stdin.isatty():
        raise ConfigError("labelling asks for keys on a terminal: --export FILE writes the answers to label "
                          "elsewhere, --import FILE reads the labels back")
    try:
        _label(items, labels, folder, lambda: progress(view, labels, plan))
    finally:  # Ctrl-C, SIGTERM and SIGHUP end the session too (exit 130, 143, 129): each label is already on disk
        said = [labels[i.key].supported for i in items if i.key in labels]
        err_console.print(f"{len(said)} of {len(items)} answers labelled ({said.count(True)} supported, "
                          f"{said.count(False)} not, {said.count(None)} skipped), kept in {path}; the same command "
                          f"resumes. `tuner best --study {folder.name} --verdict` and the report read them.")
        err_console.print(progress(view, labels, plan), highlight=False)


def _label(items, labels: dict, folder, standing: Callable[[], str]) -> None:
    """The session: one answer a screen, a key a label, recorded at once; `standing()` says under each whether the
    labels so far decide the verdict."""
    from tuner.evaluation.labels import Label

    index = next((i for i, item in enumerate(items) if item.key not in labels), len(items))
    with keypresses(sys.stdin.fileno()) as next_key:
        while index < len(items):
            item = items[index]
            _show(item, index, len(items), labels.get(item.key), standing())
            try:
                key = next_key().lower()
            except EOFError:
                key = "q"
            if key in ("y", "n", "s"):
                label = Label.of(item.result, {"y": True, "n": False, "s": None}[key], item.trials[0])
                folder.add_label(label)
                labels[item.key] = label
                index += 1
            elif key == "b":
                index = max(index - 1, 0)
            elif key in ("q", "\x04"):
                break
    console.clear()


@contextmanager
def keypresses(fd: int) -> Iterator[Callable[[], str]]:
    """Keys one at a time, the terminal held in cbreak mode (no echo, no line buffer) for the whole session.
    click.getchar enters raw mode for each key with TCSAFLUSH, which drops a key typed while the screen was being
    drawn, and reads two keys typed quickly as one unknown key. Ctrl-C stays a signal (ISIG is kept)."""
    import codecs
    import os
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    tty.setcbreak(fd, termios.TCSANOW)  # TCSANOW keeps the keys already typed
    decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def next_key() -> str:
        key = ""
        while not key:  # a character may come in several bytes
            try:
                byte = os.read(fd, 1)
            except OSError:  # EIO: the terminal hung up
                byte = b""
            if not byte:
                raise EOFError
            key = decoder.decode(byte)
        return key

    try:
        yield next_key
    finally:
        with suppress(termios.error):  # a terminal that hung up has no mode to give back
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _show(item, index: int, total: int, given, standing: str) -> None:
    from rich.panel import Panel
    from rich.text import Text

    result = item.result
    console.clear()
    trials = ", ".join(map(str, item.trials))
    where = "held-out" if item.held_out else "search"
    console.print(f"[bold]answer {index + 1} of {total}[/] · {where} question {escape(result.id)} · trial(s) {trials}"
                  + ("" if given is None else f" · labelled [bold]{_said(given.supported)}[/]"), markup=True)
    console.print(Panel(Text(result.question), title="question", title_align="left"))
    for number, context in enumerate(result.contexts, 1):
        cited = number in result.citations
        console.print(Panel(Text(context), title=f"[{number}]" + (" cited" if cited else ""), title_align="left",
                            border_style="yellow" if cited else "dim"))
    console.print(Panel(Text(result.answer or "(no answer)"), title="answer", title_align="left",
                        border_style="bold cyan"))
    # asked again below the texts: long contexts scroll the header away
    console.print(f"[bold]{index + 1}/{total}[/] Is every claim of the answer supported by the contexts above?  "
                  + KEYS, markup=True)
    console.print(standing, highlight=False)


def _said(supported: bool | None) -> str:
    return {True: "supported", False: "not supported", None: "skipped"}[supported]


def _answers_of(view):
    """What an imported row may name: an answer by key, or by trial and question id (the trial's held-out answer
    when the question was held out)."""
    from tuner.evaluation.labels import fingerprint

    by_key, by_trial = {}, {}
    for trial in view.trials:
        for result in (trial.result, trial.held_out):
            for q in result.questions if result else ():
                by_key.setdefault(fingerprint(q), (trial.number, q))
                by_trial[(trial.number, q.id)] = (trial.number, q)

    def resolve(key, trial, question):
        return by_key.get(key) if key else by_trial.get((trial, question))

    return resolve


def _export(path: Path, items) -> None:
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["key", "trial", "question_id", "question", "contexts", "answer", "supported"])
        for item in items:
            result = item.result
            writer.writerow([item.key, item.trials[0], result.id, result.question,
                             "\n\n".join(f"[{i}] {c}" for i, c in enumerate(result.contexts, 1)), result.answer, ""])
