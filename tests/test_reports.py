"""The experiment report from a study of constructed trials: every section, numbers checked by hand, idempotent."""

from __future__ import annotations

import optuna
import pytest
from scipy.stats import wilcoxon

from tests.helpers import question
from tuner.analysis.noise import JudgeNoise, save_noise
from tuner.analysis.stats import paired_bootstrap_ci
from tuner.config import ProjectConfig
from tuner.cost import Cost
from tuner.evaluation.records import EvalResult, TrialFile
from tuner.reports import write_report
from tuner.study.meta import StudyMeta
from tuner.study.results import read_study
from tuner.study.space import SearchSpace
from tuner.study.storage import make_storage, study_folder

SPACE = SearchSpace.model_validate({"params": {"top_k": {"type": "int", "low": 2, "high": 6},
                                               "program": {"type": "categorical", "choices": ["default", "strict"]}}})
BASELINE = [0.5, 1.0, 0.0, 1.0]
BEST = [1.0, 1.0, 0.5, 1.0]


def result(scores, calls, hits, seconds, refusals=0, unscored=0) -> EvalResult:
    questions = [question(f"q{i}", s, refusal=i < refusals) for i, s in enumerate(scores)]
    questions += [question(f"q{len(scores) + i}", None, failure="unparsable") for i in range(unscored)]
    cost = Cost(llm_calls=calls, cache_hits=hits, prompt_tokens=100 * calls, cached_tokens=50 * hits, seconds=seconds)
    stages = {"generate": Cost(seconds=seconds / 4), "faithfulness": Cost(seconds=seconds * 3 / 4)}
    return EvalResult.summarise(questions, ["faithfulness"], {}, cost, stages,
                                {"generator": "gen-x", "judge": "judge-y"})


@pytest.fixture
def study(tmp_path):
    folder = study_folder(tmp_path / "studies", "fake")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name="fake", storage=make_storage(folder), direction="maximize")
    distributions = {n: p.distribution() for n, p in SPACE.params.items()}
    trials = [  # number, params, scores, state, calls, hits, seconds
        (0, {"top_k": 5, "program": "default"}, BASELINE, "complete", 12, 0, 400.0),
        (1, {"top_k": 2, "program": "strict"}, [1.0, 0.0], "pruned", 6, 0, 100.0),
        (2, {"top_k": 6, "program": "default"}, BEST, "complete", 5, 7, 200.0),
        (3, {"top_k": 3, "program": "default"}, [0.5, 0.5, 0.5, 0.5], "complete", 8, 4, 300.0),
    ]
    for number, params, scores, state, calls, hits, seconds in trials:
        evaluated = result(scores, calls, hits, seconds, refusals=1 if number == 3 else 0,
                           unscored=1 if number == 3 else 0)
        value = evaluated.value("faithfulness")
        study.add_trial(optuna.trial.create_trial(
            params=params, distributions=distributions,
            state=optuna.trial.TrialState.PRUNED if state == "pruned" else optuna.trial.TrialState.COMPLETE,
            value=scores[-1] if state == "pruned" else value,  # Optuna keeps a pruned trial's last step
            intermediate_values={i: s for i, s in enumerate(scores)}, user_attrs={"baseline": number == 0}))
        folder.write_trial(TrialFile(number, params, {**ProjectConfig().pipeline.model_dump(), **params},
                                     state == "pruned", evaluated))
    folder.write_meta(StudyMeta(("faithfulness",), metrics=("faithfulness",), search_space="inline",
                                space=SPACE.model_dump(mode="json"), project=ProjectConfig().model_dump(mode="json")))
    return folder


def test_report_sections_and_hand_computed_numbers(study, tmp_path):
    out = tmp_path / "reports" / "fake"
    report = write_report(read_study(study), out)
    text = report.path.read_text()
    for section in ("## The question answered", "## Best vs baseline", "## Search history and knobs",
                    "## Where the target is lost", "## Judge noise", "## Failures, refusals and empty contexts",
                    "## Pruned trials", "## Cost per trial", "## Next experiments"):
        assert section in text, section
    assert "**Best: trial 2**, faithfulness = 0.875" in text  # mean of BEST
    diffs = [b - a for a, b in zip(BASELINE, BEST)]  # 0.5, 0, 0.5, 0: mean 0.25
    low, high = paired_bootstrap_ci(diffs)
    p = wilcoxon(diffs, zero_method="wilcox").pvalue
    assert f"| faithfulness (target) | 0.625 | 0.875 | +0.250 | [{low:+.3f}, {high:+.3f}] | {p:.3f} | 4 |" in text
    assert "not distinguishable from zero" in text  # 4 questions, two ties: the CI reaches 0
    assert "winner's curse" in text
    # spend: 12 + 6 + 5 + 8 calls paid, 0 + 0 + 7 + 4 from the cache, tokens 100/call paid and 50/hit cached
    assert "31 paid (3,100 tokens), 11 served from the cache (550 tokens)" in text
    assert "1 complete".replace("1", "3") in text and "1 pruned" in text
    # the pruned trial is shown with the questions it reached, at their mean — never its last step's score
    assert "| 1 | 2 of 4 | 0.500 |" in text
    # failures: trial 3 has one unparsable verdict and one refusal
    assert "| 3 | complete | 5 | 1 unparsable | 1 | 0 | 0 |" in text
    # the best trial loses 0.5 on q2 with its gold context selected: generation
    assert "| generation | 100% | 0.50 | q2 |" in text
    assert "top_k: 2 … 6 → 4 … 8" in text  # best top_k 6 on the upper edge: recentred
    assert (out / "next_space.yaml").is_file()
    for plot in ("history", "slices", "deltas", "costs"):
        assert (out / f"{plot}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"({plot}.png)" in text
    assert "## Judge noise\n\nNone to measure: graded verdicts" in text  # the default judge samples nothing
    files = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".md", ".yaml")}
    write_report(read_study(study), out)  # idempotent: the same files again
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.suffix in (".md", ".yaml")} == files


def test_judge_noise_section(study, tmp_path):
    save_noise(JudgeNoise("faithfulness", 2, {"q0": [1.0, 1.0, 0.0], "q1": [1.0, 1.0, 1.0], "q2": [0.5, 0.5, 0.5],
                                             "q3": [1.0, 1.0, 1.0]}), study)
    text = write_report(read_study(study), tmp_path / "r").path.read_text()
    # run means 0.875, 0.875, 0.625: sd 0.144; 2·√2·sd = 0.408 > 0.25 → within the judge's fluctuation
    assert "re-judged 2 times" in text and "standard deviation of 0.144" in text
    assert "within the judge's normal fluctuation" in text
    assert "| q0 | 1.00, 1.00, 0.00 | 1.00 |" in text  # per-question spread
    assert "q0: What" not in text and "| q0: question q0? | 1.000 |" not in text  # q0 lost nothing
