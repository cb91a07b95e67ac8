"""The report's PNG plots. Draws only what reports/_data.py computed; matplotlib is imported lazily (Agg)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tuner.analysis.importance import KnobEffect
from tuner.reports._data import History


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    _pyplot().close(fig)
    return path


def plot_history(history: History, target: str, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ax.scatter(history.numbers, history.values, s=22, color="#4c72b0", label="complete trial", zorder=3)
    ax.step(history.numbers, history.best_so_far, where="post", color="#dd8452", label="best so far")
    if history.pruned:
        ax.scatter([p[0] for p in history.pruned], [p[1] for p in history.pruned], s=22, marker="x",
                   color="#999999", label="pruned (mean of questions reached)")
    ax.set_xlabel("trial")
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_ylabel(target)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_importances(effects: Sequence[KnobEffect], path: Path) -> Path:
    plt = _pyplot()
    rows = [e for e in effects if e.importance is not None]
    fig, ax = plt.subplots(figsize=(6, 0.45 * len(rows) + 1.2))
    ax.barh([f"{e.knob}" + ("*" if e.scope != "all trials" else "") for e in rows][::-1],
            [e.importance for e in rows][::-1], color="#55a868")
    ax.set_xlabel("importance (PED-ANOVA; * = within its condition's trials)")
    ax.set_xlim(0, 1)
    return _save(fig, path)


def plot_slices(points: dict[str, list[tuple[Any, float]]], target: str, path: Path) -> Path:
    plt = _pyplot()
    names = list(points)
    cols = min(3, len(names))
    rows = -(-len(names) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.6 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        xs = [p[0] for p in points[name]]
        ys = [p[1] for p in points[name]]
        if all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs):
            ax.scatter(xs, ys, s=18, color="#4c72b0")
        else:
            labels = list(dict.fromkeys(str(x) for x in xs))
            ax.scatter([labels.index(str(x)) for x in xs], ys, s=18, color="#4c72b0")
            ax.set_xticks(range(len(labels)), labels, fontsize=8)
        ax.set_title(name, fontsize=9)
        ax.set_ylabel(target, fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    return _save(fig, path)


def plot_deltas(deltas: Sequence[tuple[str, float]], target: str, path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(deltas) + 1.3))
    labels = [q for q, _ in deltas][::-1]
    values = [d for _, d in deltas][::-1]
    ax.barh(labels, values, color=["#55a868" if v > 0 else "#c44e52" if v < 0 else "#999999" for v in values])
    ax.axvline(0, color="black", linewidth=0.8)
    ax.set_xlabel(f"best − baseline, {target} (per question)")
    ax.tick_params(axis="y", labelsize=7)
    return _save(fig, path)


def plot_costs(trials: Sequence[int], seconds: dict[str, list[float]], path: Path) -> Path:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    bottom = [0.0] * len(trials)
    positions = list(range(len(trials)))
    for stage, values in seconds.items():
        ax.bar(positions, [v / 60 for v in values], bottom=bottom, label=stage)
        bottom = [b + v / 60 for b, v in zip(bottom, values)]
    ax.set_xticks(positions, [str(t) for t in trials], fontsize=8)
    ax.set_xlabel("trial")
    ax.set_ylabel("minutes (LLM calls served from cache cost ~0)")
    ax.legend(fontsize=7, ncol=3)
    return _save(fig, path)


def plot_front(points: Sequence[tuple[int, float, float]], front: set[int], targets: Sequence[str],
               path: Path) -> Path:
    """Two targets: every feasible complete trial, the Pareto front joined and labelled."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.scatter([p[1] for p in points], [p[2] for p in points], s=22, color="#999999", label="trial", zorder=2)
    edge = sorted((p for p in points if p[0] in front), key=lambda p: p[1])
    ax.plot([p[1] for p in edge], [p[2] for p in edge], "o-", color="#dd8452", label="Pareto front", zorder=3)
    for number, x, y in edge:
        ax.annotate(str(number), (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    ax.set_xlabel(targets[0])
    ax.set_ylabel(targets[1])
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, path)
