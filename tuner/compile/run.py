"""One compile, end to end: fixed contexts for the training questions, the optimizer under a call budget, the
program saved with a sidecar that says how it was made.

The contexts come from one retrieval configuration (recorded in the sidecar): the prompt is tuned for what that
pipeline retrieves. Every LLM call goes through the runner's cache and cost meter under the stage `compile`, so
a compile killed with kill -9 and run again pays only for calls it had not made.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import dspy

from tuner.compile.metric import CompileMetric, Feedback
from tuner.compile.optimizers import COMPILERS
from tuner.compile.saved import Sidecar, write_sidecar
from tuner.config import PipelineConfig
from tuner.cost import BudgetSpent
from tuner.data import Question
from tuner.data.split import Split
from tuner.errors import ConfigError, TunerError
from tuner.evaluation.records import Constraint
from tuner.metrics import ANSWER_METRICS, REGISTRY
from tuner.prompts.programs import RAGAnswer, program_id

if TYPE_CHECKING:
    from tuner.evaluation.rag_eval import RagRunner



@dataclass(frozen=True)
class CompileSettings:
    optimizer: str = "bootstrap"
    target: str = "faithfulness"
    guard: Constraint | None = None
    budget: int = 300  # paid LLM calls
    seed: int = 0

    def __post_init__(self) -> None:
        if self.optimizer not in COMPILERS:
            raise ConfigError(f"--optimizer {self.optimizer!r}: choose {', '.join(COMPILERS)}")
        if self.target not in ANSWER_METRICS:
            raise ConfigError(f"--target {self.target!r}: a compile tunes the answer; choose "
                              f"{' or '.join(ANSWER_METRICS)}")
        if self.budget < 1:
            raise ConfigError("--budget: at least 1 LLM call")

    @property
    def metrics(self) -> list[str]:
        """What a compiled program is judged on: the target, and the guard's metric."""
        return list(dict.fromkeys([self.target, *([self.guard.metric] if self.guard else [])]))

    @property
    def calls_per_score(self) -> int:
        # paid calls one scored example costs, roughly: the answer, then the judge's calls for each metric
        guard = 0 if self.guard is None else REGISTRY[self.guard.metric].calls if self.guard.metric in REGISTRY else 1
        return 1 + REGISTRY[self.target].calls + guard


@dataclass
class Compiled:
    program: RAGAnswer
    path: Path
    sidecar: Sidecar


def examples(runner: RagRunner, questions: Sequence[Question], pipeline: PipelineConfig) -> list[dspy.Example]:
    """The questions as DSPy examples, with the contexts `pipeline` retrieves for them (no LLM unless the
    pipeline reranks with one). `answerable`: a gold document is among the contexts (True without gold ids)."""
    found = []
    for question in questions:
        retrieval = runner.pipeline.run(question.text, pipeline)
        contexts = [c.chunk.text for c in retrieval.selected]
        gold = question.relevant_ids
        answerable = not gold or any(set(c.chunk.doc_ids) & set(gold) for c in retrieval.selected)
        found.append(dspy.Example(id=question.id, question=question.text, contexts=contexts,
                                  reference=question.reference, answerable=answerable)
                     .with_inputs("question", "contexts"))
    return found


def compile_questions(questions: Sequence[Question], recorded: Split | None, train: int | None,
                      held_out_share: float) -> tuple[list[Question], list[Question]]:
    """Training and held-out questions: a study's held-out questions stay unseen (train on its search questions,
    or the first `train` of them); otherwise `train` questions (or 1 - held_out_share of them) by the id-hash
    split, the rest held out to judge the compiled program."""
    if recorded is not None:
        training = recorded.search(questions)
        return (training[:train] if train else training), recorded.holdout(questions)
    ids = [q.id for q in questions]
    if train is not None and train >= len(ids):
        raise ConfigError(f"--train {train}: the dataset has {len(ids)} questions; leave some to judge on")
    parts = Split.make(ids, 1 - train / len(ids) if train else held_out_share, option="--split")
    return parts.search(questions), parts.holdout(questions)


def compile_program(runner: RagRunner, pipeline: PipelineConfig, train: Sequence[Question],
                    held_out: Sequence[Question], settings: CompileSettings, out_dir: Path,
                    on_score: Callable[[Feedback], None] | None = None) -> Compiled:
    """Compile the pipeline's program on `train`, save it under `out_dir` as OPTIMIZER-PROGRAMID.json with its
    sidecar. Raises TunerError when the budget runs out first (nothing is saved; the calls paid are cached)."""
    if not train:
        raise ConfigError("no training question: use more questions or a smaller held-out share")
    start = runner.built_in.program(pipeline.program)
    trainset = examples(runner, train, pipeline)
    if not any(e.contexts for e in trainset):
        raise ConfigError("the pipeline retrieved no context for any training question: nothing to be faithful to")
    metric = CompileMetric(runner.scorer, runner.meter, settings.target, settings.guard, on_score)
    compiler = COMPILERS[settings.optimizer](settings.budget, settings.calls_per_score, settings.seed)
    meter = runner.meter
    paid_before, made_before, meter.budget = meter.paid, meter.made, meter.paid + settings.budget
    out_dir.mkdir(parents=True, exist_ok=True)
    try:
        with meter.stage("", "compile"), dspy.context(lm=runner.built_in.lm_for()), chatter_to(out_dir / "compile.log"):
            program = compiler.compile(start, trainset, metric)
            train_scores = [metric.score(e, answer_of(program, e)).score for e in trainset]
    except BudgetSpent:
        raise TunerError(f"the budget of {settings.budget} LLM calls ran out before {settings.optimizer} finished: "
                         f"nothing saved; run again with a larger --budget (the calls paid are cached, not paid "
                         f"again)") from None
    finally:
        meter.budget = None
    identity = program_id(program)
    path = out_dir / f"{settings.optimizer}-{identity}.json"
    program.save(str(path))
    sidecar = Sidecar(
        program_id=identity, optimizer=settings.optimizer, target=settings.target,
        guard=str(settings.guard) if settings.guard else None, seed=settings.seed, budget=settings.budget,
        calls=meter.made - made_before, calls_paid=meter.paid - paid_before,
        start_program=pipeline.program, start_program_id=program_id(start),
        demos=sum(len(p.demos) for p in program.predictors()), instructions=program.respond.signature.instructions,
        generator=runner.generator.name, judge=runner.judge.name, pipeline=pipeline.model_dump(mode="json"),
        train_ids=tuple(q.id for q in train), held_out_ids=tuple(q.id for q in held_out),
        train_score=sum(train_scores) / len(train_scores))
    write_sidecar(path, sidecar)
    return Compiled(program, path, sidecar)


@contextlib.contextmanager
def chatter_to(log: Path) -> Iterator[None]:
    """DSPy's optimizers print, log and draw tqdm bars on stdout and stderr as they go: into a log beside the
    program (a caller showing progress meanwhile writes to the terminal it holds, not to sys.stdout/stderr)."""
    with open(log, "a", encoding="utf-8") as stream, contextlib.redirect_stdout(stream), \
            contextlib.redirect_stderr(stream):
        yield


def answer_of(program: RAGAnswer, example: dspy.Example) -> str:
    try:
        return str(program(**example.inputs()).answer or "")
    except (dspy.utils.exceptions.AdapterParseError, ValueError):  # the format was not followed: no answer
        return ""
