"""Judge alignment (`tuner judge align`): the graded judge's wording and labelled demonstrations, searched on people's
labels, adopted only where agreement rises on labels the search did not see, recorded in the study and refused on a
resume under another."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.fakes import ScriptedLLM
from tests.helpers import labels_file, one_line_error, run_tuner
from tuner.config import EvaluationConfig, JudgeAlignment, VerdictDemo, load_config
from tuner.errors import ConfigError
from tuner.evaluation.judge.align import Candidate, candidates, excerpt, folds_of
from tuner.evaluation.judge.cases import label_cases
from tuner.evaluation.judge.cut import judge_cut, setting_name
from tuner.evaluation.labels import Label, append
from tuner.metrics.graded import verdict_messages
from tuner.models.llms import Completion


class LearnsFromDemos(ScriptedLLM):
    """Zero-shot it cannot tell (every verdict 0.8); shown a demonstration answered "no", it marks an invented
    detail (0.2) and passes the rest (0.9). `helps=False`: demos change nothing."""

    def __init__(self, helps: bool = True):
        super().__init__()
        self.helps = helps

    def yes_probability(self, messages, reuse_prefix=False):
        self.calls.append({"messages": messages, "json_schema": None, "seed": 0, "reuse_prefix": reuse_prefix})
        shown_no = any(m["role"] == "assistant" and m["content"] == "no" for m in messages)
        if not (self.helps and shown_no):
            return Completion("0.8", 30, 0)
        return Completion("0.2" if "invented" in messages[-1]["content"] else "0.9", 30, 0)


def test_demonstrations_are_earlier_turns_answered_yes_or_no_before_the_verdict():
    demos = [VerdictDemo(context="ctx A", statement="claim A", supported=True),
             VerdictDemo(context="ctx B", statement="claim B", supported=False)]
    messages = verdict_messages("ctx", "claim", "support", demos)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
    assert [messages[1]["content"], messages[3]["content"]] == ["yes", "no"]
    assert messages[0]["content"].startswith("Context:\nctx A\n\nStatement: claim A")
    assert messages[-1] == verdict_messages("ctx", "claim", "support")[0]  # the verdict itself is unchanged


def test_candidates_start_zero_shot_then_draw_balanced_demo_sets_that_leave_each_class_to_score(tmp_path):
    cases = label_cases(__import__("tuner.evaluation.labels", fromlist=["read"]).read(
        labels_file(tmp_path / "l.jsonl", 6, 2)).values())
    found = candidates(cases, "support", budget=6)
    assert [(c.prompt, len(c.demos)) for c in found[:2]] == [("support", 0), ("nli", 0)]
    assert len(found) == 6 and found == candidates(cases, "support", budget=6)  # seeded
    for candidate in found[2:]:
        shown = [c.supported for c in candidate.demos]
        # 4 would show both unsupported claims, leaving none to score
        assert shown.count(True) == shown.count(False) and len(shown) == 2
    folds = folds_of(cases, 3)  # stratified: 6 supported and 2 not over 3 folds
    assert sorted(sum(not c.supported for c in fold) for fold in folds) == [0, 1, 1]
    long = label_cases([Label("k", "q", True, None, "", "built in 1870", (" ".join(["filler"] * 500) +
                                                                          " built in 1870 " + "x " * 300,))])[0]
    assert "built in 1870" in excerpt(long) and len(excerpt(long).split()) == 120


def test_an_alignment_is_a_judge_setting_its_cut_first_and_a_contradicting_wording_refused(tmp_path):
    aligned = JudgeAlignment(prompt="nli", labels=12, cut=0.7,
                             demos=[VerdictDemo(context="c", statement="s", supported=False)])
    evaluation = EvaluationConfig(alignment=aligned)
    assert evaluation.verdict_prompt == "nli" and setting_name(evaluation) == "graded, sentences, nli, aligned"
    assert str(judge_cut(evaluation, "gguf:x.gguf:1:fast", setting_name(evaluation))) == \
        "0.70 (the alignment's, from 12 labels)"
    with pytest.raises(ValueError, match="contradicts the alignment's wording"):
        EvaluationConfig(alignment=aligned, verdict_prompt="support")
    with pytest.raises(ValueError, match="alignment is a setting of graded verdicts"):
        EvaluationConfig(verdicts="sampled", alignment=aligned)
    assert repr(aligned) == f"alignment {aligned.digest}"
    assert aligned.digest == aligned.model_copy(update={"cut": 0.5, "labels": 3}).digest  # figures are not identity
    config = tmp_path / "tuner.yaml"
    config.write_text(yaml.safe_dump({"evaluation": {"alignment": "none.json"}}))
    with pytest.raises(ConfigError, match=r"evaluation.alignment: .*none.json: file not found"):
        load_config(config)
    (tmp_path / "bad.json").write_text("{not json")
    config.write_text(yaml.safe_dump({"evaluation": {"alignment": "bad.json"}}))
    with pytest.raises(ConfigError, match="not a judge alignment"):
        load_config(config)


def test_judge_align_adopts_demonstrations_that_raise_held_out_agreement_and_a_study_records_them(
        cli_with, tmp_path):
    invoke = cli_with(LearnsFromDemos())
    labels = labels_file(tmp_path / "labels.jsonl")
    result = invoke("judge", "align", "--labels", str(labels), "--candidates", "4", "--out", "aligned.json")
    assert result.exit_code == 0, result.output
    printed = " ".join(result.output.split())
    assert "on 12 labels in 2 folds, each judged by the winner of 4 candidates searched on the others: held-out " \
           "AUC 0.50 → 1.00" in printed
    assert "adopted: wording support" in printed and "Set evaluation.alignment: aligned.json" in printed
    written = JudgeAlignment.model_validate(json.loads((tmp_path / "aligned.json").read_text()))
    assert written.labels == 12 and any(not d.supported for d in written.demos)
    assert 0.2 < written.cut < 0.9 and "held-out AUC 0.50 → 1.00" in written.held_out
    # named in a config, the file's content is the setting (a later edit of the file is another judge)
    (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"evaluation": {"alignment": "aligned.json"}}))
    assert load_config(tmp_path / "tuner.yaml").evaluation.alignment == written


def test_judge_align_adopts_nothing_where_held_out_agreement_does_not_rise(cli_with, tmp_path):
    invoke = cli_with(LearnsFromDemos(helps=False))
    result = invoke("judge", "align", "--labels", str(labels_file(tmp_path / "labels.jsonl")), "--candidates", "3")
    assert result.exit_code == 0, result.output
    printed = " ".join(result.output.split())
    assert "held-out AUC 0.50 → 0.50" in printed
    assert "not adopted: held-out agreement did not rise; the judge stays as configured and nothing was written" \
        in printed
    assert not (tmp_path / "judge-alignment.json").exists()


def test_too_few_labels_of_a_class_is_one_line(tmp_path):
    labels = labels_file(tmp_path / "labels.jsonl", 6, 3)
    result = run_tuner("judge", "align", "--labels", str(labels), cwd=tmp_path)
    one_line_error(result, "needs at least 4 answers labelled supported and 4 labelled not supported",
                   "have 6 and 3", "tuner judge label")
    result = run_tuner("judge", "align", "--labels", "missing.jsonl", cwd=tmp_path)
    one_line_error(result, "--labels missing.jsonl: no such file")


def test_a_resume_under_another_alignment_is_refused(tmp_path, fake_embedder):
    from tests.helpers import PROGRAMS, open_session
    from tuner.config import ProjectConfig

    first = JudgeAlignment(prompt="support", labels=8, held_out="held-out AUC 0.60 → 0.70",
                           demos=[VerdictDemo(context="c", statement="s", supported=False)])
    project = ProjectConfig(cache_dir=tmp_path / "cache", evaluation=EvaluationConfig(alignment=first))
    session = open_session(tmp_path, fake_embedder, PROGRAMS, name="a", limit=3, project=project)
    assert session.project.evaluation.alignment == first
    from tuner.reports import write_report
    from tuner.study.results import read_study

    view = read_study(session.folder)  # recorded whole, and the report names it
    assert view.meta.config.evaluation.alignment == first
    text = " ".join(write_report(view, tmp_path / "report").path.read_text().split())
    assert f"aligned with 8 of your labels (alignment {first.digest}: wording support, 1 demonstrations" in text
    other = first.model_copy(update={"demos": [VerdictDemo(context="c", statement="s", supported=True)]})
    moved = project.model_copy(update={"evaluation": EvaluationConfig(alignment=other)})
    with pytest.raises(ConfigError) as refused:
        open_session(tmp_path, fake_embedder, PROGRAMS, name="a", limit=3, project=moved)
    assert re.search(rf"judged with evaluation.alignment = alignment {first.digest}, not alignment {other.digest}",
                     str(refused.value))
    assert Candidate("support").alignment().demos == []


#: four short passages, each with an answer it supports and one that adds a detail it does not hold
REAL = [
    ("The Sorrel Bridge crosses the Vell river at Dunmore. It opened in 1892 and was designed by Ada Kell.",
     "The Sorrel Bridge opened in 1892.", "The Sorrel Bridge opened in 1892 and cost four million pounds."),
    ("Marta Lind founded the Oskar Choir in Uppsala in 1961. The choir sings mostly Swedish folk songs.",
     "Marta Lind founded the Oskar Choir.", "Marta Lind founded the Oskar Choir after winning an Olympic medal."),
    ("The Kestrel line runs from Harbin Street to the airport. Trains leave every twelve minutes.",
     "Kestrel trains leave every twelve minutes.", "Kestrel trains leave every twelve minutes and are driverless."),
    ("Fennel soup is made from fennel bulbs, leeks and stock. It is served warm with bread.",
     "Fennel soup is served warm with bread.", "Fennel soup is served warm with bread and was invented in Rome."),
]


@pytest.mark.slow
def test_judge_align_with_the_real_0_5b_model_shows_its_demonstrations_and_decides(cli_with, small_llm, tmp_path,
                                                                                   monkeypatch):
    """Real: the 0.5B judge aligned on 8 labels (4 supported, 4 with an added detail) in 2 folds, 3 candidates
    each: every candidate is judged by the model itself (its demos shown as earlier turns), the held-out figures are
    measured, and the outcome is either a written alignment a config then judges with, or nothing written."""
    labels = tmp_path / "labels.jsonl"
    for i, (context, fine, added) in enumerate(REAL):
        append(labels, Label(f"s{i}", f"q{i}", True, None, "", fine, (context,)))
        append(labels, Label(f"u{i}", f"q{i}", False, None, "", added, (context,)))
    shown = []
    real = type(small_llm).yes_probability

    def spy(self, messages, reuse_prefix=False):
        shown.append(sum(m["role"] == "assistant" for m in messages))
        return real(self, messages, reuse_prefix)
    monkeypatch.setattr(type(small_llm), "yes_probability", spy)
    invoke = cli_with(small_llm)
    result = invoke("judge", "align", "--labels", str(labels), "--candidates", "3", "--out", "aligned.json")
    assert result.exit_code == 0, result.output
    printed = " ".join(result.output.split())
    found = re.search(r"on 8 labels in 2 folds, each judged by the winner of 3 candidates searched on the others: "
                      r"held-out AUC (\d\.\d\d) → (\d\.\d\d), balanced accuracy (\d\.\d\d) → (\d\.\d\d)", printed)
    assert found, printed
    before, after = float(found.group(1)), float(found.group(2))
    assert 0 in shown and 2 in shown  # zero-shot verdicts, and verdicts after two demonstrations
    if after > before and (tmp_path / "aligned.json").exists():
        assert "adopted:" in printed
        (tmp_path / "tuner.yaml").write_text(yaml.safe_dump({"evaluation": {"alignment": "aligned.json"}}))
        result = invoke("judge", "check", "--config", "tuner.yaml", "--labels", str(labels), "--agreement", "0",
                        "--out", "check.json")
        assert result.exit_code == 0, result.output
        checked = json.loads((tmp_path / "check.json").read_text())["judges"][0]
        assert checked["setting"].endswith(", aligned") and checked["cut_source"].startswith("the alignment's")
    else:
        assert "not adopted:" in printed and not (tmp_path / "aligned.json").exists()
