"""Study commands: optimize (and its rounds), report, analyze, studies, best, export, trials."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape
from rich.table import Table

from tuner.cache import redact
from tuner.cli._app import app
from tuner.cli._display import (
    index_progress,
    print_trials,
    run_with_display,
    track,
    verdict_with_display,
    write_study_report,
)
from tuner.cli._interrupt import before_forced_exit, cleaning_up
from tuner.cli._options import (
    REPORTS,
    STUDIES,
    ConfigOption,
    DatasetOption,
    LimitOption,
    ReportsDirOption,
    StorageOption,
    StudiesDirOption,
    StudyOption,
    parse_duration,
)
from tuner.config import load_config
from tuner.errors import ConfigError, TunerError
from tuner.ui import console, err_console, progress, status, warning


@app.command("optimize")
def optimize_command(
    target: Annotated[Optional[list[str]], typer.Option("--target", "-t", help="metric to maximise, or a cost to "
                                                        "minimise (seconds_per_question, tokens_per_question, "
                                                        "context_tokens) beside one; repeat for a Pareto study "
                                                        "\\[default: faithfulness]")] = None,
    trials: Annotated[int, typer.Option("--trials", "-n", min=1, help="finished trials the study should hold")] = 40,
    timeout: Annotated[Optional[str], typer.Option(help="stop starting trials after this long, e.g. 8h, 90m")] = None,
    study: StudyOption = "default",
    search_space: Annotated[Optional[str], typer.Option(
        "--search-space", help="YAML file, or a name in search_spaces/ \\[default: default]")] = None,
    dataset: DatasetOption = None,
    docs: Annotated[Optional[Path], typer.Option(
        "--docs", help="a folder of documents (.txt .md .html .pdf .docx) instead of --dataset: ingested, and a "
        "test set generated from it the first time (the same questions on every resume)")] = None,
    anchor_questions: Annotated[Optional[Path], typer.Option(
        "--anchor-questions", help="JSON Lines of ~10 questions people wrote, each with the ids of the documents "
        "that answer it: after the study, the report says whether the study's questions rank its configurations as "
        "these do (Kendall τ, 95 % CI); with --docs they also set how close to their sources' wording the generated "
        "questions may be")] = None,
    config: ConfigOption = None,
    limit: LimitOption = None,
    sampler: Annotated[str, typer.Option(help="tpe, random or grid")] = "tpe",
    seed: Annotated[int, typer.Option(help="sampler seed")] = 0,
    constraint: Annotated[Optional[list[str]], typer.Option(
        "--constraint", help='guard, e.g. "answer_relevancy>=0.7" or "seconds_per_question<=20"')]
    = None,
    prune_after: Annotated[Optional[int], typer.Option(
        min=1, help="questions answered before a trial may be pruned (the test needs 4 at least) \\[default: 4; no "
        "pruning when every target is a retrieval metric: tuner's pipeline answers one in about a millisecond]")] \
        = None,
    storage: StorageOption = None,
    studies_dir: StudiesDirOption = STUDIES,
    rounds: Annotated[int, typer.Option("--rounds", min=1, help="rounds of optimise -> analyse -> next space; "
                                        "round r runs as study NAME.rR")] = 1,
    holdout: Annotated[Optional[float], typer.Option(
        "--holdout", min=0, max=0.95, help="share of questions held out for the final verdict (default 0.3 from 20 "
        "questions on; 0: none)")] = None,
    judge_check: Annotated[str, typer.Option(
        "--judge-check", help="before a new study's first trial, check the judge on a few labelled cases: warn "
        "(default) prints what is wrong, strict refuses to start, off skips it")] = "warn",
    own_cache: Annotated[bool, typer.Option(
        "--own-cache", help="a new study keeps its LLM calls and embeddings in its own folder instead of the "
        "project's shared cache_dir (a resume keeps what the study was created with)")] = False,
    heartbeat: Annotated[int, typer.Option(
        "--heartbeat", min=1, help="with --storage: seconds between a running trial's heartbeats; a worker silent "
        "for three has its trial failed and retried by another")] = 60,
    reports_dir: ReportsDirOption = REPORTS,
    track_to: Annotated[Optional[str], typer.Option(
        "--track", help="mirror the study to MLflow: mlflow (MLflow's default store) or mlflow:URI, e.g. "
        "mlflow:http://mlflow:5000 or mlflow:sqlite:///mlflow.db; a parent run per study, a child run per trial "
        "(pip install 'rag-tuner\\[track]')")] = None,
    estimate: Annotated[bool, typer.Option(
        "--estimate", help="print what the study will cost (calls, tokens, wall time), measured on trial 0 (the "
        "baseline) and trial 1 (the sampler's first draw) over four search questions spread over the set (cached), "
        "and start nothing")] \
        = False,
) -> None:
    """Search the pipeline's knobs with Optuna, then judge the best on held-out questions; run again to resume."""
    from tuner.evaluation.records import Constraint
    from tuner.study.judge_precheck import MODES
    from tuner.study.optimize import StudySettings
    from tuner.study.results import read_study, require_a_complete_trial
    from tuner.study.session import Recorded, Session, StudySpec
    from tuner.study.storage import study_folder

    if judge_check not in MODES:
        raise ConfigError(f"--judge-check {judge_check!r}: choose {', '.join(MODES)}")
    if docs is not None:
        if dataset is not None:
            raise ConfigError("--docs and --dataset: choose one (--docs makes the dataset from the folder)")
        dataset = dataset_from_docs(docs, config, studies_dir, anchor_questions)
    anchors = read_anchor_questions(anchor_questions, config, dataset) if anchor_questions else None
    recorded = Recorded.or_given(study_folder(studies_dir, study, storage), target, constraint, search_space)
    settings = StudySettings(recorded.targets, [Constraint.parse(c) for c in recorded.constraints], sampler, seed,
                             prune_after)
    timeout_seconds = parse_duration(timeout) if timeout else None
    project = None if recorded.resumed and not config else load_config(config)  # a resumed study keeps its project
    if estimate:
        return print_estimate(study_folder(studies_dir, study, storage), project, settings, trials * rounds,
                              holdout, dataset, limit, recorded.search_space, studies_dir)
    spec = StudySpec(study, settings, recorded.search_space, project, dataset, limit, storage, studies_dir,
                     holdout=holdout, before_first_trial=judge_display(judge_check, config, dataset),
                     own_cache=own_cache, heartbeat=heartbeat)
    tracker = tracker_for(track_to)
    if rounds > 1:
        return optimize_rounds(spec, rounds, trials, timeout_seconds, reports_dir, tracker, anchors)
    session = Session.open(spec)
    before_forced_exit(lambda: write_study_report(session.folder, reports_dir))
    judged = None  # the study with its verdict, read once: the report and the tracker take it as it is
    try:
        run_with_display(session, trials, timeout_seconds, tracker)
        print_trials(session.study, session.folder, settings.targets, last=10)
        require_a_complete_trial(session.study)
        judged = judge_study(read_study(session.folder), session, anchors)
    finally:  # also after Ctrl-C: the morning's report shows whatever finished
        cleaning_up.set()
        if not session.discarded:  # a study refused before its first trial has nothing to report
            report = write_study_report(session.folder, reports_dir, judged)
            if tracker is not None:
                track(tracker, session.folder, report.path.parent if report is not None else None, judged)


def tracker_for(option: str | None):
    """The MLflow tracker `--track` asks for, checked before any trial runs (None: not asked)."""
    if option is None:
        return None
    from tuner.reports.tracking import MlflowTracker, parse_track

    return MlflowTracker(parse_track(option))


def print_estimate(folder, project, settings, trials: int, holdout: float | None, dataset: Path | None,
                   limit: int | None, search_space: Path, studies_dir: Path) -> None:
    from tuner.study.estimate import estimate_study
    from tuner.study.session import offered_programs, recorded_space

    meta = folder.read_meta()
    if project is None:  # a resumed study: its own project and split
        project = meta.config
    if meta:  # a study that ran: the estimate is for what is left of it
        from tuner.study.optimize import counted
        from tuner.study.results import load_study

        done = counted(load_study(folder))
        left = max(trials - done, 0)
        err_console.print(f"study {folder.name} holds {done} finished trial(s) of the {trials} asked: the estimate "
                          f"is for the {left} left" + ("" if left else " (none: raise --trials to go on)"),
                          highlight=False, soft_wrap=True)
        trials = left
    space = recorded_space(search_space, meta, project).with_programs(offered_programs(meta, studies_dir, folder))
    # a bar for the index (embedding a new corpus takes minutes), then one for the sampled questions
    with index_progress() as on_progress:
        told = estimate_study(project, settings, trials, holdout, meta.held_out if meta else None, dataset, limit,
                              on_progress=on_progress, space=space)
    console.print(f"[bold]estimate[/] for {trials} trial(s) × {told.search} search questions + the verdict on "
                  f"{told.held_out} held-out: {told.questions:,} question evaluations", markup=True, highlight=False)
    table = Table()
    for column in ("", "per question", "whole study (at most)"):
        table.add_column(column, justify="left" if not column else "right")
    table.add_row("LLM calls", f"{told.calls_per_question:.1f}", f"{told.calls:,.0f}")
    table.add_row("tokens", f"{told.tokens_per_question:,.0f}", f"{told.tokens:,.0f}")
    if told.later_seconds_per_question is None:
        table.add_row("wall time", f"{told.seconds_per_question:.1f} s", _hours(told.seconds))
    else:
        table.add_row("wall time, trial 0", f"{told.seconds_per_question:.1f} s", "")
        table.add_row("wall time, trial 1", f"{told.later_seconds_per_question:.1f} s", "")
        table.add_row("wall time", "", _hours(told.seconds))
    console.print(table)
    if told.later_params is not None:
        knobs = ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                          for k, v in sorted(told.later_params.items()))
        console.print(f"Trial 1 is the sampler's first draw ({knobs}), run after trial 0 as the study runs it: "
                      f"later trials resume what earlier ones computed (a question's passages); the whole study's "
                      f"time takes every later trial at trial 1's pace.", highlight=False, soft_wrap=True)
    paid = f"{told.paid_now} call(s) paid now" + (
        "" if told.later_params is None else f" for trial 0 and {told.later_paid_now} for trial 1")
    console.print(f"Measured on the baseline over {told.sampled} search question(s) as on a cold cache "
                  f"({paid}, cached for the study). An upper bound: trials that repeat "
                  f"calls are served from the cache and pruned trials stop early; index knobs add their index "
                  f"builds, LLM query strategies and contexts their own calls."
                  + (f" {told.unmetered} cached call(s) predate tuner keeping a call's seconds: their time is not "
                     f"counted." if told.unmetered else ""), highlight=False, soft_wrap=True)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min" if seconds >= 60 else \
        f"{seconds:.0f} s"


def dataset_from_docs(docs: Path, config: Path | None, studies_dir: Path, anchors: Path | None = None) -> Path:
    """The folder ingested and, the first time, given a generated test set: the dataset the study runs on."""
    from tuner.cli.data import show_scorecard
    from tuner.testset import dataset_from_docs as prepare

    with index_progress() as on_index, progress() as bar:
        files = bar.add_task("reading documents", total=None)
        asked = bar.add_task("writing questions", total=None, visible=False)

        def on_question(kept: int, total: int) -> None:
            bar.update(asked, completed=kept, total=total, visible=True)

        path, made = prepare(docs, load_config(config), studies_dir, anchors=anchors, on_index=on_index,
                             on_progress=on_question,
                             on_file=lambda done, total: bar.update(files, completed=done, total=total))
    if made is not None:
        show_scorecard(made.scorecard)
    err_console.print(f"dataset: {path} (from {docs}; `tuner data {path}` shows it)", highlight=False)
    return path


def judge_display(mode: str, config: Path | None, dataset: Path | None):
    """The judge check before a new study's first trial, behind a status line (None: off)."""
    if mode == "off":
        return None

    def check(session) -> None:
        from tuner.study.judge_precheck import judge_precheck, same_check

        # the calls are cached, but the first check pays for them: the line says so once it knows
        with status("checking the judge on a few labelled cases"):
            found = judge_precheck(session, mode)
        if mode == "strict" and found.refuses:
            options = same_check(session, {"config": config, "dataset": dataset}, found.metrics)
            again = " ".join(["tuner judge check --quick", *(f"--{k} {v}" for k, v in options.items())])
            if found.skipped:
                raise ConfigError(f"judge check (--judge-check strict) could not run: {found.skipped}")
            raise ConfigError(f"judge check failed (--judge-check strict): {found.problems[0]}; see `{again}`, "
                              f"choose another judge, or use --judge-check warn")
        if found.skipped:
            warning(f"judge check skipped: {found.skipped}")
        for problem in found.problems:
            warning(f"judge check: {problem}")
        if found.metrics and not found.refuses:
            aucs = "; ".join(f"{m} AUC " + ("—" if auc is None else f"{auc:.2f}") for m, auc in found.aucs.items())
            err_console.print(f"judge check: {aucs} ({found.paid} judge calls paid, {found.cached} from the cache)",
                              highlight=False, soft_wrap=True)

    return check


def read_anchor_questions(path: Path, config: Path | None, dataset: Path | None) -> list:
    """The anchor questions, checked against the study's corpus before any trial runs."""
    from tuner.data import load_dataset
    from tuner.testset.anchors import read_anchors

    where = load_config(config).dataset if dataset is None else None
    data = load_dataset(dataset if dataset is not None else where.path, "auto" if dataset else where.format,
                        require_questions=False)
    return read_anchors(path, data.documents)


def judge_study(view, session, anchors: list | None):
    """After the search: the held-out verdict, then (given anchors) how the study's questions rank its
    configurations against the anchors — saved for the report. The view after the verdict (rounds read it)."""
    from tuner.testset.anchors import ANCHOR_FILE, check_study

    view = verdict_with_display(view, session.runner)
    if anchors:
        with status(f"ranking the study's configurations by its questions and by {len(anchors)} anchor questions"):
            checked = check_study(view, session.runner(), anchors)
        session.folder.write_doc(ANCHOR_FILE, checked.to_json())
        console.print(checked.sentence().replace("**", ""), highlight=False, soft_wrap=True)
    return view


def optimize_rounds(spec, rounds: int, trials: int, timeout: float | None, reports_dir: Path, tracker=None,
                    anchors: list | None = None) -> None:
    from tuner.agent import run_rounds
    from tuner.study.storage import study_folder

    def announce(outcome) -> None:
        if tracker is not None:
            track(tracker, study_folder(spec.studies_dir, outcome.study, spec.storage), Path(outcome.report).parent)
        parts = [f"{label} {c.metric} {c.reference_mean:.3f} -> {c.candidate_mean:.3f}, 95% CI "
                 f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" for label, c in (("in-sample", outcome.headline),
                                                                    ("held-out", outcome.held_out))
                 if c is not None and c.ci is not None]
        said = 'gain' if outcome.gained else 'no gain distinguishable from 0'
        gain = f"; {'; '.join(parts)} ({said})" if parts else ""
        err_console.print(f"round {outcome.round} ({outcome.study}) done{gain}; report: {outcome.report}",
                          highlight=False, soft_wrap=True)

    from tuner.agent.rounds import latest_round

    before_forced_exit(lambda: write_study_report(latest_round(spec), reports_dir))
    try:
        outcomes, stop = run_rounds(spec, rounds, trials, reports_dir, timeout,
                                    run=lambda session, n, limit: run_with_display(session, n, limit, tracker),
                                    on_round=announce,
                                    judge=lambda view, session: judge_study(view, session, anchors))
    except (KeyboardInterrupt, TunerError):
        cleaning_up.set()  # as a single study's: the watcher lets the report be written before it leaves
        write_study_report(latest_round(spec), reports_dir)
        raise
    err_console.print(f"rounds stopped: {stop}; journey: {reports_dir / spec.name / 'journey.md'}")


@app.command("report")
def report_command(study: StudyOption = "default", out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="folder for report.md and its plots (default: REPORTS_DIR/STUDY)")] = None,
                   storage: StorageOption = None, studies_dir: StudiesDirOption = STUDIES,
                   reports_dir: ReportsDirOption = REPORTS) -> None:
    """Write a study's experiment report (Markdown + PNG plots + next_space.yaml); no LLM call."""
    from tuner.reports import write_report
    from tuner.study.results import read_study
    from tuner.study.storage import study_folder

    folder = study_folder(studies_dir, study, storage)
    started = time.perf_counter()
    report = write_report(read_study(folder), out or reports_dir / folder.name)
    head = report.analysis.headline
    if head is not None and report.analysis.view.best is not None:
        console.print(head.sentence(f"Trial {report.analysis.view.best.number}", "the baseline"), highlight=False)
    err_console.print(f"report written to {report.path} in {time.perf_counter() - started:.1f} s", highlight=False)


@app.command("analyze")
def analyze_command(study: StudyOption = "default",
                    noise: Annotated[int, typer.Option("--noise", min=0, help="re-judge the best trial's answers "
                                                       "N times with sampled judge seeds (costs LLM calls)")] = 0,
                    storage: StorageOption = None, studies_dir: StudiesDirOption = STUDIES,
                    reports_dir: ReportsDirOption = REPORTS) -> None:
    """Bottleneck analysis: which stage loses the target, which knobs matter, what to try next."""
    from tuner.study.results import read_study
    from tuner.study.storage import study_folder

    folder = study_folder(studies_dir, study, storage)
    view = read_study(folder)
    if noise:
        measure_judge_noise(view, noise)
    report = write_study_report(folder, reports_dir)
    if report is None:
        return
    analysis = report.analysis
    shares = analysis.shares
    if shares is None:
        console.print("no complete best trial with results yet: nothing to analyse")
        return
    table = Table(title=f"{study}: where trial {analysis.view.best.number} loses {shares.target} "
                        f"({shares.total:.2f} points over {len(shares.losses)} questions)")
    for column in ("stage", "share", "questions"):
        table.add_column(column)
    from tuner.analysis.stages import STAGES

    for stage in STAGES:
        if shares.questions(stage):
            table.add_row(stage, f"{shares.share(stage):.0%}",
                          ", ".join(q.question_id for q in shares.questions(stage)))
    table.caption = shares.caption
    console.print(table)
    if analysis.effects:
        knobs_table = Table(title="knobs that matter")
        for column in ("knob", "importance", f"mean {shares.target} per value (trials)", "best trial"):
            knobs_table.add_column(column)
        for e in analysis.effects:
            knobs_table.add_row(e.knob, "—" if e.importance is None else f"{e.importance:.2f}",
                                "; ".join(f"{label}: {mean:.3f} ({n})" for label, mean, n in e.means),
                                str(e.best_value))
        if all(e.importance is None for e in analysis.effects):
            knobs_table.caption = "importances need 8+ complete trials: marginal means only (few trials, wide error)"
        console.print(knobs_table)
    proposals = Table(title="next experiments")
    for column in ("#", "kind", "change", "because"):
        proposals.add_column(column)
    for i, p in enumerate(analysis.proposals, 1):
        proposals.add_row(str(i), p.kind, p.change, p.trigger)
    console.print(proposals)


def measure_judge_noise(view, repeats: int) -> None:
    from tuner.analysis.noise import rejudge, save_noise
    from tuner.metrics import RETRIEVAL_METRICS
    from tuner.study.results import study_runner

    best = view.best
    if best is None or best.result is None or view.target in RETRIEVAL_METRICS:
        raise TunerError("--noise needs a complete best trial scored by the judge (a RAGAS target)")
    with index_progress() as shown:
        runner = study_runner(view, on_progress=shown)
    with progress() as bar:
        task = bar.add_task(f"re-judging trial {best.number}", total=repeats * len(best.result.questions))
        measured = rejudge(runner.scorer, best.result.questions, view.target, best.number, repeats,
                           lambda done, total: bar.update(task, completed=done))
    save_noise(measured, view.folder)
    sd = measured.mean_sd
    err_console.print(f"judge noise: {view.target} mean per judging {', '.join(f'{m:.3f}' for m in measured.run_means)}"
                      f" (sd {sd:.3f})" if sd is not None else "judge noise: too few scored judgings", highlight=False)


@app.command("studies")
def studies_command(storage: StorageOption = None, studies_dir: StudiesDirOption = STUDIES) -> None:
    """List studies: targets, trials by state, best value."""
    from tuner.study.results import best_trials, list_studies, load_study, trial_states

    table = Table(title=f"studies in {redact(storage) if storage else studies_dir}")
    states = ("complete", "pruned", "duplicate", "fail", "interrupted", "running")
    for column in ("study", "targets", *states, "best", "best trial"):
        table.add_column(column)
    if storage is None and not studies_dir.is_dir():
        err_console.print(f"no studies: {studies_dir} does not exist (no study has run here yet, or pass "
                          f"--studies-dir or --storage)", highlight=False, soft_wrap=True)
        return
    for folder in list_studies(studies_dir, storage):
        try:
            meta = folder.read_meta()
            study = load_study(folder)
        except TunerError as exc:  # one unreadable study is listed as such; the others still show
            table.add_row(folder.name, "?", *[""] * len(states), f"unreadable: {exc}", "")
            continue
        counts = trial_states(study.get_trials(deepcopy=False))
        best = best_trials(study)
        best_text = ", ".join(f"{v:.4f}" for v in best[0].values) if len(best) == 1 else f"{len(best)} on front"
        table.add_row(folder.name, ", ".join(meta.targets) if meta else "?", *(str(counts.count(s)) for s in states),
                      best_text if best else "—", str(best[0].number) if len(best) == 1 else "")
    console.print(table)


@app.command("best")
def best_command(study: StudyOption = "default", out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="write the best configuration as a config file")] = None,
                 verdict: Annotated[bool, typer.Option("--verdict", help="judge the best vs the baseline on the "
                                                       "study's held-out questions (scores what is missing)")] = False,
                 storage: StorageOption = None, studies_dir: StudiesDirOption = STUDIES,
                 reports_dir: ReportsDirOption = REPORTS) -> None:
    """The best configuration of a study, as a project config that `tuner eval --config` accepts."""
    import yaml

    from tuner.study.results import best_config, best_trials, load_study, read_study, study_runner, write_config
    from tuner.study.storage import study_folder

    folder = study_folder(studies_dir, study, storage)
    if verdict:
        view = read_study(folder)
        if not view.split.active:
            raise ConfigError(f"study {folder.name} holds out no question (it ran with --holdout 0, on fewer than 20 "
                              f"questions, or before held-out splits): there is nothing unseen to judge on")
        if view.best is None:
            raise ConfigError(f"study {folder.name} has no complete single-target best trial to judge yet")
        verdict_with_display(view, lambda on_progress: study_runner(view, on_progress))
        write_study_report(folder, reports_dir)
    optuna_study = load_study(folder)
    data = best_config(optuna_study, folder)
    trial = best_trials(optuna_study)[0]
    meta = folder.read_meta()
    values = ", ".join(f"{t}={v:.4f}" for t, v in zip(meta.targets, trial.values))
    comment = f"best of study {folder.name}: trial {trial.number}, {values}"
    if out:
        write_config(out, data, comment)
        err_console.print(f"{comment}; written to {out}")
    else:
        console.print(f"# {comment}\n" + yaml.safe_dump(data, sort_keys=False), highlight=False)


@app.command("export")
def export_command(
    study: StudyOption = "default",
    to: Annotated[str, typer.Option("--to", help="where the tuned retrieval goes: weaviate")] = "weaviate",
    trial: Annotated[Optional[int], typer.Option("--trial", help="export this trial (default: the best)")] = None,
    collection: Annotated[str, typer.Option("--collection", help="the Weaviate collection holding the chunks")]
    = "Chunk",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="also write the snippet to this .py file")] = None,
    storage: StorageOption = None, studies_dir: StudiesDirOption = STUDIES,
) -> None:
    """The winning retrieval as a Weaviate hybrid query: alpha, fusion, limit, autocut, and a runnable snippet."""
    from tuner.config import PipelineConfig
    from tuner.export import weaviate_export
    from tuner.study.results import read_study
    from tuner.study.storage import study_folder

    if to != "weaviate":
        raise ConfigError(f"--to {to!r}: tuner exports to weaviate")
    view = read_study(study_folder(studies_dir, study, storage))
    chosen = view.best if trial is None else next((t for t in view.trials if t.number == trial), None)
    if chosen is None or not chosen.pipeline:
        raise ConfigError(f"study {study} has no complete best trial yet" if trial is None else
                          f"study {study} has no trial {trial} that ran (see `tuner trials --study {study}`)")
    pipeline = PipelineConfig.from_record(chosen.pipeline)
    if pipeline is None:
        raise ConfigError(f"study {study} trial {chosen.number}'s pipeline is none this version of tuner runs")
    exported = weaviate_export(pipeline, view.project, collection)
    values = ", ".join(f"{t}={v:.4f}" for t, v in zip(view.targets, chosen.values or ()))
    console.print(f"{study} trial {chosen.number} ({values or 'no value'}) as a Weaviate hybrid query:",
                  highlight=False, soft_wrap=True)
    table = Table()
    table.add_column("parameter")
    table.add_column("value")
    for name, value in exported.params.items():
        table.add_row(name, str(value))
    console.print(table)
    for lost in exported.not_transferred:
        err_console.print(f"[yellow]not in Weaviate:[/] {escape(lost)}", markup=True, highlight=False,
                          soft_wrap=True)
    console.print(exported.snippet, highlight=False, soft_wrap=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"# {study} trial {chosen.number} ({values}), exported by `tuner export --to weaviate`\n"
                       + exported.snippet, encoding="utf-8")
        err_console.print(f"snippet written to {out}", highlight=False)


@app.command("trials")
def trials_command(study: StudyOption = "default", storage: StorageOption = None,
                   studies_dir: StudiesDirOption = STUDIES) -> None:
    """Every trial of a study: state, values, parameters, cost."""
    from tuner.study.results import load_study
    from tuner.study.storage import study_folder

    folder = study_folder(studies_dir, study, storage)
    print_trials(load_study(folder), folder, list(folder.read_meta().targets))
