"""Fast llama.cpp decoding (tuner/models/llms/_llama_decoding.py): the same greedy output as llama-cpp-python's own,
saved template prefixes that cut the tokens a prompt evaluates, the grammar still binding, loops stopped."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from tuner.models.llms._llama_decoding import LOOP_SPAN, REPLACED_TAIL, PrefixStates, common_prefix, looping

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


class KVLib:
    """llama.cpp's state calls as PrefixStates makes them, on a context whose KV holds `ctx.size` bytes; counts the
    states it loads."""

    def __init__(self):
        self.loaded = 0

    def llama_state_seq_get_size(self, ctx, seq):
        return ctx.size

    def llama_state_seq_get_data(self, ctx, buffer, size, seq):
        return size

    def llama_state_seq_set_data(self, ctx, buffer, size, seq):
        self.loaded += 1
        return size

    def llama_get_memory(self, ctx):
        return ctx

    def llama_memory_clear(self, memory, data):
        pass


#: a question's prompt: the template every question shares (150 tokens), then its own 1,000 (its passages)
TEMPLATE = np.arange(150)


def prompt(question: int, passages: int = 5, program: int = 0, alpha: int = 0) -> np.ndarray:
    """`passages` of 200 tokens each, then 100 of the program's instructions: trials that change the program or
    keep fewer passages share the prompt's prefix, one that retrieves with another `alpha` does not"""
    own = np.arange(200 * passages) + 10_000 * (question + 1) + 500_000 * alpha
    return np.concatenate([TEMPLATE, own, np.arange(100) + 1_000_000 * (program + 1)])


def walk(states: PrefixStates, lib: KVLib, questions: range, **prompt_settings) -> int:
    """One trial: each question's prompt resumed from what is saved, then saved; how many resumed more than the
    template."""
    resumed = 0
    for q in questions:
        tokens = prompt(q, **prompt_settings)
        got = states.restore(SimpleNamespace(), tokens, have=0, question=str(q))
        resumed += got is not None and common_prefix(got, tokens) > len(TEMPLATE)
        states.save(SimpleNamespace(size=len(tokens)), tokens, question=str(q))
    return resumed


def test_prefix_states_are_kept_per_question_and_resume_a_prefix_of_them():
    lib = KVLib()
    states = PrefixStates(lib, budget=10 * 1_250)
    assert walk(states, lib, range(6)) == 0 and len(states._saved) == 6  # one template, six questions: six states
    assert walk(states, lib, range(6), program=1) == 6  # another program: each resumes its passages
    assert len(states._saved) == 6  # and is not saved again: it adds only the instructions' tail
    tokens = prompt(2, passages=2)  # top_k 2 resumes top_k 5's first two passages
    assert common_prefix(states.restore(SimpleNamespace(), tokens, have=0, question="2"), tokens) == 150 + 400
    states.save(SimpleNamespace(size=len(tokens)), tokens, question="2")  # it reaches less far: not worth a state
    assert len(states._saved) == 6


def test_short_prompts_that_share_only_their_template_are_each_kept():
    """One passage per question: 200 tokens of its own beside the 150 of the template it shares (was: the second
    question's state replaced the first's, as if the template were the prompt)."""
    states = PrefixStates(KVLib(), budget=1 << 30)
    walk(states, KVLib(), range(4), passages=1)
    assert len(states._saved) == 4 and walk(states, KVLib(), range(4), passages=1, program=1) == 4


def test_a_longer_prompt_replaces_the_saved_one_it_extends_by_more_than_a_tail():
    lib = KVLib()
    states = PrefixStates(lib, budget=1 << 30)
    short = prompt(0, passages=2)
    states.save(SimpleNamespace(size=len(short)), short, question="0")
    longer = prompt(0, passages=5)
    assert len(longer) - common_prefix(short, longer) > REPLACED_TAIL
    states.save(SimpleNamespace(size=len(longer)), longer, question="0")
    assert [len(s.tokens) for s in states._saved] == [len(longer)]  # it serves the short one's prefix too


#: the judge's template (its contexts-first verdict prompt's instructions), another than the answer's
JUDGE = np.arange(150) + 9_000_000


def visit(states: PrefixStates, question: int, alpha: int = 0) -> list[int]:
    """A question's calls in one trial as a study makes them: its answer prompt, then three verdicts of the judge on
    its passages (the judge's template, the passages, a statement of 40 tokens); the tokens each computed."""
    passages = prompt(question, alpha=alpha)[len(TEMPLATE):-100]
    calls = [prompt(question, alpha=alpha)] + [np.concatenate([JUDGE, passages, np.arange(40) + 2_000_000 + 100 * i])
                                               for i in range(3)]
    computed = []
    for tokens in calls:
        got = states.restore(SimpleNamespace(), tokens, have=0, question=str(question))
        computed.append(len(tokens) - (0 if got is None else common_prefix(got, tokens)))
        states.save(SimpleNamespace(size=len(tokens)), tokens, question=str(question))
    return computed


def test_a_full_budget_keeps_each_question_s_verdicts_resuming_its_passages_and_some_questions_for_the_next_trial():
    """Six questions of two states each, room for three and a half: every visit's later verdicts compute only their
    statement (was: once the budget was full, a question whose states were all in use kept none, and each verdict
    computed the passages again), and each trial after the first resumes the passages of some question."""
    states = PrefixStates(KVLib(), budget=int(3.5 * len(prompt(0))))
    trials = [[visit(states, q) for q in range(6)] for _ in range(3)]
    assert all(later == [40, 40] for trial in trials for _, _, *later in trial)
    for trial in trials[1:]:
        assert any(0 in calls for calls in trial)  # a question's answer or verdict resumed whole
        assert sum(map(sum, trial)) < sum(map(sum, trials[0]))
    assert states.held <= states.budget
    # a trial that retrieves other passages gives its verdicts the same
    assert all(later == [40, 40] for q in range(6) for _, _, *later in [visit(states, q, alpha=1)])
    # states saved outside any question (a judge check) give way to a question's
    outside = prompt(99)
    states.save(SimpleNamespace(size=len(outside)), outside)
    visit(states, 0)
    assert all(s.question for s in states._saved) and states.held <= states.budget


def test_a_full_budget_drops_a_state_wherever_it_sits_among_the_saved():
    """The state to drop is found by identity: question 2's, the last of three saved, gives way to question 1's new
    passages (was: the list compared the earlier states' tokens with it, and numpy refused to)."""
    lib = KVLib()
    size = len(prompt(0))
    states = PrefixStates(lib, budget=3 * size)
    walk(states, lib, range(3))
    new = prompt(1, passages=4, alpha=1)  # another length, as other passages have
    states.save(SimpleNamespace(size=len(new)), new, question="1")
    assert [(s.question, len(s.tokens)) for s in states._saved] == [("0", size), ("1", size), ("1", len(new))]


def test_no_budget_keeps_nothing():
    states = PrefixStates(KVLib(), budget=0)
    assert walk(states, KVLib(), range(3)) == 0 and states._saved == []


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
    from tuner.metrics.graded import verdict_messages

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


@pytest.mark.slow
def test_an_answer_under_another_program_resumes_its_passages_and_says_what_it_computed(pair):
    """Passages first: question 1 asked again under the strict program after question 2 came between resumes the
    passages' state and computes only the instructions after them, and answers as the whole prompt does."""
    from tuner.prompts.programs import BUILTIN_PROGRAMS, PassagesFirst, number_contexts

    plain, fast = pair
    passages = {q: [f"{q} {fact}" for fact in ("was founded by river traders in the ninth century and grew around "
                                                "its harbour, which silted up in 1450.",
                                                "is known for a cathedral whose spire fell in a storm in 1703 and was "
                                                "rebuilt in stone twelve years later.") * 6]
                for q in ("Dunmore", "Kelvale")}

    def answer(llm, town: str, program: str):
        messages = PassagesFirst().format(BUILTIN_PROGRAMS[program], [], {
            "question": f"When did the spire of {town}'s cathedral fall?", "contexts": number_contexts(passages[town])})
        return llm.chat(messages, max_tokens=60)

    for town in passages:
        first = answer(fast, town, "default")
    assert first.evaluated_tokens > 0.8 * first.prompt_tokens  # a new question: its passages computed once
    again = answer(fast, "Dunmore", "strict")
    assert again.evaluated_tokens < 0.4 * again.prompt_tokens  # only the strict instructions after the passages
    assert again.text == answer(plain, "Dunmore", "strict").text  # greedy: the whole prompt's answer


def test_a_prompt_lookup_draft_continues_the_latest_earlier_occurrence_of_the_last_tokens():
    from tuner.models.llms._llama_decoding import PromptLookup

    draft = PromptLookup(most=3, match=2)
    text = np.array([5, 6, 7, 8, 9, 1, 5, 6, 2, 3, 4, 5, 6], dtype=np.intc)
    assert draft(text).tolist() == [2, 3, 4]  # the later of the two earlier (5, 6), cut at `most`
    assert draft(np.array([1, 2, 3, 1, 2], dtype=np.intc)).tolist() == [3, 1, 2]
    assert draft(np.array([1, 2, 3, 4], dtype=np.intc)).tolist() == []  # (3, 4) never came before
    assert draft(np.array([1, 2], dtype=np.intc)).tolist() == []


#: passages an answer copies from, and questions on them
ESSAY = ["The Sorrel Bridge crosses the Vell river at Dunmore. It was designed by the engineer Agnes Rudd and opened "
         "to traffic in 1892, after six years of work by four hundred masons.",
         "Dunmore's harbour silted up in 1450, and the town's trade moved to Kelvale, whose merchants built the "
         "first stone quay on the Vell in 1461.",
         "The Vell river rises in the Corran hills and runs for ninety kilometres before it reaches the sea at "
         "Kelvale, where its estuary is two kilometres wide."]


def test_a_context_first_answer_prompt_begins_as_the_judge_s_numbered_verdicts_do():
    """Both chats open with one user turn whose text starts with the numbered passages and a blank line; the answer's
    instructions and question come after them, a program's demonstrations after those."""
    from tuner.metrics.graded import verdict_messages
    from tuner.prompts.programs import BUILTIN_PROGRAMS, ContextFirst
    from tuner.text import number_contexts

    numbered = number_contexts(ESSAY)
    verdict = verdict_messages(numbered, "The Vell is ninety kilometres long.")
    answer = ContextFirst().format(BUILTIN_PROGRAMS["strict"], [], {"question": "How long is the Vell?",
                                                                      "contexts": numbered})
    shared = f"Context:\n{numbered}\n\n"
    assert [m["role"] for m in verdict] == [m["role"] for m in answer] == ["user"]
    assert verdict[0]["content"].startswith(shared) and answer[0]["content"].startswith(shared)
    rest = answer[0]["content"][len(shared):]
    assert "How long is the Vell?" in rest and "strictly faithful" in rest and ESSAY[0] not in rest
    demo = {"question": "Who built the quay?", "contexts": "[1] Kelvale's merchants built the quay.",
            "answer": "Kelvale's merchants [1]."}
    shown = ContextFirst().format(BUILTIN_PROGRAMS["default"], [demo], {"question": "How long is the Vell?",
                                                                         "contexts": numbered})
    assert shown[0]["content"].startswith(shared) and [m["role"] for m in shown] == ["user", "assistant", "user"]
    assert "Who built the quay?" in shown[0]["content"] and "How long is the Vell?" in shown[2]["content"]


def test_a_model_draft_is_the_smaller_model_s_greedy_continuation_up_to_its_end():
    from tuner.models.llms._llama_decoding import ModelDraft

    class Writer:  # a stand-in for llama_cpp.Llama: writes 5, 6, 7, then its end-of-sequence token
        def generate(self, tokens, top_k, temp):
            assert top_k == 1 and temp == 0.0 and tokens == [1, 2, 3]  # greedy, from the whole text so far
            yield from (5, 6, 7, 0, 9)

        def token_eos(self):
            return 0

    assert ModelDraft(Writer(), most=2)(np.array([1, 2, 3], dtype=np.intc)).tolist() == [5, 6]
    assert ModelDraft(Writer(), most=8)(np.array([1, 2, 3], dtype=np.intc)).tolist() == [5, 6, 7]


def test_a_draft_model_of_another_vocabulary_is_refused_in_one_line(tmp_path):
    from tuner.models.llms import LLMError
    from tuner.models.llms._llama_cpp import LlamaCppLLM

    class Loaded:
        def __init__(self, n_vocab: int, **_):
            self.vocab, self.closed = n_vocab, False

        def n_vocab(self):
            return self.vocab

        def close(self):
            self.closed = True

    drafter = Loaded(32000)
    llm = object.__new__(LlamaCppLLM)  # what _load leaves: the answering model loaded, its settings
    llm.path, llm._llama, llm._settings = tmp_path / "big.gguf", Loaded(151936), {"n_ctx": 4096, "n_threads": 2}
    llm._llama_cpp = type("llama_cpp", (), {"Llama": staticmethod(lambda **_: drafter)})
    with pytest.raises(LLMError) as refused:
        llm._draft_model(tmp_path / "small.gguf")
    assert str(refused.value) == ("speculative: small.gguf cannot draft for big.gguf: its vocabulary has 32,000 "
                                  "tokens, not 151,936 (a smaller model of the same family drafts: qwen2.5-0.5b for "
                                  "qwen2.5-1.5b)")
    assert drafter.closed


@pytest.mark.slow
@pytest.mark.parametrize("speculative", ["prompt-lookup", "the model itself"])
def test_drafts_write_the_same_greedy_answers_in_fewer_steps(pair, small_gguf, speculative):
    """Speculative decoding on the answers of three questions, drafted from the prompt (`speculative:
    prompt-lookup`) or by a draft model (here the 0.5B itself: CI has no smaller one): the same text as decoding
    token by token, written in fewer model steps than tokens (drafts accepted several at a time)."""
    from tuner.models.llms._llama_cpp import LlamaCppLLM
    from tuner.prompts.programs import BUILTIN_PROGRAMS, ContextFirst
    from tuner.text import number_contexts

    _, fast = pair
    drafted = LlamaCppLLM(small_gguf, speculative=speculative if speculative == "prompt-lookup" else str(small_gguf))
    steps, evaluate = [], drafted._model.eval
    drafted._model.eval = lambda tokens: (steps.append(len(tokens)), evaluate(tokens))[1]
    written = 0
    try:
        for question in ("Who designed the Sorrel Bridge, and when did it open?",
                         "Why did Dunmore's trade move to Kelvale?", "How long is the Vell river?"):
            messages = ContextFirst().format(BUILTIN_PROGRAMS["default"], [], {
                "question": question, "contexts": number_contexts(ESSAY)})
            one_by_one, reply = fast.chat(messages, max_tokens=80), drafted.chat(messages, max_tokens=80)
            assert reply.text == one_by_one.text and reply.text
            written += reply.completion_tokens
    finally:
        drafted._model.eval = evaluate
        drafted.close()
    checked = [n for n in steps[1:] if n < 20]  # the steps after each prompt: one token, or one with its draft
    assert max(checked) > 1 and len(checked) < written


@pytest.mark.slow
def test_a_context_first_answer_lends_its_passages_to_the_judges_verdicts(pair):
    """One model answering and judging: under `answer_layout: context-first` and `verdict_contexts: numbered` the
    verdicts after an answer compute only their statements' tokens, and grade as the whole prompt would."""
    from tuner.metrics.graded import verdict_messages
    from tuner.prompts.programs import BUILTIN_PROGRAMS, ContextFirst
    from tuner.text import number_contexts

    plain, fast = pair
    passages = ESSAY * 3
    messages = ContextFirst().format(BUILTIN_PROGRAMS["default"], [], {
        "question": "Who designed the Sorrel Bridge?", "contexts": number_contexts(passages)})
    assert fast.chat(messages, max_tokens=40).prompt_tokens > 500
    statements = ["Agnes Rudd designed the Sorrel Bridge.", "The Sorrel Bridge opened in 1892.",
                  "The Sorrel Bridge was painted purple by Gustave Eiffel in 1950."]
    verdicts = [fast.yes_probability(verdict_messages(number_contexts(passages), s), reuse_prefix=True)
                for s in statements]
    assert max(v.evaluated_tokens for v in verdicts) < 40  # the answer's passages resumed, never computed again
    whole = [float(plain.yes_probability(verdict_messages(number_contexts(passages), s)).text) for s in statements]
    # up to the float rounding of a prompt evaluated in two parts (on 150 claims people labelled the judge's AUC
    # did not move: docs/performance.md, "One read of the passages")
    assert [float(v.text) for v in verdicts] == pytest.approx(whole, abs=0.03)
