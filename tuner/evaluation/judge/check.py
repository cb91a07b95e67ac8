"""Is the judge worth optimising against, on this data? The configured judge scores every labelled case (cases.py)
through the usual scorer and cache, and the check reports per metric: mean score per class, ROC AUC, accuracy at the
judge's cut (cut.py), unscored and empty-judgement rates per class, agreement between two sampled judge seeds, and
seconds per case. A judge that cannot separate the classes (AUC < 0.8) or leaves one class unscored more often than
the other is named before anyone optimises against it.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tuner.data import Question
from tuner.evaluation.judge.agreement import auc, auc_interval, balanced_accuracy, best_cut, cross_validated
from tuner.evaluation.judge.cases import Case, quick_cases
from tuner.evaluation.judge.cut import MIDDLE, Cut, judge_cut, setting_name
from tuner.files import write_json
from tuner.metrics import JUDGED_METRICS, REGISTRY

if TYPE_CHECKING:  # the scorer imports RAGAS: reports read saved checks without it
    from tuner.evaluation.ragas_judge import Outcome, RagasScorer

log = logging.getLogger(__name__)

CHECK_FILE = "judge_check.json"



#: below this ROC AUC the judge is said not to separate supported from unsupported answers
MIN_AUC = 0.8



#: unscored shares of the two classes further apart than this bias every mean (one class drops out more)
MAX_UNSCORED_GAP = 0.2



@dataclass(frozen=True)
class CaseScore:
    case: Case
    value: float | None
    failure: str | None
    seconds: float
    paid_calls: int
    cached_calls: int
    #: the scores under two sampled judge seeds (agreement), when asked for
    samples: tuple[float | None, ...] = ()
    #: what the case's judge calls took when they were paid, cached ones included (its seconds on a cold cache);
    #: None when a cached call's time is unknown
    cold_seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self.case), "supported": self.case.supported, "value": self.value,
                "failure": self.failure, "seconds": round(self.seconds, 3), "paid_calls": self.paid_calls,
                "cached_calls": self.cached_calls, "samples": list(self.samples),
                "cold_seconds": None if self.cold_seconds is None else round(self.cold_seconds, 3)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CaseScore:
        case = Case(data["metric"], data["question_id"], data["kind"], data["question"], data["answer"],
                    tuple(data["contexts"]), data.get("reference"))
        return cls(case, data.get("value"), data.get("failure"), data.get("seconds", 0.0),
                   data.get("paid_calls", 0), data.get("cached_calls", 0), tuple(data.get("samples", [])),
                   data.get("cold_seconds"))



def score_cases(scorer: RagasScorer, meter, cases: Sequence[Case], agreement: int = 0,
                on_progress: Callable[[int, Case], None] | None = None) -> list[CaseScore]:
    """Each case judged as a study would (greedy); the first `agreement` cases of each metric also under two
    sampled judge seeds."""
    results, sampled = [], {m: 0 for m in JUDGED_METRICS}
    for index, case in enumerate(cases):
        if on_progress:
            on_progress(index, case)
        started = time.perf_counter()
        with meter.stage(case.key, "judge_check") as cost:
            outcome = _score(scorer, case)
        seconds = time.perf_counter() - started
        paid, cached = cost.llm_calls, cost.cache_hits
        cold = None if cost.unmetered_hits else seconds + cost.saved_seconds
        samples: tuple[float | None, ...] = ()
        if sampled[case.metric] < agreement:
            sampled[case.metric] += 1
            samples = tuple(_score(scorer, case, sample_round).value for sample_round in (1, 2))
        results.append(CaseScore(case, outcome.value, outcome.failure, seconds, paid, cached, samples, cold))
    return results



def _score(scorer: RagasScorer, case: Case, sample_round: int = 0) -> Outcome:
    scorer.judge.sample_round = sample_round
    try:
        return scorer.score(case.metric, case.question, case.answer, list(case.contexts), case.reference)
    finally:
        scorer.judge.sample_round = 0



@dataclass(frozen=True)
class ClassStats:
    cases: int
    mean: float | None
    unscored: float  # share left without a score (NaN, unparsable, refusal, ...)
    empty: float  # share the judge extracted nothing from, scored 0 by the empty-judgement rule

    @classmethod
    def of(cls, scored: Sequence[CaseScore]) -> ClassStats:
        values = [s.value for s in scored if s.value is not None]
        n = len(scored)
        return cls(n, sum(values) / len(values) if values else None,
                   sum(s.value is None for s in scored) / n if n else 0.0,
                   sum(s.failure == "empty" for s in scored) / n if n else 0.0)



@dataclass(frozen=True)
class MetricCheck:
    metric: str
    supported: ClassStats
    unsupported: ClassStats
    auc: float | None
    #: share of all cases on the right side of the cut (`read_at`; an unscored case counts as wrong)
    accuracy: float
    #: share of the doubly sampled cases whose two sampled verdicts fall on the same side of 0.5
    agreement: float | None
    agreement_cases: int
    #: mean seconds of a case on a cold cache (a cached call counts at what it took when paid); None when unknown
    seconds_per_case: float | None
    by_kind: Mapping[str, float | None] = field(default_factory=dict)
    #: the AUC's 95 % bootstrap interval
    auc_interval: tuple[float, float] | None = None
    #: the cut with the best balanced accuracy on these cases, and the balanced accuracy of a cut chosen without
    #: the cases it classifies (cross-validated), beside the one at the judge's cut
    cut: float | None = None
    balanced_accuracy: float | None = None
    balanced_accuracy_at_cut: float | None = None
    #: the judge's cut, where `accuracy` and `balanced_accuracy_at_cut` read a score as supported
    read_at: float = MIDDLE

    @classmethod
    def of(cls, metric: str, scored: Sequence[CaseScore], cut: float = MIDDLE) -> MetricCheck:
        mine = [s for s in scored if s.case.metric == metric]
        pos = [s for s in mine if s.case.supported]
        neg = [s for s in mine if not s.case.supported]
        right = sum(s.value is not None and (s.value >= cut) == s.case.supported for s in mine)
        pairs = [s.samples for s in mine if len(s.samples) == 2 and None not in s.samples]
        cold = [s.cold_seconds for s in mine if s.cold_seconds is not None] or \
            [s.seconds for s in mine if s.paid_calls and not s.cached_calls]  # a check saved before cold_seconds
        kinds = {}
        for kind in REGISTRY[metric].check_kinds:
            values = [s.value for s in mine if s.case.kind == kind and s.value is not None]
            if any(s.case.kind == kind for s in mine):
                kinds[kind] = sum(values) / len(values) if values else None
        scores = ([s.value for s in pos if s.value is not None], [s.value for s in neg if s.value is not None])
        verdicts = [(s.value, s.case.supported) for s in mine]
        return cls(metric, ClassStats.of(pos), ClassStats.of(neg), auc(*scores),
                   right / len(mine) if mine else 0.0,
                   sum((a >= MIDDLE) == (b >= MIDDLE) for a, b in pairs) / len(pairs) if pairs else None,
                   sum(len(s.samples) == 2 for s in mine),
                   sum(cold) / len(cold) if cold else None, kinds, auc_interval(*scores), best_cut(verdicts),
                   cross_validated(verdicts), balanced_accuracy(verdicts, cut), cut)

    @property
    def flip_rate(self) -> float | None:
        """Share of the doubly sampled cases whose verdict changes side of 0.5 under another seed."""
        return None if self.agreement is None else 1 - self.agreement

    @property
    def problems(self) -> list[str]:
        """What makes this judge unsafe to optimise against on this data, one sentence each."""
        out = []
        if self.auc is None:
            out.append(f"{self.metric}: a class has no scored case, so the judge's separation cannot be told")
        elif self.auc < MIN_AUC:
            out.append(f"{self.metric}: the judge barely separates supported from unsupported answers on this data "
                       f"(AUC {self.auc:.2f} < {MIN_AUC})")
        gap = self.unsupported.unscored - self.supported.unscored
        if abs(gap) > MAX_UNSCORED_GAP:
            worse = "unsupported" if gap > 0 else "supported"
            out.append(f"{self.metric}: {worse} cases go unscored more often ({self.supported.unscored:.0%} of "
                       f"supported, {self.unsupported.unscored:.0%} of unsupported), so means leave them out "
                       f"unevenly")
        return out

    def to_json(self) -> dict[str, Any]:
        return asdict(self)



#: the faithfulness verdict settings `tuner judge check --settings` compares: RAGAS's own first (each names how it
#: reads the passages: a project's own default may be another)
VERDICT_SETTINGS: tuple[Mapping[str, str], ...] = tuple({"verdict_contexts": "joined", **setting} for setting in (
    {"verdicts": "sampled", "statements": "judge"},
    {"verdicts": "graded", "statements": "judge"},
    {"verdicts": "graded", "statements": "sentences"},
    {"verdicts": "graded", "statements": "sentences", "verdict_contexts": "numbered"},
    {"verdicts": "graded", "statements": "sentences", "verdict_contexts": "each"},
    {"verdicts": "graded", "statements": "sentences", "verdict_prompt": "nli"},
    {"verdicts": "graded", "statements": "sentences", "verdict_contexts": "each", "verdict_prompt": "nli"},
    {"verdicts": "graded", "statements": "sentences", "verdict_contexts": "chunks"},
))


#: AUCs closer than this are one: the faster setting is the one to use
SAME_AUC = 0.02


@dataclass(frozen=True)
class JudgeCheck:
    judge: str
    dataset: str
    empty_judgement: str
    metrics: Mapping[str, MetricCheck]
    cases: tuple[CaseScore, ...]
    #: cases left out because their prompts would not fit the judge's context window (`window` tokens)
    too_long: tuple[str, ...] = ()
    window: int | None = None
    #: the faithfulness verdict setting judged with (`setting_name`)
    setting: str = "sampled"
    #: where a graded score reads as supported, and why there (cut.py)
    cut: Cut = Cut(MIDDLE, "the middle")

    @classmethod
    def of(cls, judge: str, dataset: str, empty_judgement: str, scored: Sequence[CaseScore],
           too_long: Sequence[str] = (), window: int | None = None, setting: str = "sampled",
           cut: Cut = Cut(MIDDLE, "the middle")) -> JudgeCheck:
        metrics = list(dict.fromkeys(s.case.metric for s in scored))
        return cls(judge, dataset, empty_judgement, {m: MetricCheck.of(m, scored, cut.value) for m in metrics},
                   tuple(scored), tuple(too_long), window, setting, cut)

    @property
    def problems(self) -> list[str]:
        left_out = [f"{len(self.too_long)} case(s) left out: their judge prompts would not fit the judge's "
                    f"{self.window}-token context window (raise judge n_ctx), e.g. {self.too_long[0]}"] \
            if self.too_long else []
        return [p for m in self.metrics.values() for p in m.problems] + left_out

    @property
    def questions(self) -> list[str]:
        return list(dict.fromkeys(s.case.question_id for s in self.cases))

    def to_json(self) -> dict[str, Any]:
        return {"judge": self.judge, "dataset": self.dataset, "empty_judgement": self.empty_judgement,
                "setting": self.setting, "cut": self.cut.value, "cut_source": self.cut.source,
                "questions": self.questions, "problems": self.problems, "too_long": list(self.too_long),
                "window": self.window,
                "metrics": {m: c.to_json() for m, c in self.metrics.items()},
                "cases": [s.to_json() for s in self.cases]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JudgeCheck:
        scored = [CaseScore.from_json(c) for c in data.get("cases", [])]
        return cls.of(data["judge"], data.get("dataset", ""), data.get("empty_judgement", "unsupported"), scored,
                      data.get("too_long", ()), data.get("window"), data.get("setting", "sampled"),
                      Cut(data.get("cut", MIDDLE), data.get("cut_source", "the middle")))



def choose(checks: Sequence[JudgeCheck], metric: str = "faithfulness") -> tuple[JudgeCheck, str] | None:
    """The check whose judge and setting to use for `metric`: the best AUC, and of AUCs within SAME_AUC of it the
    fastest; with the sentence that says why. None when fewer than two checks have an AUC and a time to compare."""
    known = [c for c in checks if metric in c.metrics and c.metrics[metric].auc is not None
             and c.metrics[metric].seconds_per_case is not None]
    if len(known) < 2:
        return None
    best_auc = max(c.metrics[metric].auc for c in known)
    chosen = min((c for c in known if c.metrics[metric].auc >= best_auc - SAME_AUC),
                 key=lambda c: c.metrics[metric].seconds_per_case)
    mine = chosen.metrics[metric]
    others = "; ".join(f"{c.setting} ({c.judge}): AUC {c.metrics[metric].auc:.2f}, "
                       f"{c.metrics[metric].seconds_per_case:.1f} s" for c in known if c is not chosen)
    return chosen, (f"use {metric} {chosen.setting} with {chosen.judge}: AUC {mine.auc:.2f} at "
                    f"{mine.seconds_per_case:.1f} s a case (the best AUC, or within {SAME_AUC} of it and the "
                    f"fastest); {others}")



def tokens_needed(judge, max_tokens: int, case: Case) -> int:
    """What the case's largest judge prompt and its reply take of the judge's context window, at most."""
    texts = [case.question, case.answer, *case.contexts, case.reference or ""]
    return REGISTRY[case.metric].template_tokens + judge.count_tokens("\n".join(texts)) + max_tokens



def check_judge(runner, cases: Sequence[Case], agreement: int = 0,
                on_progress: Callable[[int, Case], None] | None = None) -> JudgeCheck:
    """`cases` scored by `runner`'s judge. Every case is measured against the judge's context window before the
    first call: one that cannot fit is left out and named, not met minutes in (a case that still overflows is
    that case's failure, and the others are kept)."""
    judge, budget = runner.judge, runner.workspace.config.judge_tokens
    window = judge.context_window
    too_long = tuple(case.key for case in cases if window and tokens_needed(judge, budget, case) > window)
    kept = [case for case in cases if case.key not in too_long]
    scored = score_cases(runner.scorer, runner.meter, kept, agreement, on_progress)
    evaluation = runner.workspace.config.evaluation
    setting = setting_name(evaluation, judge.why_read_off_text)
    return JudgeCheck.of(judge.name, runner.workspace.dataset.name, evaluation.empty_judgement, scored, too_long,
                         window, setting, judge_cut(evaluation, judge.name, setting))



def checks_json(checks: Sequence[JudgeCheck]) -> dict[str, Any]:
    return {"judges": [c.to_json() for c in checks]}



def parse_checks(data: Any) -> list[JudgeCheck]:
    """The checks in a saved document; [] when there is none or it cannot be read (a report never fails on it)."""
    try:
        return [JudgeCheck.from_json(c) for c in data["judges"]]
    except (ValueError, KeyError, TypeError):
        return []



def save_checks(checks: Sequence[JudgeCheck], out: Path | None = None, study=None,
                against_labels: bool = False) -> str:
    """Keep the checks, and say where: a study's own check (no --out, not against labels) is kept with the study
    (`study`: its StudyFolder), where its report shows it; any other goes to a file, never replacing the study's
    check on its data."""
    if out is None and study is not None and not against_labels:
        study.write_doc(CHECK_FILE, checks_json(checks))
        return f"saved with study {study.name}"
    out = out or Path("reports") / ("judge-check-labels.json" if against_labels else "judge-check.json")
    write_json(out, checks_json(checks))
    return f"written to {out}"



def load_checks(path: Path) -> list[JudgeCheck]:
    try:
        return parse_checks(json.loads(path.read_text()))
    except (OSError, ValueError):
        return []



def quick_check(runner, questions: Sequence[Question], metrics: Sequence[str]) -> JudgeCheck:
    """The check before a study's first trial."""
    return check_judge(runner, quick_cases(runner, questions, metrics))
