"""The label correction's coverage and width at every label count, in seeded simulations whose truth is known.

A population of questions with human verdicts (supported 1, not 0) and a judge's scores of them; a few questions
are labelled at random and the corrected interval is compared with the truth (the mean verdict over every question,
or the paired difference of two configurations' verdicts). Judges: `good` (tracks the verdict, biased low, little
noise), `weak` (tracks it through heavy noise: AUC about 0.75, like the 1.5B judge on amnesty_qa) and `useless`
(uniform noise). For each label count it prints the share of simulations whose 95 % interval covers the truth, and
the mean width, for:

- `bare PPI`: issue 36's estimator (λ = 1, t interval on the labels, no pseudo-labels);
- `bare PPI++`: λ from the data but no pseudo-labels (five labels that agree have no spread: λ = 0, width 0);
- `labels only`: the labels' own interval (with the pseudo-labels, as tuner gives it when every question is labelled);
- `PPI++`: what tuner gives now (λ from the data, pseudo-labels; tuner/analysis/ppi.py).

    python bench/ppi.py                       # 1000 simulations per row
    python bench/ppi.py --simulations 200 --questions 20

With --sequential it measures `tuner judge label`'s stopping rule instead: a person labels until the corrected
best − baseline difference decides (its interval excludes zero) or the labels planned run out, in the labelling
plan's order (questions drawn where the judge is least sure; tuner/analysis/labelling.py) against a random order
(every question equally likely), both read by the same estimator and confidence sequence. Per judge and true gain
it prints the labels to a decision (median, over the runs that decided), the share decided within the budget, the
share of decisions on the wrong side, and the share of runs whose interval ever missed the truth (what "95 %"
promises at every look). The last column is today's PPI++ t interval read after every label in random order: the
share of runs it decided for the wrong side or missed the truth.

    python bench/ppi.py --sequential --simulations 500 --questions 100 --budget 120
"""

from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console
from rich.table import Table

from tuner.analysis.labelling import chances, decision, draw
from tuner.analysis.ppi import DIFFERENCE, Plan, correct_difference, labels_only, planned_mean, ppi_difference, ppi_mean

console = Console(width=200)
LABEL_COUNTS = (5, 8, 12, 20, 40, 60)


def judge(rng: np.random.Generator, verdicts: np.ndarray, kind: str) -> np.ndarray:
    size = len(verdicts)
    if kind == "good":
        return np.clip(verdicts * 0.8 + 0.05 + rng.normal(0, 0.1, size), 0, 1)
    if kind == "weak":
        return np.clip(verdicts * 0.3 + 0.35 + rng.normal(0, 0.3, size), 0, 1)
    return rng.random(size)


def simulate(kind: str, paired: bool, supported: float, questions: int, labels: int, seed: int):
    """One simulation: (truth, bare PPI, bare PPI++, labels only, PPI++)."""
    rng = np.random.default_rng(seed)
    shared = rng.random(questions)  # a question's difficulty, shared by both configurations' answers
    a = (shared < supported).astype(float)
    labelled = rng.choice(questions, labels, replace=False)
    rest = np.setdiff1d(np.arange(questions), labelled)
    if not paired:
        scores = judge(rng, a, kind)
        args = scores[rest].tolist(), scores[labelled].tolist(), a[labelled].tolist()
        return (a.mean(), ppi_mean(*args, weight=1.0, span=None), ppi_mean(*args, span=None),
                labels_only(a[labelled].tolist()), ppi_mean(*args))
    b = (np.clip(shared + rng.normal(0, 0.25, questions), 0, 1) < supported + 0.1).astype(float)
    judged_a, judged_b = judge(rng, a, kind), judge(rng, b, kind)
    args = (judged_b[rest].tolist(), judged_a[rest].tolist(), judged_b[labelled].tolist(),
            judged_a[labelled].tolist(), b[labelled].tolist(), a[labelled].tolist())
    difference = (b - a)[labelled].tolist()
    return ((b - a).mean(), ppi_difference(*args, weight=1.0, span=None), ppi_difference(*args, span=None),
            labels_only(difference, span=DIFFERENCE), ppi_difference(*args))


def population(kind: str, gain: float, questions: int, seed: int, same: float = 0.3):
    """A held-out set's baseline and best answers: `same` of the questions gave the same answer twice (one label,
    one score); on the others the best is supported `gain / (1 - same)` more often. Labels 1/0 and judge scores."""
    rng = np.random.default_rng(seed)
    alike = rng.random(questions) < same
    a = (rng.random(questions) < 0.55).astype(float)
    b = np.where(alike, a, (rng.random(questions) < 0.55 + gain / (1 - same)).astype(float))
    judged_a = judge(rng, a, kind)
    judged_b = np.where(alike, judged_a, judge(rng, b, kind))
    return alike, a, b, judged_a, judged_b


def label_until_decided(kind: str, gain: float, questions: int, budget: int, seed: int, active: bool):
    """One session: (labels given, decided, wrong side, ever missed the truth, today's t interval looked at after
    every label ever missed it)."""
    alike, a, b, judged_a, judged_b = population(kind, gain, questions, seed)
    ids = [f"q{i}" for i in range(questions)]
    truth = float((b - a).mean())
    pairs = {q: () if alike[i] else (judged_a[i], judged_b[i]) for i, q in enumerate(ids)}
    odds = chances(pairs, 0.5) if active else dict.fromkeys(ids, 1 / questions)
    held = {q: 1 if alike[i] else 2 for i, q in enumerate(ids)}
    draws = draw(odds, held, budget, seed)
    plan = Plan(odds, draws, len(draws))
    judged = {q: float(judged_b[i] - judged_a[i]) for i, q in enumerate(ids)}
    human, given, missed, peeked = {}, 0, False, False
    for question in dict.fromkeys(draws):
        i = ids.index(question)
        human[question] = float(b[i] - a[i])
        given += held[question]
        corrected = planned_mean(judged, human, plan, span=DIFFERENCE)
        if corrected is None:
            continue
        missed |= not corrected.ci[0] <= truth <= corrected.ci[1]
        if not active:  # today's interval, looked at after every label in random order
            old = correct_difference(dict(zip(ids, judged_a)), dict(zip(ids, judged_b)),
                                     {q: float(a[ids.index(q)]) for q in human},
                                     {q: float(b[ids.index(q)]) for q in human})
            peeked |= old is not None and not old.ci[0] <= truth <= old.ci[1]
        said = decision(corrected, draws.index(question) + 1, plan.target)
        if said.startswith("decided"):
            wrong = (corrected.ci[0] > 0) != (truth > 0) if truth != 0 else True
            return given, True, wrong, missed, peeked
        if "you can stop" in said:
            break
    return given, False, False, missed, peeked


def sequential(args) -> None:
    table = Table(title=f"labels to a decision on best − baseline: {args.questions} held-out questions (30 % answered "
                        f"alike), budget {args.budget} answers, {args.simulations} seeded sessions per row")
    for column in ("judge", "true gain", "order", "labels to a decision (median)", "labels given (mean)", "decided",
                   "wrong side", "interval ever missed", "today's t interval ever missed"):
        table.add_column(column, justify="left" if column in ("judge", "order") else "right")
    for kind in ("good", "weak", "useless"):
        for gain in (0.0, 0.1, 0.2):
            for active in (True, False):
                runs = [label_until_decided(kind, gain, args.questions, args.budget, seed, active)
                        for seed in range(args.simulations)]
                decided = [r for r in runs if r[1]]
                to_decide = np.median([r[0] if r[1] else np.inf for r in runs])  # undecided: never
                table.add_row(kind, f"{gain:+.1f}", "where they decide" if active else "random",
                              f"{to_decide:.0f}" if np.isfinite(to_decide) else "undecided",
                              f"{np.mean([r[0] for r in runs]):.0f}", f"{len(decided) / len(runs):.0%}",
                              f"{sum(r[2] for r in decided) / max(len(decided), 1):.1%}",
                              f"{sum(r[3] for r in runs) / len(runs):.1%}",
                              "" if active else f"{sum(r[4] for r in runs) / len(runs):.1%}")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=200, help="questions judged in all (labelled or not)")
    parser.add_argument("--supported", type=float, default=0.7, help="share of supported answers")
    parser.add_argument("--sequential", action="store_true", help="labels to a decision, asked where they decide "
                        "vs at random")
    parser.add_argument("--budget", type=int, default=60, help="with --sequential: answers a session may label")
    args = parser.parse_args()
    if args.sequential:
        return sequential(args)
    table = Table(title=f"95 % intervals over {args.simulations} seeded simulations, {args.questions} questions, "
                        f"{args.supported:.0%} supported: coverage / mean width")
    columns = ("what", "judge", "labels", "bare PPI", "bare PPI++", "labels only", "PPI++", "PPI++ ≥ 0.93, ≤ labels")
    for column in columns:
        table.add_column(column, justify="left" if column in ("what", "judge") else "right")
    worst = 1.0
    for paired in (False, True):
        for kind in ("good", "weak", "useless"):
            for count in (c for c in LABEL_COUNTS if c < args.questions):
                covered, widths = np.zeros(4), np.zeros(4)
                for seed in range(args.simulations):
                    truth, *intervals = simulate(kind, paired, args.supported, args.questions, count, seed)
                    for i, interval in enumerate(intervals):
                        covered[i] += interval.ci[0] <= truth <= interval.ci[1]
                        widths[i] += interval.width
                covered, widths = covered / args.simulations, widths / args.simulations
                worst = min(worst, covered[3])
                meets = covered[3] >= 0.93 and widths[3] <= widths[2]
                table.add_row("difference" if paired else "mean", kind, str(count),
                              *(f"{c:.3f} / {w:.3f}" for c, w in zip(covered, widths)), "yes" if meets else "NO")
    console.print(table)
    console.print(f"lowest PPI++ coverage: {worst:.3f}")


if __name__ == "__main__":
    main()
