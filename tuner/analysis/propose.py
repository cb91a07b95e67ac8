"""Next experiments: concrete changes to the search space, each with its reason and the figure behind it.

Rules, from the study's own evidence:
* extend  — the best value sits on the edge of its range (and the knob can go further);
* fix     — a knob with negligible importance and marginal effect is fixed at the best trial's value;
* narrow  — an important numeric knob is searched around the best value;
* add     — knobs the bottleneck calls for: reranker + dynamic K when selection loses points, more top_k when
            gold documents sit just below the cut, hops when multi-hop questions miss a document, the answer
            program when generation loses points;
* add     — index knobs (chunk size, chunker, stemmer…) when questions find no gold document among the candidates:
            each value is an index built once;
* advice  — what no trial can change (a stronger judge, prompt compilation, another embedder once every index
            knob is searched) is listed, never put into the space.

`next_space` applies the in-space proposals to the study's space; None means nothing is left to search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from annotated_types import Ge, Gt, Le, Lt
from pydantic import ValidationError

from tuner.analysis.importance import MIN_TRIALS, KnobEffect
from tuner.analysis.stages import StageShares
from tuner.config import KNOBS, PipelineConfig, ProjectConfig
from tuner.errors import ConfigError
from tuner.study.results import StudyView
from tuner.study.space import Param, SearchSpace

#: a stage losing at least this share of the target's points gets proposals of its own
STAGE_SHARE = 0.25
#: below this importance (with no visible marginal effect) a knob is not worth a trial's budget
NEGLIGIBLE = 0.05
#: from this importance on, a numeric knob is searched more finely around its best value
IMPORTANT = 0.2

RERANKING = {
    "reranker": Param(type="categorical", choices=["none", "embedding", "llm"]),
    "confidence_threshold": Param(type="float", low=0.3, high=0.9, step=0.05,
                                  when={"reranker": ["embedding", "llm"]}),
    "min_docs": Param(type="int", low=1, high=3, when={"reranker": ["embedding", "llm"]}),
    "max_docs": Param(type="int", low=3, high=8, when={"reranker": ["embedding", "llm"]}),
}


@dataclass(frozen=True)
class Proposal:
    kind: str  # extend | fix | narrow | add | advice
    knob: str | None
    change: str
    reason: str
    trigger: str  # the figure that triggered it
    priority: float  # higher first: the share of lost points or the importance behind it
    param: Param | None = None  # the knob's new definition (None: removed / advice only)

    @property
    def in_space(self) -> bool:
        return self.kind != "advice"


def index_knobs(project: ProjectConfig) -> dict[str, Param]:
    """The index knobs a next round may add, over their `explore` values (every value a new index to build) and
    the project's own, each value one the project can index with (the config's own check refuses the rest: a chunk
    no longer than its overlap, stemming on Weaviate); a knob left with one value is not worth adding."""
    own = project.index_settings()
    knobs = {}
    for name, knob in KNOBS.items():
        if not (knob.index and knob.explore):
            continue
        values = dict.fromkeys([*knob.explore, getattr(own, name)])
        choices = [value for value in values if _indexable(project, name, value)]
        if all(isinstance(value, int | float) for value in choices):
            choices.sort()  # numbers in order, the project's own among them
        if len(choices) > 1:
            knobs[name] = Param(type="categorical", choices=choices)
    return knobs


def _indexable(project: ProjectConfig, name: str, value: Any) -> bool:
    try:
        project.index_settings(PipelineConfig(**{name: value}))
    except (ConfigError, ValidationError):
        return False
    return True


def propose(view: StudyView, effects: list[KnobEffect], shares: StageShares | None) -> list[Proposal]:
    """Ranked proposals for the next round (see the module docstring)."""
    space, best = view.space, view.best
    if space is None or best is None:
        return []
    proposals: dict[str, Proposal] = {}  # one per knob: the strongest reason wins

    def offer(p: Proposal) -> None:
        key = p.knob if p.in_space else f"advice:{p.change}"
        if key not in proposals or proposals[key].priority < p.priority:
            proposals[key] = p

    by_knob = {e.knob: e for e in effects}
    for name, param in space.params.items():
        effect = by_knob.get(name)
        value = best.params.get(name)
        importance = effect.importance if effect else None
        if param.numeric and value is not None:
            extended = _extend(name, param, value, own=not space.pipeline_knobs)
            if extended is not None:
                offer(Proposal("extend", name, f"{name}: {param.describe()} → {extended.describe()}",
                               f"the best {name} sits on the edge of its range: the optimum may lie beyond",
                               f"best {name} = {value:g}, range {param.describe()}", 0.5 + (importance or 0),
                               extended))
                continue
        if effect is None or effect.trials < MIN_TRIALS:
            continue
        if importance is not None and importance < NEGLIGIBLE and effect.spread < 0.02 and value is not None:
            offer(Proposal("fix", name, f"{name}: fixed at {_show(value)}",
                           f"{name} barely moves the target: fixing it spends the next trials elsewhere",
                           f"importance {importance:.2f}, marginal effect {effect.spread:.3f} over "
                           f"{effect.trials} trials", 0.3))
        elif param.numeric and importance is not None and importance >= IMPORTANT and value is not None:
            narrowed = _narrow(param, value)
            if narrowed is not None:
                offer(Proposal("narrow", name, f"{name}: {param.describe()} → {narrowed.describe()}",
                               f"{name} matters: search it more finely around the best value",
                               f"importance {importance:.2f}, best {name} = {value:g}", 0.3 + importance, narrowed))

    if shares is not None and shares.total > 0:
        for proposal in _diagnosis(view, shares):
            offer(proposal)
    return _runnable(view, sorted(proposals.values(), key=lambda p: (-p.priority, p.kind, p.knob or "")))


#: what each stage's lost points call for. Knob-specific by nature: which knob cures which stage is knowledge of
#: the pipeline (a reranker and dynamic K for selection; top_k, hops, alpha and another index for retrieval; the
#: answer program for generation), not a fact of any one knob. Range edges, negligible knobs and the values of the
#: index knobs come from each knob's own facts instead (`propose`, `index_knobs`).
def _diagnosis(view: StudyView, shares: StageShares) -> list[Proposal]:
    out = []
    for stage, proposals_for in STAGE_PROPOSALS.items():
        if (share := shares.share(stage)) >= STAGE_SHARE:
            out += proposals_for(view, shares, share) if view.space.pipeline_knobs else [_own_stage(stage, share,
                                                                                                     shares)]
    return out


def _own_stage(stage: str, share: float, shares: StageShares) -> Proposal:
    """The user's own system: tuner knows which of its stages loses the points, not which of its knobs acts there."""
    return Proposal("advice", None, f"look at your system's {stage}: declare a knob of it under system.knobs and "
                    f"search it", f"{stage}, more than any other stage, limits the target",
                    f"{stage} loses {share:.0%} of the lost {shares.target} points", share)


def _best_pipeline(view: StudyView) -> PipelineConfig:
    return PipelineConfig.from_record(view.best.pipeline) or PipelineConfig()


def _selection(view: StudyView, shares: StageShares, selection: float) -> list[Proposal]:
    params = view.space.params
    out: list[Proposal] = []
    trigger = f"selection loses {selection:.0%} of the lost {shares.target} points " \
              f"({len(shares.questions('selection'))} questions)"
    reranker = params.get("reranker")
    if reranker is None or not {"embedding", "llm"} & set(reranker.choices or []):
        for name, param in RERANKING.items():
            out.append(Proposal("add", name, f"{name}: {param.describe()}",
                                "gold contexts reach the pool but are not selected: let a reranker's "
                                "confidence decide how many chunks pass", trigger, selection, param))
    elif "min_docs" in params and (params["min_docs"].high or 0) < KNOBS["min_docs"].most:
        widened = params["min_docs"].model_copy(update={"high": float(int(params["min_docs"].high) + 2)})
        out.append(Proposal("extend", "min_docs", f"min_docs: {params['min_docs'].describe()} → "
                            f"{widened.describe()}", "dynamic K drops gold contexts: keep more chunks",
                            trigger, selection, widened))
    return out


def _retrieval(view: StudyView, shares: StageShares, retrieval: float) -> list[Proposal]:
    params = view.space.params
    best = view.best
    pipeline = _best_pipeline(view)
    out: list[Proposal] = []
    lost = shares.questions("retrieval")
    trigger = f"retrieval loses {retrieval:.0%} of the lost {shares.target} points ({len(lost)} questions)"
    records = {q.id: q for q in best.result.questions} if best.result else {}
    ranks = sorted(r for q in lost if q.question_id in records
                   and (r := records[q.question_id].retrieval.candidate_rank) is not None)
    near = [r for r in ranks if pipeline.top_k < r <= 3 * pipeline.top_k]
    top_k = params.get("top_k")
    if near and (top_k is None or (top_k.high or 0) < max(near)):
        high = min(100, max(near) + 1)
        low = int(top_k.low) if top_k else pipeline.top_k
        param = Param(type="int", low=low, high=high)
        out.append(Proposal("add" if top_k is None else "extend", "top_k",
                            f"top_k: {top_k.describe() if top_k else pipeline.top_k} → {param.describe()}",
                            "gold documents sit just below the cut", f"{trigger}; gold at candidate ranks "
                            f"{', '.join(map(str, near))} with top_k {pipeline.top_k}", retrieval, param))
    multi = [q for q in lost if q.question_id in records and len(records[q.question_id].retrieval.gold_ids) > 1
             and records[q.question_id].retrieval.selected]
    hops = params.get("hops")
    if multi and (hops is None or (hops.high or 0) < 2):
        param = Param(type="int", low=0, high=2)
        out.append(Proposal("add" if hops is None else "extend", "hops", f"hops: {param.describe()}",
                            "multi-hop questions find one gold document but miss the other: graph "
                            "expansion follows shared entities to it", f"{trigger}; {len(multi)} multi-hop "
                            f"question(s) with a gold document selected and another missed", retrieval, param))
    if "alpha" not in params:
        param = Param(type="float", low=0.0, high=1.0, step=0.1)
        out.append(Proposal("add", "alpha", "alpha: 0 … 1 step 0.1", "retrieval misses gold documents: "
                            "search the BM25/vector balance", trigger, retrieval * 0.8, param))
    unreached = [q for q in lost if q.question_id in records
                 and records[q.question_id].retrieval.candidate_rank is None]
    if unreached:
        trigger = (f"{len(unreached)} question(s) with no gold document among the "
                   f"{view.project.backend.candidates} candidates per side")
        reason = ("for some questions no gold document is among the candidates at all: only another index "
                  "reaches them")
        indexing = {name: param for name, param in index_knobs(view.project).items() if name not in params}
        for name, param in indexing.items():
            out.append(Proposal("add", name, f"{name}: {param.describe()}", reason, trigger, retrieval * 0.7,
                                param))
        if not indexing:  # every index knob is searched already
            out.append(Proposal("advice", None, "re-index with another embedder (embedder.model)", reason,
                                trigger, retrieval * 0.7))
    return out


def _generation(view: StudyView, shares: StageShares, generation: float) -> list[Proposal]:
    params = view.space.params
    pipeline = _best_pipeline(view)
    out: list[Proposal] = []
    trigger = f"generation loses {generation:.0%} of the lost {shares.target} points " \
              f"({len(shares.questions('generation'))} questions with the gold context selected)"
    program = params.get("program")
    if program is None or "strict" not in (program.choices or []):
        choices = list(dict.fromkeys([*(program.choices if program else [pipeline.program]), "default",
                                      "strict"]))
        param = Param(type="categorical", choices=choices)
        out.append(Proposal("add" if program is None else "extend", "program",
                            f"program: {param.describe()}", "the contexts hold the answer but the answer "
                            "is not faithful to them: try a stricter answer program", trigger, generation,
                            param))
    out.append(Proposal("advice", None, f"compile the answer program for {shares.target}: `tuner compile "
                        f"--study {view.name}` (it trains on the search questions only); the next "
                        "round or study offers it as a program choice", "generation, not retrieval, limits the "
                        "target", trigger, generation * 0.9))
    return out


def _judge(view: StudyView, shares: StageShares, judge: float) -> list[Proposal]:
    out: list[Proposal] = []
    out.append(Proposal("advice", None, "check the judge: `tuner analyze --noise 3`, or a stronger judge model",
                        "unscored or unstable verdicts decide the target, not the pipeline",
                        f"the judge accounts for {judge:.0%} of the lost {shares.target} points", judge))
    return out


def _unknown(view: StudyView, shares: StageShares, unknown: float) -> list[Proposal]:
    best = view.best
    out: list[Proposal] = []
    untraced = f"{unknown:.0%} of the lost points are untraceable"
    if best.result and any("context_recall" in q.scores for q in best.result.questions):
        out.append(Proposal("advice", None, "a stronger judge, or gold document ids", "context recall was "
                            "scored but the judge left it unscored where points were lost", untraced,
                            unknown * 0.5))
    else:
        out.append(Proposal("advice", None, "score context_recall too (--constraint context_recall>=0) or "
                            "add gold document ids", "without them a lost point cannot be traced to "
                            "retrieval or generation", untraced, unknown * 0.5))
    return out


STAGE_PROPOSALS = {"selection": _selection, "retrieval": _retrieval, "generation": _generation, "judge": _judge,
                   "unknown": _unknown}


def next_space(space: SearchSpace, proposals: list[Proposal], best_params: dict[str, Any],
               round_name: str = "") -> SearchSpace | None:
    """The space with the in-space proposals applied; None when that leaves nothing to search or changes
    nothing. A fixed knob stays in the space as its one best value under its own `when:` (where its condition
    fails it takes the base's value, as a searched knob does: round 1's best confidence threshold must not follow
    a trial that draws no reranker); a knob whose condition no value left can meet leaves the space."""
    changes = [p for p in proposals if p.in_space]
    if not changes:
        return None
    proposed = _space(space, changes, best_params)
    if all(p.single for p in proposed.params.values()):
        return None
    if {n: p.model_dump() for n, p in proposed.params.items()} == {n: p.model_dump() for n, p in space.params.items()}:
        return None
    description = f"{round_name}: proposed by tuner's analysis; " if round_name else "proposed by tuner's analysis; "
    return proposed.model_copy(update={"description": description + "; ".join(p.change for p in changes)})


def _runnable(view: StudyView, proposals: list[Proposal]) -> list[Proposal]:
    """The proposals with those that would let a trial draw an invalid pipeline (min_docs above max_docs, autocut
    beside a confidence threshold) turned into advice, the least important first: the space the tool writes
    runs every draw from the study's base pipeline."""
    proposals = list(proposals)
    checked = view.space.pipeline_knobs  # a system's knobs: every draw its own to check
    while True:
        changes = [p for p in proposals if p.in_space]
        space = _space(view.space, changes, view.best.params) if changes else None
        clash = space.first_clash(view.project.pipeline.tuners(), view.project.index_settings) \
            if space is not None and checked else None
        involved = [p for p in changes if clash is not None and p.knob in clash.knobs]
        if not involved:
            break
        dropped = min(involved, key=lambda p: p.priority)
        proposals[proposals.index(dropped)] = Proposal(
            "advice", None, f"{dropped.change} — left out of the next space", f"a trial could then draw {clash.draw}, "
            f"which no pipeline takes ({clash.reason})", dropped.trigger, dropped.priority)
    # a change to a knob whose `when:` another change made impossible (min_docs once reranker is fixed at none)
    return [p if space is None or not p.in_space or p.knob in space.params else Proposal(
        "advice", None, f"{p.change} — moot", f"{p.knob} is no longer searched: its `when:` cannot hold in the next "
        f"space", p.trigger, p.priority) for p in proposals]


def _space(space: SearchSpace, changes: list[Proposal], best_params: dict[str, Any]) -> SearchSpace:
    params = _apply(space, changes, best_params)
    return space.derived({"params": {n: p.model_dump(exclude_defaults=True) for n, p in params.items()}})


def _apply(space: SearchSpace, changes: list[Proposal], best_params: dict[str, Any]) -> dict[str, Param]:
    """The space's parameters with `changes` applied, and every `when:` cut to the values its knob can still take
    (a knob none of whose allowed values is left goes, and so on down its dependents)."""
    params = dict(space.params)
    for p in changes:
        old = params.get(p.knob)
        if p.kind == "fix":
            params[p.knob] = Param(type="categorical", choices=[best_params[p.knob]], when=old.when)
        elif p.param is not None:
            params[p.knob] = p.param.model_copy(update={"when": old.when}) if old is not None else p.param
    kept: dict[str, Param] = {}
    for name, param in _conditions_first(params).items():  # a condition names only knobs above it
        when = {}
        for other, allowed in param.when.items():
            reachable = [v for v in (allowed if isinstance(allowed, list) else [allowed])
                         if other in kept and kept[other].takes(v)]
            if not reachable:
                break
            when[other] = reachable
        else:
            kept[name] = param.model_copy(update={"when": when})
    return kept


def _conditions_first(params: dict[str, Param]) -> dict[str, Param]:
    """The parameters in their order, except that a knob follows every knob its `when:` names (added knobs come
    in priority order: a reranker's threshold may come before the reranker)."""
    ordered: dict[str, Param] = {}

    def place(name: str) -> None:
        if name not in ordered:
            for other in params[name].when:
                if other in params:
                    place(other)
            ordered[name] = params[name]

    for name in params:
        place(name)
    return ordered


#: how far inside an exclusive limit (gt/lt) a range may end
EXCLUSIVE = 1e-9


def _bounds(name: str, own: bool = False) -> tuple[float, float]:
    """The knob's hard limits from the pipeline config (ge/gt/le/lt), or its `Knob.most`; a knob of the user's own
    system (`own`) declares none."""
    most = KNOBS[name].most if name in KNOBS and not own else None
    low, high = float("-inf"), float("inf") if most is None else float(most)
    for rule in [] if own else PipelineConfig.model_fields[name].metadata:
        # an exclusive limit is not a value the knob takes (hop_decay > 0): the range stops just inside it, and
        # the step grid then at the first step past it
        if isinstance(rule, Ge):
            low = float(rule.ge)
        if isinstance(rule, Gt):
            low = float(rule.gt) + EXCLUSIVE
        if isinstance(rule, Le):
            high = float(rule.le)
        if isinstance(rule, Lt):
            high = float(rule.lt) - EXCLUSIVE
    return low, high


def _extend(name: str, param: Param, value: float, own: bool = False) -> Param | None:
    """Best value on an edge the knob could go beyond: recentre the range on it (same width, same step),
    clipped to the knob's hard limits."""
    hard_low, hard_high = _bounds(name, own)
    on_high = _close(value, param.high) and param.high < hard_high
    on_low = _close(value, param.low) and param.low > hard_low
    if not (on_high or on_low) or param.log:
        return None
    step = param.step or (1 if param.type == "int" else 0)
    half = max(step, _snap((param.high - param.low) / 2, step)) if step else (param.high - param.low) / 2
    low, high = _on_grid(value, max(hard_low, value - half), min(hard_high, value + half), step)
    if param.type == "int":
        low, high = float(int(round(low))), float(int(round(high)))
    if (low, high) == (param.low, param.high):
        return None  # a hard limit leaves no room on the step grid
    return param.model_copy(update={"low": round(low, 10), "high": round(high, 10)})


def _narrow(param: Param, value: float) -> Param | None:
    """Best value ± a quarter of the width, inside the old range."""
    width = param.high - param.low
    step = param.step or (1 if param.type == "int" else 0)
    half = max(step * 2, _snap(width / 4, step) if step else width / 4)
    low, high = _on_grid(value, max(param.low, value - half), min(param.high, value + half), step)
    if param.type == "int":
        low, high = float(int(round(low))), float(int(round(high)))
    if high - low >= width or high <= low:
        return None
    return param.model_copy(update={"low": round(low, 10), "high": round(high, 10)})


def _on_grid(value: float, low: float, high: float, step: float) -> tuple[float, float]:
    """[low, high] shrunk to the step grid through `value`: a range clipped at a limit must still end on a step
    (a space whose high a step from low never reaches is invalid)."""
    if not step:
        return low, high
    return (value - math.floor((value - low) / step + 1e-9) * step,
            value + math.floor((high - value) / step + 1e-9) * step)


def _snap(amount: float, step: float) -> float:
    return round(amount / step) * step if step else amount


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
