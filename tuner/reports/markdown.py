"""report.md: the study's answer in words and tables, each section with a sentence of plain reading."""

from __future__ import annotations

from typing import Any

from tuner.analysis import Analysis, testset
from tuner.analysis.corrections import none_matched
from tuner.analysis.stages import STAGES
from tuner.evaluation.judge.cut import overstatement
from tuner.metrics import REGISTRY, lower_is_better
from tuner.reports import _data
from tuner.study.results import StudyView
from tuner.ui import duration, knobs


def _f(value: float | None, digits: int = 3) -> str:
    return "—" if value is None or value != value else f"{value:.{digits}f}"


def _show(value: Any) -> str:
    return "—" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return lines + [""]


def render(analysis: Analysis, plots: dict[str, str]) -> str:
    view = analysis.view
    out = [f"# Study `{view.name}`: {', '.join(view.targets)}", ""]
    if analysis.testset is not None and analysis.testset.distrusted:  # before any figure the questions chose
        out += [analysis.testset.anchors.sentence(), ""]
    out += _verdict(analysis, plots) + _question(view) + _comparison(analysis, plots) + _history(view, analysis, plots)
    out += (testset.lines(analysis.testset, view.target) if analysis.testset else [])
    out += _bottleneck(analysis) + _noise(analysis) + _judge_check(analysis) + _failures(view) + _pruned(view)
    out += _costs(analysis, plots) + _compiled(view)
    out += _next(analysis)
    return "\n".join(out).rstrip() + "\n"


def _directions(view: StudyView) -> str:
    return ", ".join(f"{t} {'minimised' if low else 'maximised'}" for t, low in zip(view.targets, view.lower))


def _verdict(analysis: Analysis, plots: dict[str, str]) -> list[str]:
    view, head, verdict = analysis.view, analysis.headline, analysis.verdict
    best, baseline = view.best, view.baseline
    if len(view.targets) > 1:
        out = [f"**Pareto study** over {', '.join(view.targets)} ({_directions(view)}): {len(front := view.front)} "
               f"trial(s) on the front — "
               + "; ".join(f"trial {t.number} ({', '.join(f'{m}={v:.3g}' for m, v in zip(view.targets, t.values))})"
                           for t in front) + ". Paired comparisons, the held-out verdict and the bottleneck analysis "
               "need a single target; rerun with one `--target` and the others as `--constraint` guards to get them.",
               ""]
        if "front" in plots:
            out += [f"![Pareto front]({plots['front']})", ""]
        if analysis.cheapest is not None:
            out += [f"**Cheapest within noise of the best:** {analysis.cheapest.sentence()}", ""]
        return out
    if best is None:
        return ["**No complete trial meets the study's constraints yet**: nothing to report as best.", ""]
    lines = [f"**Best: trial {best.number}**, {view.target} = {_f(best.values[0])} ({knobs(best.params)})."]
    if verdict is not None:
        lines.append(f"**Verdict:** {verdict.sentence()}")
    if baseline is None:
        lines.append("The baseline trial has not finished, so the gain cannot be measured yet.")
    elif best.number == baseline.number:
        if verdict is None:
            lines.append("The baseline is still the best trial: no configuration tried beats the starting point.")
    elif head is not None:
        lines.append("In-sample: " + head.sentence(f"trial {best.number}", f"the baseline (trial {baseline.number})"))
        total = sum(t.state == 'complete' for t in view.trials)
        if verdict is not None:
            lines.append(f"The in-sample figure comes from the questions the search used to pick trial {best.number} "
                         f"out of {total}: the best of many noisy trials looks better than it is (winner's curse). "
                         f"Believe the held-out figure.")
        else:
            lines.append(f"Both were scored on the questions the search used to pick trial {best.number} out of "
                         f"{total}: the best of many noisy trials looks better than it is (winner's curse), so read "
                         f"this gain as an upper bound. This study held out no question "
                         f"({'--holdout 0' if view.meta.split else 'it predates held-out splits'} or fewer "
                         f"than 20 questions), so no unseen question can confirm it.")
    if analysis.judge_check is not None and analysis.judge_check.problems:
        lines.append(f"**Judge warning:** {' '.join(p + '.' for p in analysis.judge_check.problems)} Every judged "
                     f"figure here is this judge's opinion: see *Judge check* below.")
    if chance := _data.judge_at_chance(view):
        lines.append(f"**Judge warning:** {chance}: every judged figure here, and the stage blamed below, may be "
                     f"the judge's error rather than the pipeline's. Judge with a larger model (`judge: {{model: "
                     f"qwen2.5-1.5b}}`) before acting on them.")
    if analysis.shares is not None and analysis.shares.limiting:
        stage = analysis.shares.limiting
        lines.append(f"The stage that limits {view.target} is **{stage}** "
                     f"({analysis.shares.share(stage):.0%} of the points the best trial loses).")
    return [" ".join(lines), ""] + _held_out(analysis)


def _held_out(analysis: Analysis) -> list[str]:
    verdict = analysis.verdict
    if verdict is None:
        return []
    split = verdict.split
    out = ["## Verdict on held-out questions", "",
           f"{len(split.holdout_ids)} questions ({split.fraction:.0%}, chosen by hash of question id) were held out: "
           "no trial, pruning decision or sampler step saw them. After the search, the best trial, the baseline and "
           "the trials within noise of the best were scored on them through the same caches.", ""]
    if not verdict.held_out:
        return out + [verdict.sentence(), ""]
    rows = []
    for c in verdict.held_out:
        ci = "—" if c.ci is None else f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]"
        rows.append([c.metric + (" (target)" if c.metric == verdict.metric else ""), _f(c.reference_mean),
                     _f(c.candidate_mean), "—" if c.mean_difference is None else f"{c.mean_difference:+.3f}", ci,
                     _f(c.p), f"{c.n}" + (f" (+{c.unpaired} unpaired)" if c.unpaired else ""), c.verdict])
    seen = verdict.in_sample
    out += _table(["held-out metric", "baseline", f"best (trial {verdict.best.number})", "difference", "95 % CI",
                   "Wilcoxon p", "questions", "reading"], rows)
    if seen.ci is not None and verdict.headline and verdict.headline.ci is not None:
        head = verdict.headline
        out += _table(["", f"{verdict.metric}: best − baseline", "95 % CI", "questions"],
                      [["in-sample (search questions)", f"{seen.mean_difference:+.3f}",
                        f"[{seen.ci[0]:+.3f}, {seen.ci[1]:+.3f}]", seen.n],
                       ["held-out (unseen questions)", f"{head.mean_difference:+.3f}",
                        f"[{head.ci[0]:+.3f}, {head.ci[1]:+.3f}]", head.n]])
    if len(verdict.contenders) > 1:
        rows = [[c.trial.number, knobs(c.trial.params), _f(c.in_sample),
                 "not scored" if c.held_out is None else _f(c.held_out.candidate_mean),
                 "—" if c.held_out is None or c.held_out.ci is None else
                 f"{c.held_out.mean_difference:+.3f} [{c.held_out.ci[0]:+.3f}, {c.held_out.ci[1]:+.3f}]"]
                for c in verdict.contenders]
        out += ["These trials were within noise of the best on the search questions (its lead over them is not "
                "distinguishable from zero), so all were scored on held-out:", ""]
        out += _table(["trial", "knobs", f"{verdict.metric} in-sample", "held-out", "held-out − baseline (95 % CI)"],
                      rows)
        winner = verdict.generalises_best
        if winner is None and all(c.held_out is not None for c in verdict.contenders):
            out += ["No trial among them generalises better than the others: the best held-out scores tie.", ""]
        if winner is not None:
            out += [f"Trial {winner.trial.number} generalises best ({verdict.metric} "
                    f"{_f(winner.held_out.candidate_mean)} on held-out). Choosing it by that figure spends the "
                    f"held-out questions on a choice among {len(verdict.contenders)}, so its held-out score is "
                    f"mildly optimistic in turn.", ""]
    return out + _labels(verdict)


def _labels(verdict) -> list[str]:
    """The held-out faithfulness as the judge scored it and as the human labels correct it."""
    fixed = verdict.corrections
    if fixed is None:
        return ["### Corrected by human labels", "", none_matched(verdict.labels_given), ""] \
            if verdict.labels_given else []
    out = ["### Corrected by human labels", "",
           f"{fixed.labels} held-out answers carry a human label (`tuner judge label`); "
           + (fixed.agreement.sentence() if fixed.agreement else "the judge scored none of them") + ". "
           "Each faithfulness figure below is prediction-powered: the judge's scores of the unlabelled answers, "
           "rectified by its error on the labelled ones, with a 95 % interval that accounts for both.", ""]
    judged = {"baseline": verdict.baseline.held_out}
    judged.update({f"trial {c.trial.number}": c.trial.held_out for c in verdict.contenders})
    rows = []
    for name, result in judged.items():
        mean = fixed.means.get(name)
        rows.append([name, _f(result.metrics.get("faithfulness") if result else None),
                     "too few labels" if mean is None else f"{mean.estimate:.3f} [{mean.ci[0]:.3f}, {mean.ci[1]:.3f}]",
                     "—" if mean is None else mean.labelled])
    out += _table(["held-out answers of", "judge's faithfulness", "corrected (95 % CI)", "labelled"], rows)
    out += [fixed.sentence(f"trial {verdict.best.number}", "the baseline"), ""]
    if verdict.corrected is not None:
        judge_says = verdict.headline is not None and verdict.headline.verdict == "better"
        out += ["The verdict reads the corrected figure"
                + (": the labels change it." if judge_says != verdict.holds else ", which agrees with the judge's.")
                , ""]
    winner, by_judge = verdict.generalises_best, max(
        (c for c in verdict.contenders if c.held_out is not None and c.held_out.candidate_mean is not None),
        key=lambda c: c.held_out.candidate_mean, default=None)
    if verdict.corrected is not None and winner is not None and by_judge is not None:
        out += [f"Among the contenders, the labels pick trial {winner.trial.number}"
                + (", as the judge does." if winner is by_judge else
                   f" where the judge picks trial {by_judge.trial.number}: the correction changes the winner."), ""]
    return out


def _model(models: dict[str, str] | None, role: str, configured: str, unused: str) -> str:
    """The model the best trial used in `role` (None: no trial result to read, so the configured one); a result
    without it never used one (a study of retrieval metrics)."""
    if models is None:
        return configured
    return models.get(role) or f"none: {unused} (retrieval metrics only)"


def _own_answers(view: StudyView) -> str:
    own, answered = _data.self_judged(view), [t for t in view.trials if t.result is not None]
    if not own:
        return ""
    generators = {t.result.models.get("generator") for t in answered}
    whose = "every trial" if len(own) == len(answered) else \
        f"trial{'s' if len(own) > 1 else ''} {', '.join(map(str, own[:8]))}{'…' if len(own) > 8 else ''}"
    flattered = ": beside other generators' answers, its own may score higher than they deserve" \
        if len(generators) > 1 else ""
    return (f" — also the generator of {whose}; a model judging its own answers tends to favour them "
            f"(self-preference){flattered}. A judge: of another model rules this out")


def _question(view: StudyView) -> list[str]:
    project, spend = view.project, _data.spend(view)
    best = view.best or view.baseline
    models = best.result.models if best and best.result else None
    states = ", ".join(f"{n} {s}" for s, n in sorted(view.by_state().items()))
    dataset = str(project.dataset.path) if project.dataset.path else "the bundled demo"
    held = len(view.split.holdout_ids)
    recorded = (view.meta.data or {}).get("questions")  # before any trial finished: the study's record of them
    questions = len(best.result.questions) if best and best.result else \
        recorded - held if isinstance(recorded, int) else "?"
    rows = [
        ["target", ", ".join(view.targets)],
        ["guards", ", ".join(view.constraints) or "none"],
        ["dataset", f"{dataset} ({questions} search questions" + (f", {held} held out)" if held else ")")],
        ["system", f"{project.system.identity} (your own: it retrieves and answers; tuner judges)"]
        if project.system else
        ["generator", _model(models, "generator", project.generator.model, "no answer was generated")],
        ["judge", _model(models, "judge", project.judge_llm.model, "nothing was judged") + _own_answers(view)
         + (f"; its verdicts were {models['verdicts']}" if models and models.get("verdicts") else "")
         + _aligned(project.evaluation.alignment)],
        ["trials", states],
        ["wall time", f"{duration(_data.wall_seconds(view))} from the first trial's start to the last's end; "
                      f"{duration(spend.trial_seconds)} inside trials"],
        ["LLM calls" + (" and system replies" if project.system else ""),
         f"{spend.calls} paid ({spend.tokens:,} tokens), {spend.cache_hits} served from the cache "
         f"({spend.cached_tokens:,} tokens)"],
    ]
    if spend.indexes:
        rows.append(["indexes", f"{spend.indexes} built by trials for their index knobs, "
                                f"{duration(spend.index_seconds)} in all (chunk embeddings are cached by text, shared "
                                f"by every index and study)"])
    out = ["## The question answered", "",
           f"Which configuration of the search space "
           f"{'maximises ' + view.target if len(view.targets) == 1 else 'is best on ' + _directions(view)} on these "
           f"questions? "
           f"Every trial answered the same search questions; the LLM cache served every call a trial repeated.", ""]
    out += _table(["", ""], rows)
    if view.space is not None:
        out += ["Search space" + (f" (`{view.space_file}`)" if view.space_file else "") + ":", ""]
        out += _table(["knob", "values", "searched when"],
                      [[n, p.describe(), ", ".join(f"{k} in {v}" for k, v in p.when.items()) or "always"]
                       for n, p in view.space.params.items()])
    return out


def _comparison(analysis: Analysis, plots: dict[str, str]) -> list[str]:
    view = analysis.view
    best, baseline = view.best, view.baseline
    if not analysis.comparisons or best is None or baseline is None:
        return []
    out = ["## Best vs baseline" + (" on the search questions (in-sample)" if analysis.verdict else ""), "",
           "Per-question paired differences (best − baseline) on the questions both scored; the interval is a "
           "seeded percentile bootstrap of the mean difference (10,000 resamples), p from the Wilcoxon signed-rank "
           "test. A CI that contains 0 means the difference could be luck.", ""]
    changed = [[k, _show(baseline.pipeline.get(k)), _show(best.pipeline.get(k))] for k in best.pipeline
               if best.pipeline.get(k) != baseline.pipeline.get(k)]
    if changed:
        out += _table(["knob", f"baseline (trial {baseline.number})", f"best (trial {best.number})"], changed)
    rows = []
    for c in analysis.comparisons:
        ci = "—" if c.ci is None else f"[{c.ci[0]:+.3f}, {c.ci[1]:+.3f}]"
        rows.append([c.metric + (" (target)" if c.metric in view.targets else ""), _f(c.reference_mean),
                     _f(c.candidate_mean), "—" if c.mean_difference is None else f"{c.mean_difference:+.3f}", ci,
                     _f(c.p), f"{c.n}" + (f" (+{c.unpaired} unpaired)" if c.unpaired else ""), c.verdict])
    out += _table(["metric", "baseline", "best", "difference", "95 % CI", "Wilcoxon p", "questions", "reading"], rows)
    if analysis.corrections is not None:
        out += [analysis.corrections.sentence(f"trial {best.number}", "the baseline"), ""]
    for c in analysis.comparisons[1:]:
        if REGISTRY[c.metric].kind == "retrieval":
            continue
        if c.distinguishable:
            out += [f"- {c.sentence(f'Trial {best.number}', 'the baseline')}"]
    if "deltas" in plots:
        out += ["", f"![per-question differences]({plots['deltas']})", ""]
    return out


def _history(view: StudyView, analysis: Analysis, plots: dict[str, str]) -> list[str]:
    out = ["## Search history and knobs", ""]
    if "history" in plots:
        out += ["Best-so-far over the trials (pruned trials are shown at the mean of the questions they reached, "
                "which is not comparable with a full trial's value).", "", f"![history]({plots['history']})", ""]
    effects = analysis.effects
    if effects:
        have = any(e.importance is not None for e in effects)
        out += [("Importances (PED-ANOVA, Optuna) say how much of the target's spread each knob explains; "
                 "knobs searched only under a condition are assessed over the trials where it held. ")
                if have else (f"Importances need at least 8 complete trials per condition; this study has fewer, "
                              f"so only marginal effects are shown (mean {view.target} per value, with the number "
                              f"of trials behind each — few trials, wide error). "), ""]
        rows = [[e.knob, _f(e.importance, 2), e.scope,
                 "; ".join(f"{label}: {_f(mean)} ({n})" for label, mean, n in e.means), _show(e.best_value)]
                for e in effects]
        out += _table(["knob", "importance", "over", f"mean {view.target} per value (trials)", "best trial"], rows)
        if "importances" in plots:
            out += [f"![importances]({plots['importances']})", ""]
    if "slices" in plots:
        out += [f"![slices]({plots['slices']})", ""]
    return out


def _bottleneck(analysis: Analysis) -> list[str]:
    shares = analysis.shares
    if shares is None:
        return []
    out = ["## Where the target is lost", ""]
    if shares.unattributed:
        return out + [f"Not attributed to stages: {shares.unattributed}.", ""]
    if not shares.losses:
        return out + [f"The best trial loses no {shares.target} point on any question.", ""]
    best = REGISTRY[shares.target].best
    out += [f"Each question of the best trial that scores {'above' if lower_is_better(shares.target) else 'below'} "
            f"{best:g} on {shares.target} is attributed to one stage: "
            "retrieval (a gold document never reached the reranker's pool), selection (it reached the pool but "
            "was not selected), generation (the gold context was selected, yet the answer lost points), judge "
            "(unscored or unstable verdict), unknown (no gold ids or context recall to tell).", ""]
    rows = [[s, f"{shares.share(s):.0%}", f"{sum(q.loss for q in shares.questions(s)):.2f}",
             ", ".join(q.question_id for q in shares.questions(s))] for s in STAGES if shares.questions(s)]
    out += _table(["stage", "share of lost points", "points lost", "questions"], rows)
    out += _table(["question", shares.target, "stage", "why"],
                  [[f"{q.question_id}: {q.question[:70]}", _f(q.score), q.stage, q.why] for q in shares.losses])
    return out


def _noise(analysis: Analysis) -> list[str]:
    noise, head = analysis.noise, analysis.headline
    out = ["## Judge noise", ""]
    if noise is None:
        evaluation = analysis.view.project.evaluation
        if evaluation.verdicts == "graded" and evaluation.statements == "sentences":
            return out + ["None to measure: graded verdicts read P(yes) off one token of each of the answer's "
                          "sentences, a sampled call nowhere, so judging an answer again gives the same score. What "
                          "remains is the judge's error, which the judge check measures.", ""]
        sampled = "the judge's statement extraction, its one sampled step under graded verdicts," \
            if evaluation.verdicts == "graded" else "the judge's verdicts"
        return out + [f"Not measured: `tuner analyze --study NAME --noise 3` re-judges the best trial's answers with "
                      f"three sampled judge seeds (it costs LLM calls) and adds the spread of {sampled} here.", ""]
    sd = noise.mean_sd
    spreads = noise.spreads
    unstable = sorted(q for q, s in spreads.items() if s >= 0.5)
    out += [f"Trial {noise.trial}'s answers were re-judged {noise.repeats} times with sampled seeds. Per question, "
            f"the verdicts spanned on average {_f(sum(spreads.values()) / len(spreads) if spreads else None)} "
            f"({len(unstable)} question(s) by 0.5 or more: {', '.join(unstable) or 'none'}); the trial's mean "
            f"{noise.metric} moved with a standard deviation of {_f(sd)} across judgings "
            f"(means: {', '.join(_f(m) for m in noise.run_means)}).", ""]
    out += _table(["question", "study's verdict, then each re-judging", "spread"],
                  [[q, ", ".join(_f(v, 2) for v in values), _f(noise.spread(q), 2)]
                   for q, values in noise.scores.items()])
    if head is not None and head.mean_difference is not None and sd is not None:
        exceeds = noise.exceeds(head.mean_difference)
        out += [f"The best − baseline difference of {head.mean_difference:+.3f} is "
                f"{'above' if exceeds else 'within'} the judge's normal fluctuation (2 × √2 × {sd:.3f} = "
                f"{2 * 2 ** 0.5 * sd:.3f})" + ("." if exceeds else ": it could be the judge's noise alone."), ""]
    return out


def _aligned(alignment) -> str:
    if alignment is None:
        return ""
    return (f"; aligned with {alignment.labels} of your labels ({alignment!r}: wording {alignment.prompt}, "
            f"{len(alignment.demos)} demonstrations; {alignment.held_out or 'no held-out figure recorded'})")


def _judge_check(analysis: Analysis) -> list[str]:
    check = analysis.judge_check
    if check is None:
        return []
    out = ["## Judge check", "",
           f"Before the first trial, the judge ({check.judge}) scored labelled cases built from {len(check.questions)} "
           f"of this study's search questions: answers the data supports (its reference answer, sentences of the gold "
           f"contexts) and answers it cannot support (another question's answer; the right answer to the wrong "
           f"question). A judge worth optimising against scores the first high and the second low: ROC AUC near 1, "
           f"0.5 is chance. `tuner judge check --study {analysis.view.name}` runs the full check.", ""]
    out += _table(["metric", "cases (supported / unsupported)", "mean supported", "mean unsupported", "AUC",
                   f"accuracy at {check.cut.value:.2f}", "unscored (supported / unsupported)"],
                  [[m, f"{c.supported.cases} / {c.unsupported.cases}", _f(c.supported.mean), _f(c.unsupported.mean),
                    _f(c.auc, 2), f"{c.accuracy:.0%}", f"{c.supported.unscored:.0%} / {c.unsupported.unscored:.0%}"]
                   for m, c in check.metrics.items()])
    out += [("Problems: " + " ".join(p + "." for p in check.problems)) if check.problems else
            "The judge separated the classes on these cases.", ""]
    out += [f"A score reads as supported from {check.cut}."]
    if "faithfulness" in check.metrics and (known := overstatement(check.judge, check.setting)):
        out += [f"Known of this judge: {known}."]
    return out + [""]


def _failures(view: StudyView) -> list[str]:
    rows = _data.failures(view)
    if not rows:
        return []
    metrics = sorted({m for r in rows for m in r.by_metric})
    out = ["## Failures, refusals and empty contexts", "",
           "Unscored questions are left out of a trial's mean, so a configuration could win by being unscored: "
           "these counts show where that happens. A refusal is an answer that declines to answer; no context "
           "means dynamic K selected nothing; empty means the judge extracted nothing from a non-empty answer even "
           "when re-asked, and the answer was scored 0 (unsupported) rather than left out.", ""]
    table = []
    for r in rows:
        cells = [", ".join(f"{n} {why}" for why, n in r.by_metric.get(m, {}).items()) or "0" for m in metrics]
        table.append([r.trial, r.state, r.questions, *cells, r.refusals, r.no_context, r.generation_errors])
    return out + _table(["trial", "state", "questions", *(f"{m} failures" for m in metrics), "refusals",
                         "no context", "answer errors"], table)


def _pruned(view: StudyView) -> list[str]:
    pruned = _data.history(view).pruned
    if not pruned:
        return []
    reference = view.baseline or view.best
    total = len(reference.result.questions) if reference and reference.result else "?"
    out = ["## Pruned trials", "",
           "The Wilcoxon pruner stopped these trials when their per-question scores were significantly worse than "
           "the best trial's on the same questions. The mean below covers only the questions reached: it is not "
           "the trial's value and is not comparable with complete trials.", ""]
    return out + _table(["trial", "questions reached", f"mean {view.target} over them"],
                        [[n, f"{q} of {total}", _f(m)] for n, m, q in pruned])


def _costs(analysis: Analysis, plots: dict[str, str]) -> list[str]:
    view = analysis.view
    trials, seconds = _data.cost_by_stage(view)
    if not trials:
        return []
    out = ["## Cost per trial", "", "Seconds per stage of each trial; repeated calls came from the cache. Of the "
           "prompt tokens the paid calls sent, the models computed those evaluated; the rest resumed a prefix an "
           "earlier call computed.", ""]
    if "costs" in plots:
        out += [f"![cost per trial]({plots['costs']})", ""]
    by_trial = {t.number: t for t in view.trials}
    costs = [by_trial[n].result.cost for n in trials]
    rows = [[n, by_trial[n].state, cost.llm_calls, cost.cache_hits, cost.evaluated_of_sent, f"{cost.seconds:.0f}",
             *(f"{seconds[s][i]:.0f}" for s in seconds)] for i, (n, cost) in enumerate(zip(trials, costs))]
    out += _table(["trial", "state", "LLM calls", "cache hits", "prompt tokens evaluated/sent", "seconds",
                   *seconds], rows)
    cheapest = analysis.cheapest
    if cheapest is not None and len(view.targets) == 1:
        out += [f"**Cheapest within noise of the best:** {cheapest.sentence()} ({cheapest.cost}: the pipeline's own "
                f"cost per question — retrieval, query rewriting and the answer, not the judge — as on a cold cache.)",
                ""]
    return out


def _compiled(view: StudyView) -> list[str]:
    rows = _data.compiled(view)
    if not rows:
        return []
    out = ["## Compiled answer programs", "",
           "Programs compiled by `tuner compile` that this study offered as `program` choices. A program compiled "
           "on this study's search questions scores optimistically on them; the held-out verdict is not affected.",
           ""]
    return out + _table(["program", "optimizer", "LLM calls to compile", "search questions it was compiled on",
                         "its own held-out comparison", "trials (value)"],
                        [[r.path, r.optimizer or "?", _show(r.calls), r.trained_on_search, r.held_out,
                          ", ".join(f"{n} ({_f(v)})" for n, v in r.trials) or "none"] for r in rows])


def _next(analysis: Analysis) -> list[str]:
    out = ["## Next experiments", ""]
    if not analysis.proposals:
        return out + ["Nothing to propose: no range edge reached, no knob negligible or important enough to "
                      "change, and no stage losing a large share of the target.", ""]
    out += ["Ranked by the share of lost points or the importance behind each; `next_space.yaml` holds the "
            "in-space changes as a search space (`tuner spaces show` accepts it; `tuner optimize --rounds` runs it). "
            "Advice needs something a trial cannot change.", ""]
    rows = [[i, p.kind, p.change, p.reason, p.trigger] for i, p in enumerate(analysis.proposals, 1)]
    out += _table(["#", "kind", "change", "why", "because"], rows)
    if analysis.next_space is None:
        out += ["The in-space proposals leave nothing new to search.", ""]
    return out
