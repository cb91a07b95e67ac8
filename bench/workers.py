"""Workers benchmark, side by side in one run:

1. Throughput: one study (the 0.5B model as generator and judge, one llama.cpp thread per worker, the first N demo
   questions, search_spaces/quick.yaml, random sampler) run by 1 worker, then by 2 workers at once, each in a
   fresh PostgreSQL database: wall time, finished trials per hour, LLM calls paid, calls paid twice.
2. Storage overhead: a retrieval-only study (ndcg@10: no model, so the storage's share is as large as it gets) on
   the demo with the journal file, SQLite and PostgreSQL: seconds per trial inside Optuna's storage and tuner's
   record store, beside the trial's wall time.

PostgreSQL: --postgres URL (a server you can create databases on), else a throwaway server from .ci/postgres.

    python bench/workers.py                   # 3 questions, 4 trials; 30 retrieval-only trials per storage
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy
import yaml
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.cache import open_store
from tuner.config import ProjectConfig
from tuner.study.optimize import StudySettings
from tuner.study.results import read_study
from tuner.study.session import Session, StudySpec
from tuner.study.storage import study_folder

ROOT = Path(__file__).resolve().parents[1]
console = Console(width=200)


def fresh_database(server: str) -> str:
    name = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(server, isolation_level="AUTOCOMMIT")
    with admin.connect() as db:
        db.exec_driver_sql(f'CREATE DATABASE "{name}"')
    admin.dispose()
    return server.rsplit("/", 1)[0] + "/" + name


def throughput(server: str, workers: int, questions: int, trials: int, root: Path) -> dict:
    url = fresh_database(server)
    model = {"model": "qwen2.5-0.5b", "n_threads": 1}
    processes = []
    started = time.perf_counter()
    for i in range(workers):
        folder = root / f"w{workers}-{i}"
        folder.mkdir(parents=True)
        (folder / "tuner.yaml").write_text(yaml.safe_dump({"generator": model, "judge": model}))
        command = [sys.executable, "-m", "tuner", "optimize", "--config", "tuner.yaml", "--storage", url, "--study",
                   "bench", "--search-space", str(ROOT / "search_spaces" / "quick.yaml"), "--limit", str(questions),
                   "--trials", str(trials), "--sampler", "random", "--holdout", "0", "--judge-check", "off"]
        processes.append(subprocess.Popen(command, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                          text=True))
    for process in processes:
        _, stderr = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"a worker failed:\n{stderr}")
    wall = time.perf_counter() - started
    view = read_study(study_folder(root / "elsewhere", "bench", url))
    ran = [t for t in view.trials if t.state in ("complete", "pruned")]
    calls = open_store(url, "llm_calls")
    return {"workers": workers, "wall": wall, "trials": len(ran), "per_hour": len(ran) / wall * 3600,
            "paid": len(calls), "twice": calls.repeated(),
            "duplicates": sum(t.state == "duplicate" for t in view.trials)}


def timed(obj, bucket: list[float], names: tuple[str, ...] = ()) -> None:
    """Add the time spent in `obj`'s methods (`names`, or all public ones) to bucket[0] (instance attributes
    shadow them)."""
    for name in names or dir(obj):
        method = getattr(obj, name, None)
        if name.startswith("_") or not callable(method) or isinstance(method, type):
            continue

        @functools.wraps(method)
        def wrapper(*args, __method=method, **kwargs):
            start = time.perf_counter()
            try:
                return __method(*args, **kwargs)
            finally:
                bucket[0] += time.perf_counter() - start

        object.__setattr__(obj, name, wrapper)  # also on a frozen dataclass


def storage_overhead(kind: str, location: str | None, trials: int, root: Path) -> dict:
    project = ProjectConfig(cache_dir=root / "cache")
    spec = StudySpec(f"overhead-{kind}", StudySettings(["ndcg@10"], sampler="random", seed=0),
                     ROOT / "search_spaces" / "retrieval.yaml", project, storage=location, studies_dir=root / "studies")
    session = Session.open(spec)
    session.runner()  # the index is built before timing starts
    spent = [0.0]
    timed(session.study._storage, spent)
    if session.folder.records is not None:
        timed(session.folder.records, spent)
    else:  # the journal's study keeps its records as files: time those writes and reads too
        timed(session.folder, spent, ("write_trial", "read_trial", "write_meta", "read_meta", "write_doc", "read_doc"))
    started = time.perf_counter()
    ran = session.run(trials)
    wall = time.perf_counter() - started
    return {"storage": kind, "trials": ran, "wall": wall / max(ran, 1), "storage_s": spent[0] / max(ran, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--postgres", help="server URL (default: a throwaway one from .ci/postgres)")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--overhead-trials", type=int, default=30)
    parser.add_argument("--skip-throughput", action="store_true")
    args = parser.parse_args()

    server, stop = args.postgres, None
    if server is None:
        lines = subprocess.run([str(ROOT / ".ci" / "postgres")], capture_output=True, text=True, check=True).stdout
        env = dict(line.removeprefix("export ").split("=", 1) for line in lines.splitlines())
        server, stop = env["TUNER_TEST_POSTGRES"], env["TUNER_TEST_POSTGRES_DATA"]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            overhead = [storage_overhead(kind, location, args.overhead_trials, root / kind) for kind, location in (
                ("journal", None), ("sqlite", f"sqlite:///{root / 'tuner.db'}"),
                ("postgresql", fresh_database(server)))]
            table = Table(title=f"storage overhead per trial: retrieval-only study (ndcg@10), demo, "
                                f"{args.overhead_trials} random trials of search_spaces/retrieval.yaml")
            for column in ("storage", "trials", "wall s/trial", "in storage s/trial", "share"):
                table.add_column(column, justify="left" if column == "storage" else "right")
            for row in overhead:
                table.add_row(row["storage"], str(row["trials"]), f"{row['wall']:.3f}", f"{row['storage_s']:.3f}",
                              f"{row['storage_s'] / row['wall']:.0%}")
            console.print(table)
            if args.skip_throughput:
                return
            runs = [throughput(server, n, args.questions, args.trials, root / "throughput") for n in (1, 2)]
            table = Table(title=f"1 vs 2 workers on one PostgreSQL study: 0.5B generator + judge, 1 thread each, "
                                f"{args.questions} demo questions, {args.trials} trials, quick space, random sampler")
            for column in ("workers", "wall min", "finished trials", "trials/hour", "LLM calls paid", "paid twice",
                           "duplicate proposals"):
                table.add_column(column, justify="right")
            for run in runs:
                table.add_row(str(run["workers"]), f"{run['wall'] / 60:.1f}", str(run["trials"]),
                              f"{run['per_hour']:.1f}", str(run["paid"]), str(run["twice"]), str(run["duplicates"]))
            table.caption = f"2 workers: {runs[1]['per_hour'] / runs[0]['per_hour']:.2f}x the trials per hour of 1"
            console.print(table)
    finally:
        if stop:
            subprocess.run([str(ROOT / ".ci" / "postgres"), "stop", stop], check=False)


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()
