"""Judge noise: the best trial's answers re-judged with sampled judge seeds (opt-in: it costs LLM calls).

The study's verdicts are greedy; re-judging the same answers and contexts with temperature 0.7 under N seeds
shows how much the judge alone moves a question's score and the trial's mean. An improvement smaller than
that fluctuation is the judge's, not the configuration's. Re-judgings are cached like every call, so asking
again for the same N costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tuner.evaluation.records import QuestionResult

if TYPE_CHECKING:
    from tuner.study.storage import StudyFolder

NOISE_FILE = "judge_noise.json"


@dataclass(frozen=True)
class JudgeNoise:
    metric: str
    trial: int
    #: question id -> [study's verdict, re-judging 1, ..., N]; None where a judging was unscored
    scores: Mapping[str, Sequence[float | None]]

    @property
    def repeats(self) -> int:
        return max((len(v) for v in self.scores.values()), default=1) - 1

    def spread(self, question_id: str) -> float | None:
        values = [v for v in self.scores.get(question_id, []) if v is not None]
        return max(values) - min(values) if len(values) > 1 else None

    @property
    def spreads(self) -> dict[str, float]:
        return {q: s for q in self.scores if (s := self.spread(q)) is not None}

    @property
    def run_means(self) -> list[float]:
        """The trial's mean target under each judging (questions that judging scored)."""
        means = []
        for run in range(self.repeats + 1):
            values = [v[run] for v in self.scores.values() if len(v) > run and v[run] is not None]
            if values:
                means.append(sum(values) / len(values))
        return means

    @property
    def mean_sd(self) -> float | None:
        """Standard deviation of the trial's mean across judgings: the judge's noise on a reported mean."""
        means = self.run_means
        if len(means) < 2:
            return None
        centre = sum(means) / len(means)
        return math.sqrt(sum((m - centre) ** 2 for m in means) / (len(means) - 1))

    def exceeds(self, difference: float) -> bool | None:
        """Is a best − baseline difference above the judge's normal fluctuation? Both means carry the judge's
        noise, so the difference's is √2 × mean_sd; "above" means beyond two of those."""
        sd = self.mean_sd
        return None if sd is None else abs(difference) > 2 * math.sqrt(2) * sd

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "trial": self.trial, "scores": {q: list(v) for q, v in self.scores.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JudgeNoise:
        return cls(data["metric"], int(data["trial"]), {q: list(v) for q, v in data["scores"].items()})


def rejudge(scorer, questions: Sequence[QuestionResult], metric: str, trial: int, repeats: int,
            on_progress: Callable[[int, int], None] | None = None) -> JudgeNoise:
    """Judge each question's recorded answer `repeats` more times, each round with its own sampled seeds.
    `scorer` is a RagasScorer; its judge goes back to greedy verdicts afterwards."""
    scores: dict[str, list[float | None]] = {q.id: [q.value(metric)] for q in questions}
    done, total = 0, repeats * len(questions)
    try:
        for round_ in range(1, repeats + 1):
            scorer.judge.sample_round = round_
            for q in questions:
                outcome = scorer.score(metric, q.question, q.answer, list(q.contexts), q.reference)
                scores[q.id].append(outcome.value)
                done += 1
                if on_progress:
                    on_progress(done, total)
    finally:
        scorer.judge.sample_round = 0
    return JudgeNoise(metric, trial, scores)


def save_noise(noise: JudgeNoise, folder: StudyFolder) -> None:
    folder.write_doc(NOISE_FILE, noise.to_json())


def load_noise(folder: StudyFolder) -> JudgeNoise | None:
    data = folder.read_doc(NOISE_FILE)
    if data is None:
        return None
    try:
        return JudgeNoise.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None  # a damaged noise record is as good as none: the report says noise was not measured
