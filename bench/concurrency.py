"""Questions in flight: the same 1-trial faithfulness study against an OpenAI-compatible endpoint that takes
`--delay` seconds a call, run with `concurrency` 1, 2, 4 and 8 on generator and judge, side by side in one run.

The endpoint is the tests' local fake server (`tests/fakes.py` FakeEndpoint, answering as the scripted LLM does), so
the figure is tuner's own overlap of calls, not a model's batching: with a real server, questions an hour also
depend on how many requests it serves at once. Each width runs in its own folder with its own cache (nothing is
answered from an earlier width's calls); the index and retrieval are paid in every run. The table gives the
trial's wall seconds (its cost meter), questions an hour, the ratio to one at a time, the most requests the server
held at once, and whether the answers, scores and journal equal the one-at-a-time run's.

    python bench/concurrency.py                      # 16 demo questions, 1 s a call
    python bench/concurrency.py --limit 30 --delay 2
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.fakes import FakeEndpoint  # noqa: E402  (the local OpenAI-compatible server the tests use)
from tuner.study.results import load_study  # noqa: E402
from tuner.study.storage import study_folder  # noqa: E402


def run(folder: Path, url: str, width: int, limit: int) -> tuple[float, list, list]:
    folder.mkdir()
    model = {"backend": "openai-compatible", "base_url": url, "model": "m", "concurrency": width}
    (folder / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))
    return trial_0(folder, "quick", limit)


def trial_0(folder: Path, space: str, limit: int) -> tuple[float, list, list]:
    """A one-trial faithfulness study of `folder`'s tuner.yaml over `space`: its wall seconds, its answers and
    scores, and its journal."""
    subprocess.run([sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--study", "s",
                    "--search-space", space, "--limit", str(limit), "--holdout", "0", "--judge-check", "off",
                    "--target", "faithfulness", "--trials", "1", "--own-cache"], cwd=folder, check=True,
                   capture_output=True, text=True)
    where = study_folder(folder / "studies", "s")
    result = where.read_trial(0).result
    answers = [(q.id, q.answer, q.contexts, dict(q.scores)) for q in result.questions]
    journal = [(t.number, t.state, t.params, t.values) for t in load_study(where).trials]
    return result.cost.seconds, answers, journal


def widths_table(title: str, widths: str, limit: int, measure) -> Table:
    """`measure(folder, width)` -> (seconds, answers, journal, most requests at once) for each width, each in a
    folder of its own, as a table against the first width."""
    table = Table(title=title)
    for column in ("concurrency", "trial seconds", "questions / hour", "vs 1", "most at once", "same results"):
        table.add_column(column)
    with tempfile.TemporaryDirectory() as tmp:
        first = None
        for width in map(int, widths.split(",")):
            seconds, answers, journal, most = measure(Path(tmp) / f"w{width}", width)
            first = first or (seconds, answers, journal)
            same = "yes" if (answers, journal) == first[1:] else "NO"
            table.add_row(str(width), f"{seconds:.1f}", f"{limit / seconds * 3600:.0f}",
                          f"{first[0] / seconds:.2f}×", str(most), same)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=16, help="demo questions")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the endpoint takes a call")
    parser.add_argument("--widths", default="1,2,4,8")
    args = parser.parse_args()

    def measure(folder: Path, width: int):
        with FakeEndpoint("scripted", delay=args.delay) as server:
            return (*run(folder, server.url, width, args.limit), server.most_at_once)

    Console().print(widths_table(f"{args.limit} demo questions, one trial, endpoint {args.delay:g} s a call",
                                 args.widths, args.limit, measure))


if __name__ == "__main__":
    main()
