"""The DSPy answer programs: question + numbered contexts -> answer citing context numbers.

Built-in programs are named (`default`, `strict`); any program saved with `program.save("x.json")` (e.g. by
prompt optimisation) loads by path. A program's identity for caches and reports is the hash of its state
(instructions + demos), so two files with the same prompt share cached answers.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import dspy

from tuner.cache import stable_hash
from tuner.config import BUILTIN_PROGRAM_NAMES
from tuner.errors import ConfigError
from tuner.text import CONTEXT_HEADING, number_contexts

NO_CONTEXT_ANSWER = "I cannot answer from the given context: no passage was retrieved."

# What the built-in programs say when the contexts lack the answer, and the usual ways models say it.
_REFUSAL = re.compile(
    r"\b(cannot|can't|can ?not|unable to|not able to) (answer|be answered|determine|find|provide)"
    r"|\b(do(es)? not|don't|doesn't) (contain|provide|mention|include|say|specify) (enough |any |the )?"
    r"(information|answer|details)|\bno (information|answer) (is )?(given|provided|available)|^i don't know",
    re.I)


def is_refusal(answer: str) -> bool:
    """True when the answer declines to answer (a refusal scores nothing on faithfulness if it is let off)."""
    return bool(_REFUSAL.search(answer.strip()[:300]))


class AnswerFromContexts(dspy.Signature):
    """Answer the question using only the numbered contexts. After each claim, cite the number of the
    context that supports it in square brackets, like [1]. If the contexts do not contain the answer,
    say that you cannot answer from the given context."""

    question: str = dspy.InputField()
    contexts: str = dspy.InputField(desc="numbered passages: [1] ..., [2] ...")
    answer: str = dspy.OutputField(desc="a short answer with citations such as [1]")


# Seeded from AegisRAG's strict-faithfulness prompt: nothing beyond the contexts, every sentence cited.
STRICT_INSTRUCTIONS = """You are a strictly faithful assistant. Use ONLY facts stated in the numbered contexts;
never add outside knowledge, assumptions or background. Every sentence of the answer must end with the citation
[n] of the context that states it. Prefer the contexts' own words. If the contexts do not contain the answer,
reply exactly: "I cannot answer from the given context." """

BUILTIN_PROGRAMS = dict(zip(BUILTIN_PROGRAM_NAMES, (
    AnswerFromContexts,
    AnswerFromContexts.with_instructions(STRICT_INSTRUCTIONS),
), strict=True))


class PassagesFirst(dspy.ChatAdapter):
    """DSPy's chat layout with the instructions after the inputs instead of in the system message: the question and
    its passages then come before what a compiled or `strict` program changes, so trials that differ only in the
    program resume the passages' prefix (see tuner/models/llms/_llama_decoding.py). Demonstrations stay where DSPy
    puts them, before the question: a program with its own demonstrations shares only the system message."""

    def format_system_message(self, signature: type[dspy.Signature]) -> str:
        return f"{self.format_field_description(signature)}\n{self.format_field_structure(signature)}"

    def user_message_output_requirements(self, signature: type[dspy.Signature]) -> str:
        return f"{self.format_task_description(signature)}\n\n{super().user_message_output_requirements(signature)}"


class ContextFirst(dspy.ChatAdapter):
    """The passages first of all, numbered, under the heading the judge's verdict prompt begins with
    (`verdict_contexts: numbered`): when one model answers and judges, a question's verdicts resume the passages its
    answer computed instead of computing them again, and trials that change only the program resume them too. What
    DSPy puts in the system message (the program's instructions among it) follows them in the same turn (a system
    message would come before them), then the question as DSPy asks it; the contexts field points back to them.
    (Instructions after the question, as in PassagesFirst, had the 1.5B copy them as its answer.)"""

    def format(self, signature: type[dspy.Signature], demos: list, inputs: dict) -> list[dict]:
        passages = inputs["contexts"]
        messages = super().format(signature, demos, {**inputs, "contexts": "(the numbered passages of the Context "
                                                                           "above)"})
        opening = f"{CONTEXT_HEADING}{passages}\n\n{messages[0]['content']}"
        rest = messages[1:]
        if rest and rest[0]["role"] == "user":  # the first demonstration's question, or the question itself
            opening, rest = f"{opening}\n\n{rest[0]['content']}", rest[1:]
        return [{"role": "user", "content": opening}, *rest]


#: `answer_layout`: where the answer prompt puts the program's instructions (None: DSPy's ChatAdapter as it is)
LAYOUTS: dict[str, type[dspy.ChatAdapter] | None] = {"passages-first": PassagesFirst, "instructions-first": None,
                                                      "context-first": ContextFirst}


class RAGAnswer(dspy.Module):
    def __init__(self, signature: type[dspy.Signature] = AnswerFromContexts, layout: str = "instructions-first"):
        super().__init__()
        self.respond = dspy.Predict(signature)
        self.layout = layout

    def forward(self, question: str, contexts: list[str]) -> dspy.Prediction:
        if not contexts:  # dynamic K may leave nothing: say so instead of asking the model to guess
            return dspy.Prediction(answer=NO_CONTEXT_ANSWER)
        adapter = LAYOUTS[self.layout]
        with dspy.context(adapter=adapter() if adapter else None):
            return self.respond(question=question, contexts=number_contexts(contexts))


def load_program(spec: str, layout: str = "instructions-first") -> RAGAnswer:
    """A built-in program by name, or a saved program JSON by path, asking in `layout` (LAYOUTS)."""
    if spec in BUILTIN_PROGRAMS:
        return RAGAnswer(BUILTIN_PROGRAMS[spec], layout)
    path = Path(spec)
    if not path.suffix == ".json":
        raise ConfigError(f"program {spec!r}: expected {', '.join(BUILTIN_PROGRAMS)} or a saved program .json file")
    check_saved_program(path)
    program = RAGAnswer(layout=layout)
    try:
        program.load(str(path))
    except Exception as exc:  # dspy raises many kinds for a bad file
        raise ConfigError(f"program {path}: not a saved answer program ({type(exc).__name__}: {exc})") from None
    return program


def check_saved_program(path: Path) -> None:
    """A saved program must be an answer program: the same predictors, and signature fields of the same names in
    the same order. DSPy's load copies whatever fields a file holds over ours (a `Text:`/`Label:` classifier would
    answer without a word), so the file is read and compared first."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"program {path}: file not found") from None
    except (OSError, ValueError) as exc:  # cut short, not JSON, not UTF-8, a folder
        raise ConfigError(f"program {path}: not a saved answer program ({type(exc).__name__}: {exc})") from None
    expected = RAGAnswer().dump_state()
    saved = sorted(k for k in data if k != "metadata") if isinstance(data, dict) else []
    if saved != sorted(expected):
        raise ConfigError(f"program {path}: not a saved answer program (predictors {', '.join(saved) or 'none'}; an "
                          f"answer program has {', '.join(expected)})")
    for name, state in expected.items():
        ours = [f["prefix"] for f in state["signature"]["fields"]]
        try:
            theirs = [f["prefix"] for f in data[name]["signature"]["fields"]]
        except (KeyError, TypeError):
            raise ConfigError(f"program {path}: predictor {name} has no signature fields; not a saved answer "
                              f"program") from None
        if theirs != ours:
            raise ConfigError(f"program {path}: predictor {name} reads and writes {' '.join(theirs)}, an answer "
                              f"program {' '.join(ours)}: it was saved from another signature")


def program_id(program: RAGAnswer) -> str:
    return stable_hash(program.dump_state())[:16]
