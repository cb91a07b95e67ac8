"""What several test modules share: the CLI run as a user runs it, a study opened on the demo, one-line error
checks, small datasets and judges. Test modules import from here (and from fakes), never from each other."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import yaml

from tests.fakes import ScriptedLLM
from tuner.config import ProjectConfig
from tuner.evaluation.labels import Label, append
from tuner.evaluation.records import Constraint, Failure, Passage, QuestionResult, RetrievalTrace
from tuner.models.llms import Completion
from tuner.study.optimize import StudySettings
from tuner.study.results import load_study, trial_states

if TYPE_CHECKING:  # the session and runner load RAGAS and DSPy: imported where a test opens one
    from tuner.study.session import Session

DATASETS = Path(os.environ.get("TUNER_DATASETS", Path(__file__).resolve().parents[1].parent / "shared" / "datasets"))


def dataset_path(name: str) -> Path:
    path = DATASETS / name
    if not path.exists():
        pytest.skip(f"public dataset {name} not found at {path} (set TUNER_DATASETS to the datasets folder)")
    return path


def own_answer(question: dict, params: dict) -> dict:
    """The tests' own RAG system (tests/own_system.py) answering, as a server in a test serves it."""
    sys.path.insert(0, str(Path(__file__).parent))
    import own_system

    return own_system.answer(question, params)


def tuner(*args, cwd):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600)


#: RAGAS's sampled verdicts, for fakes that script its JSON replies (their unparsable, empty or coin-flip verdicts)
SAMPLED = {"verdicts": "sampled"}


class StrictIsUnfaithful(ScriptedLLM):
    """The strict program's answers are judged unfaithful, the default's faithful: a clear loser to prune."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        text = messages[-1]["content"] + (messages[0]["content"] if messages else "")
        if json_schema is None and "strictly faithful" in text:
            self.calls.append({"messages": messages, "json_schema": None, "seed": seed})
            from tuner.models.llms import Completion
            return Completion("[[ ## answer ## ]]\nMoonlight [1].\n\n[[ ## completed ## ]]", 50, 5)
        if json_schema and json_schema.get("title") == "NLIStatementOutput" and "Moonlight" in text:
            self.calls.append({"messages": messages, "json_schema": json_schema, "seed": seed})
            from tuner.models.llms import Completion
            return Completion('{"statements": [{"statement": "Moonlight", "reason": "no", "verdict": 0}]}', 40, 8)
        if json_schema and json_schema.get("title") == "StatementGeneratorOutput" and "Moonlight" in text:
            self.calls.append({"messages": messages, "json_schema": json_schema, "seed": seed})
            from tuner.models.llms import Completion
            return Completion('{"statements": ["Moonlight"]}', 40, 8)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)

    def yes_probability(self, messages, reuse_prefix=False):
        """Graded verdicts as the sampled ones: Moonlight unsupported, every other statement supported."""
        statement = verdict_statement(messages)
        if statement is None:
            return super().yes_probability(messages, reuse_prefix)
        self.calls.append({"messages": messages, "json_schema": None, "seed": 0, "reuse_prefix": reuse_prefix})
        return Completion(repr(0.0 if "Moonlight" in statement else 1.0), 30, 0)


def verdict_statement(messages) -> str | None:
    """The statement a graded faithfulness verdict asks about; None for any other yes/no question."""
    found = re.search(r"\n\nStatement: (.*)\n\nDoes the context above support", messages[-1]["content"], re.S)
    return found.group(1) if found else None


def open_session(tmp_path, fake_embedder, space: dict, name="s", targets=("faithfulness",), limit=6,
                 constraints=(), sampler="tpe", llm=None, storage=None, baseline=None, project=None) -> Session:
    """A study on the demo with a scripted LLM, opened through the same session `tuner optimize` uses."""
    from tuner.models.provider import Models
    from tuner.study.session import Session, StudySpec

    llm = llm or StrictIsUnfaithful()
    space_file = tmp_path / f"{name}-space.yaml"
    space_file.write_text(yaml.safe_dump(space, sort_keys=False))
    settings = StudySettings(list(targets), [Constraint.parse(c) for c in constraints], sampler, 0, prune_after=2)
    project = project or ProjectConfig(cache_dir=tmp_path / "cache")
    session = Session.open(StudySpec(name, settings, space_file, project, limit=limit, storage=storage,
                                     studies_dir=tmp_path / "studies", baseline=baseline or {}))
    session.runner(models=Models(llm, llm), embedder=fake_embedder)
    return session


PROGRAMS = {"params": {"program": {"type": "categorical", "choices": ["default", "strict"]}}}


def one_line_error(result, *words: str, started: bool = False) -> str:
    """The failed command's stderr: exactly one line, no traceback, naming each of `words`. A study that
    `started` has printed its status lines (study, notes, report) first: then exactly one of them is the error."""
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if started:
        lines = [line for line in lines if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


class RefusesHardQuestions(ScriptedLLM):
    """Declines every question about the lighthouse, answers the rest."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        asked = re.findall(r"\[\[ ## question ## \]\]\s*(.*)", messages[-1]["content"])  # the last: the asked one
        if json_schema is None and asked and "lighthouse" in asked[-1].lower():
            self.calls.append({"messages": messages, "json_schema": None, "seed": seed})
            from tuner.models.llms import Completion
            return Completion("[[ ## answer ## ]]\nI cannot answer from the given contexts.\n\n"
                              "[[ ## completed ## ]]", 50, 9)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)


NOISE_SPACE = {"params": {"top_k": {"type": "int", "low": 2, "high": 8},
                          "alpha": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.1}}}


class CoinFlipJudge(ScriptedLLM):
    """Faithfulness is a coin flipped per (question, contexts): no configuration is better than another, so any
    in-sample winner is pure noise."""

    def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
        if json_schema and json_schema.get("title") == "NLIStatementOutput":
            self.calls.append({"messages": messages, "json_schema": json_schema, "seed": seed})
            verdict = zlib.crc32(messages[-1]["content"].encode()) % 2
            verdicts = {"statements": [{"statement": "s", "reason": "r", "verdict": verdict}]}
            return Completion(json.dumps(verdicts), 40, 8)
        return super()._chat(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                             json_schema=json_schema)

    def yes_probability(self, messages, reuse_prefix=False):
        if verdict_statement(messages) is None:
            return super().yes_probability(messages, reuse_prefix)
        self.calls.append({"messages": messages, "json_schema": None, "seed": 0, "reuse_prefix": reuse_prefix})
        return Completion(repr(float(zlib.crc32(messages[-1]["content"].encode()) % 2)), 30, 0)


def noise_study(tmp_path, fake_embedder, llm, trials=12, name="noise") -> Session:
    from tuner.models.provider import Models
    from tuner.study.session import Session, StudySpec

    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(NOISE_SPACE))
    session = Session.open(StudySpec(name, StudySettings(["faithfulness"], sampler="random", seed=4), space,
                                     ProjectConfig(cache_dir=tmp_path / "cache", evaluation=SAMPLED),
                                     studies_dir=tmp_path / "studies"))
    session.runner(models=Models(llm, llm), embedder=fake_embedder)
    session.run(trials)
    return session


DOCS = {"d1": ("Greywater Bridge", "The Greywater Bridge crosses the Sorrel river. Ilsa Marrow designed it in 1911 "
               "after the old ferry sank."),
        "d2": ("Port Ardent", "Port Ardent is the capital of Velmora. Its harbour handles fish and wool."),
        "d3": ("Ilsa Marrow", "Ilsa Marrow was an engineer born in Halvard. She trained at the Dunmore Institute.")}


def written_index_twice(folder, gguf, knob: str) -> tuple[dict, dict]:
    """`tuner eval --retrieval-only --set KNOB` on three_documents, run twice: both results."""
    import json

    from tests.helpers import tuner

    three_documents(folder, gguf)
    results = []
    for _ in range(2):
        run = tuner("eval", "--retrieval-only", "--config", "tuner.yaml", "--set", knob, "-o", "r.json", cwd=folder)
        assert run.returncode == 0, run.stderr
        results.append(json.loads((folder / "r.json").read_text()))
    return results[0], results[1]


def three_documents(folder, gguf) -> None:
    """A BEIR set of three one-chunk documents and two questions in `folder`/set, and a tuner.yaml whose generator
    is `gguf`, caching in `folder`/cache."""
    import json

    data = folder / "set"
    data.mkdir()
    (data / "corpus.jsonl").write_text("".join(json.dumps({"_id": i, "title": t, "text": x}) + "\n"
                                               for i, (t, x) in DOCS.items()))
    (data / "queries.jsonl").write_text('{"_id": "q1", "text": "Who designed the Greywater Bridge?"}\n'
                                        '{"_id": "q2", "text": "Where was Ilsa Marrow born?"}\n')
    (data / "qrels.tsv").write_text("q1\td1\t1\nq2\td3\t1\n")
    (folder / "tuner.yaml").write_text(f"generator: {{model: qwen2.5-0.5b, path: {gguf}}}\n"
                                       f"cache_dir: cache\ndataset: {{path: set}}\n")


def llm_calls_cached(cache) -> int:
    import sqlite3

    with sqlite3.connect(cache / "llm_calls.sqlite") as db:
        table = db.execute("select name from sqlite_master where type='table'").fetchone()[0]
        return db.execute(f"select count(*) from {table}").fetchone()[0]


def question(qid: str, score: float | None, gold=("d1",), pool=("d1",), selected=("d1",), rank: int | None = 1,
             failure: str | None = None, refusal: bool = False, recall: float | None = None) -> QuestionResult:
    scores = {"faithfulness": score}
    if recall is not None:
        scores["context_recall"] = recall
    return QuestionResult(
        id=qid, question=f"question {qid}?", reference="ref", answer="an answer [1]", contexts=("ctx",),
        selected=tuple(Passage(f"{d}#0", d, 0.9, None, 0, "ctx") for d in selected),
        retrieval=RetrievalTrace(tuple(gold), {"recall@5": 1.0 if set(gold) <= set(pool) else 0.0}, rank,
                                 tuple(d for d in pool if d in gold), tuple(d for d in selected if d in gold)),
        scores=scores, failures={"faithfulness": Failure(failure)} if failure else {}, refusal=refusal)


TEXTS = [
    "The Greywater Bridge crosses the Sable River at Port Ardent.",
    "Kestrel Bay is a fishing village known for smokehouses and herring.",
    "Mount Oswy is the highest point of the island at 642 metres.",
    "The ferry to Halvard takes three hours and twenty minutes.",
    "Puffins breed on the cliffs of Skerrin from May to August.",
]


#: what a kill -9 or a power cut in the middle of Optuna's append leaves: an entry without its end
TORN = b'{"op_code":6,"worker_id":"a-b","trial_id":1,"user_attr":{"cost":{"calls'


#: room for more trials than the two run first (a configuration is never run twice)
SPACE = {"params": {**PROGRAMS["params"], "top_k": {"type": "int", "low": 3, "high": 6}}}


def interruptible(command: list[str], cwd) -> subprocess.Popen:
    """`command` started as from a terminal, where Ctrl-C is live: a shell's background job (nohup pytest &, some
    CI runners) hands its children SIGINT ignored, and Python then never raises KeyboardInterrupt."""
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def signal_when(process: subprocess.Popen, ready, number: int, wait: float = 300) -> tuple[str, float]:
    """Send `number` to `process` once `ready()` holds (the process must still run by then); its stderr once it has
    exited, and the seconds it took to exit after the signal."""
    deadline = time.monotonic() + wait
    while not ready():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.1)
    sent = time.monotonic()
    process.send_signal(number)
    _, stderr = process.communicate(timeout=60)
    return stderr, time.monotonic() - sent


def complete(folder) -> int:
    return trial_states(load_study(folder).get_trials(deepcopy=False)).count("complete")


def endpoint_project(folder, url: str, concurrency: int) -> None:
    folder.mkdir(exist_ok=True)
    model = {"backend": "openai-compatible", "base_url": url, "model": "m", "concurrency": concurrency}
    (folder / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))


IN_FLIGHT_STUDY = ("optimize", "--config", "tuner.yaml", "--study", "s", "--search-space", "quick", "--limit", "16",
         "--holdout", "0", "--judge-check", "off", "--target", "faithfulness", "--trials", "1", "--own-cache")


#: the graded judge's tests: one supported sentence, one the contexts do not hold
CONTEXTS = ["The Sorrel Bridge crosses the Vell river at Dunmore. It opened in 1892."]
ANSWER = "The Sorrel Bridge crosses the Vell river [1]. Gustave Eiffel painted the Sorrel arches purple."


def scorer(llm, **evaluation):
    """The judge's scorer over `llm` with these evaluation settings (RAGAS is imported here, not with helpers)."""
    from tuner.config import EvaluationConfig
    from tuner.evaluation.ragas_judge import RagasScorer

    return RagasScorer(llm, None, EvaluationConfig(**evaluation), max_tokens=64)


def answer(qid: str, text: str, contexts=("ctx",)) -> QuestionResult:
    return QuestionResult(qid, f"question {qid}?", None, text, tuple(contexts), (), RetrievalTrace(), {})


def require_real(reason: str) -> None:
    """Skip when a real model is unavailable — except in CI, where it must be there (TUNER_REQUIRE_REAL_MODELS)."""
    if os.environ.get("TUNER_REQUIRE_REAL_MODELS"):
        pytest.fail(f"real model required in CI: {reason}")
    pytest.skip(reason)


#: what every signal test's child gets: the default handlers a terminal session has (a shell's background job
#: ignores SIGINT, `nohup` SIGHUP, and tuner keeps a signal its parent ignored ignored)
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run_tuner(*args, cwd, env=None, timeout=120) -> subprocess.CompletedProcess:
    """`tuner ARGS` with a deadline: a hang fails the test in minutes, not at the suite's end."""
    return subprocess.run([sys.executable, "-m", "tuner", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "COLUMNS": "200", **(env or {})})


def started(command: list[str], cwd, ignore=()) -> subprocess.Popen:
    def handlers() -> None:
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN if number in ignore else signal.SIG_DFL)

    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=handlers)


def free_port() -> int:
    """A port nothing listens on now, for a local server."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


CONTEXT = "The lighthouse at Point Reyes was built in 1870 and guided ships through fog for a century."


def labels_file(path, supported: int = 6, unsupported: int = 6):
    """Answers about the lighthouse: the supported ones restate it, the unsupported ones add an invented detail."""
    for i in range(supported + unsupported):
        fine = i < supported
        answer = f"The lighthouse was built in 1870 (note {i})." if fine else \
            f"The lighthouse was built in 1870 by an invented architect number {i}."
        append(path, Label(f"k{i}", f"q{i}", fine, None, "When was it built?", answer, (CONTEXT,)))
    return path


def judged_study_and_check(folder: Path, judge: dict | None,
                           evaluation: dict) -> tuple[subprocess.CompletedProcess, subprocess.CompletedProcess, dict]:
    """A 2-trial `tuner optimize --target faithfulness` on 3 demo questions, answered by a scripted endpoint and
    judged by `judge` (None: the same endpoint) under `evaluation`, then `tuner judge check --labels` (labels_file's
    12) with the same judge: the study's run (its trial files under studies/s), the check's run and its
    faithfulness figures."""
    from tests.fakes import FakeEndpoint

    with FakeEndpoint("scripted", delay=0) as writer:
        (folder / "tuner.yaml").write_text(yaml.safe_dump({
            "generator": {"backend": "openai-compatible", "base_url": writer.url, "model": "m"},
            "judge": judge or {"backend": "openai-compatible", "base_url": writer.url, "model": "m"},
            "evaluation": evaluation}))
        studied = tuner("optimize", "--config", "tuner.yaml", "--study", "s", "--search-space", "quick", "--limit",
                        "3", "--holdout", "0", "--judge-check", "off", "--target", "faithfulness", "--trials", "2",
                        "--own-cache", cwd=folder)
        labels_file(folder / "labels.jsonl")
        checked = tuner("judge", "check", "--labels", "labels.jsonl", "--config", "tuner.yaml", "--agreement", "0",
                        "--out", "check.json", cwd=folder)
    assert checked.returncode == 0, checked.stderr
    return studied, checked, json.loads((folder / "check.json").read_text())["judges"][0]["metrics"]["faithfulness"]
