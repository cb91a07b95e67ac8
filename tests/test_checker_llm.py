"""A checker LLM behind an endpoint, asked in its own format (`evaluation.verdict_prompt`): Bespoke-MiniCheck's
instructions as the system message, then "Document: … Claim: …", its P(Yes) read from the endpoint's
log-probabilities (minicheck); Granite Guardian's groundedness risk, the passages as a context turn and the statement
as the assistant's, its P(No) the P(supported) (granite-guardian). The endpoint here is a stub that answers only in
the format asked of it (a checker fed another format loses its accuracy; the stub refuses it outright, so a prompt
that drifts fails the test)."""

from __future__ import annotations

import json

import pytest

from tests.fakes import FakeEndpoint
from tests.helpers import judged_study_and_check
from tuner.config import EvaluationConfig
from tuner.errors import ConfigError
from tuner.evaluation.judge.align import align
from tuner.evaluation.judge.cut import setting_name
from tuner.metrics.graded import VERDICT_SYSTEM, verdict_messages


def test_the_minicheck_verdict_is_bespoke_minicheck_s_own_format():
    assert verdict_messages("The bridge opened in 1892.", "It opened in 1892.", "minicheck") == [
        {"role": "system", "content": VERDICT_SYSTEM["minicheck"]},
        {"role": "user", "content": "Document: The bridge opened in 1892.\nClaim: It opened in 1892."}]
    assert setting_name(EvaluationConfig(verdict_prompt="minicheck")) == "graded, sentences, minicheck"


def test_the_granite_guardian_verdict_is_its_groundedness_check():
    assert verdict_messages("The bridge opened in 1892.", "It opened in 1892.", "granite-guardian") == [
        {"role": "system", "content": "groundedness"},
        {"role": "context", "content": "The bridge opened in 1892."},
        {"role": "assistant", "content": "It opened in 1892."}]
    assert setting_name(EvaluationConfig(verdict_prompt="granite-guardian")) == "graded, sentences, granite-guardian"


@pytest.mark.parametrize("prompt", ["minicheck", "granite-guardian"])
def test_a_checker_llm_s_format_is_not_aligned(prompt):
    with pytest.raises(ConfigError, match=f"verdict_prompt {prompt} is a checker LLM's own format"):
        align(None, EvaluationConfig(verdict_prompt=prompt), [], 2, 4)


@pytest.mark.parametrize("prompt", ["minicheck", "granite-guardian"])
def test_a_study_is_judged_by_a_checker_llm_in_its_own_format_and_checked_on_labels(tmp_path, prompt):
    """`tuner optimize --target faithfulness` (2 trials, 3 demo questions) with the checker as judge, then `tuner
    judge check --labels` reading the same judge: every verdict asked in its format and answered, and read the
    right way round (Granite Guardian's Yes is the risk: its P(No) is the P(supported))."""
    with FakeEndpoint(prompt) as checker:
        studied, _, faithfulness = judged_study_and_check(tmp_path, {
            "backend": "openai-compatible", "base_url": checker.url, "model": prompt}, {"verdict_prompt": prompt})
        asked, answered = len(checker.bodies), len(checker.answered)
    assert studied.returncode == 0, studied.stderr
    trials = [json.loads(p.read_text()) for p in sorted((tmp_path / "studies" / "s" / "trials").glob("*.json"))]
    assert len(trials) == 2 and all(t["metrics"]["faithfulness"] is not None for t in trials)
    assert faithfulness["auc"] > 0.9  # the invented details are what the checker does not find in the document
    assert asked > 12 and answered == asked  # every verdict in its format: none refused
