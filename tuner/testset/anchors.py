"""Anchor questions: a few questions people wrote (`--anchor-questions FILE`), against which a generated set is
checked. Both rank the same retrieval configurations by nDCG@10; Kendall's τ says whether the generated set would
choose as the people's questions do. The anchors also set the lexical overlap the generated questions are held to.

The file is JSON Lines, one question a line, with the ids of the documents that answer it (for a `--docs` folder,
the file names as `tuner data DATASET` lists them):

    {"question": "How long do refunds take to arrive?", "documents": ["billing/refunds.md"]}
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tuner.data import Document, Question
from tuner.data._io import read_jsonl
from tuner.errors import DataError
from tuner.testset.validity import discriminating, overlaps, rank_agreement

log = logging.getLogger(__name__)

#: fewer anchors cannot rank anything: τ's interval would span every answer
FEWEST_ANCHORS = 5
#: a generated set whose τ with the anchors is below this is not trusted to choose (the issue's bar, and the squad2
#: figure a generated set reaches where it works)
TRUSTED_TAU = 0.6
#: a generated set's best this close to the anchors' best on the anchors (nDCG@10) chose as well as they would
SAME_BEST = 0.01
#: the study document the check is saved in, for the report
ANCHOR_FILE = "anchors.json"
#: anchors whose words barely meet the documents they name are likely in another language than the corpus (people's
#: questions on the shared sets overlap their gold documents 0.67-0.77; German ones on an English corpus near 0.1)
FOREIGN_OVERLAP = 0.3


def read_anchors(path: Path, documents: Sequence[Document]) -> list[Question]:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"--anchor-questions {path}: no such file")
    known = {d.id for d in documents}
    anchors = []
    for number, row in enumerate(read_jsonl(path), 1):
        text, ids = row.get("question"), row.get("documents")
        if not isinstance(text, str) or not text.strip():
            raise DataError(f"{path}: line {number} has no \"question\"")
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise DataError(f"{path}: line {number} has no \"documents\" (the ids of the documents that answer it)")
        unknown = sorted(set(ids) - known)
        if unknown:
            raise DataError(f"{path}: line {number} names document {unknown[0]!r}, which the corpus does not hold "
                            f"(`tuner data DATASET` lists its ids)")
        answer = row.get("answer")
        anchors.append(Question(id=f"anchor-{number:03d}", text=text.strip(), relevant_ids=frozenset(ids),
                                answers=(answer,) if isinstance(answer, str) and answer else ()))
    if len(anchors) < FEWEST_ANCHORS:
        raise DataError(f"{path}: {len(anchors)} anchor question(s); give at least {FEWEST_ANCHORS} (10 or more "
                        f"narrow the interval)")
    overlap = float(np.mean(overlaps(anchors, documents)))
    if overlap < FOREIGN_OVERLAP:  # the generated questions are held to the anchors' overlap: say it now
        log.warning(f"{path}: the anchor questions share few words with the documents they name (overlap "
                    f"{overlap:.2f}; people's questions usually 0.6-0.8): are they in the corpus's language? The "
                    f"generated questions are held to their overlap, and ranked against them")
    return anchors


@dataclass(frozen=True)
class AnchorCheck:
    """How the generated questions and the anchors rank the same configurations."""

    anchors: int
    generated: int
    configurations: tuple[str, ...]
    tau: float | None  # None: fewer than 3 configurations, or every one tied on one side
    ci: tuple[float, float] | None
    #: mean lexical overlap with the gold documents: the anchors', the generated questions'
    overlap: tuple[float, float]
    #: the share of generated questions on which the configurations disagree (nDCG@10 spread ≥ DISAGREE)
    discriminating: float
    best_by_anchors: str = ""
    best_by_generated: str = ""
    #: the anchors' mean nDCG@10 of each set's best: what choosing by the generated questions costs
    anchors_of_best: tuple[float, float] = (0.0, 0.0)
    #: the configurations the generated questions cannot tell from their best (validity.Agreement.tied_synthetic)
    tied_with: tuple[str, ...] = ()

    @property
    def trusted(self) -> bool:
        return self.tau is not None and self.tau >= TRUSTED_TAU

    def sentence(self) -> str:
        if self.tau is None:
            why = f"only {self.generated} generated question(s) with gold documents, and τ needs {FEWEST_ANCHORS}" \
                if too_few(self.generated) else \
                f"{len(self.configurations)} configuration(s) scored, and τ needs 3 that differ"
            return f"The {self.anchors} anchor questions could not be compared with the generated ones: {why}."
        ci = f"[{self.ci[0]:+.2f}, {self.ci[1]:+.2f}]" if self.ci else "[—]"
        ranked = (f"Kendall τ {self.tau:+.2f} {ci} between the rankings of {len(self.configurations)} "
                  f"configurations by the {self.generated} generated questions and by your {self.anchors} anchor "
                  f"questions (nDCG@10)")
        if self.trusted:
            return (f"The generated questions rank configurations like your anchor questions: {ranked}."
                    + ("" if self.ci and self.ci[0] > 0 else " The interval is wide: more anchors would narrow it.")
                    + self._ties())
        cost = self.anchors_of_best[0] - self.anchors_of_best[1]
        overlap = (f"Lexical overlap with the gold documents: anchors {self.overlap[0]:.2f}, generated "
                   f"{self.overlap[1]:.2f}.")
        unlike = f"**The generated questions rank configurations unlike your anchor questions** ({ranked}; τ < " \
                 f"{TRUSTED_TAU:g})"
        if cost <= SAME_BEST:
            return (f"{unlike}, though both choose {self.best_by_generated} (or one as good on the anchors): the "
                    f"study's choice holds on your questions, its order of the others does not.{self._ties()} "
                    f"{overlap}")
        return (f"{unlike}: do not trust a choice made on the generated questions. The anchors' best is "
                f"{self.best_by_anchors}, the generated set's {self.best_by_generated} ({cost:.3f} nDCG@10 lower on "
                f"the anchors).{self._ties()} {overlap}")

    def _ties(self) -> str:
        """What the generated questions cannot choose between, when anything: a near-tie named as one."""
        if not self.tied_with:
            return ""
        shown = ", ".join(self.tied_with[:3]) + (f" and {len(self.tied_with) - 3} more" if len(self.tied_with) > 3
                                                 else "")
        among = (f"; the anchors' best, {self.best_by_anchors}, is one of them"
                 if self.best_by_anchors in self.tied_with else "")
        return (f" The generated questions cannot tell their best, {self.best_by_generated}, from {shown} (the 95 % "
                f"interval of the difference reaches 0){among}: treat these as equals.")

    def to_json(self) -> dict[str, Any]:
        return {"schema": 1, **{k: getattr(self, k) for k in self.__dataclass_fields__}}

    @classmethod
    def from_json(cls, data: Any) -> AnchorCheck | None:
        if not isinstance(data, dict) or data.get("schema") != 1:
            return None  # a report never fails on a document it cannot read
        values = {k: data.get(k) for k in cls.__dataclass_fields__ if k in data}
        for key in ("configurations", "ci", "overlap", "anchors_of_best", "tied_with"):
            if values.get(key) is not None:
                values[key] = tuple(values[key])
        try:
            return cls(**values)
        except TypeError:
            return None


def too_few(count: int) -> bool:
    """Fewer generated questions than anchors the check asks for cannot rank configurations (one question's τ has a
    zero-width interval that means nothing)."""
    return count < FEWEST_ANCHORS


def check_anchors(score: Callable[[Any, Sequence[Question]], np.ndarray], configurations: dict[str, Any],
                  generated: Sequence[Question], anchors: Sequence[Question],
                  documents: Sequence[Document]) -> AnchorCheck:
    """`score(configuration, questions)`: each question's nDCG@10 under one of `configurations` (label -> config)."""
    generated = [q for q in generated if q.relevant_ids]
    labels = list(configurations)
    overlap = (float(np.mean(overlaps(anchors, documents))), float(np.mean(overlaps(generated, documents) or [0.0])))
    if not generated:
        raise DataError("no generated question has gold documents: nothing to rank configurations with")
    ours = np.stack([score(c, generated) for c in configurations.values()], axis=1)
    theirs = np.stack([score(c, anchors) for c in configurations.values()], axis=1)
    share = float(discriminating(ours).mean())
    if too_few(len(generated)) or len(labels) < 3 or np.ptp(ours.mean(axis=0)) == 0 or \
            np.ptp(theirs.mean(axis=0)) == 0:
        return AnchorCheck(len(anchors), len(generated), tuple(labels), None, None, overlap, share)
    agreement = rank_agreement(theirs, ours)
    ci = None if np.isnan(agreement.ci[0]) else agreement.ci
    return AnchorCheck(len(anchors), len(generated), tuple(labels), agreement.tau, ci, overlap, share,
                       labels[agreement.best_human], labels[agreement.best_synthetic],
                       (agreement.human_of_best_human, agreement.human_of_best_synthetic),
                       tuple(labels[j] for j in agreement.tied_synthetic))


def check_study(view, runner, anchors: Sequence[Question]) -> AnchorCheck:
    """`check_anchors` on a study's own configurations (its complete trials, each retrieval setting once) and its
    questions."""
    from tuner.config import PipelineConfig
    from tuner.testset.generate import ndcg

    configurations: dict[str, PipelineConfig] = {}
    seen = set()
    for trial in view.trials:
        if trial.state != "complete" or not trial.pipeline:
            continue
        config = PipelineConfig.from_record(trial.pipeline)
        if config is None:  # a knob value this version no longer takes
            continue
        retrieval = config.model_dump_json(exclude={"program"})  # the answer program moves no retrieval score
        if retrieval not in seen:
            seen.add(retrieval)
            configurations[f"trial {trial.number}"] = config
    dataset = runner.workspace.dataset
    return check_anchors(lambda config, asked: ndcg(runner, config, asked), configurations, dataset.questions,
                         anchors, dataset.documents)
