"""Scoring a trial's configuration on the held-out questions: the one place a study touches them.

Called by the verdict after the search (never by a trial), through the study's own runner and caches, so a
configuration the trials already answered costs no new LLM call for the parts they share. The result goes to
studies/NAME/holdout/NNNN.json beside the trial's own file — never into Optuna's storage, so no sampler or
pruner can learn from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tuner.data.split import Split
from tuner.errors import ConfigError
from tuner.evaluation.records import TrialFile
from tuner.study.results import TrialRecord
from tuner.study.storage import StudyFolder

if TYPE_CHECKING:
    from tuner.evaluation.rag_eval import ProgressHook, RagRunner


def score_held_out(runner: RagRunner, folder: StudyFolder, split: Split, trial: TrialRecord, metrics: Sequence[str],
                   on_progress: ProgressHook | None = None) -> TrialFile:
    """Evaluate `trial`'s pipeline on the held-out questions, scoring what the study scored; saved and returned."""
    questions = split.holdout(runner.workspace.dataset.questions)
    if not questions:
        raise ConfigError(f"study {folder.name} holds out no question of this dataset: nothing to score")
    config = runner.answerer.recorded(trial.pipeline)
    if config is None:
        raise ConfigError(f"trial {trial.number}'s configuration is none this version of tuner runs")
    result = runner.evaluate(config, questions, metrics=list(metrics), on_progress=on_progress, answer=bool(metrics))
    record = TrialFile(trial.number, dict(trial.params), config.model_dump(), False, result)
    folder.write_trial(record, held_out=True)
    return record
