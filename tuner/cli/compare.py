"""`tuner compare`: a regression gate for CI — a new configuration against a base one on the same questions."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from tuner.cli._app import app
from tuner.cli._options import DatasetOption, LimitOption
from tuner.config import load_config
from tuner.errors import ERROR, ConfigError
from tuner.ui import console, err_console, stdout_for_results


@app.command("compare")
def compare_command(
    base: Annotated[Path, typer.Argument(help="the configuration to compare against (e.g. main's tuner.yaml)")],
    new: Annotated[Path, typer.Argument(help="the changed configuration")],
    metric: Annotated[Optional[list[str]], typer.Option(
        "--metric", "-m", help="metric to gate on; repeat for several \\[default: faithfulness]")] = None,
    margin: Annotated[float, typer.Option(
        "--margin", min=0, help="a loss the gate tolerates: it fails only when NEW is worse by more than this, with "
        "the 95 % CI of the difference excluding zero")] = 0.02,
    dataset: DatasetOption = None,
    limit: LimitOption = None,
    split: Annotated[str, typer.Option("--split", help="all, search or holdout (the configs' dataset.holdout)")]
    = "all",
    as_json: Annotated[bool, typer.Option("--json", help="print the comparison as JSON on stdout")] = False,
    labels: Annotated[Optional[Path], typer.Option(
        "--labels", help="people's labels of answers (a study's labels.jsonl): faithfulness is gated on its "
        "PPI-corrected difference")] = None,
) -> None:
    """Evaluate BASE and NEW on the same questions (through the shared cache) and compare them question by question:
    the paired difference, its bootstrap 95 % CI and the Wilcoxon p per metric. Exit 1 when NEW is worse beyond
    --margin with the CI excluding zero, or when a metric was scored on no question of both runs; else 0."""
    from tuner.evaluation.labels import read as read_labels
    from tuner.metrics import SCORED_METRICS, TARGETS

    if labels is not None and not labels.is_file():
        raise ConfigError(f"--labels {labels}: no such file")
    given = read_labels(labels) if labels else None
    metrics = list(dict.fromkeys(metric or ["faithfulness"]))
    for name in metrics:
        if name not in TARGETS:
            raise ConfigError(f"--metric {name!r}: choose from {', '.join(TARGETS)}")
    judged = [m for m in metrics if m in SCORED_METRICS]
    with stdout_for_results() if as_json else contextlib.nullcontext(sys.stdout) as out:
        verdict, before, after, questions = _compared(base, new, metrics, judged, margin, dataset, limit, split, given)
    if as_json:
        payload = verdict.to_json(str(base), str(new), questions)
        payload["llm_calls_paid"] = {"base": before.cost.llm_calls, "new": after.cost.llm_calls}
        print(json.dumps(payload, indent=2), file=out)
    else:
        show(verdict, base, new, questions, given)
    if verdict.failed:
        err_console.print(f"[red]regression:[/] {', '.join(c.metric for c in verdict.failed)} worse beyond the margin "
                          f"{verdict.margin:g}, the CI excluding zero (exit 1)", markup=True, highlight=False)
        raise typer.Exit(ERROR)
    if verdict.unmeasured:
        err_console.print(f"[red]no data:[/] {', '.join(c.metric for c in verdict.unmeasured)} scored on no question "
                          f"of both runs: the gate cannot pass on no data (exit 1)", markup=True, highlight=False)
        raise typer.Exit(ERROR)


def _compared(base: Path, new: Path, metrics: list[str], judged: list[str], margin: float, dataset, limit, split: str,
              given):
    """BASE and NEW evaluated on the same questions and gated: (verdict, BASE's result, NEW's, questions)."""
    from tuner.analysis.regression_gate import gate
    from tuner.cli.evaluate import open_split, run_evaluation
    from tuner.evaluation.answerers import answerer_kind
    from tuner.evaluation.judge.cut import cut_of
    from tuner.evaluation.records import unscorable

    results = []
    for label, path in (("BASE", base), ("NEW", new)):
        project = load_config(path)
        workspace = open_split(project, dataset, limit, split)
        lacking = [why for m in metrics if (why := unscorable(m, workspace.dataset))]
        if lacking:  # a ConfigError exits 2: never the regression code 1
            raise ConfigError(f"--metric: {'; '.join(lacking)}: it cannot be compared on this set (choose another "
                              f"--metric or --dataset)")
        config = answerer_kind(project).base(project)
        results.append((workspace.dataset, run_evaluation(workspace, config, judged, no_cache=False,
                                                          answer=bool(judged), label=f"{label}: ")))
    (data, before), (other, after) = results
    if [q.id for q in data.questions] != [q.id for q in other.questions]:
        raise ConfigError(f"{base} and {new} evaluate other questions ({data.name}, {len(data.questions)} vs "
                          f"{other.name}, {len(other.questions)}): give --dataset (and --limit) for both")
    # the loop's last project is NEW's: its judge's cut reads the label agreement
    return gate(metrics, before, after, margin, given, cut_of(project.evaluation, after)), before, after, \
        len(data.questions)


def show(verdict, base: Path, new: Path, questions: int, labels=None) -> None:
    """`labels`: the human labels given (--labels), said when none fits an answer compared."""
    from tuner.analysis.corrections import none_matched

    table = Table(title=f"{new} against {base}: {questions} questions, paired")
    for column in ("metric", "BASE", "NEW", "NEW − BASE", "95 % CI", "Wilcoxon p", "paired", "reading"):
        table.add_column(column, justify="left" if column in ("metric", "reading") else "right")
    number = "{:.3f}".format
    for c in verdict.comparisons:
        if c.ci is None:
            table.add_row(c.metric, "—", "—", "—", "—", "—", "0", verdict.reading(c))
            continue
        table.add_row(c.metric, number(c.reference_mean), number(c.candidate_mean), f"{c.mean_difference:+.3f}",
                      f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]", f"{c.p:.3g}", str(c.n), verdict.reading(c))
    console.print(table)
    for c in verdict.comparisons:
        console.print(c.sentence(candidate=f"NEW ({new})", reference=f"BASE ({base})"), highlight=False,
                      soft_wrap=True)
    if verdict.corrections is not None:
        console.print(verdict.corrections.sentence(f"NEW ({new})", f"BASE ({base})"), highlight=False, soft_wrap=True)
    elif labels:
        console.print(none_matched(len(labels)), highlight=False, soft_wrap=True)
    if not verdict.failed and not verdict.unmeasured:
        console.print(f"no regression beyond the margin {verdict.margin:g} (exit 0)", highlight=False)
