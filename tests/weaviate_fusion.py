"""Weaviate's hybrid fusion transcribed from its Go source (usecases/traverser/hybrid/hybrid_fusion.go), kept apart
from tuner's own fusion so that tests can compare the two: float32 arithmetic, and the comparator that calls
scores within 1e-7 equal, then orders by the raw score the object had in the last result set holding it, then by
UUID. Result sets are lists of (uuid, raw score), best first; the keyword set comes before the vector set."""

from __future__ import annotations

import functools

import numpy as np


def weaviate_ranked(weights: list[float], sets: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """FusionRanked: score float32(weight / (rank + 60)) summed in float32; the secondary sort value is the raw
    score the object had in the last set holding it."""
    combined: dict[str, list[np.float32]] = {}
    for weight, results in zip(weights, sets):
        for rank, (key, raw) in enumerate(results):
            score = np.float32(weight / (rank + 60))
            if key in combined:
                score = np.float32(score + combined[key][0])
            combined[key] = [score, np.float32(raw)]
    return _go_sorted(combined)


def weaviate_relative_score(weights: list[float], sets: list[list[tuple[str, float]]]) -> list[tuple[str, float]]:
    """FusionRelativeScore: each set min-max scaled in float32 (all equal: the weight), weighted, summed."""
    combined: dict[str, list[np.float32]] = {}
    for weight, results in zip(weights, sets):
        raws = [np.float32(raw) for _, raw in results]
        if not raws:
            continue
        high, low = max(raws), min(raws)
        for (key, _), raw in zip(results, raws):
            score = np.float32(weight)
            if high != low:
                score = np.float32(score * np.float32((raw - low) / (high - low)))
            if key in combined:
                score = np.float32(score + combined[key][0])
            combined[key] = [score, raw]
    return _go_sorted(combined)


def _go_sorted(combined: dict[str, list[np.float32]]) -> list[tuple[str, float]]:
    def before(a, b) -> int:  # the Go comparator: score, then (within 1e-7) raw score, then UUID ascending
        (id_a, (score_a, raw_a)), (id_b, (score_b, raw_b)) = a, b
        gap = float(np.float32(score_b - score_a))
        if gap * gap < 1e-14:
            raw_gap = float(np.float32(raw_b - raw_a))
            if raw_gap * raw_gap < 1e-14:
                return -1 if id_a < id_b else 1
            return -1 if raw_a > raw_b else 1
        return -1 if score_a > score_b else 1

    ordered = sorted(combined.items(), key=functools.cmp_to_key(before))
    return [(key, float(score)) for key, (score, _) in ordered]
