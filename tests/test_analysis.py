"""Analysis on constructed data: paired statistics, stage attribution, proposals and the next space, records."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from tests.helpers import question
from tuner.analysis.importance import KnobEffect
from tuner.analysis.propose import next_space, propose
from tuner.analysis.stages import attribute
from tuner.analysis.stats import compare, paired_bootstrap_ci, wilcoxon_p
from tuner.config import PipelineConfig, ProjectConfig
from tuner.cost import Cost
from tuner.errors import ConfigError, DataError
from tuner.evaluation.records import SCHEMA_VERSION, EvalResult, TrialFile
from tuner.study.space import SearchSpace, load_space

DIFFS = [0.5, 0.0, 0.25, -0.1, 0.4, 0.3, 0.0, 0.6, 0.2, -0.2, 0.35, 0.1]


def test_bootstrap_ci_matches_scipy_on_fixed_data():
    from scipy.stats import bootstrap

    low, high = paired_bootstrap_ci(DIFFS, resamples=20_000, seed=1)
    reference = bootstrap((np.array(DIFFS),), np.mean, n_resamples=20_000, method="percentile",
                          random_state=7).confidence_interval
    assert low == pytest.approx(reference.low, abs=0.01) and high == pytest.approx(reference.high, abs=0.01)
    assert low < np.mean(DIFFS) < high
    assert paired_bootstrap_ci(DIFFS, seed=3) == paired_bootstrap_ci(DIFFS, seed=3)  # seeded: reproducible


def test_wilcoxon_and_the_verdict_sentence():
    from scipy.stats import wilcoxon

    assert wilcoxon_p(DIFFS) == pytest.approx(wilcoxon(DIFFS).pvalue)
    assert wilcoxon_p([0.0, 0.0]) == 1.0
    reference = {f"q{i}": 0.5 for i in range(len(DIFFS))}
    candidate = {f"q{i}": 0.5 + d for i, d in enumerate(DIFFS)}
    candidate["q99"] = 1.0  # scored only by the candidate: left out, counted
    reference["q98"] = candidate["q98"] = None  # scored by neither (no gold ids): not unpaired
    gain = compare("faithfulness", reference, candidate)
    assert gain.n == 12 and gain.unpaired == 1 and gain.mean_difference == pytest.approx(np.mean(DIFFS))
    assert gain.verdict == "better" and "distinguishable from zero" in gain.sentence()
    noise = compare("faithfulness", {"a": 0.5, "b": 0.5, "c": 0.5}, {"a": 0.7, "b": 0.3, "c": 0.6})
    assert noise.verdict == "undecided" and "could be luck" in noise.sentence()
    empty = compare("faithfulness", {"a": None}, {"a": 1.0})
    assert empty.verdict == "no data" and empty.ci is None


def test_stage_attribution_one_question_per_stage():
    questions = [
        question("ok", 1.0),
        question("retrieval", 0.0, gold=("d1", "d2"), pool=("d1",), selected=("d1",), rank=7),
        question("selection", 0.5, gold=("d1",), pool=("d1",), selected=("d9",)),
        question("generation", 0.25, refusal=True),
        question("judge", None, failure="unparsable"),
        question("unstable", 0.75),
        question("no-gold", 0.5, gold=(), pool=(), selected=(), rank=None),
        question("no-gold-recall", 0.5, gold=(), pool=(), selected=(), rank=None, recall=0.2),
    ]
    shares = attribute(questions, "faithfulness", judge_spread={"unstable": 1.0, "generation": 0.0})
    stages = {q.question_id: q.stage for q in shares.losses}
    assert stages == {"retrieval": "retrieval", "selection": "selection", "generation": "generation",
                      "judge": "judge", "unstable": "judge", "no-gold": "unknown", "no-gold-recall": "retrieval"}
    assert "ok" not in stages  # nothing lost
    # points: retrieval 1 + 0.5 (recall-based), selection 0.5, generation 0.75, judge 1 + 0.25, unknown 0.5
    assert shares.total == pytest.approx(4.5)
    assert shares.share("judge") == pytest.approx(1.25 / 4.5)
    assert shares.share("retrieval") == pytest.approx(1.5 / 4.5) and shares.limiting == "retrieval"
    assert "candidate rank 7" in next(q.why for q in shares.losses if q.question_id == "retrieval")
    retrieval_target = attribute(questions[1:3], "recall@5")
    assert {q.question_id: q.stage for q in retrieval_target.losses} == {"retrieval": "retrieval"}


SPACE = {"params": {
    "top_k": {"type": "int", "low": 2, "high": 10},
    "alpha": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.1},
    "hops": {"type": "int", "low": 0, "high": 2},
    "reranker": {"type": "categorical", "choices": ["none", "embedding"]},
    "confidence_threshold": {"type": "float", "low": 0.3, "high": 0.9, "step": 0.05,
                             "when": {"reranker": ["embedding"]}},
}}


#: what knobs outside a space, or whose `when:` fails, take (the project's pipeline)
BASE = PipelineConfig()


class View:
    """The parts of a StudyView that propose() reads."""

    def __init__(self, space, best_params, best_pipeline=None):
        from types import SimpleNamespace

        from tuner.config import ProjectConfig

        self.space = SearchSpace.model_validate(space)
        self.best = SimpleNamespace(params=best_params, pipeline=best_pipeline or {}, result=None, number=3)
        self.project = ProjectConfig()
        self.name = "s"


def effect(knob, importance, spread=0.0, trials=12):
    means = (("a", 0.5, 6), ("b", 0.5 + spread, 6))
    return KnobEffect(knob, "all trials", trials, importance, means, None)


def test_edge_extension_rule_and_a_valid_next_space(tmp_path):
    view = View(SPACE, {"top_k": 10, "alpha": 0.0, "hops": 1, "reranker": "none"})
    proposals = propose(view, [effect("top_k", 0.6, 0.2), effect("alpha", 0.3, 0.1), effect("hops", 0.2, 0.1),
                               effect("reranker", 0.1, 0.05)], None)
    extend = next(p for p in proposals if p.knob == "top_k")
    assert extend.kind == "extend" and (extend.param.low, extend.param.high) == (6, 14)  # recentred on 10
    assert "best top_k = 10" in extend.trigger
    assert not any(p.knob == "alpha" and p.kind == "extend" for p in proposals)  # 0 is alpha's hard limit
    space = next_space(view.space, proposals, view.best.params, "s")
    path = tmp_path / "next_space.yaml"
    path.write_text(yaml.safe_dump(space.model_dump(mode="json", exclude_defaults=True), sort_keys=False))
    loaded = load_space(path)  # what `tuner spaces show` and the next round read
    assert (loaded.params["top_k"].low, loaded.params["top_k"].high) == (6, 14)
    assert loaded.params["confidence_threshold"].when == {"reranker": ["embedding"]}
    # at the low edge of a range that can go lower: recentred, clipped at top_k's hard floor of 1
    low = propose(View(SPACE, {"top_k": 2, "alpha": 0.5, "hops": 1, "reranker": "none"}), [], None)
    assert [(p.param.low, p.param.high) for p in low if p.knob == "top_k"] == [(1, 6)]
    # a stepped range clipped at that floor stays on its step grid (quick.yaml's top_k: 2, 5)
    stepped = {**SPACE, "params": {**SPACE["params"], "top_k": {"type": "int", "low": 2, "high": 5, "step": 3}}}
    view = View(stepped, {"top_k": 2, "alpha": 0.5, "hops": 1, "reranker": "none"})
    proposals = propose(view, [effect("top_k", 0.6, 0.2)], None)
    assert not [p for p in proposals if p.knob == "top_k" and p.kind == "extend"]  # no room on the grid below 2
    unchanged = next_space(view.space, proposals, view.best.params, "s")
    assert unchanged is None or unchanged.params["top_k"] == view.space.params["top_k"]
    # an exclusive limit (hop_decay > 0) is never a range's end: the first step past it is
    decaying = {**SPACE, "params": {**SPACE["params"], "hop_decay": {"type": "float", "low": 0.2, "high": 0.8,
                                                                     "step": 0.1, "when": {"hops": [1, 2]}}}}
    view = View(decaying, {"top_k": 5, "alpha": 0.5, "hops": 1, "hop_decay": 0.2, "reranker": "none"})
    [extended] = [p for p in propose(view, [], None) if p.knob == "hop_decay"]
    assert extended.param.low == 0.1 and next_space(view.space, [extended], view.best.params) is not None


def test_negligible_knobs_are_fixed_with_their_dependents():
    view = View(SPACE, {"top_k": 5, "alpha": 0.5, "hops": 1, "reranker": "none"})
    effects = [effect("top_k", 0.5, 0.2), effect("alpha", 0.4, 0.1), effect("hops", 0.08, 0.05),
               effect("reranker", 0.01, 0.0)]
    proposals = propose(view, effects, None)
    assert [p.knob for p in proposals if p.kind == "fix"] == ["reranker"]
    narrowed = next(p for p in proposals if p.knob == "top_k")
    assert narrowed.kind == "narrow" and narrowed.param.low >= 2 and narrowed.param.high <= 10
    space = next_space(view.space, proposals, view.best.params)
    assert space.params["reranker"].choices == ["none"]  # fixed: one value, under its own `when:` if it had one
    assert "confidence_threshold" not in space.params  # its condition can no longer hold
    # too few trials: no importance-based proposal at all
    assert not [p for p in propose(view, [effect("reranker", 0.01, 0.0, trials=4)], None) if p.kind == "fix"]


def test_a_fixed_knob_keeps_its_condition_so_every_draw_of_the_next_space_runs():
    """The rounds run that blocked: round 1's best confidence threshold fixed for round 2, whose sampler then drew
    reranker none with autocut 2; the fixed threshold came along and no pipeline takes both."""
    space = {"params": {"reranker": {"type": "categorical", "choices": ["none", "embedding"]},
                        "autocut": {"type": "categorical", "choices": [None, 1, 2], "when": {"reranker": ["none"]}},
                        "confidence_threshold": {"type": "float", "low": 0.3, "high": 0.9, "step": 0.05,
                                                 "when": {"reranker": ["embedding"]}},
                        "top_k": {"type": "int", "low": 2, "high": 10}}}
    view = View(space, {"reranker": "embedding", "confidence_threshold": 0.65, "top_k": 5})
    proposals = propose(view, [effect("confidence_threshold", 0.01), effect("top_k", 0.5, 0.2),
                               effect("reranker", 0.3, 0.1)], None)
    assert [p.knob for p in proposals if p.kind == "fix"] == ["confidence_threshold"]
    proposed = next_space(view.space, proposals, view.best.params)
    fixed = proposed.params["confidence_threshold"]
    assert fixed.choices == [0.65] and fixed.when == {"reranker": ["embedding"]}
    assert proposed.first_clash(BASE) is None
    # the draw that failed: the fixed knob follows its condition and takes the base's (none) instead

    class Draw:  # an Optuna trial that draws what it is told
        def suggest_categorical(self, name, choices):
            return {"reranker": "none", "autocut": 2}.get(name, choices[0])

        def suggest_int(self, name, low, high, step=1, log=False):
            return low

    drawn = proposed.suggest(Draw())
    assert drawn == {"reranker": "none", "autocut": 2, "top_k": drawn["top_k"]}
    assert BASE.with_params(drawn).confidence_threshold is None


def test_a_proposal_that_would_make_draws_invalid_is_left_out():
    """Siblings of the clash: min_docs extended past max_docs' low end, or a base with a threshold beside a
    searched autocut; the space the tool writes must still run every draw."""
    space = {"params": {"reranker": {"type": "categorical", "choices": ["embedding"]},
                        "min_docs": {"type": "int", "low": 1, "high": 3},
                        "max_docs": {"type": "int", "low": 3, "high": 8}}}
    view = View(space, {"reranker": "embedding", "min_docs": 3, "max_docs": 6})
    proposals = propose(view, [], None)
    left_out = [p for p in proposals if p.kind == "advice" and p.change.startswith("min_docs")]
    assert left_out and "min_docs=4, max_docs=3" in left_out[0].reason  # said, not silently dropped
    proposed = next_space(view.space, proposals, view.best.params)
    assert proposed is None or proposed.first_clash(BASE) is None
    assert SearchSpace.model_validate(space).first_clash(BASE) is None
    clashing = SearchSpace.model_validate({"params": {"min_docs": {"type": "int", "low": 1, "high": 5},
                                                      "max_docs": {"type": "int", "low": 3, "high": 8}}})
    clash = clashing.first_clash(BASE)
    assert clash.knobs == ("min_docs", "max_docs") and clash.draw == "min_docs=5, max_docs=3"
    with pytest.raises(ConfigError, match="a trial may draw min_docs=5, max_docs=3, which no pipeline takes"):
        clashing.check_runnable(BASE, "space.yaml")
    autocut = SearchSpace.model_validate({"params": {"autocut": {"type": "categorical", "choices": [None, 2]}}})
    assert autocut.first_clash(BASE) is None
    assert autocut.first_clash(PipelineConfig(confidence_threshold=0.5)).draw.startswith("autocut=2")


def test_diagnosis_adds_the_knobs_a_stage_calls_for():
    space = {"params": {"alpha": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.1}}}
    view = View(space, {"alpha": 0.5}, {"top_k": 5, "program": "default"})
    selection = attribute([question(f"s{i}", 0.0, pool=("d1",), selected=("d9",)) for i in range(3)], "faithfulness")
    added = {p.knob for p in propose(view, [], selection) if p.kind == "add"}
    assert added == {"reranker", "confidence_threshold", "min_docs", "max_docs"}
    # the added knobs in an order the space file takes: the reranker above the knobs conditional on it (it was
    # below them, alphabetically, and the written space was invalid)
    with_reranker = next_space(view.space, propose(view, [], selection), {"alpha": 0.5})
    assert list(with_reranker.params) == ["alpha", "reranker", "confidence_threshold", "max_docs", "min_docs"]
    assert with_reranker.params["min_docs"].when == {"reranker": ["embedding", "llm"]}
    generation = attribute([question(f"g{i}", 0.0) for i in range(3)], "faithfulness")
    kinds = {(p.kind, p.knob) for p in propose(view, [], generation)}
    assert ("add", "program") in kinds and ("advice", None) in kinds
    assert next_space(view.space, propose(view, [], generation), {"alpha": 0.5}).params["program"].choices == \
        ["default", "strict"]
    assert next_space(view.space, [], {"alpha": 0.5}) is None  # nothing to propose: nothing to search


def test_records_round_trip_and_schema_versions():
    q = question("q1", 0.5, failure=None)
    result = EvalResult.summarise([q, question("q2", None, failure="nan")], ["faithfulness"], {},
                                  Cost(llm_calls=3), {"generate": Cost(llm_calls=1)}, {"program": "default"})
    assert result.metrics == {"faithfulness": 0.5} and result.failures == {"faithfulness": {"nan": 1}}
    file = TrialFile(4, {"top_k": 3}, {"top_k": 3}, False, result)
    data = json.loads(json.dumps(file.to_json()))
    assert data["schema"] == SCHEMA_VERSION
    again = TrialFile.from_json(data)
    assert again.result.questions[0] == q and again.result.cost.llm_calls == 3 and again.number == 4
    old = {k: v for k, v in data.items() if k != "schema"}  # a schema-1 file: no traces, no refusals
    for row in old["per_question"]:
        for key in ("gold_rank", "gold_in_pool", "gold_selected", "refusal"):
            row.pop(key)
    loaded = TrialFile.from_json(old)
    assert loaded.result.questions[0].retrieval.traced is False
    assert loaded.result.questions[0].retrieval.selected == ("d1",)  # recovered from the selected passages
    with pytest.raises(DataError, match="newer tuner"):
        TrialFile.from_json({**data, "schema": SCHEMA_VERSION + 1}, "0004.json")
    with pytest.raises(DataError, match="not a tuner trial file"):
        TrialFile.from_json({"schema": 2}, "x.json")


def test_a_change_made_moot_by_a_fixed_knob_is_said_not_listed_as_a_change():
    """Round 1 of the retrieval space fixed reranker at none and extended min_docs (whose `when:` wants a reranker):
    the next space's description and the journey listed the extension although min_docs had left the space."""
    space = {"params": {"reranker": {"type": "categorical", "choices": ["none", "embedding"]},
                        "min_docs": {"type": "int", "low": 1, "high": 3, "when": {"reranker": ["embedding"]}},
                        "top_k": {"type": "int", "low": 2, "high": 10}}}
    view = View(space, {"reranker": "none", "top_k": 5})
    proposals = propose(view, [effect("reranker", 0.01), effect("top_k", 0.5, 0.2)], None)
    view.best.params["min_docs"] = 3  # as if a trial with the reranker had been best on min_docs' edge
    proposals = propose(view, [effect("reranker", 0.01), effect("top_k", 0.5, 0.2)], None)
    moot = [p for p in proposals if p.change.startswith("min_docs")]
    assert moot and moot[0].kind == "advice" and "no longer searched" in moot[0].reason
    proposed = next_space(view.space, proposals, view.best.params)
    assert "min_docs" not in proposed.params and "min_docs" not in proposed.description


def test_index_knob_proposals_come_from_each_knob_s_facts_and_the_config_s_own_checks(monkeypatch):
    from tuner.analysis.propose import index_knobs
    from tuner.config import KNOBS, Knob

    project = ProjectConfig()
    knobs = index_knobs(project)
    assert knobs["chunk_size"].choices == sorted({*KNOBS["chunk_size"].explore, 150})  # the project's own among them
    weaviate = ProjectConfig.model_validate({"backend": {"type": "weaviate"}})
    assert "stemmer" in knobs and "stemmer" not in index_knobs(weaviate)  # Weaviate does not stem: refused by config
    # a knob given values to explore is proposed with no code of its own; a value the index refuses is left out
    monkeypatch.setitem(KNOBS, "chunk_overlap", Knob(carried="chunks", index="chunking.overlap", explore=(0, 60, 400)))
    assert index_knobs(project)["chunk_overlap"].choices == [0, 30, 60]  # 400 is not below chunk_size 150
