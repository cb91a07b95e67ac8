"""Can the study's questions be trusted to rank? For a study on a generated test set: what its scorecard measured
(lexical overlap, the share of questions that separate configurations), that share on the study's own trials, and
how the generated questions rank the study's configurations against the user's anchor questions."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuner.errors import DataError
from tuner.study.results import StudyView
from tuner.testset import read_scorecards
from tuner.testset.anchors import ANCHOR_FILE, AnchorCheck
from tuner.testset.validity import DISAGREE, discriminating


@dataclass(frozen=True)
class TestsetReading:
    scorecard: dict | None  # the last generation run that wrote the dataset's questions (None: people wrote them)
    anchors: AnchorCheck | None
    #: the search questions on which the study's complete trials' target spans DISAGREE or more, of how many
    discriminating: tuple[int, int] | None
    configurations: int = 0

    @property
    def distrusted(self) -> bool:
        """The anchors rank the study's configurations otherwise: the report says so first."""
        return self.anchors is not None and self.anchors.tau is not None and not self.anchors.trusted


def read_testset(view: StudyView) -> TestsetReading | None:
    """None for a study on questions people wrote and checked against no anchors."""
    path = view.project.dataset.path
    try:
        runs = read_scorecards(path) if path is not None else []
    except (DataError, OSError):  # a report never fails on the dataset's scorecard (moved, torn)
        runs = []
    anchors = AnchorCheck.from_json(view.folder.read_doc(ANCHOR_FILE))
    if not runs and anchors is None:
        return None
    return TestsetReading(runs[-1] if runs else None, anchors, *spread_over_trials(view))


def spread_over_trials(view: StudyView) -> tuple[tuple[int, int] | None, int]:
    """How many search questions the study's complete trials disagree on (their target spans ≥ DISAGREE), of the
    questions every one of them scored; and over how many trials."""
    trials = [t for t in view.trials if t.state == "complete" and t.result is not None]
    if len(trials) < 2:
        return None, len(trials)
    per_trial = [{q.id: q.value(view.target) for q in t.result.questions} for t in trials]
    shared = sorted(set.intersection(*(set(k for k, v in values.items() if v is not None) for values in per_trial)))
    if not shared:
        return None, len(trials)
    scores = np.array([[values[q] for values in per_trial] for q in shared], dtype=float)
    return (int(discriminating(scores).sum()), len(shared)), len(trials)


def lines(reading: TestsetReading, target: str) -> list[str]:
    """The report's section: the figures and what they mean."""
    out = ["", "## Test set", ""]
    card = reading.scorecard
    if card is not None and card.get("overlap"):
        split = card["discriminating"]
        share = f" ({split['questions'] / split['of']:.0%})" if split["of"] else ""
        out.append(f"The questions were generated from the corpus ({sum(card['kept'].values())} kept of "
                   f"{sum(card['drawn'].values())} drawn, {card['llm_calls']} LLM calls). Their lexical overlap with "
                   f"their sources is {card['overlap']['kept']:.2f} (held to {card['overlap']['target']:.2f}, "
                   f"{card['overlap']['from']}); {split['questions']} of {split['of']}{share} separate keyword, "
                   f"hybrid and vector search by {split['spread']:g} nDCG@10 or more.")
    elif card is not None:
        out.append("The questions were generated from the corpus by a tuner from before the lexical-overlap gate: "
                   "their overlap with their sources was not measured.")
    if reading.discriminating is not None:
        separating, scored = reading.discriminating
        out.append(f"On this study's {reading.configurations} complete trials, {separating} of {scored} search "
                   f"questions ({separating / scored:.0%}) move {target} by {DISAGREE:g} or more between trials; "
                   f"the rest score alike under every configuration tried and carry no ranking signal.")
    if reading.anchors is not None:
        out.append(reading.anchors.sentence())
    elif card is not None:
        out.append("No anchor questions were given: whether these questions rank configurations as your users' "
                   "would is not measured (`--anchor-questions FILE` with ~10 questions people wrote checks it).")
    return [*out[:3], " ".join(out[3:]), ""] if len(out) > 3 else []
