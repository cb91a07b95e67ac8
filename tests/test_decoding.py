"""Fast llama.cpp decoding (tuner/models/llms/_llama_decoding.py): the same greedy output as llama-cpp-python's own,
saved template prefixes that cut the tokens a prompt evaluates, the grammar still binding, loops stopped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tuner.models.llms._llama_decoding import LOOP_SPAN, common_prefix, looping

SCHEMA = {"title": "Statements", "type": "object", "required": ["statements"],
          "properties": {"statements": {"type": "array", "items": {"type": "string"}}}}
#: two templates of the judge's shape: long fixed instructions, then the sample
TEMPLATE_A = ("Break the answer into short standalone statements. Each statement must be understandable without the "
              "others; replace pronouns by the names they stand for; keep numbers and dates exactly as written. "
              "Reply with a JSON object whose key 'statements' lists them.\n" * 6)
TEMPLATE_B = ("Decide whether the passage helps to answer the question. Think about what the question asks, whether "
              "the passage states it, and whether the statement could be inferred from it. Reply in JSON.\n" * 6)


def ask(template: str, sample: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"{template}\nAnswer: {sample}"}]


def test_common_prefix_counts_shared_leading_tokens():
    assert common_prefix(np.array([1, 2, 3, 4]), np.array([1, 2, 9])) == 2
    assert common_prefix(np.array([1, 2]), np.array([1, 2, 3])) == 2
    assert common_prefix(np.array([7]), np.array([1])) == 0


def test_a_block_three_times_in_a_row_is_a_loop_and_nothing_less_is():
    block = list(range(100, 140))  # 40 tokens
    assert looping(list(range(10)) + block * 3)
    assert not looping(list(range(10)) + block * 2)
    assert looping([1, 2, 3] * 11) and not looping([1, 2, 3] * 10)  # short blocks must span LOOP_SPAN tokens
    assert looping([5] * LOOP_SPAN) and not looping([5] * (LOOP_SPAN - 1))
    assert not looping(list(range(500)))
    assert not looping(block * 3 + [1])  # it must end in the loop: what stopped it is no loop


@pytest.fixture(scope="module")
def pair(small_gguf):
    """The 0.5B model twice: llama-cpp-python's own decoding and tuner's fast decoding."""
    from tuner.models.llms._llama_cpp import LlamaCppLLM

    plain, fast = (LlamaCppLLM(small_gguf, decoding=mode) for mode in ("plain", "fast"))
    yield plain, fast
    plain.close()
    fast.close()


@pytest.mark.slow
def test_fast_decoding_gives_plain_greedy_output_and_is_another_cache_identity(pair):
    plain, fast = pair
    assert fast.name == plain.name + ":fast"
    for template, sample in ((TEMPLATE_A, "Paris is the capital of France. It has two million inhabitants."),
                             (TEMPLATE_B, "The Eiffel Tower was built in 1889 for the World Fair."),
                             (TEMPLATE_A, "Marie Curie won two Nobel prizes, in physics and in chemistry.")):
        replies = [llm.chat(ask(template, sample), max_tokens=120, json_schema=SCHEMA) for llm in pair]
        assert replies[0].text == replies[1].text
        assert json.loads(replies[1].text)["statements"]
    assert fast.chat(ask(TEMPLATE_B, "Bananas are yellow."), max_tokens=30).text  # free text: no grammar
    yes = [float(llm.yes_probability(ask(TEMPLATE_B, "Paris is in France. Yes or no?")).text) for llm in pair]
    assert yes[0] == pytest.approx(yes[1], abs=0.02)


@pytest.mark.slow
def test_sampled_replies_still_obey_the_grammar(pair):
    """The grammar is checked after sampling: a sampled token it refuses must be drawn again under it."""
    _, fast = pair
    for seed in range(4):
        reply = fast.chat(ask(TEMPLATE_A, "Rome is in Italy; its river is the Tiber."), max_tokens=120,
                          temperature=1.5, seed=seed, json_schema=SCHEMA)
        assert isinstance(json.loads(reply.text)["statements"], list)


@pytest.mark.slow
def test_a_template_seen_before_resumes_after_its_instructions(pair):
    """A, B, A: plain decoding evaluates the second A whole (B was in between); fast decoding restores A's state."""
    evaluated = {}
    for llm in pair:
        llm.profile = []
        try:
            for template, sample in ((TEMPLATE_A, "Oslo is in Norway."), (TEMPLATE_B, "Lima is in Peru."),
                                     (TEMPLATE_A, "Quito is in Ecuador.")):
                llm.chat(ask(template, sample), max_tokens=40, json_schema=SCHEMA)
            evaluated[llm.name] = llm.profile[-1]
        finally:
            llm.profile = None
    plain, fast = (evaluated[llm.name] for llm in pair)
    assert plain.evaluated > 0.85 * plain.prompt_tokens  # all but the chat preamble both templates share
    assert fast.evaluated < 0.1 * fast.prompt_tokens  # only the sample after the instructions


@pytest.mark.slow
def test_a_looping_generation_stops_early(pair):
    plain, fast = pair
    request = [{"role": "user", "content": "Write the words 'red green blue' 150 times, separated by spaces."}]
    looped, stopped = (llm.chat(request, max_tokens=300) for llm in pair)
    assert looped.completion_tokens == 300  # plain decoding runs to the cap
    assert stopped.completion_tokens < 100 and "red green blue" in stopped.text


@pytest.mark.slow
def test_graded_verdicts_resume_their_question_s_contexts_and_grade_as_a_whole_prompt_would(pair):
    """A question's verdicts share the contexts: each after the first computes only its statement's tokens, and
    its P(yes) is the whole prompt's up to float rounding."""
    from tuner.evaluation.metrics.graded import verdict_messages

    plain, fast = pair
    context = " ".join(["The Sorrel Bridge crosses the Vell river at Dunmore and opened in 1892."] * 12)
    statements = ["The Sorrel Bridge crosses the Vell river.", "The Sorrel Bridge opened in 1892.",
                  "The Sorrel Bridge was painted purple by Gustave Eiffel in 1950."]
    computed, evaluate = [], fast._model.eval
    fast._model.eval = lambda tokens: (computed.append(len(tokens)), evaluate(tokens))[1]
    try:
        resumed = [float(fast.yes_probability(verdict_messages(context, s), reuse_prefix=True).text)
                   for s in statements]
        fast.chat(ask(TEMPLATE_A, "Bananas are yellow."), max_tokens=5)  # another template between two calls
        del computed[3:]
        again = float(fast.yes_probability(verdict_messages(context, statements[0]), reuse_prefix=True).text)
    finally:
        fast._model.eval = evaluate
    assert computed[0] > 150 and max(computed[1:]) < 40  # after the first, only a statement's own tokens
    whole = [float(plain.yes_probability(verdict_messages(context, s)).text) for s in statements]
    assert resumed == pytest.approx(whole, abs=0.02) and again == pytest.approx(whole[0], abs=0.02)
    assert min(resumed[:2]) > resumed[2]  # supported statements above the invented one
