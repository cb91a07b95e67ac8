"""What a study pays for its prompts: prompt tokens sent, computed and unique, per trial, before and after prefix
states were kept per question (issue 64).

    python bench/prefix.py                                    # demo + amnesty_qa, 15 questions, 6 trials
    python bench/prefix.py --sets demo --questions 3 --trials 2 --variants before after   # a smoke run

The same faithfulness study (quick space, random sampler with a fixed seed, so every variant walks the same
configurations; no held-out split, no judge check, no pruning: a trial pruned after another number of questions
would make totals differ for that alone) runs once per variant, each in its own process with an empty LLM
cache (the index and embeddings are shared):

* `before`: the prompt prefixes as tuner kept them until issue 64: one KV state per template (a prompt sharing 96
  leading tokens with a saved one replaces it, oldest dropped first);
* `after`: states kept per question (the default): its trial values differ from `before` only by the float
  rounding of prompts evaluated in two parts;
* `passages first`: the same with the program's instructions after the passages (`answer_layout: passages-first`);
* `after 256 MiB`: `after` with `prefix_memory: 256`.

Per trial: its value, prompt tokens sent (paid calls) and computed (tuner's own counts, as the trials table shows
them), unique (the tokens of its prompts that no earlier prompt of the study began with: what even a perfect cache
must compute), and seconds. Per variant: the totals, each one's ratio to `before`, evaluated/unique, the process's
peak RSS, the most the saved states held, the largest change of a trial's value and how many answers are the same
text as `before`'s (the float rounding of resumed prefixes; that and the layout in `passages first`). Figures
are printed, never asserted: record them in docs/performance.md. Run it alone: another model job on the 2 cores
voids the seconds.
"""

from __future__ import annotations

import argparse
import bisect
import ctypes
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"
SETS = {"demo": None, "amnesty_qa": DATASETS / "amnesty_qa"}
VARIANTS = {
    "before": {"states": "template"},
    "after": {},
    "passages first": {"answer_layout": "passages-first"},
    "after 256 MiB": {"prefix_memory": 256},
}
console = Console(width=200)


# --- the child: one study, with the prompts it sent recorded ------------------------------------------------------

class TemplateStates:
    """PrefixStates as tuner kept them before issue 64 (the `before` variant): one state per template, the oldest
    dropped first when the budget is full."""

    SAME_TEMPLATE = 96

    def __init__(self, llama_cpp, budget: int):
        from tuner.models.llms._llama_decoding import PrefixStates

        self._new = PrefixStates(llama_cpp, budget)  # its restore, with every state of one "question"
        self._lib = llama_cpp

    @property
    def held(self) -> int:
        return self._new.held

    def save(self, ctx, tokens, question: str = "") -> None:
        from tuner.models.llms._llama_decoding import _Saved, common_prefix

        states = self._new
        if len(tokens) < self.SAME_TEMPLATE:
            return
        states._saved = [s for s in states._saved if common_prefix(s.tokens, tokens) < self.SAME_TEMPLATE]
        size = self._lib.llama_state_seq_get_size(ctx, 0)
        state = (ctypes.c_uint8 * size)()
        if self._lib.llama_state_seq_get_data(ctx, state, size, 0) != size:
            return
        states._saved.append(_Saved(tokens.copy(), state, "", states._tick("")))
        while states.held > states.budget:
            states._saved.remove(min(states._saved, key=lambda s: s.used))

    def restore(self, ctx, tokens, have: int, question: str = ""):
        return self._new.restore(ctx, tokens, have, "")


def child(states: str, out: Path, args: list[str]) -> None:
    """Run `tuner optimize args` in this process, prompt prefixes kept as `states` says ("template": as before issue
    64); at exit write the prompts it sent (with when) and its peak RSS."""
    import atexit
    import importlib

    from tuner.cli import main
    from tuner.models.llms import _llama_decoding

    _llama_cpp = importlib.import_module("tuner.models.llms._llama_cpp")  # the package's `_llama_cpp` is a function

    sent: list[tuple[float, np.ndarray]] = []
    held = [0]

    class Recorder(list):
        def append(self, tokens) -> None:
            sent.append((time.time(), np.asarray(tokens, dtype=np.int64)))

    _llama_cpp.LlamaCppLLM.prompts = Recorder()
    kept = TemplateStates if states == "template" else _llama_decoding.PrefixStates
    save = kept.save

    def measured_save(self, *a, **k):
        save(self, *a, **k)
        held[0] = max(held[0], self.held)

    kept.save = measured_save
    _llama_cpp.PrefixStates = kept
    written = {"calls": 0, "tokens": 0, "seconds": 0.0}  # paid free-text calls, their tokens, the seconds writing them
    chat = _llama_cpp.LlamaCppLLM._chat

    def timed_chat(self, messages, **settings):
        if settings.get("json_schema") is not None:
            return chat(self, messages, **settings)
        model = self._model
        evaluate, spent = model.eval, []

        def timed(tokens) -> None:
            started = time.perf_counter()
            evaluate(tokens)
            spent.append(time.perf_counter() - started)
        model.eval = timed
        try:
            reply = chat(self, messages, **settings)
        finally:
            del model.eval  # the class's own again
        written["calls"] += 1
        written["tokens"] += reply.completion_tokens
        written["seconds"] += sum(spent[1:])  # after the prompt's evaluation
        return reply

    _llama_cpp.LlamaCppLLM._chat = timed_chat

    def write() -> None:
        np.savez(out / "prompts.npz", times=np.array([t for t, _ in sent]),
                 lengths=np.array([len(p) for _, p in sent]),
                 tokens=np.concatenate([p for _, p in sent]) if sent else np.array([], dtype=np.int64))
        (out / "peak.json").write_text(json.dumps({
            "rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "held_mib": held[0] / (1 << 20),
            "written": written}))

    atexit.register(write)
    sys.argv = ["tuner", *args]
    main()


# --- the parent: the variants side by side ------------------------------------------------------------------------

def unique_new(times: np.ndarray, lengths: np.ndarray, tokens: np.ndarray) -> list[int]:
    """Per prompt, in the order sent: its tokens past the longest prefix any earlier prompt shares with it."""
    keys: list[bytes] = []
    new = []
    start = 0
    for length in lengths:
        prompt = tokens[start:start + length].astype(">u4")
        start += length
        key = prompt.tobytes()
        at = bisect.bisect_left(keys, key)
        shared = 0
        for neighbour in keys[max(0, at - 1):at + 1]:  # the longest shared prefix is with a sorted neighbour
            other = np.frombuffer(neighbour, dtype=">u4")
            n = min(len(other), len(prompt))
            differ = np.flatnonzero(other[:n] != prompt[:n])
            shared = max(shared, int(differ[0]) if len(differ) else n)
        new.append(int(length) - shared)
        keys.insert(at, key)
    return new


def run_variant(variant: str, dataset: Path | None, questions: int, trials: int, model: str, work: Path,
                warm: Path | None, settings: dict, space: str = "quick", sampler: str = "random") -> dict:
    """One study under `settings` (project settings; "states" and "prefix_memory" as VARIANTS name them; a
    "generator" mapping adds to the generator's)."""
    folder, args = prepared(variant, dataset, questions, trials, model, work, warm, settings, space, sampler)
    started = time.perf_counter()
    script = str(Path(sys.argv[0]).resolve())  # the child runs in the variant's folder
    ran = subprocess.run([sys.executable, script, "--child", settings.get("states", "question"), "--out", str(folder),
                          "--", *args], cwd=folder, capture_output=True, text=True)
    if ran.returncode != 0:
        raise SystemExit(f"{variant}: tuner optimize failed ({ran.returncode}): {ran.stderr.strip()[-2000:]}")
    return {"folder": folder, "cache": folder / "cache", "wall": time.perf_counter() - started, **read_variant(folder)}


def prepared(variant: str, dataset: Path | None, questions: int, trials: int, model: str, work: Path,
             warm: Path | None, settings: dict, space: str, sampler: str) -> tuple[Path, list[str]]:
    """The variant's folder (its config, and a cache holding the first variant's index and embeddings) and the
    `tuner optimize` arguments of its study."""
    folder = work / variant.replace(" ", "-").replace(",", "")
    folder.mkdir(parents=True)
    cache = folder / "cache"
    if warm is not None:  # the index and embeddings of the first variant: only the LLM cache starts empty
        cache.mkdir()
        for name in ("embeddings.sqlite", "indexes.sqlite"):
            if (warm / name).exists():
                shutil.copy(warm / name, cache / name)
    settings = {key: value for key, value in settings.items() if key != "states"}
    generator = {"model": model, **({"prefix_memory": settings.pop("prefix_memory")}
                                    if "prefix_memory" in settings else {}), **settings.pop("generator", {})}
    config = {"generator": generator, "dataset": {"limit": questions, **({"path": str(dataset)} if dataset else {})},
              "cache_dir": str(cache), **settings}
    (folder / "tuner.yaml").write_text(yaml.safe_dump(config))
    args = ["optimize", "--config", str(folder / "tuner.yaml"), "--target", "faithfulness", "--trials", str(trials),
            "--search-space", space, "--sampler", sampler, "--seed", "0", "--holdout", "0", "--judge-check", "off",
            "--study", "bench", "--studies-dir", str(folder / "studies"), "--reports-dir", str(folder / "reports"),
            "--prune-after", str(questions)]  # every trial answers every question: each variant does the same work
    return folder, args


def read_variant(folder: Path) -> dict:
    import optuna

    from tuner.study.storage import study_folder

    study_dir = study_folder(folder / "studies", "bench")
    study = optuna.load_study(study_name="bench", storage=optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(study_dir.journal))))
    recorded = np.load(folder / "prompts.npz")
    new = unique_new(recorded["times"], recorded["lengths"], recorded["tokens"])
    starts = [(t.number, t.datetime_start.timestamp()) for t in study.trials if t.datetime_start]
    unique: dict[int, int] = {}
    for at, count in zip(recorded["times"], new):
        number = max((n for n, begun in starts if begun <= at), default=-1)  # -1: before trial 0 (none here)
        unique[number] = unique.get(number, 0) + count
    rows = {}
    for t in study.trials:
        file = study_dir.read_trial(t.number) if (study_dir.trials / f"{t.number:04d}.json").is_file() else None
        if file is None:
            continue
        cost = file.result.cost
        rows[t.number] = {"params": t.params, "value": t.values[0] if t.values else None,
                          "sent": cost.prompt_tokens, "evaluated": cost.evaluated_tokens,
                          "unique": unique.get(t.number, 0), "seconds": cost.seconds,
                          "answers": {q.id: q.answer for q in file.result.questions},
                          "faithfulness": {q.id: q.scores.get("faithfulness") for q in file.result.questions},
                          "stages": {stage: cost.as_dict() for stage, cost in file.result.cost_by_stage.items()}}
    return {"trials": rows, "study_unique": sum(new), "before_trials": unique.get(-1, 0),
            **json.loads((folder / "peak.json").read_text())}


def knobs(params: dict) -> str:
    return " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in sorted(params.items()))


def show(name: str, results: dict[str, dict]) -> None:
    per_trial = Table(title=f"{name}: per trial (tokens: prompt tokens of the paid calls)")
    for column in ("trial", "params", "variant", "faithfulness", "sent", "evaluated", "unique", "seconds"):
        per_trial.add_column(column, justify="left" if column in ("params", "variant") else "right")
    for number in next(iter(results.values()))["trials"]:
        for variant, result in results.items():
            r = result["trials"].get(number)
            if r is None:
                continue
            per_trial.add_row(str(number), knobs(r["params"]) if variant == next(iter(results)) else "", variant,
                              "-" if r["value"] is None else f"{r['value']:.4f}", f"{r['sent']:,}",
                              f"{r['evaluated']:,}", f"{r['unique']:,}", f"{r['seconds']:.0f}")
    console.print(per_trial)
    totals = Table(title=f"{name}: the study")
    for column in ("variant", "sent", "evaluated", "× before", "unique", "evaluated / unique", "seconds", "× before",
                   "peak RSS MiB", "states held MiB", "max |Δ faithfulness| vs before", "answers as before"):
        totals.add_column(column, justify="left" if column == "variant" else "right")
    base = results.get("before")

    def total(result: dict, key: str) -> float:
        return sum(r[key] for r in result["trials"].values())

    for variant, result in results.items():
        shared = [n for n in result["trials"] if base and n in base["trials"]]
        deltas = [abs(result["trials"][n]["value"] - base["trials"][n]["value"]) for n in shared
                  if result["trials"][n]["value"] is not None and base["trials"][n]["value"] is not None]
        same = [result["trials"][n]["answers"][q] == answer for n in shared
                for q, answer in base["trials"][n]["answers"].items() if q in result["trials"][n]["answers"]]
        evaluated, seconds = total(result, "evaluated"), total(result, "seconds")
        totals.add_row(variant, f"{total(result, 'sent'):,.0f}", f"{evaluated:,.0f}",
                       f"{evaluated / total(base, 'evaluated'):.2f}" if base else "-",
                       f"{result['study_unique']:,}", f"{evaluated / max(1, result['study_unique']):.2f}",
                       f"{seconds:.0f}", f"{seconds / total(base, 'seconds'):.2f}" if base else "-",
                       f"{result['rss_mib']:,.0f}", f"{result['held_mib']:,.0f}",
                       f"{max(deltas):.4f}" if deltas else "-", f"{sum(same)}/{len(same)}" if same else "-")
    console.print(totals)


def study_parser(description: str, variants: dict, questions: int, trials: int, model: str) -> argparse.ArgumentParser:
    """The arguments of a bench that runs one study per variant, each in a child process of its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--variants", nargs="+", default=list(variants), choices=list(variants))
    parser.add_argument("--questions", type=int, default=questions)
    parser.add_argument("--trials", type=int, default=trials)
    parser.add_argument("--model", default=model)
    parser.add_argument("--keep", type=Path, help="keep the studies here (default: a temporary folder)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    return parser


def main() -> None:
    parser = study_parser(__doc__.splitlines()[0], VARIANTS, 15, 6, "qwen2.5-0.5b")
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=list(SETS))
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.out, args.rest)
    for name in args.sets:
        if SETS[name] is not None and not SETS[name].is_dir():
            raise SystemExit(f"{SETS[name]}: not found (bench/prefix.py reads ../shared/datasets)")
    with tempfile.TemporaryDirectory() as scratch:
        work = (args.keep or Path(scratch)).resolve()  # the children run in their own folders
        for name in args.sets:
            results, warm = {}, None
            for variant in args.variants:
                console.print(f"{name}: {variant} …", highlight=False)
                results[variant] = run_variant(variant, SETS[name], args.questions, args.trials, args.model,
                                               work / name, warm, VARIANTS[variant])
                warm = warm or results[variant]["cache"]
            show(f"{name} ({args.questions} questions, {args.trials} trials, {args.model})", results)


if __name__ == "__main__":
    main()
