"""Judge alignment: the graded judge's wording and a few of people's labelled answers, shown before every verdict,
chosen for agreement with the labels (`tuner judge align`) — the way DSPy's BootstrapFewShotWithRandomSearch
searches labelled demonstrations and MLflow's `align()` fits a judge to feedback.

The search is DSPy's random search, done here: a graded verdict is read off one token's log-probabilities, which a
DSPy predictor does not expose, and demos drawn at random from labels that are mostly "supported" would mostly
show "yes". So the candidates are each wording zero-shot, then seeded draws of balanced demo sets (half supported,
half not), each scored by AUC on the training labels it does not show (ranking is what a study needs; a scale
that sits high is the cut's business).

Adopted only where agreement rises on labels the search never saw: the labels are split into stratified folds,
each fold is judged by the winner of a search on the others and by the judge as configured, and the alignment is
adopted when the held-out AUC rises. Only then does the search run on all the labels, and its winner is written.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tuner.config import EvaluationConfig, JudgeAlignment, VerdictDemo
from tuner.errors import ConfigError, DataError
from tuner.evaluation.judge.agreement import auc, balanced_accuracy, best_cut
from tuner.evaluation.judge.cases import Case
from tuner.evaluation.judge.check import score_cases

#: a demo's passage: the excerpt of this many words holding most of the answer's words (four fit a small window)
DEMO_WORDS = 120
#: demos per candidate, half supported and half not
SIZES = (2, 4)
FOLDS = 2
#: candidates scored per search (the two wordings zero-shot first)
CANDIDATES = 6
WORDINGS = ("support", "nli")

Verdicts = list[tuple[float | None, bool]]
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Candidate:
    prompt: str
    demos: tuple[Case, ...] = ()

    def alignment(self, labels: int = 0, cut: float | None = None, held_out: str = "",
                  judge: str | None = None) -> JudgeAlignment:
        return JudgeAlignment(prompt=self.prompt, labels=labels, cut=cut, held_out=held_out, judge=judge, demos=[
            VerdictDemo(context=excerpt(case), statement=case.answer, supported=case.supported)
            for case in self.demos])

    def settings(self, evaluation: EvaluationConfig) -> EvaluationConfig:
        return evaluation.model_copy(update={"verdict_prompt": self.prompt, "alignment": self.alignment()})


@dataclass(frozen=True)
class Aligned:
    """What the cross-validation measured, and the alignment adopted (None where held-out agreement did not rise)."""

    labels: int
    folds: int
    candidates: int
    before_auc: float | None
    after_auc: float | None
    before_accuracy: float | None  # balanced accuracy at a cut chosen on the other folds
    after_accuracy: float | None
    adopted: JudgeAlignment | None

    @property
    def rose(self) -> bool:
        return self.before_auc is not None and self.after_auc is not None and self.after_auc > self.before_auc

    def sentence(self) -> str:
        def f(value: float | None) -> str:
            return "—" if value is None else f"{value:.2f}"
        return (f"on {self.labels} labels in {self.folds} folds, each judged by the winner of {self.candidates} "
                f"candidates searched on the others: held-out AUC {f(self.before_auc)} → {f(self.after_auc)}, "
                f"balanced accuracy {f(self.before_accuracy)} → {f(self.after_accuracy)}")


def excerpt(case: Case) -> str:
    """The passage holding most of the answer's words, cut to the `DEMO_WORDS` words around them."""
    wanted = set(_words(case.answer))
    best: tuple[int, list[str]] = (-1, [])
    for passage in case.contexts:
        words = passage.split()
        for start in range(0, max(1, len(words) - DEMO_WORDS + 1), DEMO_WORDS // 4):
            window = words[start:start + DEMO_WORDS]
            hits = sum(w in wanted for w in _words(" ".join(window)))
            if hits > best[0]:
                best = (hits, window)
    return " ".join(best[1]) or " ".join(case.contexts)[:800] or "(no passage)"


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def candidates(train: Sequence[Case], prompt: str, budget: int = CANDIDATES, seed: int = 0) -> list[Candidate]:
    """Today's wording zero-shot (the judge as configured), the other wording, then seeded balanced demo sets under
    either wording, each leaving at least one label of each class to be scored on."""
    supported = [c for c in train if c.supported]
    unsupported = [c for c in train if not c.supported]
    wordings = (prompt, *(w for w in WORDINGS if w != prompt))
    found = [Candidate(w) for w in wordings]
    sizes = [s for s in SIZES if s // 2 < min(len(supported), len(unsupported))]
    draw = 0
    while sizes and len(found) < budget:
        rng = random.Random(seed * 1000 + draw)
        size = sizes[draw % len(sizes)]
        demos = rng.sample(supported, size // 2) + rng.sample(unsupported, size // 2)
        rng.shuffle(demos)
        found.append(Candidate(wordings[(draw // len(sizes)) % len(wordings)], tuple(demos)))
        draw += 1
    return found[:budget]


def folds_of(cases: Sequence[Case], folds: int, seed: int = 0) -> list[list[Case]]:
    """Stratified, seeded: each fold holds its share of either class."""
    rng, assigned = random.Random(seed), [[] for _ in range(folds)]
    for side in (True, False):
        members = [c for c in cases if c.supported == side]
        rng.shuffle(members)
        for i, member in enumerate(members):
            assigned[i % folds].append(member)
    return assigned


class Search:
    """Candidates scored with one judge (its calls cached like every call, so a rerun pays nothing again)."""

    def __init__(self, runner, evaluation: EvaluationConfig, on_progress: Progress | None = None, total: int = 0):
        self.runner, self.evaluation = runner, evaluation
        self.on_progress, self.total, self.done = on_progress, total, 0

    def verdicts(self, candidate: Candidate | None, cases: Sequence[Case]) -> Verdicts:
        """Each case's faithfulness under `candidate` (None: the judge as configured), the cases it shows left out."""
        from tuner.evaluation.ragas_judge import RagasScorer

        settings = self.evaluation if candidate is None else candidate.settings(self.evaluation)
        config = self.runner.workspace.config
        scorer = RagasScorer(self.runner.judge, self.runner.workspace.embedder, settings, config.judge_tokens)
        shown = set() if candidate is None else {c.key for c in candidate.demos}
        kept = [c for c in cases if c.key not in shown]
        scored = score_cases(scorer, self.runner.meter, kept, 0, self._tick)
        self._tick(len(kept) - 1, None, ended=True)
        return [(s.value, s.case.supported) for s in scored]

    def _tick(self, index: int, case, ended: bool = False) -> None:
        if ended:
            self.done += index + 1
        if self.on_progress:
            self.on_progress(self.done + (0 if ended else index), self.total)

    def best(self, train: Sequence[Case], budget: int) -> tuple[Candidate, Verdicts, Verdicts]:
        """The candidate with the best AUC on the training labels it does not show (of equals, the first: fewer
        demos, today's wording), its verdicts there, and the configured judge's."""
        found = candidates(train, self.evaluation.verdict_prompt, budget)
        scored = [(candidate, self.verdicts(candidate, train)) for candidate in found]
        winner, verdicts = max(scored, key=lambda pair: _auc(pair[1]) or 0.0)
        return winner, verdicts, scored[0][1]


def align(runner, evaluation: EvaluationConfig, cases: Sequence[Case], folds: int = FOLDS,
          budget: int = CANDIDATES, on_progress: Progress | None = None) -> Aligned:
    """Cross-validate the search on `cases` (people's labels); where held-out AUC rises, search on them all and
    return the winner as the adopted alignment."""
    search = Search(runner, evaluation, on_progress, verdicts_needed(len(cases), folds, budget, adopting=True))
    aligned = cross_validate(search, cases, folds, budget)
    if not aligned.rose:
        return aligned
    winner, verdicts, _ = search.best(cases, budget)
    if winner == Candidate(evaluation.verdict_prompt) and evaluation.alignment is None:
        return aligned  # on all the labels, the judge as configured wins: nothing to adopt
    adopted = winner.alignment(len(cases), best_cut(verdicts), aligned.sentence(), runner.judge.name)
    return replace(aligned, adopted=adopted)


def verdicts_needed(labels: int, folds: int, budget: int, adopting: bool) -> int:
    """At most how many verdicts the cross-validation takes, and with `adopting` the search on all labels after it."""
    train = labels * (folds - 1) // folds
    return folds * (budget * train + 2 * (labels - train)) + budget * labels * adopting


def cross_validate(search: Search, cases: Sequence[Case], folds: int = FOLDS, budget: int = CANDIDATES) -> Aligned:
    """Each fold judged by the winner of a search on the others and by the judge as configured: what alignment
    gains on labels its search never saw."""
    prompt = search.evaluation.verdict_prompt
    if prompt not in WORDINGS:  # other wordings or demonstrations would leave its format
        raise ConfigError(f"verdict_prompt {prompt} is a checker LLM's own format, which it was "
                          f"trained on alone: it is not aligned (align a judge asked in {' or '.join(WORDINGS)})")
    need = 2 * folds
    counts = {side: sum(c.supported == side for c in cases) for side in (True, False)}
    if min(counts.values()) < need:
        raise DataError(f"judge alignment in {folds} folds needs at least {need} answers labelled supported and {need} "
                        f"labelled not supported; these labels have {counts[True]} and {counts[False]} (label more "
                        "with `tuner judge label`)")
    before, after, before_cut, after_cut = [], [], [], []
    for i, held in enumerate(parts := folds_of(cases, folds)):
        train = [c for j, part in enumerate(parts) if j != i for c in part]
        winner, winner_train, today_train = search.best(train, budget)
        today, mine = search.verdicts(None, held), search.verdicts(winner, held)
        before += today
        after += mine
        before_cut += _at(today, best_cut(today_train))
        after_cut += _at(mine, best_cut(winner_train))
    return Aligned(labels=len(cases), folds=folds, candidates=budget, before_auc=_auc(before),
                   after_auc=_auc(after), before_accuracy=_accuracy(before_cut),
                   after_accuracy=_accuracy(after_cut), adopted=None)


def _auc(verdicts: Verdicts) -> float | None:
    return auc([v for v, s in verdicts if s and v is not None], [v for v, s in verdicts if not s and v is not None])


def _at(verdicts: Verdicts, cut: float | None) -> Verdicts:
    """Each verdict read at `cut` (chosen on other labels) as 1 or 0; unscored stays unscored."""
    cut = 0.5 if cut is None else cut
    return [(None if v is None else float(v >= cut), s) for v, s in verdicts]


def _accuracy(read: Verdicts) -> float | None:
    return balanced_accuracy(read, 0.5)
