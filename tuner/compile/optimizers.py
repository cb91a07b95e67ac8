"""DSPy's optimizers behind the `ProgramCompiler` contract, each sized to the call budget.

Weak local models propose weak instructions and few faithful demos; the held-out comparison after a compile
(`tuner compile` prints it) says whether the result is better than the program it started from. All run on one
thread with a fixed seed, so a compile run again asks the same calls and the cache answers them.
"""

from __future__ import annotations

import dspy

from tuner.compile._base import ProgramCompiler
from tuner.compile.metric import CompileMetric
from tuner.prompts.programs import RAGAnswer

#: a bootstrapped demo must be wholly supported by its contexts
DEMO_THRESHOLD = 1.0
#: demos carry their contexts: more than two crowd a small model's window
MAX_DEMOS = 2
#: GEPA's reflections are paid calls its metric-call limit does not count: about one per six scores, so a tenth of
#: the budget is kept for them
REFLECTION_SHARE = 0.1


class Bootstrap(ProgramCompiler):
    """BootstrapFewShotWithRandomSearch: faithful answers the program gave on training questions become demos;
    candidate demo sets are scored on the training questions and the best kept. With a budget too small for a
    search, plain BootstrapFewShot (demos, no comparison)."""

    name = "bootstrap"

    def compile(self, program: RAGAnswer, trainset: list[dspy.Example], metric: CompileMetric) -> RAGAnswer:
        # each candidate costs a bootstrap pass and a scoring pass over the training questions; random search
        # always scores its three fixed candidates (zero-shot, labelled, unshuffled) first
        candidates = self.scores_affordable() // max(1, 2 * len(trainset)) - 3
        if candidates < 1:
            optimizer = dspy.BootstrapFewShot(metric=metric, metric_threshold=DEMO_THRESHOLD,
                                              max_bootstrapped_demos=MAX_DEMOS, max_labeled_demos=0, max_rounds=1)
            return optimizer.compile(program.deepcopy(), trainset=trainset)
        optimizer = dspy.BootstrapFewShotWithRandomSearch(
            metric=metric, metric_threshold=DEMO_THRESHOLD, max_bootstrapped_demos=MAX_DEMOS, max_labeled_demos=0,
            num_candidate_programs=candidates, num_threads=1, max_errors=len(trainset) * (candidates + 3))
        return optimizer.compile(program.deepcopy(), trainset=trainset, valset=trainset)


class Mipro(ProgramCompiler):
    """MIPROv2: the generator proposes instructions (and demo sets), and a Bayesian search over the pairs scores
    them on the training questions. Sized like `auto="light"` but from the budget."""

    name = "mipro"

    def compile(self, program: RAGAnswer, trainset: list[dspy.Example], metric: CompileMetric) -> RAGAnswer:
        candidates = 3
        # proposing and bootstrapping cost about one pass over the training set per candidate; the rest is trials
        trials = max(1, self.scores_affordable() // max(1, len(trainset)) - candidates)
        optimizer = dspy.MIPROv2(metric=metric, auto=None, num_candidates=candidates, max_bootstrapped_demos=1,
                                 max_labeled_demos=0, num_threads=1, seed=self.seed, verbose=False,
                                 track_stats=False, max_errors=len(trainset) * (trials + candidates))
        return optimizer.compile(program.deepcopy(), trainset=trainset, valset=trainset, num_trials=trials,
                                 minibatch=False, data_aware_proposer=False)


class Gepa(ProgramCompiler):
    """GEPA: the generator reflects on the judge's feedback (the unsupported statements, a refusal that had its
    answer, a guard's veto) and rewrites the instructions; a Pareto front of candidates is kept."""

    name = "gepa"

    def compile(self, program: RAGAnswer, trainset: list[dspy.Example], metric: CompileMetric) -> RAGAnswer:
        optimizer = dspy.GEPA(metric=metric.with_feedback(), reflection_lm=dspy.settings.lm,
                              max_metric_calls=max(2 * len(trainset), self.scores_affordable(REFLECTION_SHARE)),
                              reflection_minibatch_size=min(3, len(trainset)), num_threads=1, seed=self.seed,
                              use_merge=False, track_stats=False)
        return optimizer.compile(program.deepcopy(), trainset=trainset, valset=trainset)


COMPILERS: dict[str, type[ProgramCompiler]] = {c.name: c for c in (Bootstrap, Mipro, Gepa)}
