"""Where a graded verdict reads as supported, and what is known of a judge beyond its own check.

A graded judge gives P(supported); a rule that needs yes or no (the judge check's accuracy, compile's feedback on
unsupported sentences, the agreement with people's labels) reads it at a cut. A small model's scale is not
calibrated: on people's labels its unsupported claims still average P(yes) well above 0.5, so 0.5 reads almost
everything as supported. The cut is, in this order:

- `evaluation.cut`, the user's (set it to the cut `tuner judge check --labels` prints for your labels);
- an aligned judge's own, chosen on the labels it was aligned on (`evaluation.alignment`), for the judge it was
  aligned for (another model's scale differs);
- the cut measured on people's labels for a known judge model under the same verdict setting (the model registry's
  `NamedModel.as_judge`, found by the fingerprint in the judge's cache name);
- 0.5.

Those measurements also say how far the judge check's own constructed cases overstate a known judge: its AUC on them
against its AUC on real answers people labelled (AttributionBench's development claims for the 1.5B's default,
RAGTruth's test claims for the settings measured before; `bench/judge.py --labels`,
docs/performance.md "Judge on people's labels").
"""

from __future__ import annotations

from dataclasses import dataclass

from tuner.errors import ConfigError
from tuner.models.llms import short_name
from tuner.models.registry import Blend, OnPeople, as_judge, measured_blends

#: the cut when nothing better is known: the middle of the scale
MIDDLE = 0.5


def setting_name(evaluation, read_off_text: str = "") -> str:
    """How faithfulness was judged, in the words of the config: "sampled", "graded", "graded, sentences", then
    ", each passage", ", chunks", ", numbered" and ", nli" where the graded verdict reads passages alone, in chunks
    or numbered, or asks the NLI question, ", aligned" where it is shown an alignment's demonstrations, ", checker
    KIND:ENTRY" where a checker reads it, ", lexical blend" where its score is blended with the lexical shares; a
    graded setting whose verdicts were read off the sampled text says so and why (`read_off_text`)."""
    name = evaluation.verdicts + (", sentences" if evaluation.statements == "sentences" else "")
    if evaluation.verdicts == "graded":
        name += {"each": ", each passage", "chunks": ", chunks", "numbered": ", numbered"}.get(
            evaluation.verdict_contexts, "")
        name += "" if evaluation.verdict_prompt == "support" else f", {evaluation.verdict_prompt}"
    if evaluation.verdicts == "graded" and evaluation.alignment is not None:
        name += ", aligned"
    if evaluation.verdicts == "graded" and evaluation.checker is not None:
        name += f", checker {evaluation.checker.identity}"
    if evaluation.verdicts == "graded" and evaluation.blend != "none":
        name += f", {evaluation.blend} blend"
    if read_off_text and evaluation.verdicts == "graded":
        name += f" (as sampled yes/no: the judge {read_off_text})"
    return name


def measured(judge: str, setting: str) -> OnPeople | None:
    """What the development set says of this judge (its cache name) under `setting`: a fact of its model's entry in
    the model registry (`NamedModel.as_judge`), which its cache name's fingerprint identifies."""
    return as_judge(judge, setting)


@dataclass(frozen=True)
class Cut:
    value: float
    source: str  # where it came from, in words: "evaluation.cut", "measured on people's labels", "the middle"

    def __str__(self) -> str:
        return f"{self.value:.2f} ({self.source})"


def judge_cut(evaluation, judge: str, setting: str) -> Cut:
    """The cut for `judge` (its cache name) judging under `evaluation` (whose `setting_name` is `setting`)."""
    if evaluation.cut is not None:
        return Cut(evaluation.cut, "evaluation.cut")
    aligned = evaluation.alignment
    if aligned is not None and aligned.cut is not None and aligned.fits(judge):
        return Cut(aligned.cut, f"the alignment's, from {aligned.labels} labels")
    facts = measured(judge, setting) if evaluation.verdicts == "graded" else None
    if facts is None:
        return Cut(MIDDLE, "the middle: no cut is known for this judge")
    if facts.cut is None:
        return Cut(MIDDLE, f"the middle: on {facts.claims} claims people labelled this judge ranked no better than "
                           f"chance (AUC {facts.auc:.2f}), so no cut reads it well")
    return Cut(facts.cut, f"measured on {facts.claims} claims people labelled")


def cut_of(evaluation, result) -> float:
    """The cut `result` (an EvalResult, or None) is read at under `evaluation`: the user's `evaluation.cut`, else
    the cut recorded when it was judged, else (a record from before cuts were kept) the cut of the judge it names."""
    if evaluation.cut is None and result is not None and result.cut is not None:
        return result.cut
    judge = result.models.get("judge", "") if result is not None else ""
    return judge_cut(evaluation, judge, setting_name(evaluation)).value


def at_chance(judge: str, setting: str) -> str | None:
    """A sentence saying that this judge (its cache name) ranked people's labels no better than chance under
    `setting`; None when it did better or was not measured."""
    facts = measured(judge, setting)
    if facts is None or facts.cut is not None:
        return None
    return (f"this judge ({short_name(judge)}, {setting}) ranked {facts.claims} claims "
            f"people labelled no better than chance (AUC {facts.auc:.2f}; 0.5 is chance)")


def judge_blend(evaluation, judge: str) -> Blend | None:
    """The coefficients `evaluation.blend` reads `judge`'s (its cache name) faithfulness with: measured on people's
    labels for its model under this setting; None when the setting blends nothing. A judge with none measured is
    refused in one line, naming those that have them."""
    if evaluation.blend == "none":
        return None
    setting = setting_name(evaluation)
    facts = measured(judge, setting)
    if facts is None or facts.blend is None:
        known = "; ".join(measured_blends()) or "none"
        raise ConfigError(f"evaluation.blend: {evaluation.blend} has no coefficients measured for the judge {judge} "
                          f"under '{setting}' (measured: {known}); fit them on your labels with bench/combine.py, "
                          f"or set blend: none")
    return facts.blend


def overstatement(judge: str, setting: str) -> str | None:
    """How far the judge check's constructed cases are known to overstate this judge, in one sentence; None when
    it was not measured."""
    facts = measured(judge, setting)
    if facts is None or facts.constructed is None:
        return None
    gap = facts.constructed - facts.auc
    reading = f"the check's AUC reads about {gap:.2f} above what real answers give" if gap > 0 else \
        "the check's AUC is not above what real answers give"
    return (f"on {facts.claims} real answers people labelled ({facts.dataset}), this judge ({setting}) scored AUC "
            f"{facts.auc:.2f} where the check's kinds of case built from them gave {facts.constructed:.2f}: "
            f"{reading}")
