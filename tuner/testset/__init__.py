"""Test sets written from a corpus (generate.py, gates.py) and how far they can be trusted (validity.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tuner.config import ProjectConfig
from tuner.data import beir, load_dataset
from tuner.data._io import read_json
from tuner.errors import DataError
from tuner.files import write_json
from tuner.testset.kinds import DEFAULT_SHARES, KINDS

__all__ = ["DEFAULT_SHARES", "KINDS", "SCORECARD", "Generated", "generate_testset", "read_scorecards"]


#: the scorecards of every generation run into a dataset, oldest first
SCORECARD = "testset.json"
#: questions `tuner optimize --docs` writes (fewer when the corpus is small): enough for a held-out verdict
DOCS_QUESTIONS = 60


@dataclass(frozen=True)
class Generated:
    path: Path
    written: int  # questions this run added
    total: int  # questions the dataset now holds
    scorecard: dict  # Scorecard.to_json()


def generate_testset(config: ProjectConfig, path: Path, n: int, shares: dict[str, float] | None = None,
                     mode: str = "new", seed: int = 0, on_index: Callable | None = None,
                     on_progress: Callable[[int, int], None] | None = None, at_most: bool = False,
                     anchors: Path | None = None) -> Generated:
    """Write `n` questions into the BEIR folder at `path` (a corpus `tuner data ingest` wrote, or any BEIR set):
    mode `new` refuses a dataset that has questions, `append` adds to them, `replace` writes over them. `at_most`:
    fewer when the corpus cannot support `n` (else that is an error). `anchors`: a file of people's questions
    (anchors.py) whose lexical overlap the new questions are held to, and whose ranking of configurations the
    scorecard compares with theirs."""
    # the input is checked before the model stack is imported: a bad one is told at once, even on a busy machine
    if n < 1:
        raise DataError(f"--questions {n}: ask for at least 1")
    path = Path(path)
    if not beir.looks_like(path):
        raise DataError(f"{path}: not a dataset folder with a corpus.jsonl (make one with `tuner data ingest DIR "
                        f"--out {path}`)")
    dataset = load_dataset(path, "beir", require_questions=False)
    if dataset.questions and mode == "new":
        raise DataError(f"{path}: already holds {len(dataset.questions)} questions; add to them with --append or "
                        f"write over them with --replace")
    from tuner.testset.anchors import check_anchors, read_anchors

    people = read_anchors(anchors, dataset.documents) if anchors else []
    from tuner.config import PipelineConfig
    from tuner.evaluation.rag_eval import RagRunner  # the model stack: only when questions are written
    from tuner.testset.generate import PROBE, QuestionWriter, ndcg
    from tuner.testset.styles import StyleMix
    from tuner.testset.validity import overlap_target
    from tuner.workspace import open_workspace

    existing = dataset.questions if mode == "append" else []
    dataset = replace(dataset, questions=[])
    # questions are written from tuner's own index of the documents, whatever system the project tunes
    runner = RagRunner(open_workspace(config.model_copy(update={"system": None}), dataset=dataset,
                                      on_progress=on_index))
    writer = QuestionWriter(runner, dataset, seed=seed, existing=existing, mix=StyleMix.of(people),
                            overlap=overlap_target(people, dataset.documents))
    questions, card = writer.write(n, shares or DEFAULT_SHARES, on_progress=on_progress, at_most=at_most)
    if people:  # the probe configurations ranked by both
        checked = check_anchors(lambda config, asked: ndcg(runner, config, asked),
                                {label: PipelineConfig(**knobs) for label, knobs in PROBE.items()},
                                questions, people, dataset.documents)
        card.anchors = checked.to_json()
    if not questions:
        raise DataError(f"{path}: no question passed the gates ({card.drawn.total()} candidates; rejected: "
                        f"{dict(card.rejected)}); nothing written")
    beir.write_questions(path, [*existing, *questions])
    runs = read_scorecards(path) if mode == "append" else []
    write_json(path / SCORECARD, {"schema": 1, "runs": [*runs, card.to_json()]})
    return Generated(path, len(questions), len(existing) + len(questions), card.to_json())


def read_scorecards(path: Path) -> list[dict]:
    """The scorecards of the generation runs that wrote the dataset's questions ([] for questions people wrote)."""
    if not (Path(path) / SCORECARD).is_file():
        return []
    data = read_json(Path(path) / SCORECARD)
    if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
        raise DataError(f"{Path(path) / SCORECARD}: not a test-set scorecard")
    return data["runs"]


def dataset_from_docs(folder: Path, config: ProjectConfig, studies_dir: Path, questions: int = DOCS_QUESTIONS,
                      anchors: Path | None = None, on_index: Callable | None = None,
                      on_progress: Callable[[int, int], None] | None = None,
                      on_file: Callable[[int, int], None] | None = None) -> tuple[Path, Generated | None]:
    """`tuner optimize --docs DIR`: the folder ingested (changed files only) into studies/datasets/NAME-HASH, and a
    test set generated there the first time (every later run, a resume included, uses the same questions). The
    dataset's path, and what the generation did (None when the questions were there already)."""
    from tuner.cache import stable_hash
    from tuner.data.ingest import ingest

    folder = Path(folder)
    out = Path(studies_dir) / "datasets" / f"{folder.resolve().name}-{stable_hash(str(folder.resolve()))[:8]}"
    ingest(folder, out, on_file=on_file)
    if (out / "queries.jsonl").is_file():
        return out, None
    return out, generate_testset(config, out, questions, on_index=on_index, on_progress=on_progress, at_most=True,
                                 anchors=anchors)
