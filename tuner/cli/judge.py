"""`tuner judge check`: the RAGAS judge scored on labelled cases built from your own data."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from tuner.cli._app import app
from tuner.cli._display import index_progress, print_judge_checks
from tuner.cli._options import DatasetOption, StorageOption, StudiesDirOption, metric_list
from tuner.config import load_config
from tuner.errors import ConfigError
from tuner.ui import err_console, progress


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
            projects = [meta.config]
        questions_from = meta.held_out
        cache = folder.cache_in_use(meta)
    requested = metric_list(metrics)

    checks, cases = [], None
    for project in projects:
        with index_progress() as shown:
            workspace = open_workspace(project, dataset, cache=cache, on_progress=shown)
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
