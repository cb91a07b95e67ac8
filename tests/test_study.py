"""Search spaces, the Optuna objective, pruning, stale-trial recovery and best-config export (scripted LLM)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import optuna
import pytest
import yaml

from tests.fakes import ScriptedLLM
from tests.helpers import PROGRAMS, StrictIsUnfaithful, open_session
from tuner.config import PipelineConfig, ProjectConfig
from tuner.data.split import Split
from tuner.errors import ConfigError
from tuner.evaluation.records import Constraint, EvalResult
from tuner.models.provider import Models
from tuner.study.attrs import DUPLICATE
from tuner.study.optimize import (
    REPEATS_TO_STOP,
    StudySettings,
    enqueue_baseline,
    make_pruner,
    open_study,
    recover_interrupted,
)
from tuner.study.results import best_config, best_trials, load_study, read_study, shown_values, trial_states
from tuner.study.session import Session
from tuner.study.space import SearchSpace, load_space
from tuner.study.storage import study_folder


@pytest.fixture
def setup(tmp_path, fake_embedder):
    return lambda space, **kwargs: open_session(tmp_path, fake_embedder, space, **kwargs)


def test_conditional_params_only_when_their_condition_holds():
    space = load_space("search_spaces/default.yaml")
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=1))
    for _ in range(40):
        trial = study.ask()
        params = space.suggest(trial)
        study.tell(trial, 0.0)
        gated = {"confidence_threshold", "min_docs", "max_docs"} & set(params)
        assert bool(gated) == (params["reranker"] != "none"), params
    assert {t.params["reranker"] for t in study.trials} == {"none", "embedding", "llm"}


def test_stepped_floats_are_exact_multiples_of_their_step():
    space = SearchSpace.model_validate({"params": {"alpha": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.1}}})
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    values = {space.suggest(study.ask())["alpha"] for _ in range(60)}
    assert values == {i / 10 for i in range(11)}  # Optuna alone yields e.g. 0.30000000000000004


@pytest.mark.parametrize("space, message", [
    ({"params": {"topk": {"type": "int", "low": 1, "high": 3}}}, "not a pipeline knob"),
    ({"params": {"top_k": {"type": "int", "low": 5, "high": 3}}}, "above high"),
    ({"params": {"alpha": {"type": "float", "low": 0, "high": 1, "log": True}}}, "log scale"),
    ({"params": {"reranker": {"type": "categorical"}}}, "choices"),
    ({"params": {"min_docs": {"type": "int", "low": 1, "high": 2, "when": {"reranker": "llm"}}}}, "defined above"),
    ({"params": {}}, "params"),
])
def test_invalid_spaces_give_clear_errors(tmp_path, space, message):
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    with pytest.raises(ConfigError, match=message) as error:
        load_space(path)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_baseline_first_and_results_recorded(setup):
    session = setup(PROGRAMS, limit=3)
    study, folder = session.study, session.folder
    session.run(2)
    first = study.trials[0]
    assert first.user_attrs["baseline"] and first.params == {"program": "default"}
    assert first.value == 1.0
    # Optuna keeps what its samplers and the repeat protocol read; the results have one record, the trial file
    assert set(first.user_attrs) == {"baseline", "pipeline", "project_hash", "runs_configuration"}
    assert set(first.constraints) == {"faithfulness scored on >= 80%"}
    recorded = folder.read_trial(0)
    assert recorded.result.metrics["faithfulness"] == 1.0 and recorded.result.cost.seconds > 0
    enqueue_baseline(study, SearchSpace.model_validate(PROGRAMS), PipelineConfig())  # skipped: exists
    assert len(study.get_trials(states=(optuna.trial.TrialState.WAITING,))) == 0


def test_pruner_fires_on_a_clearly_worse_configuration(setup):
    session = setup(PROGRAMS, limit=6)
    study, folder = session.study, session.folder
    session.run(1)  # the baseline: default program, all faithful
    study.enqueue_trial({"program": "strict"})
    session.run(2)
    pruned = study.trials[1]
    assert pruned.state == optuna.trial.TrialState.PRUNED
    reached = len(folder.read_trial(1).result.questions)
    assert reached < 6  # stopped early: questions not asked cost nothing
    assert shown_values(pruned, ["faithfulness"], folder.read_trial(1)) == ([0.0], reached)
    from tests.helpers import tuner

    listed = tuner("trials", "--study", "s", "--studies-dir", str(folder.root.parent), cwd=folder.root.parent)
    assert f"0.0000 (partial: {reached} q)" in listed.stdout, listed.stdout
    # Optuna's value of a pruned trial is its last question's score; people are shown the mean so far
    mixed = optuna.trial.create_trial(state=optuna.trial.TrialState.PRUNED, value=1.0,
                                      params={}, distributions={}, intermediate_values={0: 0.0, 1: 0.0, 2: 1.0})
    three = folder.read_trial(1)
    three = dataclasses.replace(three, result=EvalResult.summarise(
        [dataclasses.replace(q, scores={"faithfulness": s}) for q, s in zip(three.result.questions[:3], (0, 0, 1))],
        ["faithfulness"], {}, three.result.cost, {}))
    assert shown_values(mixed, ["faithfulness"], three) == ([1 / 3], 3)
    assert folder.trial_file(1).is_file()


def test_a_repeated_configuration_is_not_run_and_not_counted(setup, caplog):
    """Two configurations in the space: 5 trials asked, 2 run; the repeats are recorded as duplicates of the
    trial that ran them, pay nothing, and the study stops once the sampler proposes nothing new."""
    llm = StrictIsUnfaithful()
    session = setup(PROGRAMS, limit=2, sampler="random", llm=llm)
    study, folder = session.study, session.folder
    with caplog.at_level("INFO", logger="tuner"):
        session.run(5)
    assert session.finished == 2 and "stopped at 2 distinct configurations" in caplog.text
    states = trial_states(study.trials)
    duplicates = [t for t, s in zip(study.trials, states) if s == "duplicate"]
    assert len(duplicates) == REPEATS_TO_STOP and states.count("complete") + states.count("pruned") == 2
    ran = {t.user_attrs["pipeline"]["program"]: t.number for t in study.trials if DUPLICATE not in t.user_attrs}
    for trial in duplicates:
        assert trial.user_attrs[DUPLICATE] == ran[trial.params["program"]]
        assert not folder.trial_file(trial.number).is_file() and "cost" not in trial.user_attrs
    calls = len(llm.calls)
    session.run(6)  # a resume asking for more finds nothing new either, and pays nothing
    assert session.finished == 2 and len(llm.calls) == calls


def test_interrupted_trials_are_failed_and_rerun_with_the_same_params(setup):
    session = setup(PROGRAMS, limit=2)
    study = session.study
    # a process was killed while this trial ran: the enqueued baseline (its fixed params are set as it starts)
    trial = study.ask({"program": optuna.distributions.CategoricalDistribution(["default", "strict"])})
    assert recover_interrupted(study) == [trial.number]
    assert study.trials[trial.number].state == optuna.trial.TrialState.FAIL
    [rerun] = study.get_trials(states=(optuna.trial.TrialState.WAITING,))
    assert rerun.system_attrs["fixed_params"] == study.trials[trial.number].params
    assert rerun.user_attrs == {"baseline": True, "rerun_of": trial.number}  # still the study's reference point
    assert trial_states(study.trials) == ["interrupted", "waiting"]  # not counted as a failure
    study.tell(study.ask(), state=optuna.trial.TrialState.FAIL)  # a trial that failed by itself stays "fail"
    assert trial_states(study.trials)[-1] == "fail"


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_a_resumed_study_does_not_replay_its_first_draws(tmp_path, sampler):
    space = load_space("search_spaces/default.yaml")
    settings = StudySettings(["faithfulness"], [], sampler, 0)

    def draw_three(name: str) -> list[dict]:  # one `tuner optimize` process: open the study, sample three trials
        study = open_study(study_folder(tmp_path / "studies", name), settings, space, {}, "default.yaml",
                           Split(0.0, frozenset()))
        drawn = []
        for _ in range(3):
            trial = study.ask()
            drawn.append(space.suggest(trial))
            study.tell(trial, 0.5)
        return drawn

    first, resumed = draw_three("s"), draw_three("s")
    assert not any(params in first for params in resumed), (first, resumed)  # same --seed both times
    assert draw_three("again") == first  # the seed still makes a fresh study reproducible


def test_constraints_exclude_infeasible_trials_from_best(setup, tmp_path):
    session = setup(PROGRAMS, limit=2, constraints=("context_recall>=1.01",))
    study, folder = session.study, session.folder
    session.run(2)
    assert all(t.constraints["context_recall>=1.01"] > 0 for t in study.trials)  # Optuna's record of the guard
    assert best_trials(study) == []
    with pytest.raises(ConfigError, match="no complete trial that meets its constraints"):
        best_config(study, folder)


def made_study(directions: list[str], trials: list[tuple[list[float], float]]) -> optuna.Study:
    """A real (in-memory) study holding complete trials: (values, constraint violation) each."""
    study = optuna.create_study(directions=directions)
    for values, violation in trials:
        study.add_trial(optuna.trial.create_trial(values=values, user_attrs={"constraints": [violation]}))
    return study


def test_a_feasible_lower_trial_beats_an_infeasible_higher_one():
    study = made_study(["maximize"], [([0.9], 0.05), ([0.6], 0.0), ([0.4], -0.2)])
    assert [t.number for t in best_trials(study)] == [1]


def test_the_pareto_front_is_exactly_the_feasible_non_dominated_trials():
    study = made_study(["maximize", "maximize"], [
        ([0.9, 0.1], 0.0), ([0.5, 0.5], 0.0), ([0.4, 0.4], 0.0),  # 2 is dominated by 1
        ([0.1, 0.9], 0.0), ([1.0, 1.0], 0.3),                     # 4 dominates all but breaks a constraint
        ([0.5, 0.5], 0.0)])                                        # a tie with 1 is not dominated by it
    assert sorted(t.number for t in best_trials(study)) == [0, 1, 3, 5]


def test_best_config_is_a_valid_project_config(setup):
    session = setup(PROGRAMS, limit=2)
    folder = session.folder
    session.run(2)
    data = best_config(load_study(folder), folder)
    config = ProjectConfig.model_validate(data)
    assert config.pipeline.program == "default" and data["cache_dir"] == str(session.project.cache_dir)


def test_multi_objective_study_keeps_a_pareto_front(setup):
    session = setup(PROGRAMS, targets=("faithfulness", "answer_relevancy"), limit=2)
    study, folder = session.study, session.folder
    session.run(2)
    assert len(study.directions) == 2
    front = best_trials(study)
    assert front and all(t.state.name == "COMPLETE" for t in front)
    from tuner.reports import write_report
    from tuner.study.results import read_study

    view = read_study(folder)
    assert {t.number for t in view.front} == {t.number for t in best_trials(study)}
    text = write_report(view, folder.root / "report").path.read_text()
    assert "**Pareto study** over faithfulness, answer_relevancy" in text and "## Failures" in text


@pytest.mark.parametrize("change, said", [
    ({"targets": ("context_recall",)}, "optimises faithfulness"),
    ({"constraints": ("answer_relevancy>=0.5",)}, "ran with no constraint"),
    ({"space": {"params": {"program": {"type": "categorical", "choices": ["strict"]}}}}, "searched another space"),
])
def test_resuming_with_other_targets_constraints_or_space_is_refused(setup, change, said):
    setup(PROGRAMS, limit=1).run(1)
    space = change.pop("space", PROGRAMS)
    with pytest.raises(ConfigError, match=said):
        setup(space, limit=1, **change)
    assert len(setup(PROGRAMS, limit=1).study.trials) == 1  # the study is untouched and resumes as before


def test_bad_targets_and_constraints():
    with pytest.raises(ConfigError, match="--target"):
        StudySettings(["faithfulnes"])
    with pytest.raises(ConfigError, match="--constraint"):
        Constraint.parse("answer_relevancy > 0.7")


def test_rdb_storage_with_sqlite(tmp_path, fake_embedder):
    url = f"sqlite:///{tmp_path / 'tuner.db'}"
    session = open_session(tmp_path, fake_embedder, PROGRAMS, name="rdb", limit=2, sampler="random",
                           llm=ScriptedLLM(), storage=url)
    session.run(2)
    folder = study_folder(tmp_path / "elsewhere", "rdb", url)  # another worker: only the URL in common
    assert folder.read_meta().storage_url == url and folder.read_meta().cache == "storage"
    assert not (tmp_path / "studies" / "rdb").exists()  # settings, trial records and caches are in the database
    reloaded = load_study(folder)
    ran = [t for t in read_study(folder).trials if t.state == "complete"]
    assert len(ran) == 2 and all(t.result is not None for t in ran)  # their records come from the database
    assert len(reloaded.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 2
    assert best_config(reloaded, folder)["pipeline"]["program"] in ("default", "strict")


def test_storage_url_passwords_are_redacted():
    from tuner.cache import redact

    assert redact("postgresql://tuner:s3cret@db:5432/studies") == "postgresql://tuner:***@db:5432/studies"


def test_a_resume_records_the_project_it_now_runs_but_not_other_questions_or_another_index(setup, tmp_path):
    """A resume with another --limit scored later trials on other questions than earlier ones (and `eval --split
    holdout` then held out a question the search saw): refused, like a change of the index; a changed judge
    retry count is recorded."""
    from tuner.config import ChunkingConfig, EmbedderConfig, EvaluationConfig

    first = setup(PROGRAMS, limit=2)
    first.run(1)
    assert first.folder.read_meta().data["questions"] == 2
    with pytest.raises(ConfigError, match="measured on 2 questions over 35 documents, this run has 3 questions"):
        setup(PROGRAMS, limit=3)  # e.g. `tuner optimize --limit 3` on the same study
    with pytest.raises(ConfigError, match="indexed with chunking.size = 150, not 80"):
        setup(PROGRAMS, limit=2, project=ProjectConfig(cache_dir=tmp_path / "cache", chunking=ChunkingConfig(size=80)))
    with pytest.raises(ConfigError, match="indexed with embedder.precision = 'fp32', not 'int8'"):  # other vectors
        setup(PROGRAMS, limit=2, project=ProjectConfig(cache_dir=tmp_path / "cache",
                                                       embedder=EmbedderConfig(precision="int8")))
    with pytest.raises(ConfigError, match="judged with evaluation.verdicts = 'graded', not 'sampled': its trials' "
                                          "scores are that judge's"):  # scores of another scale
        setup(PROGRAMS, limit=2, project=ProjectConfig(cache_dir=tmp_path / "cache",
                                                       evaluation=EvaluationConfig(verdicts="sampled")))
    assert len(load_study(first.folder).trials) == 1  # nothing was added by the refused resumes
    resumed = setup(PROGRAMS, limit=2, project=ProjectConfig(cache_dir=tmp_path / "cache",
                                                            evaluation=EvaluationConfig(retries=1)))
    assert resumed.folder.read_meta().project["evaluation"]["retries"] == 1
    resumed.run(2)
    assert best_config(load_study(resumed.folder), resumed.folder)["dataset"]["limit"] == 2  # best.yaml agrees


def test_a_study_recorded_before_graded_verdicts_resumes_judged_as_it_was():
    """Studies recorded before `evaluation.verdicts` existed ran RAGAS's sampled verdicts: resumed without a config
    they keep them, though new projects default to graded verdicts on sentences."""
    from tuner.study.meta import StudyMeta

    old = StudyMeta(("faithfulness",), project={"evaluation": {"metrics": ["faithfulness"], "retries": 1}})
    assert (old.config.evaluation.verdicts, old.config.evaluation.statements) == ("sampled", "judge")
    assert StudyMeta(("faithfulness",)).config.evaluation.verdicts == "sampled"
    assert (ProjectConfig().evaluation.verdicts, ProjectConfig().evaluation.statements) == ("graded", "sentences")


def test_a_shared_study_reruns_a_stopped_trial_but_leaves_running_ones_to_heartbeats(tmp_path):
    """In a database other workers' trials are RUNNING: only trials stopped by Ctrl-C (or a lost model) are queued
    again by a resume; a dead worker's RUNNING trial is the heartbeat's to retry."""
    from tuner.study.attrs import INTERRUPTED
    from tuner.study.optimize import recover_interrupted

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}")
    running, stopped = study.ask({"x": optuna.distributions.IntDistribution(0, 9)}), study.ask()
    stopped.suggest_int("x", 0, 9)
    stopped.set_user_attr(INTERRUPTED, "Ctrl-C")
    study.tell(stopped, state=optuna.trial.TrialState.FAIL)
    assert recover_interrupted(study, running_too=False) == [stopped.number]
    assert study.trials[running.number].state == optuna.trial.TrialState.RUNNING
    assert study.trials[-1].user_attrs["rerun_of"] == stopped.number
    assert recover_interrupted(study, running_too=False) == []  # once


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "search_spaces").glob("*.yaml")),
                         ids=lambda p: p.name)
def test_every_shipped_space_loads_and_runs_every_draw_from_the_defaults(path):
    space = load_space(path)
    project = ProjectConfig()
    space.check_runnable(project.pipeline, path.name, project.index_settings)
    space.check_baseline(project.resolved(), path.name)  # trial 0, the defaults, is a draw Optuna can record


def test_a_configuration_stored_before_a_knob_existed_is_the_same_as_it_with_the_default():
    from tuner.study.optimize import same_pipeline

    config = PipelineConfig(top_k=4)
    old = {k: v for k, v in config.model_dump().items() if k not in ("query", "chunker")}  # tuner 0.3's record
    assert same_pipeline(config.model_dump(), config) and same_pipeline(old, config)
    assert not same_pipeline({**old, "top_k": 5}, config)
    assert not same_pipeline({**config.model_dump(), "query": "hyde"}, config)
    assert not same_pipeline({**old, "reranker": "no-such-reranker"}, config)  # a value this version refuses


def test_trials_recorded_before_a_system_trial_had_its_own_class_are_recognised():
    """Until the user's system had a trial class (SystemTrial), every trial's record was tuner's whole pipeline with
    a `system` mapping beside it: a pipeline study's held `system: {}`, a system study's the knobs' values beside
    tuner's unused knobs. A resume must find both as repeats, and tell another system value from them."""
    from tuner.config import SystemTrial
    from tuner.study.optimize import same_pipeline

    pipeline = PipelineConfig(top_k=4)
    assert "system" not in pipeline.model_dump()
    then = {**pipeline.model_dump(), "system": {}}  # a pipeline trial's record of then
    assert same_pipeline(then, pipeline) and PipelineConfig.from_record(then) == pipeline
    assert not same_pipeline({**then, "top_k": 5}, pipeline)
    own = SystemTrial(system={"k": 4, "prompt": "plain"})
    assert own.model_dump() == {"system": {"k": 4, "prompt": "plain"}}
    then = {**PipelineConfig().model_dump(), "system": {"k": 4, "prompt": "plain"}}  # a system trial's of then
    assert same_pipeline(then, own) and same_pipeline(own.model_dump(), own)
    assert not same_pipeline({**then, "system": {"k": 5, "prompt": "plain"}}, own)
    assert not same_pipeline(pipeline.model_dump(), own) and not same_pipeline(own.model_dump(), pipeline)
    assert own.with_params({"k": 6}).knobs() == {"k": 6, "prompt": "plain"}


def test_a_study_of_questions_that_cost_no_model_call_does_not_prune_unless_asked():
    """A retrieval target's questions cost about a millisecond, less than reporting them to the pruner: no pruning by
    default (on vaswani the test at 4-15 questions also stopped every stemmed trial of a study whose stemmed index
    gains +0.108 held-out); an LLM target prunes after 4; --prune-after asks for it, never below the test's 4."""
    assert not StudySettings(["ndcg@10"]).prunes and isinstance(make_pruner(StudySettings(["ndcg@10"])),
                                                                 optuna.pruners.NopPruner)
    assert StudySettings(["ndcg@10"], prune_after=30).prunes and StudySettings(["faithfulness"]).prunes
    assert not StudySettings(["ndcg@10", "faithfulness"]).prunes  # Optuna prunes no multi-objective trial
    assert StudySettings(["faithfulness"]).patience == 4
    assert StudySettings(["ndcg@10", "faithfulness"]).patience == 4
    assert StudySettings(["recall@5"], prune_after=10).patience == 10
    assert StudySettings(["ndcg@10"], prune_after=2).patience == 4
    assert make_pruner(StudySettings(["ndcg@10"], prune_after=30))._n_startup_steps == 30


def test_a_study_resumed_where_its_space_file_is_not_searches_the_space_it_recorded(setup, tmp_path, fake_embedder):
    """A round's space is written beside the folder of the machine that ran the round; a worker elsewhere, or a
    resume after the file is gone, reads the copy in the study's record."""
    session = setup(PROGRAMS, limit=2)
    session.run(1)
    (tmp_path / "s-space.yaml").unlink()
    again = Session.open(session.spec)
    llm = StrictIsUnfaithful()
    again.runner(models=Models(llm, llm), embedder=fake_embedder)
    assert again.space == session.space and again.run(2) == 1 and llm.calls
