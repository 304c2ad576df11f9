"""Section 0: the preregistered analysis (analysis.confirmatory), exactly as planned, with every
deviation from the plan; or, without a plan, a line saying that everything is exploratory."""

from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from analysis import confirmatory
from analysis.render import fmt, fmt_pe, md_table
from analysis.sections import Context, Section

OUTCOME_WORDS = {
    "exact_hit": "exact hit (guess = boundary; logistic model)",
    "points": "points (0–5; linear model)",
    "distance": "signed distance guess − boundary (linear model)",
}


def _plan_lines(plan: dict, version: dict) -> list[str]:
    check = (
        "matches its content"
        if version.get("sha256_ok", True)
        else "**does not match its content**"
    )
    lines = [
        f"Plan version {version.get('version')}, frozen {version.get('frozen_at')}, SHA-256 "
        f"`{version.get('sha256')}` ({check}).",
        "",
    ]
    for hypothesis in plan.get("hypotheses") or []:
        lines.append(f"- Hypothesis: {hypothesis}")
    control = f" (control: {plan['control']})" if plan.get("control") else ""
    excluded = ", ".join(plan.get("exclude_decisions") or []) or "none"
    least = int(plan.get("min_rounds") or 0)
    fewest = f"; workers with fewer than {least} rounds" if least else ""
    lines += [
        f"- Outcome: {OUTCOME_WORDS.get(plan.get('outcome'), plan.get('outcome'))}; contrast: "
        f"{plan.get('contrast')}{control}; model: {plan.get('model', 'mixed')}; alpha "
        f"{plan.get('alpha', 0.05)}.",
        f"- Exclusions: workers with decision {excluded}{fewest}.",
        f"- Planned: {plan.get('planned_workers', '?')} workers, {plan.get('planned_texts', '?')} "
        f"texts; stopping rule: {plan.get('stopping_rule') or 'not stated'}.",
        "",
    ]
    return lines


def _result_lines(result: confirmatory.Confirmatory) -> list[str]:
    model = result.result
    if model is None:
        return ["No confirmatory result: the planned analysis could not run (see below).", ""]
    sizes = {e["term"]: e for e in result.effect_size}
    rows = []
    for effect in model.effects:
        if effect["term"] not in result.terms:
            continue
        size = sizes.get(effect["term"])
        rows.append(
            {
                "term": effect["term"],
                "estimate [95% CI]": f"{fmt(effect['estimate'])} [{fmt(effect['ci_low'])}, "
                f"{fmt(effect['ci_high'])}]",
                "p": fmt_pe(effect["p_value"]),
                "effect size [95% CI]": (
                    f"{size['kind']} {fmt(size['value'])} [{fmt(size['ci_low'])}, "
                    f"{fmt(size['ci_high'])}]"
                    if size
                    else "–"
                ),
            }
        )
    test = model.test or {}
    verdict = (
        "rejects the null hypothesis" if result.reject else "does not reject the null hypothesis"
    )
    alpha = result.plan.get("alpha", 0.05)
    scale = " (log odds)" if model.family == "binomial" else ""
    lines = [
        f"Fitted: `{model.model}` by {model.library}, on {result.rows:,} rounds of "
        f"{result.workers:,} workers and {result.texts:,} texts"
        + (
            " (excluded by the plan: "
            + ", ".join(f"{n:,} rounds for {rule}" for rule, n in result.excluded.items())
            + ")"
            if result.excluded
            else ""
        )
        + ".",
        "",
        f"Estimates{scale}:",
        "",
        md_table(pd.DataFrame(rows)),
        "",
        f"Test of the planned contrast: {test.get('kind', '–')} = {fmt(test.get('statistic'), 2)} "
        f"(df {test.get('df', '–')}), p {fmt_pe(result.p_value)}: at alpha {alpha} the analysis "
        f"**{verdict}**.",
        "",
    ]
    return lines


def run(ctx: Context) -> Section:
    prereg = ctx.preregistration
    if prereg is None:
        return Section(
            markdown=[
                "## Confirmatory analysis",
                "",
                "This export has no preregistration (no preregistration.json): no analysis was "
                "planned before the data, so every result below is exploratory.",
                "",
                "# Exploratory analysis",
                "",
            ],
            summary={"confirmatory": None},
        )
    rows = ctx.frame[~ctx.frame["attention_check"].astype(bool)]
    result = confirmatory.analyse(rows, prereg)
    deviations = list(result.deviations)
    chosen = [
        option
        for option, value in (
            ("--category", ctx.settings.categories),
            ("--system", ctx.settings.systems),
            ("--since", ctx.settings.since),
        )
        if value
    ]
    if chosen:
        deviations.append(
            f"the rows were selected with {', '.join(chosen)}, which the plan does not name"
        )
    lines = [
        "## Confirmatory analysis (preregistered)",
        "",
        *_plan_lines(result.plan, result.version),
        *_result_lines(result),
        "### Deviations from the plan",
        "",
    ]
    lines += [f"- ⚠ {d}" for d in deviations] or ["None."]
    lines += [
        "",
        "# Exploratory analysis",
        "",
        "Nothing below was planned: the report's own cleaning filters apply, and its p-values "
        "are not corrected for the number of looks.",
        "",
    ]
    summary = {
        "plan_version": result.version.get("version"),
        "sha256_ok": result.version.get("sha256_ok"),
        "rows": result.rows,
        "workers": result.workers,
        "texts": result.texts,
        "excluded": result.excluded,
        "terms": result.terms,
        "p_value": result.p_value,
        "reject": result.reject,
        "effect_size": result.effect_size,
        "model": asdict(result.result) if result.result else None,
        "deviations": deviations,
    }
    table = pd.DataFrame(result.result.effects) if result.result else pd.DataFrame()
    return Section(
        markdown=lines, tables={"confirmatory": table}, summary={"confirmatory": summary}
    )
