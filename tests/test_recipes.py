"""docs/architecture.md's recipes, followed to the letter on a copy of the project: each adds a throwaway backend,
metric, index knob or command by the steps the recipe lists and no other edit, then checks it works and that the
tests guarding that axis still pass (the pinned study hashes among them). A recipe that needs one more edit than it
says fails here."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPES = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


@pytest.fixture
def copy(tmp_path) -> Path:
    """The project's files as git knows them (the working tree's versions): no venv, caches or studies."""
    target = tmp_path / "project"
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip("the recipes are followed on a copy of a git checkout")
    for name in listed.stdout.splitlines():
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def edit(path: Path, anchor: str, text: str, before: bool = False) -> None:
    """Insert `text` after (or before) the one place `anchor` occurs: where the recipe says the addition goes."""
    source = path.read_text(encoding="utf-8")
    assert source.count(anchor) == 1, f"{path.name}: the recipe's anchor {anchor!r} is not one place"
    path.write_text(source.replace(anchor, text + anchor if before else anchor + text), encoding="utf-8")


def run(copy: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(copy)}
    return subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True, timeout=600)


def check(copy: Path, script: str) -> None:
    done = run(copy, "-c", textwrap.dedent(script))
    assert done.returncode == 0, done.stderr[-3000:]


def passes(copy: Path, *tests: str) -> None:
    done = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests)
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_backend_added_by_the_recipe_works_and_moves_no_study_s_hash(copy):
    assert "`LLM_BACKENDS` tuple" in RECIPES and "its entry in `BACKENDS`" in RECIPES
    # 1. tuner/config.py: a config class on _LLMSettings, added to the LLM_BACKENDS tuple
    edit(copy / "tuner/config.py", "\n\n#: settings that decide how fast a model answers", '''

class EchoConfig(_LLMSettings):
    """Answers with the question (a throwaway backend)."""

    backend: Literal["echo"] = "echo"
    echo_prefix: str = Field(">", description="echo: put before the echoed text")
''', before=True)
    edit(copy / "tuner/config.py", "LLM_BACKENDS: tuple[type[_LLMSettings], ...] = (LlamaCppConfig, EndpointConfig",
         ", EchoConfig")
    # 2. tuner/models/llms/_echo.py: a subclass of LLM
    (copy / "tuner/models/llms/_echo.py").write_text(textwrap.dedent('''
        from tuner.models.llms._base import LLM, Completion


        class EchoLLM(LLM):
            def __init__(self, prefix: str):
                self.prefix, self.name = prefix, f"echo:{prefix}"

            def _chat(self, messages, *, max_tokens, temperature, seed, json_schema):
                return Completion(f"{self.prefix} {messages[-1]['content']}")
    '''))
    # 3. tuner/models/llms/__init__.py: its entry in BACKENDS
    edit(copy / "tuner/models/llms/__init__.py", '    "openai-compatible": _endpoint,\n',
         '''    "echo": lambda config: ((config.echo_prefix,), lambda: __import__(
        "tuner.models.llms._echo", fromlist=["EchoLLM"]).EchoLLM(config.echo_prefix)),
''')
    check(copy, '''
        import pytest
        from pydantic import ValidationError
        from tuner.config import ProjectConfig, load_config
        from tuner.errors import ConfigError
        from tuner.models.llms import make_llm

        project = ProjectConfig.model_validate({"generator": {"backend": "echo", "echo_prefix": "!"}})
        assert make_llm(project.generator).chat([{"role": "user", "content": "hi"}]).text == "! hi"
        # another backend's setting is refused, naming the backend that has it
        with pytest.raises(ValidationError, match="echo_prefix is a setting of backend echo only"):
            ProjectConfig.model_validate({"generator": {"backend": "llama-cpp", "echo_prefix": "!"}})
        # an error's key path is the user's, not the union's tag
        open("bad.yaml", "w").write("generator: {backend: echo, max_tokens: 0}\\n")
        with pytest.raises(ConfigError, match=r"bad.yaml: generator.max_tokens: "):
            load_config("bad.yaml")
    ''')
    # 4. docs/configuration.md: its backend value and settings in the full example
    edit(copy / "docs/configuration.md", "\n  max_tokens: null", "\n  echo_prefix: \">\"       # echo: put before the "
         "echoed text (backend echo)", before=True)
    # the pinned study hashes hold with the new backend registered; the docs list it
    passes(copy, "tests/test_config.py", "tests/test_docs.py")


def test_a_metric_from_0_to_100_added_by_the_recipe_is_a_target_analysed_by_its_range(copy):
    assert "`low`, `high` (None: no upper bound)" in RECIPES
    # 1. its MetricSpec in REGISTRY; 2. its function in a module of the metrics package, wrapped in Computed
    (copy / "tuner/metrics/answer_words.py").write_text(textwrap.dedent('''
        def answer_words(response: str, **_) -> float:
            """Words in the answer, at most 100."""
            return float(min(100, len(response.split())))
    '''))
    edit(copy / "tuner/metrics/__init__.py", "    # by document id against the qrels",
         '''    MetricSpec("answer_words", ("answer",), lambda tools: Computed(__import__(
        "tuner.metrics.answer_words", fromlist=["answer_words"]).answer_words),
               "words in the answer", kind="computed", calls=0, high=100.0, lower_is_better=True, default=False),
''', before=True)
    check(copy, '''
        from tests.helpers import question
        from tuner.analysis.stages import attribute
        from tuner.config import EvaluationConfig
        from tuner.metrics import TARGETS, lower_is_better
        from tuner.evaluation.records import Constraint

        assert EvaluationConfig(metrics=["answer_words"]).metrics == ["answer_words"]
        assert "answer_words" in TARGETS and lower_is_better("answer_words")
        assert Constraint.parse("answer_words<=40").metric == "answer_words"
        long = question("long", None)
        long.scores["answer_words"] = 60.0
        shares = attribute([long], "answer_words")
        assert [q.loss for q in shares.losses] == [60.0] and shares.limiting == "generation"
    ''')
    passes(copy, "tests/test_metrics.py")


def test_an_index_knob_added_by_the_recipe_builds_its_own_index_and_holds_the_study_to_it(copy):
    assert 'index="chunking.size"' in RECIPES and "a field of the same name on `IndexSettings`" in RECIPES
    config = copy / "tuner/config.py"
    # 1. the field on PipelineConfig and its Knob (index= the project setting it overrides); its IndexSettings field
    edit(config, '    """One point of the search space: everything a trial may change."""\n', '''
    bm25_k1: float | None = Field(None, gt=0, description="BM25's term-frequency saturation (none: the project's)")
''')
    edit(config, '    "embedder": Knob(carried=',
         '''    "bm25_k1": Knob(lost="bm25_k1 {value} (set your collection's BM25 k1)", index="backend.bm25.k1"),
''', before=True)
    edit(config, "    #: the model the chunks' vectors come from", "    bm25_k1: float\n", before=True)
    # 2. the stage that reads it: the index builder
    edit(copy / "tuner/pipeline/index.py", '{"stemmer": settings.stemmer', ', "k1": settings.bm25_k1')
    check(copy, '''
        import pytest
        from tests.fakes import HashingEmbedder
        from tuner.config import PipelineConfig, ProjectConfig
        from tuner.data import load_dataset
        from tuner.errors import ConfigError
        from tuner.evaluation.rag_eval import RagRunner
        from tuner.study.meta import StudyMeta
        from tuner.study.session import refuse_other_measures
        from tuner.workspace import open_workspace

        project = ProjectConfig(cache_dir="cache")
        runner = RagRunner(open_workspace(project, limit=2, embedder=HashingEmbedder()))
        runner.evaluate(PipelineConfig(bm25_k1=2.0), answer=False)
        built = runner.pipeline.indexes.built
        assert [s.bm25_k1 for s, _ in built] == [2.0] and "bm25_k1 2.0" in built[0][0].describe()
        assert runner.pipeline.indexes.first.settings.bm25_k1 == 1.2  # the project's own: backend.bm25.k1
        # a resume that indexes with another k1 is refused, naming the setting
        meta = StudyMeta(("ndcg@10",), project=project.model_dump(mode="json"))
        other = ProjectConfig.model_validate({"backend": {"bm25": {"k1": 1.5}}})
        with pytest.raises(ConfigError, match="indexed with backend.bm25.k1 = 1.2, not 1.5"):
            refuse_other_measures("s", meta, None, other)
    ''')
    # 3. the docs: the full configuration example and the guide's knob table
    edit(copy / "docs/configuration.md", "  top_k:", "  bm25_k1: null\n", before=True)
    guide = copy / "docs/guide.md"
    edit(guide, "| `top_k` |", "| `bm25_k1` | > 0 (default: the project's) | BM25's k1 for this trial's index |\n",
         before=True)
    passes(copy, "tests/test_config.py", "tests/test_docs.py")


def test_a_command_added_by_the_recipe_runs_and_is_listed(copy):
    assert "a function registered on `app`" in RECIPES
    # 1. tuner/cli/name.py: a function registered on app
    (copy / "tuner/cli/hello.py").write_text(textwrap.dedent('''
        """`tuner hello`: a throwaway command."""

        from tuner.cli._app import app
        from tuner.cli._options import StudyOption
        from tuner.ui import console


        @app.command("hello")
        def hello_command(study: StudyOption = "default") -> None:
            """Say hello to a study."""
            console.print(f"hello {study}")
    '''))
    # 2. tuner/cli/__init__.py: import the module so it registers
    edit(copy / "tuner/cli/__init__.py", "  # noqa: F401\n# isort: on", ", hello", before=True)
    # 3. docs/guide.md: its usage
    edit(copy / "docs/guide.md", "## Reports and the agent\n", "\n`tuner hello --study NAME` greets a study.\n")
    said = run(copy, "-m", "tuner", "hello", "--study", "x")
    assert said.returncode == 0 and said.stdout.strip() == "hello x", said.stderr
    assert "hello" in run(copy, "-m", "tuner", "--help").stdout
    passes(copy, "tests/test_cli.py", "-k", "help")


def test_a_system_kind_added_by_the_recipe_keeps_the_contract_and_moves_no_study_s_hash(copy):
    assert "**A new kind of system**" in RECIPES and "`SYSTEM_KINDS` tuple" in RECIPES
    # 1. tuner/config.py: a config class on _SystemSettings, added to the SYSTEM_KINDS tuple
    edit(copy / "tuner/config.py", "\n\n#: every kind of the user's own system", '''

class ShellSystemConfig(_SystemSettings):
    """A shell line run once per question: the request as JSON on its stdin, the reply as JSON on its stdout."""

    kind: ClassVar[str] = "shell"
    written: ClassVar[str] = "shell: LINE"
    implementation: ClassVar[str] = "tuner.systems._shell:ShellSystem"
    shell: str = Field(min_length=1, description="shell: the line /bin/sh runs")
    path: Path | None = None
''', before=True)
    edit(copy / "tuner/config.py", "SYSTEM_KINDS: tuple[type[_SystemSettings], ...] = (PythonSystemConfig, "
         "HttpSystemConfig, CommandSystemConfig", ", ShellSystemConfig")
    # 2. tuner/systems/_shell.py: a subclass of System (here, of the command kind's)
    (copy / "tuner/systems/_shell.py").write_text(textwrap.dedent('''
        """A system that is a shell line: the command kind's protocol, run by /bin/sh."""

        from tuner.systems._command import CommandSystem


        class ShellSystem(CommandSystem):
            def __init__(self, config):
                super().__init__(config, ["/bin/sh", "-c", config.shell])
    '''))
    # 3. docs/configuration.md: its key in the full example; tests/test_system_contract.py: its entry in KINDS
    edit(copy / "docs/configuration.md", "\n  version: \"1\"            # bump it", "\n  shell: null             # "
         "or a line /bin/sh runs per question: JSON in on stdin, out on stdout", before=True)
    edit(copy / "tests/test_system_contract.py", "\n\n#: every kind of system", '''


@contextlib.contextmanager
def shell_kind(**settings):
    from tuner.config import ShellSystemConfig

    yield ShellSystemConfig(shell=f"{sys.executable} contract_command.py", path=TESTS, version="1", knobs=KNOBS,
                            **settings)''', before=True)
    edit(copy / "tests/test_system_contract.py", '"command": command_kind', ', "shell": shell_kind')
    check(copy, '''
        import pytest
        from pydantic import ValidationError
        from tuner.config import ProjectConfig

        project = ProjectConfig.model_validate({"system": {"shell": "python reply.py", "version": "1"}})
        assert project.system.entry == "python reply.py"
        with pytest.raises(ValidationError, match="a system names exactly one kind: python: module:function or "
                                                  "http: URL or command: .PROGRAM, ARG, ....* or shell: LINE"):
            ProjectConfig.model_validate({"system": {"shell": "x", "http": "http://127.0.0.1:1/", "version": "1"}})
    ''')
    # every contract case runs against the new kind; the pinned study hashes hold; the docs list it
    done = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "tests/test_system_contract.py",
               "tests/test_config.py", "tests/test_docs.py", "-k", "shell or hash or docs or config_key")
    assert done.returncode == 0, done.stdout[-3000:]
    assert done.stdout.count("[shell") == 9, done.stdout[-3000:]  # every contract case (9), on the new kind


def test_a_checker_kind_added_by_the_recipe_keeps_the_contract_and_moves_no_study_s_hash(copy):
    assert "**A new kind of checker**" in RECIPES and "`CHECKER_KINDS` tuple" in RECIPES
    # 1. tuner/config.py: a config class on _CheckerSettings, added to the CHECKER_KINDS tuple
    edit(copy / "tuner/config.py", "\n\n#: every kind of checker", '''

class NgramCheckerConfig(_CheckerSettings):
    """The share of a claim's word n-grams the passages hold."""

    kind: ClassVar[str] = "ngram"
    written: ClassVar[str] = "ngram: N"
    implementation: ClassVar[str] = "tuner.metrics.checkers._ngram:NgramChecker"
    ngram: int = Field(ge=2, le=5, description="ngram: words per n-gram")
''', before=True)
    edit(copy / "tuner/config.py", "CHECKER_KINDS: tuple[type[_CheckerSettings], ...] = (LexicalCheckerConfig",
         ", NgramCheckerConfig")
    # 2. tuner/metrics/checkers/_ngram.py: a subclass of Checker
    (copy / "tuner/metrics/checkers/_ngram.py").write_text(textwrap.dedent('''
        """A checker that looks for the claim's word n-grams in the passages."""

        import re

        from tuner.metrics.checkers import Checker


        def grams(text, n):
            words = re.findall(r"\\w+", text.lower())
            return {tuple(words[i:i + n]) for i in range(len(words) - n + 1)}


        class NgramChecker(Checker):
            def __init__(self, config):
                self.config = config

            @property
            def name(self):
                return self.config.identity

            def supported(self, contexts, statements):
                held = grams("\\n".join(contexts), self.config.ngram)
                found = [grams(s, self.config.ngram) for s in statements]
                return [len(g & held) / len(g) if g else 1.0 for g in found]
    '''))
    # 3. docs/configuration.md: its key under checker:; tests/test_checkers.py: its config in CONFIGS
    edit(copy / "docs/configuration.md", "                          #   lexical: facts  # the share of its numbers "
         "and names only\n", "                          #   ngram: 2        # the share of its word pairs\n")
    edit(copy / "tests/test_checkers.py", '{"lexical": lambda: {"lexical": "words"}', ', "ngram": lambda: {"ngram": 2}')
    check(copy, r'''
        import pytest
        from pydantic import ValidationError
        from tuner.config import ProjectConfig
        from tuner.evaluation.judge.cut import setting_name

        project = ProjectConfig.model_validate({"evaluation": {"checker": {"ngram": 3}}})
        assert setting_name(project.evaluation) == "graded, sentences, checker ngram:3"
        with pytest.raises(ValidationError, match=r"a checker names exactly one kind: lexical: words or facts or "
                                                  r"ngram: N or classifier: MODEL \(a folder or Hub id\)"):
            ProjectConfig.model_validate({"evaluation": {"checker": {"ngram": 2, "lexical": "words"}}})
    ''')
    # every contract case runs against the new kind; the pinned study hashes hold; the docs list it
    done = run(copy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", "tests/test_checkers.py",
               "tests/test_config.py", "tests/test_docs.py", "-k", "ngram or contract or hash or docs or config_key")
    assert done.returncode == 0, done.stdout[-3000:]
    assert done.stdout.count("[ngram]") == 3, done.stdout[-3000:]  # every contract case (3), on the new kind
