"""The sixth battery of faults (issue 86): a study that finished nothing, paths read from the wrong folder, a random
checker, a failed check paid twice, a refusal said as tuner's own words, wiring said wrongly, resumes refused late,
and the smaller lines. Each case as a user meets it: what the command printed and exited with, what the study kept,
what a system was asked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.fakes import SystemServer
from tests.helpers import one_line_error, open_session, own_answer, run_tuner
from tuner.config import ProjectConfig, load_config
from tuner.errors import BAD_INPUT, ERROR, ConfigError

TESTS = Path(__file__).parent
DEMO = Path(__file__).parents[1] / "tuner" / "data" / "demo"
KNOBS = {"k": {"type": "int", "default": 2}}
SPACE = {"params": {"k": {"type": "int", "low": 1, "high": 2}}}


@pytest.fixture
def own(monkeypatch):
    monkeypatch.setenv("OWN_SYSTEM_CORPUS", str(DEMO / "corpus.jsonl"))
    monkeypatch.delenv("OWN_SYSTEM_CALLS", raising=False)
    monkeypatch.delenv("OWN_SYSTEM_GGUF", raising=False)


def system_study(folder: Path, system: dict, space: dict = SPACE, dataset: Path = DEMO) -> None:
    """sys.yaml (a system over `dataset`) and space.yaml in `folder`."""
    (folder / "sys.yaml").write_text(yaml.safe_dump({
        "system": {"version": "1", "knobs": KNOBS, **system}, "dataset": {"path": str(dataset)}}))
    (folder / "space.yaml").write_text(yaml.safe_dump(space))


def optimize(*more: str, limit: int = 3) -> tuple[str, ...]:
    return ("optimize", "--config", "sys.yaml", "--search-space", "space.yaml", "--limit", str(limit), "--holdout",
            "0", "--judge-check", "off", "--study", "s", "--own-cache", "--target", "ndcg@10", *more)


def asked(log: Path) -> list[list]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


REFUSES_ALL = """
import json
from tuner.systems import Rejected

def answer(question, params):
    with open("asked.jsonl", "a") as log:
        log.write(json.dumps([question["id"], params]) + "\\n")
    raise Rejected(f"k must be at most 1")
"""


# --- 1. a study that finished nothing -----------------------------------------------------------------------------

def test_a_study_whose_every_trial_failed_exits_1_however_it_stopped(tmp_path):
    (tmp_path / "picky.py").write_text(REFUSES_ALL)
    system_study(tmp_path, {"python": "picky:answer"}, {"params": {"k": {"type": "int", "low": 3, "high": 4}}})
    exhausted = run_tuner(*optimize("--trials", "4"), cwd=tmp_path)  # the space runs out after the baseline and 2
    said = one_line_error(exhausted, started=True)
    assert exhausted.returncode == ERROR
    assert said == ("error: no trial of study s finished (3 failed; the last: system python:picky:answer refused the "
                    "knobs k=3: k must be at most 1): nothing to report as best")
    assert "stopped at 3 distinct configurations (0 finished, 3 failed): the sampler proposed only configurations " \
           "already tried" in exhausted.stderr
    assert (tmp_path / "reports" / "s" / "report.md").is_file()  # the report still says what failed
    shutil.rmtree(tmp_path / "studies")
    budget = run_tuner(*optimize("--trials", "2"), cwd=tmp_path)  # the trials asked for, all failed
    one_line_error(budget, "error: no trial of study s finished (2 failed", started=True)
    assert budget.returncode == ERROR


def test_a_round_that_finished_nothing_stops_the_rounds_with_exit_1(tmp_path):
    (tmp_path / "picky.py").write_text(REFUSES_ALL)
    system_study(tmp_path, {"python": "picky:answer"}, {"params": {"k": {"type": "int", "low": 3, "high": 4}}})
    result = run_tuner(*optimize("--trials", "2", "--rounds", "2"), cwd=tmp_path)
    one_line_error(result, "error: no trial of study s finished (2 failed", started=True)
    assert result.returncode == ERROR and (tmp_path / "reports" / "s" / "report.md").is_file()
    assert not (tmp_path / "studies" / "s.r2").exists()  # no second round built on nothing


# --- 2. relative paths from the config's folder --------------------------------------------------------------------

def test_the_checker_s_and_the_draft_model_s_relative_paths_are_read_from_the_config_s_folder(tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "models" / "x").mkdir(parents=True)
    (tmp_path / "conf" / "tuner.yaml").write_text(yaml.safe_dump({
        "generator": {"model": "qwen2.5-1.5b", "speculative": "../drafts/small.gguf"},
        "evaluation": {"checker": {"classifier": "../models/x"}}}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = load_config(Path("../conf/tuner.yaml"))
    assert Path(config.evaluation.checker.classifier) == Path("../conf/../models/x")
    assert Path(config.evaluation.checker.classifier).resolve() == (tmp_path / "models" / "x").resolve()
    assert Path(config.generator.speculative).resolve() == (tmp_path / "drafts" / "small.gguf").resolve()
    hub = ProjectConfig.model_validate({"evaluation": {"checker": {"classifier": "lytang/MiniCheck-RoBERTa-Large"}}})
    assert hub.evaluation.checker.classifier == "lytang/MiniCheck-RoBERTa-Large"  # a Hub id stays one
    named = load_config_text(tmp_path, {"generator": {"model": "qwen2.5-1.5b", "speculative": "qwen2.5-0.5b"}})
    assert named.generator.speculative == "qwen2.5-0.5b"  # a named model is no path


def load_config_text(folder: Path, data: dict) -> ProjectConfig:
    (folder / "named.yaml").write_text(yaml.safe_dump(data))
    return load_config(folder / "named.yaml")


def test_a_draft_model_beside_the_config_is_found_and_one_not_smaller_is_refused(tmp_path, monkeypatch, small_gguf):
    from tuner.models.check import gguf_of

    (tmp_path / "conf").mkdir()
    with small_gguf.open("rb") as whole, (tmp_path / "draft.gguf").open("wb") as head:
        head.write(whole.read(8 << 20))  # its header and a little: a smaller GGUF file, as a draft model is
    (tmp_path / "model.gguf").symlink_to(small_gguf)
    (tmp_path / "conf" / "tuner.yaml").write_text(yaml.safe_dump({
        "generator": {"model": str(tmp_path / "model.gguf"), "speculative": "../draft.gguf"}}))
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # where ../draft.gguf is not
    path, size = gguf_of(load_config(tmp_path / "conf" / "tuner.yaml").generator, "generator")
    assert size > 2 * small_gguf.stat().st_size + 2 * (8 << 20)  # the draft's memory counted beside the model's
    (tmp_path / "conf" / "tuner.yaml").write_text(yaml.safe_dump({
        "generator": {"model": str(tmp_path / "draft.gguf"), "speculative": "../model.gguf"}}))
    with pytest.raises(ConfigError) as refused:
        gguf_of(load_config(tmp_path / "conf" / "tuner.yaml").generator, "generator")
    megabytes = f"{small_gguf.stat().st_size / 2**20:,.0f}"
    assert str(refused.value) == (
        f"generator's draft model (speculative:) {tmp_path / 'conf' / '..' / 'model.gguf'}: model.gguf ({megabytes} "
        f"MB) is not smaller than the model it drafts for, draft.gguf (8 MB); a smaller model of the same family "
        f"drafts (qwen2.5-0.5b for qwen2.5-1.5b), or speculative: prompt-lookup needs none")


# --- 3. a classifier that is no sequence classifier ------------------------------------------------------------

@pytest.mark.slow  # it builds and loads two tiny BERTs
def test_a_classifier_checker_without_a_classification_head_or_with_unnamed_labels_is_refused(tmp_path):
    from tests.conftest import tiny_bert
    from tuner.config import EvaluationConfig
    from tuner.metrics.checkers import make_checker

    encoder = tmp_path / "encoder"
    tiny_bert(encoder, "BertModel").save_pretrained(encoder)  # a sentence-transformers folder's model
    with pytest.raises(ConfigError) as refused:
        make_checker(EvaluationConfig(checker={"classifier": str(encoder)}).checker)
    said = str(refused.value)
    assert said.startswith(f"checker classifier:{encoder}: not a sequence classifier (BertModel): its weights hold "
                           f"no classification head (classifier.") and "\n" not in said
    assert said.endswith("would be random); give a fact-checking or NLI model trained for sequence classification")
    unnamed = tmp_path / "unnamed"
    tiny_bert(unnamed, "BertForSequenceClassification", num_labels=3).save_pretrained(unnamed)
    with pytest.raises(ConfigError) as refused:
        make_checker(EvaluationConfig(checker={"classifier": str(unnamed), "reads": "nli"}).checker)
    assert str(refused.value) == (
        f"checker classifier:{unnamed} reads nli, but its labels name no entailment (label_0, label_1, label_2): name "
        f"them in its config.json's id2label (entailment, neutral, contradiction as it was trained)")


# --- 4. the check's failed reply is not asked again by trial 0 ----------------------------------------------------

def test_a_reply_that_failed_the_check_before_trial_0_is_not_asked_again_by_trial_0(tmp_path, fake_embedder, own):
    with SystemServer(own_answer, "500") as server:
        system = {"http": server.url, "version": "1", "knobs": KNOBS}
        session = open_session(tmp_path, fake_embedder, SPACE, targets=("faithfulness",), limit=2,
                               project=ProjectConfig(cache_dir=tmp_path / "cache", system=system))
        session.run(1)  # the check asks q01 (4 tries), trial 0 asks q02 alone
    assert [q for q, _ in server.asked()] == ["q01"] * 4 + ["q02"] * 4


RAISES = """
import json

def answer(question, params):
    with open("asked.jsonl", "a") as log:
        log.write(json.dumps([question["id"], params]) + "\\n")
    raise KeyError("embedding")
"""


def test_a_python_system_that_raised_in_the_check_is_called_once_for_that_question(tmp_path, fake_embedder,
                                                                                  monkeypatch):
    (tmp_path / "raises.py").write_text(RAISES)
    monkeypatch.chdir(tmp_path)
    system = {"python": "raises:answer", "path": tmp_path, "version": "1", "knobs": KNOBS}
    session = open_session(tmp_path, fake_embedder, SPACE, targets=("faithfulness",), limit=2,
                           project=ProjectConfig(cache_dir=tmp_path / "cache", system=system))
    session.run(1)
    assert asked(tmp_path / "asked.jsonl") == [["q01", {"k": 2}], ["q02", {"k": 2}]]  # q01 by the check alone


# --- 5. a refusal is the system's, one code whichever command saw it -----------------------------------------------

REFUSING_COMMAND = """
import json, sys
request = json.load(sys.stdin)
sys.stderr.write("k must be at most 1\\n")
sys.exit(3)
"""


def test_a_refusal_of_the_knobs_is_said_as_the_system_s_and_exits_2_under_eval_and_system_check(tmp_path, own):
    (tmp_path / "picky.py").write_text(REFUSES_ALL)
    (tmp_path / "ask.py").write_text(REFUSING_COMMAND)
    with SystemServer(own_answer, "400") as server:
        for system, said in (
                ({"python": "picky:answer"}, "system python:picky:answer refused the knobs k=2: k must be at most 1"),
                ({"command": ["python", "ask.py"]},
                 "system command:python ask.py refused the knobs k=2: k must be at most 1"),
                ({"http": server.url},
                 f"system {server.url} refused the knobs k=2: k=2 is more than this index holds (HTTP 400)")):
            system_study(tmp_path, system)
            evaluated = run_tuner("eval", "--config", "sys.yaml", "--limit", "2", "--retrieval-only", cwd=tmp_path)
            assert one_line_error(evaluated) == f"error: {said}" and evaluated.returncode == BAD_INPUT
            checked = run_tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path)
            assert one_line_error(checked) == f"error: {said}" and checked.returncode == BAD_INPUT


# --- 6. what system check and eval say of gold ids -------------------------------------------------------------

def test_system_check_on_a_dataset_without_qrels_says_no_gold_can_be_told_and_eval_says_why_ids_are_missing(
        tmp_path, own):
    no_qrels = tmp_path / "no-qrels"
    no_qrels.mkdir()
    shutil.copy(DEMO / "corpus.jsonl", no_qrels / "corpus.jsonl")
    shutil.copy(DEMO / "queries.jsonl", no_qrels / "queries.jsonl")
    system_study(tmp_path, {"python": "own_system:answer", "path": str(TESTS)}, dataset=no_qrels)
    checked = run_tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    assert "— (no qrels)" in checked.stdout and "│ no " not in checked.stdout.split("context(s)")[1].split("\n\n")[0]
    assert "ready for judged targets (faithfulness, answer_relevancy): this dataset names no gold documents (no " \
           "qrels), so id targets (ndcg@10, recall@k) cannot be scored on it whatever the system returns" in \
           " ".join(checked.stdout.split())
    (tmp_path / "sys.yaml").write_text(yaml.safe_dump({
        "system": {"python": "own_system:answer", "path": str(TESTS), "version": "1",
                   "knobs": {**KNOBS, "ids": {"type": "bool", "default": False}}}, "dataset": {"path": str(DEMO)}}))
    bare = run_tuner("eval", "--config", "sys.yaml", "--limit", "2", "--retrieval-only", cwd=tmp_path)
    assert bare.returncode == 0, bare.stderr
    text = " ".join(bare.stdout.split())
    assert "the contexts carry no document id, so no id metric could be computed" in text
    assert "no gold document ids in this dataset" not in text
    assert "system python:own_system:answer: ids=False, k=2" in text and "system={}" not in text


def test_an_eval_whose_every_question_failed_says_so_under_its_retrieval_table(tmp_path):
    (tmp_path / "raises.py").write_text(RAISES)
    system_study(tmp_path, {"python": "raises:answer"})
    failed = run_tuner("eval", "--config", "sys.yaml", "--limit", "2", "--retrieval-only", cwd=tmp_path)
    text = " ".join(failed.stdout.split())
    assert "no question with gold document ids got contexts (each failed or returned none): no id metric" in text
    assert "no gold document ids in this dataset" not in text


# --- 7. adapter wiring said rightly ----------------------------------------------------------------------------

def test_an_id_key_no_document_holds_is_named_with_the_keys_its_metadata_has():
    from langchain_core.documents import Document

    from tuner.systems.adapters import langchain_reply

    doc = Document(page_content="Velmora is an island.", metadata={"source": "velmora.txt", "page": 3})
    assert langchain_reply("x", [doc], id_key="source")["contexts"] == [
        {"text": "Velmora is an island.", "id": "velmora.txt"}]
    with pytest.raises(ValueError) as raised:
        langchain_reply("x", [doc], id_key="doc_id")
    assert str(raised.value) == ("id_key 'doc_id' names no key of a document's metadata (it has 'source', 'page'): "
                                 "pass the key that holds the document id")


def test_a_chain_whose_output_holds_its_answer_under_another_key_is_named_with_the_keys_read_and_found():
    from tuner.systems import Reply
    from tuner.systems._base import BadShape
    from tuner.systems.adapters import langchain_reply

    with pytest.raises(BadShape) as raised:
        Reply.parse(langchain_reply({"response": "Velmora.", "question": "?"}))
    assert str(raised.value) == ("the reply's answer is null (the chain's output has none of answer, result, output "
                                 "or messages (it has 'response', 'question')), not text; a system that retrieves "
                                 "only is configured with answers: false")
    assert Reply.parse(langchain_reply({"answer": "Velmora."})).answer == "Velmora."


EMPTY = """
def answer(question, params):
    return {"answer": "x", "contexts": [], "contexts_from": "no retriever ran (LangChain's callbacks)"}
"""


def test_a_system_that_returned_no_contexts_is_refused_for_that_not_for_ids(tmp_path):
    (tmp_path / "empty.py").write_text(EMPTY)
    system_study(tmp_path, {"python": "empty:answer"})
    result = run_tuner(*optimize("--trials", "1"), cwd=tmp_path)
    said = one_line_error(result, started=True)
    assert said == ("error: --target ndcg@10: system python:empty:answer returned no contexts for question q01 (no "
                    "retriever ran (LangChain's callbacks)), so its document ids cannot be checked before the first "
                    "trial and id metrics would read nothing; return the passages it retrieved (`tuner system check` "
                    "shows its reply)")
    assert result.returncode == BAD_INPUT


# --- 8. resumes ------------------------------------------------------------------------------------------------

def test_a_knob_whose_default_is_nan_is_refused_at_load(tmp_path):
    (tmp_path / "sys.yaml").write_text("system: {python: 'x:answer', version: '1', knobs: {t: {type: float, "
                                       "default: .nan}}}\n")
    result = run_tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path)
    said = one_line_error(result, "default: expected a finite number, got nan")
    assert result.returncode == BAD_INPUT and said.startswith("error: sys.yaml: system.knobs.t")


def test_a_study_a_newer_tuner_wrote_is_refused_before_trial_0_runs(tmp_path, own, monkeypatch):
    calls = tmp_path / "calls.jsonl"
    system_study(tmp_path, {"python": "own_system:answer", "path": str(TESTS)})
    env = {"OWN_SYSTEM_CALLS": str(calls)}
    assert run_tuner(*optimize("--trials", "1"), cwd=tmp_path, env=env).returncode == 0
    before = calls.read_text()
    trial = tmp_path / "studies" / "s" / "trials" / "0000.json"
    trial.write_text(json.dumps({**json.loads(trial.read_text()), "schema": 99}))
    resumed = run_tuner(*optimize("--trials", "2"), cwd=tmp_path, env=env)
    one_line_error(resumed, "0000.json: written by a newer tuner (schema 99", started=True)
    assert resumed.returncode == BAD_INPUT and calls.read_text() == before  # no trial ran into it


def test_a_study_refused_before_trial_0_leaves_no_folder_and_no_report(tmp_path, own):
    system_study(tmp_path, {"python": "own_system:answer", "path": str(TESTS),
                            "knobs": {**KNOBS, "ids": {"type": "bool", "default": False}}})
    result = run_tuner(*optimize("--trials", "2"), cwd=tmp_path)
    one_line_error(result, "carry no document id", started=True)
    assert result.returncode == BAD_INPUT
    assert not (tmp_path / "studies" / "s").exists() and not (tmp_path / "reports" / "s").exists()
    assert "report:" not in result.stderr


# --- 9. the smaller lines --------------------------------------------------------------------------------------

def test_the_same_unreadable_reply_exits_2_under_eval_and_system_check(tmp_path, own):
    with SystemServer(own_answer, "not json") as server:
        system_study(tmp_path, {"http": server.url})
        evaluated = run_tuner("eval", "--config", "sys.yaml", "--limit", "2", "--retrieval-only", cwd=tmp_path)
        checked = run_tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path)
    one_line_error(evaluated, "the reply is not JSON ('<html>Bad Gateway</html>')")
    one_line_error(checked, "the reply is not JSON ('<html>Bad Gateway</html>')")
    assert evaluated.returncode == checked.returncode == BAD_INPUT


def test_a_usage_path_that_points_at_text_is_refused_and_a_gzip_reply_is_read(own):
    from tuner.config import HttpSystemConfig
    from tuner.systems._base import BadShape
    from tuner.systems._http import HttpSystem

    question = {"id": "q01", "text": "Where is Velmora?"}
    with SystemServer(own_answer, "gzip") as server:
        reply = HttpSystem(HttpSystemConfig(http=server.url, version="1", timeout=5)).ask(question, {"k": 2})
        assert reply["contexts"] and isinstance(reply["answer"], str)  # decoded, not "not JSON" with binary shown
        server.mode = "br"
        with pytest.raises(BadShape, match=r"^the reply is br-encoded, which tuner does not read: serve it plain, "
                                            r"gzip or deflate$"):
            HttpSystem(HttpSystemConfig(http=server.url, version="1", timeout=5)).ask(question, {"k": 2})
        server.mode = "ok"
        config = HttpSystemConfig(http=server.url, version="1", timeout=5,
                                  response={"contexts": "contexts", "text": "text", "answer": "answer",
                                            "usage": "answer"})
        with pytest.raises(BadShape) as raised:
            HttpSystem(config).ask(question, {"k": 2})
    assert str(raised.value) == ("the reply's 'answer' is str, not an object with prompt_tokens and "
                                 "completion_tokens (system.response.usage)")


def test_http_app_answers_a_question_that_is_no_object_with_400_naming_the_shape():
    from fastapi.testclient import TestClient

    from tuner.systems.adapters import http_app

    client = TestClient(http_app(lambda question, params: {"answer": question["text"], "contexts": []}))
    said = client.post("/", json={"question": "Where is Velmora?", "params": {}})
    assert said.status_code == 400
    assert said.json()["detail"].startswith("the request's 'question' is str, not an object with its text (and id)")
    assert client.post("/", json={"question": {"id": "q1", "text": "Where?"}}).json()["answer"] == "Where?"
    assert client.post("/", json={"question": {"id": "q1", "text": "?"}, "params": [1]}).status_code == 400


def test_an_own_system_s_study_is_not_told_a_question_costs_a_millisecond(tmp_path, own):
    system_study(tmp_path, {"python": "own_system:answer", "path": str(TESTS)})
    result = run_tuner(*optimize("--trials", "1"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "millisecond" not in result.stderr
    assert "note: no pruning: a retrieval target is not pruned unless asked (--prune-after N prunes: worth it when " \
           "your system is slow to answer)" in " ".join(result.stderr.split())


# --- 10. a hung call says why in its first line ------------------------------------------------------------------

def test_a_call_that_hangs_says_what_it_waits_for_in_its_first_progress_line(tmp_path, own):
    with SystemServer(own_answer, "trickle") as server:
        system_study(tmp_path, {"http": server.url, "timeout": 2})
        result = run_tuner("system", "check", "--config", "sys.yaml", cwd=tmp_path, env={"TUNER_LOG_EVERY": "1"},
                           timeout=170)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[0] == f"waiting: no reply from the system at {server.url} in 1 s, try 1 of 4 (2 s each)", lines
    assert any("try 2 of 4" in line for line in lines)
    assert [int(line.split("try ")[1][0]) for line in lines[:-1]] == sorted(int(line.split("try ")[1][0])
                                                                           for line in lines[:-1])  # tries in order
    assert lines[-1] == (f"error: system {server.url}, asked question q01: the system did not reply within 2 s (4 "
                         f"tries; raise system.timeout for a slow system)")
    assert result.returncode == ERROR
