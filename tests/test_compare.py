"""`tuner compare`: the regression gate — exit 1 only for a loss beyond the margin that the paired CI says is real."""

from __future__ import annotations

import json

import yaml

from tests.helpers import tuner
from tuner.analysis.regression_gate import Gate
from tuner.analysis.stats import compare


def write(folder, name, config):
    (folder / name).write_text(yaml.safe_dump(config))
    return name


def test_the_gate_fails_only_on_a_real_loss_beyond_the_margin():
    base = {f"q{i}": 0.8 for i in range(12)}
    worse = compare("faithfulness", base, {q: 0.7 for q in base})  # every question 0.1 lower
    noisy = compare("faithfulness", base, {q: 0.8 + (0.3 if i % 2 else -0.35) for i, q in enumerate(base)})
    slightly = compare("faithfulness", base, {q: 0.79 for q in base})  # real, but within the margin
    assert worse.verdict == "worse" and noisy.verdict == "undecided" and slightly.verdict == "worse"
    verdict = Gate(0.02, (worse, noisy, slightly))
    assert verdict.failed == (worse,)
    assert verdict.reading(noisy) == "undecided: could be luck" and "within the margin" in verdict.reading(slightly)
    assert Gate(0.2, (worse,)).failed == ()  # a team tolerating 0.2 passes a 0.1 loss
    record = verdict.to_json("a.yaml", "b.yaml", 12)
    assert record["regression"] and [m["regression"] for m in record["metrics"]] == [True, False, False]


def test_compare_exits_1_on_a_constructed_regression_and_0_on_a_rerun(tmp_path):
    """Real retrieval on the demo: top_k 5 -> 1 loses recall@k on most questions; the same config twice does not."""
    base = write(tmp_path, "base.yaml", {"pipeline": {"top_k": 5}})
    new = write(tmp_path, "new.yaml", {"pipeline": {"top_k": 1}})
    args = ("--metric", "recall@k", "--metric", "ndcg@10", "--limit", "20")
    regression = tuner("compare", base, new, *args, "--json", cwd=tmp_path)
    assert regression.returncode == 1, regression.stderr
    record = json.loads(regression.stdout)
    recall, ndcg = record["metrics"]
    assert record["regression"] and recall["regression"] and recall["ci95"][1] < 0 and recall["questions"] == 20
    assert ndcg["verdict"] == "no difference" and not ndcg["regression"]  # the ranking itself did not change
    assert "regression: recall@k" in regression.stderr and "Traceback" not in regression.stderr
    shown = tuner("compare", base, new, *args, cwd=tmp_path)
    assert shown.returncode == 1 and "regression (beyond the margin 0.02)" in shown.stdout
    assert "is worse than BASE (base.yaml) on recall@k" in shown.stdout
    tolerated = tuner("compare", base, new, *args, "--margin", "0.5", cwd=tmp_path)
    assert tolerated.returncode == 0 and "worse, within the margin 0.5" in tolerated.stdout
    rerun = tuner("compare", base, base, *args, "--json", cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stderr
    assert [m["verdict"] for m in json.loads(rerun.stdout)["metrics"]] == ["no difference"] * 2


def test_compare_refuses_other_questions_and_bad_metrics_in_one_line(tmp_path):
    base = write(tmp_path, "base.yaml", {"dataset": {"limit": 5}})
    new = write(tmp_path, "new.yaml", {"dataset": {"limit": 6}})
    other = tuner("compare", base, new, "--metric", "ndcg@10", cwd=tmp_path)
    assert other.returncode == 2 and "evaluate other questions" in other.stderr and "--dataset" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1, other.stderr
    bad = tuner("compare", base, base, "--metric", "faithfullness", cwd=tmp_path)
    assert bad.returncode != 0 and "--metric 'faithfullness'" in bad.stderr and "Traceback" not in bad.stderr
    missing = tuner("compare", "nope.yaml", base, cwd=tmp_path)
    assert missing.returncode != 0 and "nope.yaml" in missing.stderr and "Traceback" not in missing.stderr
