"""Rounds: optimise -> analyse -> next space -> optimise, with a scripted LLM in process, and for real with the
0.5B model in a subprocess killed with SIGKILL mid-run and resumed with the same command."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest
import yaml

from tests.fakes import ScriptedLLM
from tests.helpers import SAMPLED, tuner
from tuner.agent import run_rounds
from tuner.agent.rounds import round_name
from tuner.cache import SqliteStore
from tuner.config import ProjectConfig
from tuner.models.provider import Models
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study
from tuner.study.session import StudySpec
from tuner.study.storage import study_folder

#: two values, so the best always sits on an edge and round 1 always has something to propose
EDGE_SPACE = {"params": {"top_k": {"type": "int", "low": 4, "high": 5}}}


def test_rounds_chain_studies_share_caches_and_stop_when_nothing_gains(tmp_path, fake_embedder):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(EDGE_SPACE))
    llm = ScriptedLLM()  # every answer faithful: no configuration can gain anything
    project = ProjectConfig(cache_dir=tmp_path / "cache")
    spec = StudySpec("agent", StudySettings(["faithfulness"], sampler="random", seed=1), space, project,
                     limit=2, studies_dir=tmp_path / "studies")
    def prepare(session):
        return session.runner(models=Models(llm, llm), embedder=fake_embedder)

    outcomes, stop = run_rounds(spec, rounds=4, trials=2, reports_dir=tmp_path / "reports", prepare=prepare)

    assert [o.study for o in outcomes] == ["agent", "agent.r2"]
    assert stop == "two rounds in a row gained nothing distinguishable from zero"
    first, second = (read_study(study_folder(tmp_path / "studies", o.study)) for o in outcomes)
    assert second.project.cache_dir == first.project.cache_dir  # one cache for every round
    assert second.baseline.pipeline == first.best.pipeline  # round 2 starts from round 1's best
    r2_space = yaml.safe_load((tmp_path / "studies" / "agent.r2" / "space.yaml").read_text())
    best_k = first.best.params["top_k"]
    assert r2_space["params"]["top_k"] == {"type": "int", "low": best_k - 1, "high": best_k + 1}  # recentred
    assert (tmp_path / "reports" / "agent.r2" / "report.md").is_file()
    journey = (tmp_path / "reports" / "agent" / "journey.md").read_text()
    assert "## Round 1: study `agent`" in journey and "## Round 2: study `agent.r2`" in journey
    assert "top_k: 4 … 5 →" in journey and "no gain distinguishable from zero" in journey
    assert "**Stopped:** two rounds in a row gained nothing" in journey

    calls = len(llm.calls)  # the same command again: everything is done, nothing is paid again
    again, _ = run_rounds(spec, rounds=4, trials=2, reports_dir=tmp_path / "reports", prepare=prepare)
    assert [o.study for o in again] == ["agent", "agent.r2"] and len(llm.calls) == calls


def test_rounds_stop_when_nothing_is_left_to_propose(tmp_path, fake_embedder):
    space = tmp_path / "space.yaml"  # alpha's whole range, 2 trials: no edge to extend, too few trials to fix
    space.write_text(yaml.safe_dump({"params": {"alpha": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.5}}}))
    llm = ScriptedLLM()
    project = ProjectConfig(cache_dir=tmp_path / "cache")
    spec = StudySpec("calm", StudySettings(["faithfulness"], sampler="random"), space, project, limit=1,
                     studies_dir=tmp_path / "studies")
    outcomes, stop = run_rounds(spec, 3, 2, tmp_path / "reports",
                                prepare=lambda s: s.runner(models=Models(llm, llm), embedder=fake_embedder))
    assert len(outcomes) == 1 and stop == "the analysis has nothing left to propose"


@pytest.mark.slow
def test_two_real_rounds_killed_and_resumed(tmp_path, small_gguf):
    """The 0.5B model on 3 demo questions: SIGKILL once round 2 has started, then the same command again."""
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump(
        {"generator": {"model": "qwen2.5-0.5b", "path": str(small_gguf)}, "dataset": {"limit": 3}}))
    (tmp_path / "edge.yaml").write_text(yaml.safe_dump(EDGE_SPACE))
    command = ["optimize", "--target", "faithfulness", "--trials", "2", "--rounds", "2", "--search-space",
               "edge.yaml", "--config", "tuner.yaml", "--study", "ci", "--sampler", "random", "--seed", "1"]
    studies = tmp_path / "studies"
    first = subprocess.Popen([sys.executable, "-m", "tuner", *command], cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 1200
    while not (studies / "ci.r2" / "journal.log").is_file():  # round 1 done, round 2 opened
        assert first.poll() is None and time.time() < deadline, first.stderr.read() if first.poll() else "timeout"
        time.sleep(0.2)
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert (tmp_path / "reports" / "ci" / "report.md").is_file()  # round 1's report was written before round 2

    resumed = tuner(*command, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "Traceback" not in resumed.stderr
    assert "round 2 (ci.r2) done" in resumed.stderr and "journey" in resumed.stderr

    round1, round2 = (read_study(study_folder(studies, round_name("ci", n))) for n in (1, 2))
    # each round holds its 2 trials, round 1's not run again; a trial whose answers the 0.5B judge could not score
    # fails and still takes its place (the model's output differs from one CPU to another)
    finished = [sum(t.state in ("complete", "pruned", "fail") for t in view.trials) for view in (round1, round2)]
    assert finished == [2, 2], resumed.stderr
    assert any(t.baseline and t.state == "complete" for t in round2.trials)
    assert round2.baseline.pipeline == round1.best.pipeline
    assert round2.project.cache_dir == round1.project.cache_dir
    assert SqliteStore(round1.project.cache_dir / "llm_calls.sqlite").repeated() == 0  # no call paid twice
    journey = (tmp_path / "reports" / "ci" / "journey.md").read_text()
    assert "## Round 2: study `ci.r2`" in journey and "95 % CI" in journey
    report = (tmp_path / "reports" / "ci.r2" / "report.md").read_text()
    assert "## Best vs baseline" in report and "## Where the target is lost" in report
    assert (tmp_path / "reports" / "ci.r2" / "history.png").is_file()
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(
        str(studies / "ci.r2" / "journal.log")))
    assert optuna.load_study(study_name="ci.r2", storage=storage).trials[0].user_attrs["baseline"]
    analyzed = tuner("analyze", "--study", "ci.r2", "--noise", "1", cwd=tmp_path)  # re-judges with the real judge
    assert analyzed.returncode == 0, analyzed.stderr
    assert "judge noise:" in analyzed.stderr and (studies / "ci.r2" / "judge_noise.json").is_file()
    assert "re-judged 1 times" in (tmp_path / "reports" / "ci.r2" / "report.md").read_text()
    assert "where trial" in analyzed.stdout
    assert "limiting stage" in analyzed.stdout or "nothing lost" in analyzed.stdout


def test_ctrl_c_during_optimize_still_writes_the_report(tmp_path, cli_with):
    """The morning's report exists even when the night ended with Ctrl-C: interrupted mid-trial 2."""

    class InterruptedLLM(ScriptedLLM):
        def _chat(self, messages, **kwargs):
            if len(self.calls) >= 8:  # the baseline (2 questions x 3 calls) is done; mid-way through the next
                raise KeyboardInterrupt
            return super()._chat(messages, **kwargs)

    invoke = cli_with(InterruptedLLM())
    # the baseline's top_k 5 lies outside the space, so trial 1 retrieves other contexts and pays for new calls
    (tmp_path / "space.yaml").write_text(yaml.safe_dump({"params": {"top_k": {"type": "int", "low": 2, "high": 3}}}))
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"evaluation": SAMPLED}))  # 3 calls a question
    result = invoke("optimize", "--trials", "3", "--limit", "2", "--search-space", "space.yaml", "--config",
                    "tuner.yaml", "--study", "night", "--judge-check", "off")  # counts the trials' calls only
    assert result.exit_code != 0  # interrupted
    report = (tmp_path / "reports" / "night" / "report.md").read_text()
    assert "**Best: trial 0**" in report and "1 complete" in report and "1 interrupted" in report


def test_rejudging_samples_new_seeds_and_restores_greedy_verdicts(fake_embedder):
    from tests.helpers import question
    from tuner.analysis.noise import rejudge
    from tuner.config import EvaluationConfig
    from tuner.evaluation.ragas_judge import RagasScorer

    llm = ScriptedLLM()
    scorer = RagasScorer(llm, fake_embedder, EvaluationConfig(**SAMPLED), max_tokens=64)
    noise = rejudge(scorer, [question("q1", 1.0), question("q2", 0.0)], "faithfulness", trial=3, repeats=2)
    assert noise.repeats == 2 and noise.scores["q1"] == [1.0, 1.0, 1.0] and noise.trial == 3
    assert noise.scores["q2"][0] == 0.0 and noise.spread("q2") == 1.0  # the recorded verdict vs the re-judgings
    seeds = sorted({call["seed"] for call in llm.calls})
    assert seeds == [1000, 2000]  # one seed family per round, each sampled: different from the study's greedy calls
    assert scorer.judge.sample_round == 0
