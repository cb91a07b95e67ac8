"""What commands print: tables, notes, progress around long library calls. The library returns data; this renders."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.markup import escape
from rich.table import Table

from tuner.cache import redact
from tuner.errors import TunerError, first_line
from tuner.files import write_json
from tuner.ui import console, err_console, knobs, note, progress, warning


@contextmanager
def index_progress() -> Iterator[Callable[[str, int, int], None]]:
    """Progress bars while an index is built (embedding is the long part): yields the callback build_index takes."""
    with progress() as bar:
        tasks: dict[str, Any] = {}

        def on_progress(step: str, done: int, total: int) -> None:
            if step not in tasks:
                tasks[step] = bar.add_task(step, total=total)
            bar.update(tasks[step], completed=done)

        yield on_progress


class ToTerminal(logging.Handler):
    """What the library logs (a damaged cache rebuilt, a journal repaired, the index's cache share), one line each
    on stderr: the library reports, only the command line prints."""

    def emit(self, record: logging.LogRecord) -> None:
        err_console.print(record.getMessage(), highlight=False, soft_wrap=True)


def show_library_messages() -> None:
    logger = logging.getLogger("tuner")
    if not any(isinstance(h, ToTerminal) for h in logger.handlers):
        logger.addHandler(ToTerminal())
    logger.setLevel(logging.INFO)
    logger.propagate = False


def print_notes(data) -> None:
    """What loading the dataset noticed (no gold ids, blank documents, unknown gold ids), one line each."""
    for said in data.notes:
        note(said)


def verdict_with_display(view, runner):
    """Score on held-out what the verdict needs (models load only then), print the verdict; the view after."""
    from tuner.analysis.verdict import give_verdict, to_score, verdict

    if to_score(view):
        with index_progress() as shown:
            loaded = runner(on_progress=shown)
        with progress() as bar:
            task = bar.add_task("held-out verdict", total=None)

            def on_trial(trial, index: int, count: int) -> None:
                bar.update(task, completed=0, total=len(view.split.holdout_ids),
                           description=f"held-out verdict: trial {trial.number} ({index + 1}/{count})")

            def on_progress(index: int, question_id: str, stage: str) -> None:
                bar.update(task, completed=index + (stage == "done"))

            view = give_verdict(view, loaded, on_trial, on_progress)
    judged = verdict(view)
    if judged is not None:
        console.print(judged.sentence(), highlight=False, soft_wrap=True)
    return view


def run_with_display(session, trials: int, timeout: float | None, tracker=None) -> int:
    """Load the models (only if trials remain) and run the study behind the live display; `tracker`: each finished
    trial is logged to it as it finishes."""
    from tuner.cli._live import StudyDisplay
    from tuner.study.optimize import StudyEvent, TrialDone

    if session.recovered:
        err_console.print(f"resuming: trial(s) {', '.join(map(str, session.recovered))} were interrupted and "
                          f"run again")
    for said in session.notes():
        note(said)
    if session.finished >= trials:
        err_console.print(f"study {session.folder.name} already holds {trials} finished trials (raise --trials to "
                          f"go on)")
        return 0
    with index_progress() as shown:
        runner = session.runner(on_progress=shown)
    questions = len(session.search_questions)
    held = len(session.split.holdout_ids)
    targets = session.spec.settings.targets
    where = redact(session.folder.storage) if session.folder.storage else session.folder.root
    err_console.print(f"study [bold]{escape(session.folder.name)}[/] in {escape(str(where))}: {', '.join(targets)} "
                      f"over {questions} questions of {escape(runner.workspace.dataset.name)}"
                      + (f" ({held} more held out for the verdict)" if held else " (none held out)")
                      + f", sampler {session.spec.settings.sampler}", markup=True, highlight=False)
    patience = session.spec.settings.patience
    if len(targets) == 1 and not session.spec.settings.prunes:
        why = ("a retrieval question costs about a millisecond, less than reporting it to the pruner (--prune-after "
               "N prunes anyway)") if session.project.system is None else (
            "a retrieval target is not pruned unless asked (--prune-after N prunes: worth it when your system is "
            "slow to answer)")
        err_console.print(f"note: no pruning: {why}", highlight=False)
    elif len(targets) == 1 and questions <= patience:
        err_console.print(f"note: no pruning: a trial is only stopped early after {patience}+ paired questions "
                          f"(--prune-after) and before its last, and this study searches {questions}",
                          highlight=False)
    with StudyDisplay(session.study, trials, questions, targets, runner.pipeline.indexes) as display:
        def hook(event: StudyEvent) -> None:
            display(event)
            if isinstance(event, TrialDone) and tracker is not None:
                track(tracker, session.folder)

        return session.run(trials, timeout, hook=hook)


def track(tracker, folder, report_dir: Path | None = None, view=None) -> None:
    """Mirror the study (`view`, else read back) and its report to the tracker; a tracker that fails is a note: the
    study goes on, its own storage keeps every trial, and the next sync logs what this one missed."""
    from tuner.study.results import read_study

    try:
        tracker.sync(view or read_study(folder), report_dir)
    except Exception as exc:  # MLflow's client raises many types; none may stop an overnight study
        note(f"not tracked in MLflow this time ({type(exc).__name__}: "
             f"{redact(first_line(exc))}); the next trial or a rerun logs it")


def write_study_report(folder, reports_dir: Path, view=None):
    """The study's report (of `view` when the caller has the study read already); a report that cannot be written
    is a note (the run's own outcome stands)."""
    from tuner.reports import study_report

    try:
        report = study_report(folder, reports_dir, view)
    except TunerError as exc:
        note(f"no report written: {exc}")
        return None
    err_console.print(f"report: {report.path}" + (f"; next experiments: {report.next_space}" if report.next_space
                                                  else ""), highlight=False)
    return report


def print_trials(study, folder, targets: list[str], last: int | None = None) -> None:
    """The trials table: Optuna's states and parameters, each trial's results from its trial file."""
    from tuner.cli._live import trial_values
    from tuner.study.attrs import BASELINE, DUPLICATE, RERUN_OF, spent
    from tuner.study.results import trial_states

    trials = study.get_trials(deepcopy=False)
    rows = list(zip(trials, trial_states(trials)))
    if last:  # the summary after a run: the trials that ran something
        rows = [(t, state) for t, state in rows if state != "duplicate"]
    shown = rows[-last:] if last else rows
    table = Table(title=f"trials of {study.study_name}" + (f" (last {len(shown)} of {len(trials)})" if last else ""))
    for column in ("#", "state", *targets, "scored", "params", "llm calls", "cached", "prompt tok evaluated/sent",
                   "seconds"):
        table.add_column(column, justify="right" if column not in ("state", "params") else "left")
    for trial, state in shown:
        file = folder.read_trial(trial.number) if state != "duplicate" else None
        cost = file.result.cost if file else spent(trial.user_attrs)
        values = trial_values(trial, targets, file)
        values.append(f"{file.result.scored(targets[0])}/{len(file.result.questions)}"
                      if file and targets[0] in file.result.metrics else "")
        params = knobs(trial.params)
        if RERUN_OF in trial.user_attrs:
            params = f"(re-run of {trial.user_attrs[RERUN_OF]}) " + params
        if DUPLICATE in trial.user_attrs:
            params = f"(same as {trial.user_attrs[DUPLICATE]}: not run, not counted) " + params
        if trial.user_attrs.get(BASELINE):
            params = "(baseline) " + params
        spend = ("", "", "", "") if cost is None else (str(cost.llm_calls), str(cost.cache_hits),
                                                       cost.evaluated_of_sent, str(round(cost.seconds, 3)))
        table.add_row(str(trial.number), state, *values, params, *spend)
    console.print(table)


def print_judge_checks(checks) -> None:
    """One row per judge (and faithfulness setting) and metric, side by side; then each judge's problems, one line
    each; then, when several were checked, which to use for faithfulness."""
    from tuner.evaluation.judge.check import choose
    from tuner.evaluation.judge.cut import overstatement
    from tuner.models.llms import short_name

    # two tables of nine columns, not one of fifteen: compared under several settings, one row wrapped into many
    separates = Table(title="judge check: how well each judge separates supported from unsupported cases")
    scored = Table(title="judge check: what each judge scored")
    for table, columns in ((separates, ("judge", "setting", "metric", "cases", "AUC [95% CI]", "acc@cut",
                                        "bal. acc cv", "best cut")),
                           (scored, ("judge", "setting", "metric", "mean sup", "mean unsup", "unscored sup/unsup",
                                     "empty sup/unsup", "flip rate", "s/case"))):
        for column in columns:
            table.add_column(column, justify="left" if column in ("judge", "setting", "metric") else "right",
                             no_wrap=column != "setting")

    def f(value, pattern="{:.2f}"):
        return "—" if value is None else pattern.format(value)

    for check in checks:
        judge = short_name(check.judge)
        for name, m in check.metrics.items():
            setting = check.setting if name == "faithfulness" else ""
            separates.add_row(judge, setting, name, f"{m.supported.cases}/{m.unsupported.cases}",
                              f(m.auc) + ("" if m.auc_interval is None else " [{:.2f}, {:.2f}]".format(
                                  *m.auc_interval)), f(m.accuracy), f(m.balanced_accuracy), f(m.cut))
            scored.add_row(judge, setting, name, f(m.supported.mean), f(m.unsupported.mean),
                           f"{m.supported.unscored:.0%}/{m.unsupported.unscored:.0%}",
                           f"{m.supported.empty:.0%}/{m.unsupported.empty:.0%}",
                           f(m.flip_rate, "{:.0%}") + (f" of {m.agreement_cases}" if m.agreement_cases else ""),
                           f(m.seconds_per_case, "{:.1f}"))
    cuts = "; ".join(dict.fromkeys(f"{check.setting}: {check.cut}" for check in checks))
    separates.caption = (f"acc@cut: share of cases on the right side of the judge's cut, {cuts}; bal. acc cv: "
                         "balanced accuracy of a cut chosen on the other folds of these cases (5-fold), not on the "
                         "cases it classifies; best cut: the cut with the best balanced accuracy on them all")
    console.print(separates)
    console.print(scored)
    for check in checks:
        for problem in check.problems:
            warning(f"judge {check.judge} ({check.setting}): {problem}")
        if "faithfulness" in check.metrics and (known := overstatement(check.judge, check.setting)):
            note(f"judge {check.judge}: {known}")
    chosen = choose(checks)
    if chosen is not None:
        console.print(chosen[1], highlight=False, soft_wrap=True)


def print_retrieval_table(result, what: str, values: dict[str, Any], questions: Sequence) -> None:
    """The id metrics of `result`, after the knobs `what` (the pipeline, or a system) ran with; `questions`: the
    dataset's, which say whether it names gold documents at all."""
    console.print(f"{what}: {knobs(values) or 'no knobs'}", highlight=False)
    table = Table(title="retrieval")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in result.retrieval.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    console.print(table)
    if why := unscored_retrieval(result, questions):  # a line, not a caption: the table is narrow
        console.print(why, highlight=False, soft_wrap=True)


def unscored_retrieval(result, questions: Sequence) -> str | None:
    """Why no question got id metrics, in words (None when some did): the dataset names no gold document, the
    questions that have gold ones got no contexts (they failed), or their contexts carry no document id."""
    if result.retrieval.get("questions_scored", 0):
        return None
    if not any(q.relevant_ids for q in questions):
        return "no gold document ids in this dataset: only mean_k is meaningful"
    with_gold = [q for q in result.questions if q.retrieval.gold_ids]
    if all(not q.contexts for q in with_gold):
        return "no question with gold document ids got contexts (each failed or returned none): no id metric"
    return ("the contexts carry no document id, so no id metric could be computed: return each context as "
            "{\"text\": …, \"id\": DOCUMENT_ID}")


def print_rag_tables(result) -> None:
    table = Table(title="answers (RAGAS)")
    for column in ("metric", "mean", "scored", "failures"):
        table.add_column(column, justify="left" if column == "metric" else "right")
    questions = len(result.questions)
    for metric, mean in result.metrics.items():
        failed = result.failures.get(metric, {})
        scored = sum(q.value(metric) is not None for q in result.questions)
        table.add_row(metric, "—" if mean is None else f"{mean:.4f}", f"{scored}/{questions}",
                      ", ".join(f"{n} {why}" for why, n in failed.items()) or "0")
    for metric, why in result.skipped.items():
        table.add_row(metric, "skipped", "", why)
    notes = []
    if "generation" in result.failures:
        notes.append(f"{result.failures['generation']['unparsable']} answers could not be generated")
    if result.refusals:
        notes.append(f"{result.refusals} answers declined to answer")
    table.caption = "; ".join(notes) or None
    console.print(table)
    for metric in result.metrics:  # the cause of unscored questions (the --out file holds every question's)
        if why := result.why_unscored(metric):
            console.print(f"{metric} unscored: {why}", highlight=False, soft_wrap=True)
    costs = Table(title="cost")
    for column in ("stage", "llm calls", "prompt tok", "evaluated tok", "completion tok", "cache hits", "seconds"):
        costs.add_column(column, justify="left" if column == "stage" else "right")
    for stage, cost in {**result.cost_by_stage, "total": result.cost}.items():
        costs.add_row(stage, str(cost.llm_calls), str(cost.prompt_tokens), str(cost.evaluated_tokens),
                      str(cost.completion_tokens), str(cost.cache_hits), f"{cost.seconds:.3f}")
    if result.cost.prompt_tokens:
        console.print(f"prompt tokens: {result.cost.prompt_tokens:,} sent, {result.cost.evaluated_tokens:,} computed "
                      f"(the rest resumed prefixes the models kept)", highlight=False)
    console.print(costs)


def write_out(path: Path, data: Any) -> None:
    """An --out file: atomically, and a path that cannot be written is one line."""
    try:
        write_json(path, data, indent=2)
    except OSError as exc:
        raise TunerError(f"{path}: cannot write ({exc.strerror})") from None
