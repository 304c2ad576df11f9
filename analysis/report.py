"""The full report: tables (CSV), figures (PNG), summary.json, report.md and the HEDS datasheet.

`build_report(input, out)` runs every analysis of this package on the filtered set (and the
headline numbers on all rows too) and writes everything into `out`. Every estimate has a 95%
interval (bootstrap over annotators, or over texts for agreement), every figure panel says its n,
and baselines (random guessing, always "all human", chance agreement) are drawn where they apply.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import analysis
from analysis import agreement as agreement_mod
from analysis import (
    boundary,
    cleaning,
    comments,
    factors,
    heds,
    inference,
    irt,
    learning,
    taxonomy,
)
from analysis.load import apply_selection, load, read_export_info, resolve_input, sha256_of
from roftcore.boundary import CONVENTION
from roftcore.reasons import REASON_NAMES
from roftcore.spreadsheet import neutralise_frame
from roftcore.version import code_version

DPI = 150
plt.rcParams.update(
    {
        "font.size": 10,
        "axes.titlesize": 10.5,
        "axes.labelsize": 10,
        "xtick.labelsize": 9,
        "ytick.labelsize": 9,
        "legend.fontsize": 8.5,
        "axes.spines.top": False,
        "axes.spines.right": False,
    }
)
PLAYERS, RANDOM, HUMAN = "#3b6ea5", "#c98a2b", "#7a7a7a"


@dataclass
class ReportSettings:
    min_median_seconds: float = 5.0
    straight_line_k: int = 10
    double_submit_seconds: float = 30.0
    min_rounds: int = 10
    session_length: int = 10
    bootstrap: int = 1000
    seed: int = 0
    max_comments: int = 20_000
    clusters: int = 8
    categories: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)
    since: str | None = None
    detections: str | None = None  # detections.csv from `python -m analysis detect`


def headline(frame: pd.DataFrame) -> dict:
    """The summary.json numbers of one set of rows."""
    d = frame["guess"] - frame["boundary"]
    empty = frame.empty
    return {
        **cleaning.sizes(frame),
        "exact_rate": None if empty else float((d == 0).mean()),
        "mean_points": None if empty else float(frame["points"].mean()),
        "mean_signed_distance": None if empty else float(d.mean()),
        "points_mismatch_rows": cleaning.points_mismatch(frame),
        "duplicate_pairs": cleaning.duplicate_pairs(frame),
    }


def _clean_json(value):
    if isinstance(value, dict):
        return {str(k): _clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return _clean_json(value.item())
    return value


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _md_table(frame: pd.DataFrame, digits: int = 3) -> str:
    if frame.empty:
        return "_(no rows)_\n"
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = [
        "| " + " | ".join(_fmt(v, digits) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body]) + "\n"


def _ci(row, estimate="estimate", low="ci_low", high="ci_high", digits=3) -> str:
    return f"{_fmt(row[estimate], digits)} [{_fmt(row[low], digits)}, {_fmt(row[high], digits)}]"


# -- figures ------------------------------------------------------------------------------------


def _save(fig, path: Path) -> str:
    if not fig.get_layout_engine():
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path.name


def _errorbars(ax, x, table, estimate, low, high, **kwargs):
    y = table[estimate].to_numpy(dtype=float)
    err = np.vstack([y - table[low].to_numpy(dtype=float), table[high].to_numpy(dtype=float) - y])
    ax.errorbar(x, y, yerr=np.clip(err, 0, None), fmt="none", ecolor="black", capsize=2.5, lw=1)


def figure_distance(out: Path, hist, human_guesses, n_machine: int, n_human: int) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.9), gridspec_kw={"width_ratios": [3, 2]})
    ax = axes[0]
    if not hist.empty:
        x = hist["distance"].to_numpy()
        ax.bar(x - 0.2, hist["observed_share"], width=0.4, label="players", color=PLAYERS)
        ax.bar(x + 0.2, hist["random_share"], width=0.4, label="random guessing", color=RANDOM)
        ax.set_xticks(x)
    ax.set_xlabel("guess − boundary (sentences; negative = too early)")
    ax.set_ylabel("share of annotations")
    ax.set_title(f"Texts with a machine part (n = {n_machine:,} annotations)")
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    ax = axes[1]
    if not human_guesses.empty:
        x = human_guesses["guess"].to_numpy()
        ax.bar(x - 0.2, human_guesses["observed_share"], width=0.4, color=PLAYERS, label="players")
        ax.bar(x + 0.2, human_guesses["random_share"], width=0.4, color=RANDOM, label="random")
        labels = [str(v) for v in x]
        labels[-1] = f"{x[-1]}\nall human"
        ax.set_xticks(x, labels)
    ax.set_xlabel("sentence flagged (N = 'all human', the right answer)")
    ax.set_ylabel("share of annotations")
    ax.set_title(f"All-human texts (n = {n_human:,} annotations)")
    ax.set_ylim(bottom=0)
    ax.legend(frameon=False)
    return _save(fig, out / "distance_histogram.png")


def figure_factors(out: Path, factor: dict) -> str:
    fig, axes = plt.subplots(1, 4, figsize=(14, 4.2), sharey=True)
    for ax, (name, column) in zip(axes, factors.FACTORS, strict=True):
        table = factor[name]["table"]
        if not table.empty:
            x = np.arange(len(table))
            ax.bar(x, table["mean_points"], color=PLAYERS, label="players (95% CI)")
            _errorbars(ax, x, table, "mean_points", "points_ci_low", "points_ci_high")
            ax.scatter(
                x,
                table["random_points"],
                marker="_",
                s=260,
                color=RANDOM,
                lw=2.2,
                label="random guessing",
                zorder=3,
            )
            ax.scatter(
                x,
                table["always_human_points"],
                marker="x",
                s=30,
                color=HUMAN,
                label="always 'all human'",
                zorder=3,
            )
            ax.set_xticks(x, [str(v) for v in table[column]], rotation=40, ha="right")
            for xi, n in zip(x, table["rows"], strict=True):
                ax.text(
                    xi,
                    0.08,
                    f"n={n:,}",
                    rotation=90,
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color="white",
                )
        test = factor[name]["test"]
        p = test.get("p_value")
        title = f"by {name}"
        if p is not None:
            title += f"\nclustered p = {p:.3g}" + (" (few clusters)" if test.get("few") else "")
        ax.set_title(title)
    axes[0].set_ylabel("mean points (texts with a machine part)")
    axes[0].set_ylim(0, 5)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return _save(fig, out / "points_by_factor.png")


def figure_learning(out: Path, order_t, session_t, trends: dict, chance: float) -> str:
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.9), sharey=True)
    for ax, table, column, key, label in (
        (axes[0], order_t, "n", "long_term", "annotator's n-th round"),
        (axes[1], session_t, "position", "within_session", "position in a session"),
    ):
        if not table.empty:
            ax.fill_between(
                table[column],
                table["ci_low"],
                table["ci_high"],
                color=PLAYERS,
                alpha=0.2,
                lw=0,
                label="95% CI (annotators)",
            )
            ax.plot(
                table[column], table["mean_points"], marker=".", color=PLAYERS, label="mean points"
            )
        ax.axhline(chance, color=RANDOM, ls="--", lw=1.2, label="random guessing")
        ax.set_xlabel(label)
        trend = trends[key]
        slope = trend.get("slope")
        n = int(table["rows"].sum()) if len(table) else 0
        title = f"{label.capitalize()} (n = {n:,})"
        if slope is not None:
            title += f"\nslope {slope:+.3f} [{trend['ci_low']:+.3f}, {trend['ci_high']:+.3f}]"
        ax.set_title(title)
        ax.set_ylim(0, 5)
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    axes[0].set_ylabel("mean points")
    axes[0].legend(frameon=False, loc="lower right")
    return _save(fig, out / "learning.png")


def figure_skill(out: Path, means, fit: irt.IrtFit | None, min_rounds: int) -> str:
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.7))
    if len(means):
        axes[0].hist(means, bins=20, color=PLAYERS)
    else:
        axes[0].text(
            0.5, 0.5, "no annotator has that many rounds", ha="center", transform=axes[0].transAxes
        )
    axes[0].set_xlabel("mean points per annotator")
    axes[0].set_ylabel("annotators")
    axes[0].set_title(f"Mean points (n = {len(means):,} annotators with ≥ {min_rounds} rounds)")
    if fit is not None and len(fit.annotators):
        a, t = fit.annotators, fit.texts
        axes[1].hist(a["skill"], bins=30, color=PLAYERS)
        axes[1].set_xlabel("skill (logit, Rasch model)")
        axes[1].set_ylabel("annotators")
        axes[1].set_title(f"Skill (n = {len(a):,} annotators)")
        for flag, color, label in ((False, PLAYERS, "machine part"), (True, HUMAN, "all human")):
            part = t.loc[t["all_human"] == flag, "difficulty"]
            if len(part):
                axes[2].hist(
                    part, bins=30, alpha=0.7, color=color, label=f"{label} ({len(part):,})"
                )
        axes[2].set_xlabel("difficulty (logit)")
        axes[2].set_ylabel("texts")
        axes[2].set_title(f"Text difficulty (n = {len(t):,} texts)")
        axes[2].legend(frameon=False)
    for ax in axes:
        ax.set_ylim(bottom=0)
    return _save(fig, out / "skill_range.png")


def figure_agreement(out: Path, curve: pd.DataFrame, alpha: dict) -> str:
    fig, ax = plt.subplots(figsize=(6.4, 3.9))
    if not curve.empty:
        x = curve["tolerance"].to_numpy()
        ax.bar(x, curve["rate"], width=0.5, color=PLAYERS, label="pairs of players (95% CI)")
        _errorbars(ax, x, curve, "rate", "ci_low", "ci_high")
        ax.plot(x, curve["chance_uniform"], "o--", color=RANDOM, label="chance: uniform guesses")
        ax.plot(
            x, curve["chance_marginal"], "s:", color=HUMAN, label="chance: same guess distribution"
        )
        ax.set_xticks(x, ["exact", "± 1", "± 2"])
        ax.set_title(
            f"Agreement on the same text (n = {int(curve['pairs'].iloc[0]):,} pairs)\n"
            f"Krippendorff's α (interval) = {_fmt(alpha.get('alpha'))} "
            f"[{_fmt(alpha.get('ci_low'))}, {_fmt(alpha.get('ci_high'))}]"
        )
    ax.set_xlabel("guesses at most this many sentences apart")
    ax.set_ylabel("share of annotation pairs")
    ax.set_ylim(0, 1)
    ax.legend(frameon=False, loc="upper left")
    return _save(fig, out / "agreement.png")


def figure_reasons(out: Path, reasons_cat: pd.DataFrame) -> str:
    fig, ax = plt.subplots(figsize=(10, 4))
    if not reasons_cat.empty:
        categories = list(dict.fromkeys(reasons_cat["category"]))
        width = 0.8 / max(len(categories), 1)
        x = np.arange(len(REASON_NAMES))
        for i, category in enumerate(categories):
            part = reasons_cat[reasons_cat["category"] == category].set_index("value")
            part = part.reindex(list(REASON_NAMES))
            xs = x + (i - (len(categories) - 1) / 2) * width
            ax.bar(
                xs, part["mean"], width=width, label=f"{category} (n = {int(part['rows'].max()):,})"
            )
            _errorbars(ax, xs, part, "mean", "ci_low", "ci_high")
        ax.set_xticks(x, [r.replace("_", " ") for r in REASON_NAMES], rotation=25, ha="right")
        ax.legend(frameon=False, title="category (rounds)")
    ax.set_ylabel("share of rounds citing the reason")
    ax.set_title("Reasons by category (95% CI over annotators)")
    ax.set_ylim(bottom=0)
    return _save(fig, out / "reasons_by_category.png")


# -- the report ---------------------------------------------------------------------------------


def build_report(
    input_path: str | Path, out: str | Path, settings: ReportSettings | None = None
) -> dict:
    """Run every analysis and write the report folder; returns the summary dictionary."""
    settings = settings or ReportSettings()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def tick(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 3)
        clock = now

    source_file = resolve_input(input_path)
    provenance = {
        "code_version": code_version("analysis", analysis.__version__),
        "input": str(input_path),
        "input_file": source_file.name,
        "input_sha256": sha256_of(source_file),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    frame = load(input_path)
    info = read_export_info(input_path)
    frame = apply_selection(frame, settings.categories, settings.systems, settings.since)
    tick("load")
    boot, seed = settings.bootstrap, settings.seed
    cleaned = cleaning.clean(
        frame,
        cleaning.FilterSettings(
            settings.min_median_seconds, settings.straight_line_k, settings.double_submit_seconds
        ),
    )
    filtered = inference.with_codes(cleaned.frame)
    mismatches = cleaning.mismatch_table(frame)
    impossible = cleaning.impossible_points(frame)
    tick("cleaning")

    machine, human = boundary.split_human(filtered)
    hist = boundary.histogram(machine)
    human_guesses = boundary.human_text_guesses(human)
    stats = {
        "machine": boundary.statistics(machine, boot, seed),
        "human": boundary.statistics(human, boot, seed),
        "all": boundary.statistics(filtered, boot, seed),
    }
    baselines = {
        "random_guessing": boundary.random_baseline(machine),
        "always_all_human": boundary.always_human_baseline(machine),
        "random_guessing_human": boundary.random_baseline(human),
    }
    tick("boundary")
    factor = factors.by_factor(filtered, boot, seed)
    tick("factors")
    order_t = learning.by_order(filtered, cap=50, n_boot=boot, seed=seed)
    session_t = learning.by_session_position(filtered, settings.session_length, boot, seed)
    trends = learning.annotator_trends(filtered, settings.min_rounds)
    trend = learning.trend_summary(filtered, settings.min_rounds)
    clustered = learning.clustered_trends(filtered, settings.session_length)
    skill = learning.skill_range(filtered, settings.min_rounds)
    means = learning.annotator_means(filtered, settings.min_rounds)
    fit = irt.fit(filtered) if len(filtered) else None
    tick("learning_and_skill")
    agree = agreement_mod.agreement(filtered)
    alpha, curve = agreement_mod.intervals(filtered, boot, seed)
    tick("agreement")
    reasons = filtered.assign(reasons=comments.canonical_reasons(filtered["reasons"]))
    flags = comments.reason_flags(reasons).astype(float)
    reasons_cat = inference.many_level_means(
        reasons, "category", {name: flags[name] for name in REASON_NAMES}, boot, seed
    )
    reason_pts = comments.reason_points(reasons, boot, seed)
    comment = comments.explanation_report(
        filtered, settings.max_comments, settings.clusters, settings.seed
    )
    taxonomy_scores = taxonomy.evaluate("test")
    tick("comments")
    detection = None
    if settings.detections:
        from analysis import detect

        detection = detect.compare(filtered, detect.read_detections(settings.detections))
    sheet = heds.datasheet(frame, filtered, cleaned.steps, agree, info, provenance)
    heds.write(sheet, out)

    tables = {
        "filter_steps": cleaned.steps,
        "points_mismatches": mismatches,
        "impossible_points": impossible,
        "distance_histogram": hist,
        "human_text_guesses": human_guesses,
        **{f"statistics_{k}": v.rename_axis("statistic").reset_index() for k, v in stats.items()},
        **{f"by_{name}": factor[name]["table"] for name, _ in factors.FACTORS},
        "learning_by_order": order_t,
        "learning_by_session_position": session_t,
        "annotator_trends": trends,
        "annotator_skill": fit.annotators if fit else pd.DataFrame(),
        "text_difficulty": fit.texts if fit else pd.DataFrame(),
        "agreement_by_tolerance": curve,
        "reasons_by_category": reasons_cat,
        "reason_points": reason_pts,
        "comment_rules": comments.rules_table(),
        "comment_classes": comment.classes,
        "comments": comment.table,
        "comment_clusters": pd.DataFrame(
            [
                {**c, "top_terms": " ".join(c["top_terms"]), "examples": " | ".join(c["examples"])}
                for c in comment.clusters
            ]
        ),
    }
    if detection is not None:
        tables["detector_vs_players"] = detection["table"]
    for name, table in tables.items():
        neutralise_frame(table).to_csv(out / f"{name}.csv", index=False)
    chance_points = boundary.random_baseline(filtered)["mean_points"]  # learning: all texts
    figures = [
        figure_distance(out, hist, human_guesses, len(machine), len(human)),
        figure_factors(out, factor),
        figure_learning(out, order_t, session_t, clustered, chance_points),
        figure_skill(out, means, fit, settings.min_rounds),
        figure_agreement(out, curve, alpha),
        figure_reasons(out, reasons_cat),
    ]
    if detection is not None:
        from analysis import detect

        figures.append(detect.figure(out, detection["table"], detection["summary"]))
    tick("figures_and_tables")

    summary = {
        "provenance": provenance,
        "input": str(input_path),
        "source": frame["source"].iloc[0] if len(frame) else None,
        "settings": asdict(settings),
        "all": headline(frame),
        "filtered": headline(filtered),
        "filters": cleaned.steps.to_dict(orient="records"),
        "duplicates": cleaned.duplicates,
        "points_mismatch_causes": mismatches.set_index("cause")["rows"].to_dict()
        if len(mismatches)
        else {},
        "impossible_points": len(impossible),
        "statistics_filtered": stats["all"].to_dict(orient="index"),
        "statistics_machine_texts": stats["machine"].to_dict(orient="index"),
        "statistics_all_human_texts": stats["human"].to_dict(orient="index"),
        "random_guessing": baselines["random_guessing"],
        "always_all_human": baselines["always_all_human"],
        "agreement": {
            **agree,
            "alpha_interval_ci": alpha,
            "by_tolerance": curve.to_dict("records"),
        },
        "by_factor_tests": {
            name: {
                "test": {k: v for k, v in factor[name]["test"].items() if k != "effects"},
                **({"trend": factor[name]["trend"]} if "trend" in factor[name] else {}),
            }
            for name, _ in factors.FACTORS
        },
        "learning": {**trend, "clustered": clustered},
        "skill_range": skill,
        "irt": fit.summary() if fit else None,
        "comments": {
            "total": comment.total,
            "non_empty": comment.non_empty,
            "unique_exact": comment.unique_exact,
            "unique_near": comment.unique_near,
            "sampled": comment.sampled,
            "sample_size": comment.sample_size,
            "note": comment.note,
            "taxonomy_test_split": taxonomy_scores,
        },
        "detector": detection["summary"] if detection else None,
        "figures": figures,
        "timings_seconds": timings,
    }
    summary = _clean_json(summary)
    (out / "report.md").write_text(
        _markdown(summary, tables, comment, stats, baselines, info, factor, alpha, detection)
    )
    tick("report")
    summary["timings_seconds"] = timings
    (out / "summary.json").write_text(json.dumps(_clean_json(summary), indent=2))
    return summary


def _stat_rows(stats: dict, baselines: dict) -> pd.DataFrame:
    rows = []
    for statistic in boundary.STATISTICS:
        rows.append(
            {
                "statistic": statistic,
                "machine texts [95% CI]": _ci(stats["machine"].loc[statistic]),
                "random guessing": baselines["random_guessing"][statistic],
                "always 'all human'": baselines["always_all_human"][statistic],
                "all-human texts [95% CI]": _ci(stats["human"].loc[statistic]),
            }
        )
    return pd.DataFrame(rows)


def _markdown(summary, tables, comment, stats, baselines, info, factor, alpha, detection) -> str:
    a, f, ag, prov = (
        summary["all"],
        summary["filtered"],
        summary["agreement"],
        summary["provenance"],
    )
    lines = [
        "# RoFT analysis report",
        "",
        f"Input: `{summary['input']}` ({summary['source']}); file `{prov['input_file']}`, "
        f"SHA-256 `{prov['input_sha256']}`. Made {prov['date']} by {prov['code_version']}.",
        "",
        f"Positions: {CONVENTION}.",
    ]
    if info.get("private"):
        lines += ["", "**This export is PRIVATE: it contains usernames.**"]
    causes = summary["points_mismatch_causes"]
    lines += [
        "",
        "## 1. Sizes and cleaning",
        "",
        _md_table(
            pd.DataFrame(
                [
                    {"set": "all rows", **{k: a[k] for k in a}},
                    {"set": "filtered", **{k: f[k] for k in f}},
                ]
            )
        ),
        "Filters, in order (each says what it removed and why, or that it does not apply):",
        "",
        _md_table(
            tables["filter_steps"][
                ["step", "rule", "rows_removed", "annotators_removed", "rows_left", "why"]
            ]
        ),
        "Points are recomputed from guess and boundary with the scoring rule; "
        f"{a['points_mismatch_rows']} row(s) had stored points that disagree (the recomputed "
        "value is used)" + (". By cause:" if causes else "."),
        "",
    ]
    if causes:
        lines += [_md_table(tables["points_mismatches"])]
    if len(tables["impossible_points"]):
        lines += [
            f"Impossible stored values ({len(tables['impossible_points'])} row(s); all in "
            "`impossible_points.csv`):",
            "",
            _md_table(tables["impossible_points"].head(20)),
        ]
    sm = stats["machine"]
    lines += [
        "## 2. Boundary distance",
        "",
        "![distance histogram](distance_histogram.png)",
        "",
        "Texts with a machine part and all-human texts are shown apart: on an all-human text "
        "the only right answer is 'all human', and its distances would pile up at −(N−1). "
        "Estimates with 95% bootstrap intervals over annotators; the baselines are what random "
        "guessing (uniform on 1..N) and always answering 'all human' would score on the same "
        "machine texts:",
        "",
        _md_table(_stat_rows(stats, baselines)),
        f"Players found the exact boundary {_fmt(sm.loc['exact_rate', 'estimate'])} of the time "
        f"on machine texts, against {_fmt(baselines['random_guessing']['exact_rate'])} by "
        "chance.",
        "",
        "## 3. By factor (texts with a machine part)",
        "",
        "![points by factor](points_by_factor.png)",
        "",
        "Bars: mean points with 95% intervals over annotators; dashes: random guessing on the "
        "same texts; crosses: always 'all human'. Tests: least squares of points on the "
        "factor's levels with standard errors clustered by annotator and by text (two-way), "
        "Wald test that all levels are equal.",
        "",
    ]
    for name, column in factors.FACTORS:
        test = factor[name]["test"]
        line = f"**{name}**: {test['test']}"
        if test.get("p_value") is not None:
            line += f", χ² = {_fmt(test['statistic'], 2)} (df {test['df']}), "
            line += f"p = {_fmt(test['p_value'], 4)}"
        trend = factor[name].get("trend")
        if trend and trend.get("slope") is not None:
            line += (
                f"; slope per unit of {name} {_fmt(trend['slope'])} "
                f"[{_fmt(trend['ci_low'])}, {_fmt(trend['ci_high'])}], "
                f"p = {_fmt(trend['p_value'], 4)}"
            )
        shown = tables[f"by_{name}"][
            [
                column,
                "rows",
                "annotators",
                "texts",
                "mean_points",
                "points_ci_low",
                "points_ci_high",
                "exact_rate",
                "random_points",
                "always_human_points",
            ]
        ]
        lines += [line + ".", "", _md_table(shown)]
    lr, sk, cl = summary["learning"], summary["skill_range"], summary["learning"]["clustered"]

    def slope(t):
        if t.get("slope") is None:
            return "–"
        return (
            f"{_fmt(t['slope'])} [{_fmt(t['ci_low'])}, {_fmt(t['ci_high'])}], "
            f"p = {_fmt(t['p_value'], 4)}"
        )

    irt_summary = summary["irt"] or {}
    lines += [
        "## 4. Learning over time",
        "",
        "![learning](learning.png)",
        "",
        f"Points on log(round number), standard errors clustered by annotator and text: slope "
        f"{slope(cl['long_term'])}. Within a session of {summary['settings']['session_length']} "
        f"rounds, points on the position: {slope(cl['within_session'])}.",
        "",
        f"Descriptive: of {lr['annotators']} annotators with at least {lr['min_rounds']} rounds, "
        f"the mean per-annotator Spearman rho (points vs order) is {_fmt(lr['mean_rho'])} "
        f"(median {_fmt(lr['median_rho'])}; Wilcoxon p = {_fmt(lr['wilcoxon_p_value'], 4)}).",
        "",
        "## 5. Skill and difficulty",
        "",
        "![skill range](skill_range.png)",
        "",
        f"Of {sk['annotators']} annotators with at least {sk['min_rounds']} rounds, the top "
        f"{sk['k']} averaged {_fmt(sk['top_mean'])} points and the bottom {sk['k']} "
        f"{_fmt(sk['bottom_mean'])}.",
        "",
        f"Item-response model ({irt_summary.get('model', '–')}): skill and text difficulty "
        f"estimated jointly for {irt_summary.get('annotators', 0)} annotators and "
        f"{irt_summary.get('texts', 0)} texts; skill SD {_fmt(irt_summary.get('skill_sd'))}, "
        f"difficulty SD {_fmt(irt_summary.get('difficulty_sd'))}; correlation of skill with raw "
        f"mean points {_fmt(irt_summary.get('skill_vs_mean_points_correlation'))}. Tables: "
        "`annotator_skill.csv`, `text_difficulty.csv`.",
        "",
        "## 6. Agreement",
        "",
        "![agreement](agreement.png)",
        "",
        f"Examples with at least two annotations: {ag['examples_with_2plus']}; annotation pairs: "
        f"{ag['pairs']}. Krippendorff's alpha (interval) {_fmt(alpha.get('alpha'))} "
        f"[{_fmt(alpha.get('ci_low'))}, {_fmt(alpha.get('ci_high'))}] (bootstrap over texts); "
        f"nominal {_fmt(ag['krippendorff_alpha_nominal'])}. Pair agreement by tolerance, with "
        "the chance levels (independent uniform guesses; independent guesses with the observed "
        "distribution):",
        "",
        _md_table(tables["agreement_by_tolerance"]),
        "## 7. Reasons and comments",
        "",
        "![reasons by category](reasons_by_category.png)",
        "",
        "Mean points of rounds citing each reason (95% intervals over annotators):",
        "",
        _md_table(tables["reason_points"]),
        f"Explanations: {comment.non_empty} non-empty of {comment.total}; {comment.unique_exact} "
        f"unique after normalising, {comment.unique_near} after merging near-duplicates. "
        + (comment.note or ""),
        "",
    ]
    scores = summary["comments"]["taxonomy_test_split"]
    lines += [
        "Each unique comment gets every reason it states (the comment taxonomy: cue rules "
        "with fuzzy matching and negation, plus a model trained on the labelled development "
        f"set). On its held-out test split (n = {scores['n']}), strict accuracy (exact label set; "
        f"'other' never counts) is {_fmt(scores['strict_accuracy'])} and coverage "
        f"{_fmt(scores['coverage'])}. Every comment, its reasons and what decided them: "
        "`comments.csv`.",
        "",
        _md_table(tables["comment_classes"]),
        "The most frequent comments:",
        "",
        _md_table(tables["comments"].head(15)),
        "Clusters of the comments given no reason (TF-IDF + NMF):",
        "",
    ]
    for c in comment.clusters:
        lines.append(f"- cluster {c['cluster']} ({c['size']}): {', '.join(c['top_terms'])}")
        lines += [f"  - “{e}”" for e in c["examples"]]
    if not comment.clusters:
        lines.append("_(too few comments to cluster)_")
    lines += [
        "",
        "## 8. Human Evaluation Datasheet",
        "",
        "See `heds.md` and `heds.json`; fields the input cannot establish say "
        f"'{heds.UNKNOWN}' and are listed under `to_fill`.",
        "",
    ]
    if detection is not None:
        from analysis import detect

        lines += detect.markdown(detection)
    return "\n".join(lines)
