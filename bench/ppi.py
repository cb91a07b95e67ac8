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
"""

from __future__ import annotations

import argparse

import numpy as np
from rich.console import Console
from rich.table import Table

from tuner.analysis.ppi import DIFFERENCE, labels_only, ppi_difference, ppi_mean

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--simulations", type=int, default=1000)
    parser.add_argument("--questions", type=int, default=200, help="questions judged in all (labelled or not)")
    parser.add_argument("--supported", type=float, default=0.7, help="share of supported answers")
    args = parser.parse_args()
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
