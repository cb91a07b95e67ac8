"""The `tuner` command as a user runs it: real subprocesses, real exit codes, one-line errors."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from tests.fakes import ScriptedLLM
from tests.helpers import dataset_path, tuner
from tuner.evaluation.records import EvalResult


def commands(group: typer.Typer, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command of the app, from its own registry: sub-apps (data, judge, cache...) walked into."""
    found = [(*prefix, c.name) for c in group.registered_commands]
    for sub in group.registered_groups:
        found += [(*prefix, sub.name), *commands(sub.typer_instance, (*prefix, sub.name))]
    return found


def test_help_lists_every_command_and_each_has_help(tmp_path):
    from tuner.cli import app

    every = commands(app)
    assert {("compile",), ("compare",), ("cache", "prune"), ("judge", "check")} <= set(every)
    listed = tuner("--help", cwd=tmp_path)
    assert listed.returncode == 0
    missing = [c[0] for c in every if len(c) == 1 and f"│ {c[0]} " not in listed.stdout]
    assert missing == []
    runner = CliRunner()
    failing = [c for c in every if runner.invoke(app, [*c, "--help"]).exit_code != 0]
    assert failing == []


def test_eval_retrieval_only_on_the_demo_writes_the_results_json(tmp_path):
    result = tuner("eval", "--retrieval-only", "--out", "results.json", "--set", "top_k=4", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "results.json").read_text())
    assert data["config"]["pipeline"]["top_k"] == 4
    assert set(data["retrieval"]) >= {"recall@k", "precision", "ndcg@10", "mrr", "mean_k"}
    assert data["retrieval"]["mean_k"] == 4
    assert len(data["per_question"]) == data["dataset"]["questions"] == 22
    assert "recall@k" in result.stdout  # the table
    assert (tmp_path / "studies" / ".cache" / "embeddings.sqlite").is_file()  # default cache location


def test_eval_writes_one_shape_with_or_without_answers(tmp_path, cli_with):
    """A retrieval-only evaluation is an EvalResult like a RAG one: the same keys, no metric, no answer."""
    invoke = cli_with(ScriptedLLM())
    for args in (["--retrieval-only", "-o", "r.json"], ["-m", "faithfulness", "-o", "rag.json"]):
        shown = invoke("eval", "--limit", "2", *args)
        assert shown.exit_code == 0
    retrieval, rag = (json.loads((tmp_path / name).read_text()) for name in ("r.json", "rag.json"))
    # a model that does not say what it resumed computed every prompt token, as far as anyone can tell
    sent = rag["cost"]["prompt_tokens"]
    assert sent and rag["cost"]["evaluated_tokens"] == sent
    assert f"prompt tokens: {sent:,} sent, {sent:,} computed (the rest resumed prefixes the models kept)" in \
        " ".join(shown.output.split())
    assert set(retrieval) == set(rag) and set(retrieval["per_question"][0]) == set(rag["per_question"][0])
    assert retrieval["metrics"] == {} and set(rag["metrics"]) == {"faithfulness"}
    assert retrieval["cut"] is None and rag["cut"] == 0.5  # read where it was judged: a judge nobody measured
    assert retrieval["per_question"][0]["answer"] == "" and rag["per_question"][0]["answer"]
    assert retrieval["retrieval"] == rag["retrieval"]  # the same retrieval, scored once by one rule
    assert EvalResult.from_json(retrieval).retrieval == retrieval["retrieval"]


def test_eval_with_index_knobs_set_retrieves_from_their_index(tmp_path):
    result = tuner("eval", "--retrieval-only", "--set", "chunker=sections", "--set", "chunk_size=12", "--set",
                   "chunk_overlap=4", "--set", "stemmer=english", "-o", "r.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "r.json").read_text())
    assert data["config"]["pipeline"]["chunker"] == "sections" and data["dataset"]["chunks"] > 35  # 35 documents
    assert data["retrieval"]["recall@10"] >= 0.8


def test_a_retrieval_study_searches_index_knobs_and_reports_the_indexes_it_built(tmp_path):
    result = tuner("optimize", "--target", "ndcg@10", "--search-space", "retrieval", "--trials", "5", "--limit", "8",
                   "--sampler", "random", "--seed", "3", "--study", "ix", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    trials = [json.loads(f.read_text()) for f in sorted((tmp_path / "studies" / "ix" / "trials").glob("*.json"))]
    drawn = {(t["pipeline"]["chunk_size"], t["pipeline"]["chunker"], t["pipeline"]["contextual"]) for t in trials[1:]}
    assert len(drawn) >= 2  # other indexes than one
    built = [t for t in trials if "index" in t["cost_by_stage"]]
    assert built and "index" not in trials[0]["cost_by_stage"]  # the baseline uses the project's index
    report = (tmp_path / "reports" / "ix" / "report.md").read_text()
    assert f"| indexes | {len(built)} built by trials for their index knobs" in report
    # no model answered or judged: the report names none (not the configured ones)
    assert "| generator | none: no answer was generated" in report and "| judge | none: nothing was judged" in report
    # piped to a file, with no COLUMNS set: full width, not rich's 80 columns that cut headers to "llm…"
    piped = subprocess.run([sys.executable, "-m", "tuner", "trials", "--study", "ix"], cwd=tmp_path, text=True,
                           env={k: v for k, v in os.environ.items() if k != "COLUMNS"}, capture_output=True)
    assert piped.returncode == 0 and "llm calls" in piped.stdout and "…" not in piped.stdout, piped.stdout


def test_the_live_display_says_how_many_indexes_trials_built_and_their_cost():
    from types import SimpleNamespace

    import optuna

    from tuner.cli._live import StudyDisplay

    indexes = SimpleNamespace(built=[])
    display = StudyDisplay(optuna.create_study(), 3, 4, ["ndcg@10"], indexes)
    display._update_status("", "none yet")
    assert "indexes built" not in display.status.plain  # nothing built: nothing said
    indexes.built += [("sentences 100/30", 2.4), ("words 250/30", 1.3)]
    display._update_status("", "none yet")
    assert "indexes built: 2 (4 s)" in display.status.plain


def test_eval_on_squad_normans_with_a_config_file(tmp_path):
    squad = dataset_path("squad2_dev_normans")
    (tmp_path / "tuner.yaml").write_text(f"dataset:\n  path: {squad}\npipeline:\n  alpha: 0.5\n  reranker: embedding\n")
    result = tuner("eval", "--retrieval-only", "-c", "tuner.yaml", "-o", "out/r.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "out" / "r.json").read_text())
    assert data["dataset"]["questions"] == 208 and data["retrieval"]["questions_scored"] == 96
    assert data["retrieval"]["recall@5"] > 0.85


@pytest.mark.parametrize(
    "args, files, message",
    [
        (["-c", "bad.yaml"], {"bad.yaml": "pipeline: [\n"}, "bad.yaml: invalid YAML"),
        (["-c", "typed.yaml"], {"typed.yaml": "pipeline:\n  top_k: lots\n"}, "typed.yaml: pipeline.top_k"),
        (["-c", "missing.yaml"], {}, "missing.yaml: file not found"),
        (["--dataset", "nowhere"], {}, "nowhere: dataset not found"),
        (["--set", "alpha=2"], {}, "--set: alpha: Input should be less than or equal to 1"),
        (["--set", "colour=red"], {}, "expected KEY=VALUE"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(tmp_path, args, files, message):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    result = tuner("eval", "--retrieval-only", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_empty_corpus_is_a_clear_error(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("")
    (tmp_path / "queries.jsonl").write_text('{"_id": "q", "text": "why?"}\n')
    result = tuner("eval", "--retrieval-only", "--dataset", str(tmp_path), cwd=tmp_path)
    assert result.returncode == 2 and "corpus is empty" in result.stderr and "Traceback" not in result.stderr


def test_data_command_describes_a_dataset(tmp_path):
    result = tuner("data", cwd=tmp_path)
    assert result.returncode == 0 and "demo" in result.stdout
    rows = {row.split("│")[1].strip(): row.split("│")[2].strip()
            for row in result.stdout.splitlines() if row.count("│") == 3}
    assert rows["documents"] == "35" and rows["questions"] == "22"


def test_study_commands_fail_with_one_clear_line(tmp_path):
    (tmp_path / "bad.yaml").write_text("params:\n  top_k: {type: int, low: 9, high: 3}\n")
    cases = [
        (("optimize", "--search-space", "bad.yaml", "--trials", "1"), "bad.yaml: params.top_k"),
        (("optimize", "--target", "faithfulnes"), "--target 'faithfulnes'"),
        (("optimize", "--constraint", "answer_relevancy=0.7"), "--constraint"),
        (("optimize", "--timeout", "soon"), "--timeout 'soon'"),
        (("best", "--study", "nope"), "no study named 'nope'"),
        (("report", "--study", "nope"), "no study named 'nope'"),
        (("analyze", "--study", "nope", "--noise", "2"), "no study named 'nope'"),
        (("optimize", "--rounds", "0"), "--rounds"),
        (("spaces", "show", "missing"), "search space 'missing'"),
    ]
    for args, message in cases:
        result = tuner(*args, cwd=tmp_path)
        assert result.returncode == 2, (args, result.stderr)
        assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert not (tmp_path / "studies" / "default").exists()  # nothing half-created by a rejected command


def test_spaces_show_and_empty_studies_listing(tmp_path):
    shown = tuner("spaces", "show", "quick", cwd=Path(__file__).resolve().parents[1])
    assert shown.returncode == 0 and "top_k" in shown.stdout and "program" in shown.stdout
    listed = tuner("studies", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout == "" and listed.stderr.startswith("no studies: studies does not")


def test_no_command_reuses_an_option_name():
    import click
    import typer

    from tuner.cli import app

    def commands(group: click.Group, prefix: str = ""):
        for name, command in group.commands.items():
            if isinstance(command, click.Group):
                yield from commands(command, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", command

    found = list(commands(typer.main.get_command(app)))
    assert len(found) >= 8
    for name, command in found:
        flags = [flag for param in command.params for flag in (*param.opts, *param.secondary_opts)]
        assert len(flags) == len(set(flags)), f"`tuner {name}` reuses {[f for f in flags if flags.count(f) > 1]}"


def test_knobs_are_shown_short_and_unset_ones_left_out():
    from tuner.ui import knobs

    assert knobs({"top_k": 6, "alpha": 0.7000000000000001, "reranker": "llm", "confidence_threshold": None}) == \
        "top_k=6, alpha=0.7, reranker=llm"


def test_search_spaces_ship_with_an_install(tmp_path, monkeypatch):
    """A wheel carries the bundled spaces, and `--search-space NAME` finds them where the install puts them."""
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "src").mkdir()
    for part in ("pyproject.toml", "README.md", "tuner", "search_spaces"):
        source = root / part
        if source.is_dir():
            shutil.copytree(source, tmp_path / "src" / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, tmp_path / "src" / part)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                    str(tmp_path / "dist"), str(tmp_path / "src")], check=True, capture_output=True)
    wheel = next((tmp_path / "dist").glob("*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    shipped = {Path(n).name for n in names if "/data/share/tuner/search_spaces/" in n}
    assert shipped == {p.name for p in (root / "search_spaces").glob("*.yaml")}

    from tuner.study.space import resolve_space

    prefix = tmp_path / "prefix" / "share" / "tuner" / "search_spaces"
    prefix.mkdir(parents=True)
    (prefix / "only-installed.yaml").write_text("params: {}\n")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    monkeypatch.chdir(tmp_path)
    assert resolve_space("only-installed") == prefix / "only-installed.yaml"
