"""The overnight study on long documents (issue 77): what a question costs before and after one model reads a
question's passages once for its answer and its verdicts, and writes answers drafted from their passages.

    python bench/overnight.py                                          # cmu_qa_wikipedia, 20 questions, 10 trials
    python bench/overnight.py --questions 3 --trials 2 --model qwen2.5-0.5b   # a smoke run

The corpus is cmu_qa_wikipedia's 135 whole Wikipedia articles (~4,700 words each), chunked as the project's defaults
chunk; the questions a seeded sample across its articles. The same faithfulness study (the default search space,
TPE with a fixed seed: trial 0 is the baseline and the next five TPE's seeded random start, the same configurations
in every variant, while later trials follow each variant's own scores and may differ; no held-out split, no judge
check, no pruning) runs once per variant, each in its own process with an empty LLM cache (the index and embeddings
are the first variant's):

* `before`: tuner until issue 77 (`answer_layout: instructions-first`, `verdict_contexts: joined`, no drafts);
* `after`: tuner's defaults now (where the generator judges: answers laid out `context-first` and verdicts on the
  passages `numbered` as the answer shows them, so the verdicts resume the answer's passages), with
  `speculative: prompt-lookup`;
* `after, no drafts`: the same without drafts, trial 0 alone: what the drafts save, and whether they change an
  answer (greedy decoding checked in batches rounds differently).

First, `tuner optimize --estimate` for `after` in a folder of its own (it embeds the corpus, so its time is what a
new user waits for, and its calls stay out of the studies' caches): its embedding time and trial 0's and trial 1's
seconds a question, set beside what the study then took.

Per variant: seconds a question in trial 0 and in the later trials; prompt tokens sent, computed and unique (what no
earlier prompt of the study began with: what even a perfect cache computes); tokens written and written a second of
answering; the process's peak RSS; answers and faithfulness as `before`'s. Last, what a 40-trial study of 40
questions takes at these rates. Figures are printed, never asserted: record them in docs/performance.md. Run it
alone: another model job on the 2 cores voids the seconds. `--shown DIR` prints the tables of a run kept with
`--keep DIR` again, without running anything.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from prefix import (  # bench/prefix.py: the same study, recorded
    DATASETS,
    child,
    console,
    prepared,
    read_variant,
    run_variant,
    study_parser,
)

CORPUS = DATASETS / "cmu_qa_wikipedia_v1.2"
VARIANTS = {
    "before": {"answer_layout": "instructions-first", "evaluation": {"verdict_contexts": "joined"}},
    "after": {"generator": {"speculative": "prompt-lookup"}},
    "after, no drafts": {"generator": {"speculative": "none"}},  # trial 0 alone: the drafts' own share
}
#: the estimate's output, kept in its folder
ESTIMATE = "estimate.txt"
#: variants that run trial 0 alone
TRIAL_0_ONLY = {"after, no drafts"}
#: the study a user leaves overnight, and the trial the projection takes as trial 0's
PROJECTED_TRIALS, PROJECTED_QUESTIONS = 40, 40


def long_documents(questions: int, folder: Path) -> Path:
    """The set with a seeded sample of its questions, one per article while articles last (its own first questions
    all ask about one article); the corpus and judgments are linked, not copied."""
    rows = [json.loads(line) for line in (CORPUS / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    random.Random(0).shuffle(rows)
    picked, articles = [], set()
    for row in rows:
        if row["article"] not in articles and row.get("answers"):
            picked.append(row)
            articles.add(row["article"])
        if len(picked) == questions:
            break
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("corpus.jsonl", "qrels.tsv"):
        (folder / name).symlink_to(CORPUS / name)
    (folder / "queries.jsonl").write_text("".join(json.dumps(row) + "\n" for row in picked), encoding="utf-8")
    return folder


def rates(result: dict) -> dict:
    """Seconds a question in trial 0 and in later trials, and what was written and computed."""
    trials = result["trials"]
    questions = max(1, len(next(iter(trials.values()))["answers"]))
    later = [r for n, r in trials.items() if n > 0]
    written, writing = result["written"]["tokens"], result["written"]["seconds"]
    return {"trial0": trials[0]["seconds"] / questions,
            "later": sum(r["seconds"] for r in later) / max(1, len(later) * questions) if later else None,
            "sent": sum(r["sent"] for r in trials.values()), "evaluated": sum(r["evaluated"] for r in trials.values()),
            "unique": result["study_unique"], "written": written, "answering": writing,
            "written_per_answer": written / max(1, result["written"]["calls"])}


def projected(rate: dict, trials: int = PROJECTED_TRIALS, questions: int = PROJECTED_QUESTIONS) -> float:
    """Hours for `trials` trials of `questions` questions at trial 0's and the later trials' seconds a question."""
    later = rate["later"] if rate["later"] is not None else rate["trial0"]
    return (rate["trial0"] + (trials - 1) * later) * questions / 3600


def estimated(dataset: Path, questions: int, trials: int, model: str, work: Path, warm: Path | None) -> dict:
    """What `tuner optimize --estimate` says of the `after` study before it runs, from a cache of its own (the
    index's and embeddings' aside): the embedding's predicted time, trial 0's and trial 1's seconds a question."""
    folder, args = prepared("after, estimate", dataset, questions, trials, model, work, warm, VARIANTS["after"],
                            "default", "tpe")
    ran = subprocess.run([sys.executable, "-m", "tuner", *args, "--estimate"], cwd=folder, capture_output=True,
                         text=True)
    (folder / ESTIMATE).write_text(ran.stdout + ran.stderr, encoding="utf-8")  # kept with --keep
    if ran.returncode != 0:
        raise SystemExit(f"--estimate failed ({ran.returncode}): {ran.stderr.strip()[-2000:]}")
    return told_by(ran.stdout + ran.stderr)


def told_by(printed: str) -> dict:
    """What an estimate printed: trial 0's and trial 1's seconds a question, and the embedding's time to go."""
    rows = {n: float(m[1]) for n in (0, 1) if (m := re.search(rf"wall time, trial {n}\s*│\s*([\d.]+) s", printed))}
    said = re.search(r"embedding [\d,]+ chunks the cache does not hold: about (.+?) to go", printed)
    return {"trial0": rows.get(0), "trial1": rows.get(1), "embedding": said[1] if said else None}


def same_answers(result: dict, other: dict, trial: int = 0) -> tuple[int, int]:
    """How many of a trial's answers two variants wrote as the same text."""
    mine, theirs = result["trials"][trial]["answers"], other["trials"][trial]["answers"]
    return sum(mine[q] == theirs.get(q) for q in mine), len(mine)


def show(results: dict[str, dict], questions: int, trials: int, model: str, told: dict | None) -> None:
    table = Table(title=f"cmu_qa_wikipedia, whole articles: {questions} questions, {trials}-trial TPE faithfulness "
                        f"study, {model} generating and judging")
    for column in ("variant", "s/question trial 0", "s/question later", "prompt tokens sent", "computed", "unique",
                   "written", "written/call", "written/s", "peak RSS MiB", "answers as before",
                   "max |Δ faithfulness|", f"{PROJECTED_TRIALS}×{PROJECTED_QUESTIONS} study, h"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    base = results.get("before")
    for variant, result in results.items():
        rate = rates(result)
        shared = [n for n in result["trials"] if base and n in base["trials"]]
        same = [result["trials"][n]["answers"][q] == a for n in shared
                for q, a in base["trials"][n]["answers"].items() if q in result["trials"][n]["answers"]]
        deltas = [abs(result["trials"][n]["value"] - base["trials"][n]["value"]) for n in shared
                  if None not in (result["trials"][n]["value"], base["trials"][n]["value"])]
        table.add_row(variant, f"{rate['trial0']:.1f}", "-" if rate["later"] is None else f"{rate['later']:.1f}",
                      f"{rate['sent']:,}", f"{rate['evaluated']:,}", f"{rate['unique']:,}", f"{rate['written']:,}",
                      f"{rate['written_per_answer']:.0f}", f"{rate['written'] / max(rate['answering'], 1e-9):.1f}",
                      f"{result['rss_mib']:,.0f}", f"{sum(same)}/{len(same)}" if same else "-",
                      f"{max(deltas):.3f}" if deltas else "-", f"{projected(rate):.1f}")
    console.print(table)
    if base and "after" in results:
        before, after = rates(base), rates(results["after"])
        console.print(f"trial 0: {after['trial0'] / before['trial0']:.2f}× before's seconds a question; a "
                      f"{PROJECTED_TRIALS}-trial study of {PROJECTED_QUESTIONS} questions: "
                      f"{projected(before):.1f} h before, {projected(after):.1f} h after", highlight=False)
        alike = [n for n, r in results["after"]["trials"].items()
                 if n > 0 and n in base["trials"] and r["params"] == base["trials"][n]["params"]]
        if alike:  # TPE follows each variant's own scores after its random start: compare like with like
            pace = {v: sum(results[v]["trials"][n]["seconds"] for n in alike) / (len(alike) * questions)
                    for v in ("before", "after")}
            console.print(f"later trials with the same configuration in both ({', '.join(map(str, alike))}): "
                          f"{pace['before']:.1f} s a question before, {pace['after']:.1f} after "
                          f"({pace['after'] / pace['before']:.2f}×)", highlight=False)
    if told is not None and "after" in results:
        after = results["after"]["trials"]
        n = len(after[0]["answers"])
        measured = [after[t]["seconds"] / n if t in after else None for t in (0, 1)]
        console.print(f"--estimate before the study: trial 0 {told['trial0']} s a question (measured "
                      f"{measured[0]:.1f}), trial 1 {told['trial1']} s (measured "
                      f"{'-' if measured[1] is None else f'{measured[1]:.1f}'}); the embedding said "
                      f"{told['embedding'] or 'nothing (cached)'}", highlight=False)
    if {"after", "after, no drafts"} <= set(results):
        same, asked = same_answers(results["after"], results["after, no drafts"])
        console.print(f"trial 0 with drafts: {same}/{asked} answers the same text as written token by token",
                      highlight=False)


def main() -> None:
    parser = study_parser(__doc__.splitlines()[0], VARIANTS, 20, 10, "qwen2.5-1.5b")
    parser.add_argument("--warm", type=Path, help="start from this cache folder's index and embeddings (an earlier "
                        "run's, kept with --keep: its runs/after-estimate/cache); the estimate then embeds nothing")
    parser.add_argument("--shown", type=Path, help="print the tables of a run kept with --keep DIR, running nothing")
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.out, args.rest)
    if args.shown:
        return shown_again(args.shown, args.model)
    if not CORPUS.is_dir():
        raise SystemExit(f"{CORPUS}: not found (bench/overnight.py reads ../shared/datasets)")
    with tempfile.TemporaryDirectory() as scratch:
        work = (args.keep or Path(scratch)).resolve()  # the children run in their own folders
        dataset = long_documents(args.questions, work / "data")
        results, warm, told = {}, args.warm, None
        if "after" in args.variants:  # first: its index build is the one a new user waits for
            console.print("after: --estimate …", highlight=False)
            told = estimated(dataset, args.questions, args.trials, args.model, work / "runs", args.warm)
            warm = work / "runs" / "after-estimate" / "cache"
        for variant in args.variants:
            console.print(f"{variant} …", highlight=False)
            trials = 1 if variant in TRIAL_0_ONLY else args.trials
            results[variant] = run_variant(variant, dataset, args.questions, trials, args.model, work / "runs",
                                           warm, VARIANTS[variant], space="default", sampler="tpe")
            warm = warm or results[variant]["cache"]
        show(results, args.questions, args.trials, args.model, told)


def shown_again(work: Path, model: str) -> None:
    """The tables of a kept run, from its folders: the variants that finished, and the estimate's output."""
    runs = work / "runs"
    results = {v: {"cache": runs / folder / "cache", **read_variant(runs / folder)} for v in VARIANTS
               if (runs / (folder := v.replace(" ", "-").replace(",", "")) / "peak.json").is_file()}
    if not results:
        raise SystemExit(f"{work}: no finished variant kept there (run with --keep {work})")
    estimate = runs / "after-estimate" / ESTIMATE
    told = told_by(estimate.read_text(encoding="utf-8")) if estimate.is_file() else None
    first = next(iter(results.values()))
    show(results, len(first["trials"][0]["answers"]), len(first["trials"]), model, told)


if __name__ == "__main__":
    main()
