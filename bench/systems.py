"""Your own system behind HTTP: the same 1-trial faithfulness study of an HTTP system asked with `concurrency` 1
and 4 (its judge a local endpoint with the same width), side by side in one run.

The system is the tests' own (tests/own_system.py: its BM25 retriever over the demo corpus, an extractive answer)
served by the tests' local HTTP server taking `--delay` seconds a request, as a deployed RAG service takes its
time; the judge is the tests' scripted OpenAI-compatible endpoint taking `--judge-delay` a call. The figure is
tuner's own overlap of requests, so a real service gains as much only if it serves that many at once. Each width
runs in its own folder with its own cache. The table gives the trial's wall seconds (its cost meter), questions
an hour, the ratio to one at a time, the most requests the system held at once, and whether the replies, scores and
journal equal the one-at-a-time run's.

    python bench/systems.py                            # 16 demo questions, the system 1 s a request, the judge 0.2 s
    python bench/systems.py --limit 30 --delay 2 --widths 1,2,4,8
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml
from rich.console import Console

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from bench.concurrency import trial_0, widths_table  # noqa: E402  (the same study and table, another server)
from tests.fakes import FakeEndpoint, SystemServer  # noqa: E402  (the tests' local servers)

os.environ.setdefault("OWN_SYSTEM_CORPUS", str(ROOT / "tuner" / "data" / "demo" / "corpus.jsonl"))
import own_system  # noqa: E402  (the test system: BM25 + an extractive answer)


def run(folder: Path, system_url: str, judge_url: str, width: int, limit: int) -> tuple[float, list, list]:
    folder.mkdir()
    judge = {"backend": "openai-compatible", "base_url": judge_url, "model": "m", "concurrency": width}
    (folder / "tuner.yaml").write_text(yaml.safe_dump({
        "system": {"http": system_url, "version": "1", "concurrency": width,
                   "knobs": {"k": {"type": "int", "default": 3}}},
        "judge": judge, "generator": judge}))
    (folder / "space.yaml").write_text(yaml.safe_dump({"params": {"k": {"type": "int", "low": 1, "high": 5}}}))
    return trial_0(folder, "space.yaml", limit)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=16, help="demo questions")
    parser.add_argument("--delay", type=float, default=1.0, help="seconds the system takes a request")
    parser.add_argument("--judge-delay", type=float, default=0.2, help="seconds the judge takes a call")
    parser.add_argument("--widths", default="1,4")
    args = parser.parse_args()

    def measure(folder: Path, width: int):
        with SystemServer(own_system.answer, delay=args.delay) as system, \
                FakeEndpoint("scripted", delay=args.judge_delay) as judge:
            return (*run(folder, system.url, judge.url, width, args.limit), system.most_at_once)

    Console().print(widths_table(f"{args.limit} demo questions, one trial, an HTTP system {args.delay:g} s a "
                                 f"request, the judge {args.judge_delay:g} s a call", args.widths, args.limit,
                                 measure))


if __name__ == "__main__":
    main()
