"""The judge's P(yes) combined with what needs no weights, fitted on people's labels: the share of a claim's content
words, and of its numbers and names, that the passages hold (the lexical checker's two readings).

It reads the per-claim scores bench/judge.py --labels saved for each judge setting (`--checks`, one file per
setting; the first is the baseline), computes the lexical shares itself (no model), and fits a logistic regression
on the logit of each judge score and the shares. Scored by 10-fold cross-validation (seeded, stratified): the AUC
of the out-of-fold probabilities with its 95 % bootstrap interval, the paired difference from the baseline judge
alone on the same claims, the balanced accuracy of a cut chosen on other folds, and the cut on every claim's
out-of-fold probability (what a shipped blend's cut is). The coefficients of the fit on
every claim are printed as the fact a judge setting would ship (like its measured cut), with where they came from.

Where the labels come from several sources (a labels row's `source`), a second table asks whether a blend carries to
data it was not fitted on: each source's claims scored by the blend fitted on the other sources, beside the baseline
judge alone on the same claims (AUC, and the paired difference with its interval).

    python bench/combine.py --labels ../shared/datasets/attributionbench_dev/labels.jsonl \\
        --checks studies/bench-judge-ab/labels-graded-sentences.json
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

from judge import paired_difference
from rich.console import Console
from rich.table import Table

import tuner  # noqa: F401  (offline env first)
from tuner.config import LexicalCheckerConfig
from tuner.evaluation.judge.agreement import auc, auc_interval, best_cut, cross_validated
from tuner.evaluation.judge.cases import label_cases
from tuner.evaluation.judge.check import load_checks
from tuner.evaluation.labels import read as read_labels
from tuner.metrics.checkers import make_checker
from tuner.metrics.graded import answer_sentences

console = Console(width=200)
FOLDS = 10


def logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def lexical(kind: str, contexts, claim: str) -> float:
    shares = make_checker(LexicalCheckerConfig(lexical=kind)).supported(list(contexts), answer_sentences(claim))
    return sum(shares) / len(shares) if shares else 1.0


def out_of_fold(rows: list[list[float]], labels: list[bool], folds: int = FOLDS) -> list[float]:
    """P(supported) for each claim from a logistic regression fitted on the other folds (stratified, seeded)."""
    from sklearn.linear_model import LogisticRegression

    rng, fold_of = random.Random(0), [0] * len(rows)
    for side in (True, False):
        members = [i for i, y in enumerate(labels) if y == side]
        rng.shuffle(members)
        for n, i in enumerate(members):
            fold_of[i] = n % folds
    predicted = [0.0] * len(rows)
    for fold in range(folds):
        train = [i for i in range(len(rows)) if fold_of[i] != fold]
        model = LogisticRegression(max_iter=1000).fit([rows[i] for i in train], [labels[i] for i in train])
        held = [i for i in range(len(rows)) if fold_of[i] == fold]
        for i, p in zip(held, model.predict_proba([rows[i] for i in held])[:, 1]):
            predicted[i] = float(p)
    return predicted


def fitted_elsewhere(rows: list[list[float]], labels: list[bool], groups: list[str], held: str) -> list[float]:
    """P(supported) for the claims of group `held` from a logistic regression fitted on every other group's."""
    from sklearn.linear_model import LogisticRegression

    train = [i for i, g in enumerate(groups) if g != held]
    model = LogisticRegression(max_iter=1000).fit([rows[i] for i in train], [labels[i] for i in train])
    return [float(p) for p in model.predict_proba([r for r, g in zip(rows, groups) if g == held])[:, 1]]


def sources(path: Path) -> dict[tuple[str, str], str]:
    """Each labelled claim's source (where a labels row names one)."""
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())
    return {(str(r["question_id"]), r["answer"]): r.get("source") or "—" for r in rows}


def across_sources(scored: list, supported: dict, baseline: dict, rows: list[list[float]], origin: dict) -> None:
    groups = [origin.get(k, "—") for k in scored]
    labels = [supported[k] for k in scored]
    table = Table(title="the blend (baseline + lexical shares) on each source, fitted on the other sources")
    for column in ("held-out source", "claims (unsupported)", "baseline AUC", "blend AUC", "ΔAUC [paired]"):
        table.add_column(column)
    for held in sorted(set(groups)):
        mine = [k for k, g in zip(scored, groups) if g == held]
        if all(supported[k] for k in mine) or not any(supported[k] for k in mine):
            continue
        predicted = dict(zip(mine, fitted_elsewhere(rows, labels, groups, held)))
        pos, neg = [k for k in mine if supported[k]], [k for k in mine if not supported[k]]
        table.add_row(held, f"{len(mine)} ({len(neg)})",
                      f"{auc([baseline[k] for k in pos], [baseline[k] for k in neg]):.2f}",
                      f"{auc([predicted[k] for k in pos], [predicted[k] for k in neg]):.2f}",
                      paired_difference(predicted, {k: baseline[k] for k in mine}, supported))
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--checks", type=Path, nargs="+", required=True, help="bench/judge.py --labels' saved "
                        "scores, one file per setting; the first is the baseline")
    args = parser.parse_args()
    from sklearn.linear_model import LogisticRegression

    cases = {(c.question_id, c.answer): c for c in label_cases(read_labels(args.labels).values())}
    judged = {}
    for path in args.checks:
        for check in load_checks(path):
            judged[check.setting] = {(s.case.question_id, s.case.answer): s.value for s in check.cases}
    if not judged:
        raise SystemExit(f"no judge scores in {', '.join(map(str, args.checks))}: run bench/judge.py --labels first")
    settings = list(judged)
    scored = [k for k in cases if all(judged[s].get(k) is not None for s in settings)]
    console.print(f"{args.labels}: {len(cases)} claims; {len(scored)} scored under every setting "
                  f"({', '.join(settings)})")
    supported = {k: cases[k].supported for k in scored}
    shares = {k: (lexical("words", cases[k].contexts, cases[k].answer),
                  lexical("facts", cases[k].contexts, cases[k].answer)) for k in scored}
    baseline = {k: judged[settings[0]][k] for k in scored}

    features = {f"logit P(yes): {s}": (lambda k, s=s: logit(judged[s][k])) for s in settings}
    features["content words held"] = lambda k: shares[k][0]
    features["numbers and names held"] = lambda k: shares[k][1]
    combinations = {f"{settings[0]} alone (baseline)": [f"logit P(yes): {settings[0]}"],
                    **{f"{s} alone": [f"logit P(yes): {s}"] for s in settings[1:]},
                    "lexical shares alone": ["content words held", "numbers and names held"],
                    **{f"{s} + lexical shares": [f"logit P(yes): {s}", "content words held",
                                                 "numbers and names held"] for s in settings}}
    if len(settings) > 1:
        combinations["every setting + lexical shares"] = list(features)
    table = Table(title=f"judge combinations, {FOLDS}-fold cross-validated on {len(scored)} claims "
                        f"({sum(not v for v in supported.values())} unsupported)")
    for column in ("combination", "AUC [95% CI]", "ΔAUC vs baseline [paired]", "bal. acc cv", "cut"):
        table.add_column(column)
    labels = [supported[k] for k in scored]
    fitted = []
    for name, used in combinations.items():
        rows = [[features[f](k) for f in used] for k in scored]
        predicted = dict(zip(scored, out_of_fold(rows, labels)))
        pos = [predicted[k] for k in scored if supported[k]]
        neg = [predicted[k] for k in scored if not supported[k]]
        low, high = auc_interval(pos, neg)
        verdicts = [(predicted[k], supported[k]) for k in scored]
        table.add_row(name, f"{auc(pos, neg):.2f} [{low:.2f}, {high:.2f}]",
                      paired_difference(predicted, baseline, supported), f"{cross_validated(verdicts):.2f}",
                      f"{best_cut(verdicts):.2f}")
        model = LogisticRegression(max_iter=1000).fit(rows, labels)
        fitted.append(f"{name}: intercept {model.intercept_[0]:+.3f}; " + "; ".join(
            f"{f} {c:+.3f}" for f, c in zip(used, model.coef_[0])))
    console.print(table)
    origin = sources(args.labels)
    if len({origin.get(k) for k in scored}) > 1:
        blend = combinations[f"{settings[0]} + lexical shares"]
        across_sources(scored, supported, baseline, [[features[f](k) for f in blend] for k in scored], origin)
    console.print(f"coefficients fitted on all {len(scored)} claims of {args.labels} (P(supported) = sigmoid(intercept "
                  f"+ Σ coefficient × feature)):", highlight=False, soft_wrap=True)
    for line in fitted:
        console.print(f"  {line}", highlight=False, soft_wrap=True)


if __name__ == "__main__":
    main()
