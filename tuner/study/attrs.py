"""The keys of a trial's user attributes in the study storage, in one leaf module (as Optuna keeps trial states in
trial/_state.py): the objective writes them, results, reports and the command line read them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tuner.cost import Cost

#: the pipeline configuration the trial runs (a dict), said before it runs so other workers see it
PIPELINE = "pipeline"
#: a hash of the project it ran with, less the pipeline (models, data, evaluation): a repeat needs the same
PROJECT = "project_hash"
#: the decision of a trial that looked for repeats of its configuration: it runs it
RUNS = "runs_configuration"
#: a proposal that repeated a tried configuration: the number of the trial that ran it (not run, not counted)
DUPLICATE = "duplicate_of"
#: a trial stopped by Ctrl-C or a model that went away (the reason): a resume runs it again
INTERRUPTED = "interrupted"
#: the trial a resume queued again for an interrupted one
RERUN_OF = "rerun_of"
#: trial 0, the reference point: the project's pipeline, or the previous round's best
BASELINE = "baseline"
#: completed on start-up from its trial file (its finishing journal entry was lost)
RECOVERED = "recovered_from_file"
#: why a trial that ran failed ("no question could be scored on faithfulness")
ERROR = "error"
#: what a trial stopped in its evaluation had paid (Cost.as_dict): it has no trial file (read with `spent`)
COST = "cost"
#: studies before one typed trial record also kept a copy of the results here (metrics, retrieval, failures,
#: questions, refusals, scored, constraints): nothing reads them; the trial file is the result's one record


def spent(user_attrs: Mapping[str, Any]) -> Cost | None:
    """What a trial stopped in its evaluation had paid (its COST attribute); None when it kept none."""
    cost = user_attrs.get(COST)
    return Cost.from_dict(cost) if isinstance(cost, dict) else None
