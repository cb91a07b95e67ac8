"""Held-out verdicts: the split, a search that never touches held-out questions, and a verdict that calls noise
noise (scripted LLM in process; the real 0.5B verdict runs in tests/test_study_real.py)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import yaml

from tests.helpers import NOISE_SPACE, SAMPLED, CoinFlipJudge, noise_study, tuner
from tuner.agent import run_rounds
from tuner.analysis import analyze
from tuner.analysis.verdict import contenders, give_verdict, to_score, verdict
from tuner.config import ProjectConfig
from tuner.data import load_dataset
from tuner.data.split import Split
from tuner.errors import ConfigError
from tuner.models.provider import Models
from tuner.reports import write_report
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study
from tuner.study.session import Session, StudySpec
from tuner.study.storage import study_folder

DEMO_IDS = [q.id for q in load_dataset().questions]  # 22 questions: a study holds 7 out by default


def test_the_split_is_deterministic_disjoint_and_exact():
    split = Split.make(DEMO_IDS, 0.3)
    assert split == Split.make(list(reversed(DEMO_IDS)), 0.3)  # ids alone decide, not their order
    assert len(split.holdout_ids) == round(0.3 * len(DEMO_IDS)) == 7
    questions = load_dataset().questions
    search, held = split.search(questions), split.holdout(questions)
    assert not {q.id for q in search} & {q.id for q in held}
    assert len(search) + len(held) == len(questions)
    assert split.part(questions, "all") == questions
    assert Split.from_json(json.loads(json.dumps(split.to_json()))) == split  # what study.json records
    # a question's side depends on its id's hash, not on which other questions exist: most of them keep it
    smaller = Split.make(DEMO_IDS[:20], 0.3)
    assert len(smaller.holdout_ids & split.holdout_ids) >= 4


def test_the_default_holds_out_from_twenty_questions_and_refuses_empty_sides():
    assert Split.auto(DEMO_IDS, None).fraction == 0.3
    assert not Split.auto(DEMO_IDS[:19], None).active
    assert not Split.auto(DEMO_IDS, 0.0).active
    with pytest.raises(ConfigError, match="leaves no question"):
        Split.make(["a", "b"], 0.1)
    with pytest.raises(ConfigError, match=r"\[0, 1\)"):
        Split.make(DEMO_IDS, 1.0)


def test_no_trial_touches_a_held_out_question_before_the_verdict(tmp_path, fake_embedder):
    llm = CoinFlipJudge()
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(NOISE_SPACE))
    session = Session.open(StudySpec("s", StudySettings(["faithfulness"], sampler="random", seed=4), space,
                                     ProjectConfig(cache_dir=tmp_path / "cache", evaluation=SAMPLED),
                                     studies_dir=tmp_path / "studies"))
    runner = session.runner(models=Models(llm, llm), embedder=fake_embedder)
    asked: list[str] = []
    pipeline_run = runner.pipeline.run
    runner.pipeline.run = lambda text, config, *rewritten: (asked.append(text),
                                                                       pipeline_run(text, config, *rewritten))[1]
    session.run(5)

    held_out = session.split.holdout(session.dataset.questions)
    assert len(held_out) == 7 and json.loads(session.folder.meta.read_text())["split"] == session.split.to_json()
    held_texts = {q.text for q in held_out}
    assert asked and not held_texts & set(asked)  # retrieval never saw one
    assert not any(q.text in json.dumps(call["messages"]) for call in llm.calls for q in held_out)  # nor any LLM
    view = read_study(session.folder)
    for trial in view.trials:  # every trial recorded exactly the search questions
        assert trial.result is not None and [q.id for q in trial.result.questions] == \
            [q.id for q in session.search_questions]
        assert trial.held_out is None
    assert analyze(view).verdict.pending

    judged = give_verdict(view, runner)
    scored = [t for t in judged.trials if t.held_out is not None]
    assert {t.number for t in scored} == {t.number for t in contenders(view)} | {view.baseline.number}
    for trial in scored:
        assert {q.id for q in trial.held_out.questions} == session.split.holdout_ids
    assert held_texts <= set(asked)  # only now
    assert to_score(read_study(session.folder)) == []  # saved: a second verdict scores nothing again
    calls = len(llm.calls)
    give_verdict(read_study(session.folder), runner)
    assert len(llm.calls) == calls


def test_a_pure_noise_winner_gets_a_verdict_whose_interval_contains_zero(tmp_path, fake_embedder):
    session = noise_study(tmp_path, fake_embedder, CoinFlipJudge())
    view = give_verdict(read_study(session.folder), session.runner())
    judged = verdict(view)
    assert judged.best.number != judged.baseline.number
    assert judged.in_sample.mean_difference > 0  # the search found a "winner" on the search questions
    low, high = judged.headline.ci
    assert low <= 0 <= high and not judged.holds
    assert "not distinguishable from zero on unseen questions" in judged.sentence() or \
        "did not generalise" in judged.sentence() or "was luck" in judged.sentence()

    report = write_report(view, tmp_path / "reports" / "noise")
    text = report.path.read_text()
    assert text.index("**Verdict:**") < text.index("In-sample:")  # the report leads with the held-out figure
    assert "## Verdict on held-out questions" in text and "held-out (unseen questions)" in text
    assert "7 questions (30%, chosen by hash of question id) were held out" in text


def test_a_stale_held_out_file_is_ignored_and_scored_again(tmp_path, fake_embedder):
    llm = CoinFlipJudge()
    session = noise_study(tmp_path, fake_embedder, llm, trials=3)
    view = give_verdict(read_study(session.folder), session.runner())
    best = view.best
    file = session.folder.read_trial(best.number, held_out=True)
    other = replace(file, pipeline={**file.pipeline, "top_k": 99})  # as if the trial had been re-run differently
    session.folder.write_trial(other, held_out=True)
    again = read_study(session.folder)
    assert next(t for t in again.trials if t.number == best.number).holdout is None
    assert best.number in {t.number for t in to_score(again)}


def test_resuming_keeps_the_recorded_split_and_refuses_another(tmp_path, fake_embedder):
    session = noise_study(tmp_path, fake_embedder, CoinFlipJudge(), trials=1)
    spec = session.spec
    assert Session.open(spec).split == session.split
    with pytest.raises(ConfigError, match="holds out 0.3 of its questions"):
        Session.open(replace(spec, holdout=0.5))
    with pytest.raises(ConfigError, match="holds out 0.3"):
        Session.open(replace(spec, holdout=0.0))


def test_rounds_keep_round_one_split_and_decide_on_held_out_gain(tmp_path, fake_embedder):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump({"params": {"top_k": {"type": "int", "low": 4, "high": 5}}}))
    llm = CoinFlipJudge()
    project = ProjectConfig(cache_dir=tmp_path / "cache")
    spec = StudySpec("agent", StudySettings(["faithfulness"], sampler="random", seed=1), space, project,
                     studies_dir=tmp_path / "studies")
    outcomes, stop = run_rounds(spec, rounds=2, trials=2, reports_dir=tmp_path / "reports",
                                prepare=lambda s: s.runner(models=Models(llm, llm), embedder=fake_embedder))
    first, second = (read_study(study_folder(tmp_path / "studies", o.study)) for o in outcomes)
    assert second.split == first.split and first.split.active
    for outcome in outcomes:
        if outcome.best_value is not None and outcome.headline is not None:
            assert outcome.held_out is not None  # each round was judged on held-out
            assert outcome.gained == (outcome.held_out.verdict == "better")
    journey = (tmp_path / "reports" / "agent" / "journey.md").read_text()
    assert "| in-sample |" in journey and "| held-out |" in journey and "judged held-out" in journey


def test_eval_scores_either_part_of_a_split(tmp_path):
    (tmp_path / "best.yaml").write_text(yaml.safe_dump({"dataset": {"holdout": 0.3}}))
    counts = {}
    for part in ("search", "holdout", "all"):
        result = tuner("eval", "--retrieval-only", "--config", "best.yaml", "--split", part, "--out", f"{part}.json",
                       cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        counts[part] = json.loads((tmp_path / f"{part}.json").read_text())["dataset"]["questions"]
    assert counts == {"search": 15, "holdout": 7, "all": 22}
    refused = tuner("eval", "--retrieval-only", "--limit", "10", "--split", "holdout", cwd=tmp_path)
    assert refused.returncode != 0 and "hold none out" in refused.stderr and "Traceback" not in refused.stderr


def test_best_verdict_explains_a_study_without_held_out_questions(tmp_path, fake_embedder):
    from tests.helpers import PROGRAMS, StrictIsUnfaithful

    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(PROGRAMS))
    llm = StrictIsUnfaithful()  # a baseline on the strict program loses to the default one
    project = ProjectConfig(cache_dir=tmp_path / "cache")
    session = Session.open(StudySpec("tiny", StudySettings(["faithfulness"], sampler="grid"), space, project,
                                     limit=4, studies_dir=tmp_path / "studies", baseline={"program": "strict"}))
    session.runner(models=Models(llm, llm), embedder=fake_embedder)
    session.run(2)
    result = tuner("best", "--study", "tiny", "--verdict", cwd=tmp_path)
    assert result.returncode != 0 and "holds out no question" in result.stderr and "Traceback" not in result.stderr
    report = write_report(read_study(session.folder), tmp_path / "reports" / "tiny").path.read_text()
    assert "In-sample:" in report and "no unseen question can confirm it" in report
    assert "## Verdict on held-out questions" not in report
