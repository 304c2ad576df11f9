"""The full report: tables (CSV), figures (PNG), summary.json, report.md and the HEDS datasheet.

`build_report(input, out)` runs every analysis of this package on the filtered set (and the
headline numbers on all rows too) and writes everything into `out`.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd

from analysis import agreement as agreement_mod
from analysis import boundary, cleaning, comments, factors, heds, learning
from analysis.load import apply_selection, load, read_export_info
from app.spreadsheet import neutralise_frame


@dataclass
class ReportSettings:
    min_median_seconds: float = 5.0
    straight_line_k: int = 10
    min_rounds: int = 10
    session_length: int = 10
    bootstrap: int = 1000
    seed: int = 0
    max_comments: int = 20_000
    clusters: int = 8
    categories: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)
    since: str | None = None


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
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


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


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def _figures(out: Path, hist, factor, order_t, session_t, means, reasons_cat) -> list[str]:
    made = []
    fig, ax = plt.subplots(figsize=(7, 3.6))
    if not hist.empty:
        x = hist["distance"].to_numpy()
        ax.bar(x - 0.2, hist["observed_share"], width=0.4, label="players")
        ax.bar(x + 0.2, hist["random_share"], width=0.4, label="random guessing", alpha=0.7)
        ax.set_xticks(x)
    ax.set_xlabel("guess − boundary (sentences)")
    ax.set_ylabel("share of annotations")
    ax.set_title("Distance from the boundary")
    ax.legend()
    _save(fig, out / "distance_histogram.png")
    made.append("distance_histogram.png")

    fig, axes = plt.subplots(1, 4, figsize=(12, 3.4), sharey=True)
    for ax, (name, label) in zip(
        axes,
        [("system", "system"), ("category", "category"), ("p", "p_bin"), ("boundary", "boundary")],
        strict=True,
    ):
        table = factor[name]["table"]
        if not table.empty:
            ax.bar(table[label].astype(str), table["mean_points"])
        ax.set_title(f"by {name}")
        ax.tick_params(axis="x", rotation=45, labelsize=7)
    axes[0].set_ylabel("mean points")
    _save(fig, out / "points_by_factor.png")
    made.append("points_by_factor.png")

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4))
    if not order_t.empty:
        axes[0].plot(order_t["n"], order_t["mean_points"], marker=".")
    axes[0].set_xlabel("annotator's n-th round")
    axes[0].set_ylabel("mean points")
    axes[0].set_title("Long-term")
    if not session_t.empty:
        axes[1].plot(session_t["position"], session_t["mean_points"], marker="o")
    axes[1].set_xlabel("position in a session")
    axes[1].set_title("Within a session")
    _save(fig, out / "learning.png")
    made.append("learning.png")

    fig, ax = plt.subplots(figsize=(6, 3.4))
    if len(means):
        ax.hist(means, bins=20)
    ax.set_xlabel("mean points per annotator")
    ax.set_ylabel("annotators")
    ax.set_title("Skill range")
    _save(fig, out / "skill_range.png")
    made.append("skill_range.png")

    fig, ax = plt.subplots(figsize=(8, 3.6))
    if not reasons_cat.empty:
        shares = reasons_cat.set_index("category")[list(comments.REASON_NAMES)]
        shares.T.plot.bar(ax=ax)
    ax.set_ylabel("share of rounds")
    ax.set_title("Reasons by category")
    ax.tick_params(axis="x", rotation=30, labelsize=7)
    _save(fig, out / "reasons_by_category.png")
    made.append("reasons_by_category.png")
    return made


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

    frame = load(input_path)
    info = read_export_info(input_path)
    frame = apply_selection(frame, settings.categories, settings.systems, settings.since)
    tick("load")
    cleaned = cleaning.clean(
        frame, cleaning.FilterSettings(settings.min_median_seconds, settings.straight_line_k)
    )
    filtered = cleaned.frame
    tick("cleaning")

    hist = boundary.histogram(filtered)
    stats_all = boundary.statistics(frame, settings.bootstrap, settings.seed)
    stats_filtered = boundary.statistics(filtered, settings.bootstrap, settings.seed)
    baseline = boundary.random_baseline(filtered)
    tick("boundary")
    factor = factors.by_factor(filtered)
    tick("factors")
    order_t = learning.by_order(filtered)
    session_t = learning.by_session_position(filtered, settings.session_length)
    trends = learning.annotator_trends(filtered, settings.min_rounds)
    trend = learning.trend_summary(filtered, settings.min_rounds)
    skill = learning.skill_range(filtered, settings.min_rounds)
    means = learning.annotator_means(filtered, settings.min_rounds)
    tick("learning")
    agree = agreement_mod.agreement(filtered)
    tick("agreement")
    reasons_sys = comments.reason_shares(filtered, "system")
    reasons_cat = comments.reason_shares(filtered, "category")
    reason_pts = comments.reason_points(filtered)
    comment = comments.explanation_report(
        filtered, settings.max_comments, settings.clusters, settings.seed
    )
    tick("comments")
    sheet = heds.datasheet(frame, filtered, cleaned.steps, agree, info)
    heds.write(sheet, out)

    tables = {
        "filter_steps": cleaned.steps,
        "distance_histogram": hist,
        "statistics_all": stats_all.rename_axis("statistic").reset_index(),
        "statistics_filtered": stats_filtered.rename_axis("statistic").reset_index(),
        "by_system": factor["system"]["table"],
        "by_category": factor["category"]["table"],
        "by_p": factor["p"]["table"],
        "by_boundary": factor["boundary"]["table"],
        "learning_by_order": order_t,
        "learning_by_session_position": session_t,
        "annotator_trends": trends,
        "reasons_by_system": reasons_sys,
        "reasons_by_category": reasons_cat,
        "reason_points": reason_pts,
        "comment_rules": comments.rules_table(),
        "comment_classes": comment.classes,
        "comment_clusters": pd.DataFrame(
            [
                {**c, "top_terms": " ".join(c["top_terms"]), "examples": " | ".join(c["examples"])}
                for c in comment.clusters
            ]
        ),
    }
    for name, table in tables.items():
        neutralise_frame(table).to_csv(out / f"{name}.csv", index=False)
    figures = _figures(out, hist, factor, order_t, session_t, means, reasons_cat)
    tick("figures_and_tables")

    summary = {
        "input": str(input_path),
        "source": frame["source"].iloc[0] if len(frame) else None,
        "settings": asdict(settings),
        "all": headline(frame),
        "filtered": headline(filtered),
        "filters": cleaned.steps.to_dict(orient="records"),
        "statistics_filtered": stats_filtered.to_dict(orient="index"),
        "random_guessing": baseline,
        "agreement": agree,
        "by_factor_tests": {
            k: {"test": v["test"], **({"spearman": v["spearman"]} if "spearman" in v else {})}
            for k, v in factor.items()
        },
        "learning": trend,
        "skill_range": skill,
        "comments": {
            "total": comment.total,
            "non_empty": comment.non_empty,
            "unique_exact": comment.unique_exact,
            "unique_near": comment.unique_near,
            "sampled": comment.sampled,
            "sample_size": comment.sample_size,
            "note": comment.note,
        },
        "figures": figures,
        "timings_seconds": timings,
    }
    summary = _clean_json(summary)
    (out / "report.md").write_text(
        _markdown(summary, tables, comment, stats_filtered, baseline, info)
    )
    tick("report")
    summary["timings_seconds"] = timings
    (out / "summary.json").write_text(json.dumps(_clean_json(summary), indent=2))
    return summary


def _markdown(summary, tables, comment, stats_filtered, baseline, info) -> str:
    a, f, ag = summary["all"], summary["filtered"], summary["agreement"]
    lines = [
        "# RoFT analysis report",
        "",
        f"Input: `{summary['input']}` ({summary['source']}).",
    ]
    if info.get("private"):
        lines += ["", "**This export is PRIVATE: it contains usernames.**"]
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
        "Points are recomputed from guess and boundary with the site's scoring function; "
        f"{a['points_mismatch_rows']} row(s) had stored points that disagree (the recomputed "
        f"value is used). {a['duplicate_pairs']} row(s) repeat an (annotator, example) pair.",
        "",
        "Filters, in order:",
        "",
        _md_table(tables["filter_steps"]),
        "## 2. Boundary distance",
        "",
        "![distance histogram](distance_histogram.png)",
        "",
        "Filtered set, with 95% bootstrap intervals over annotators, and the value expected "
        "from random guessing with the same boundaries:",
        "",
        _md_table(
            stats_filtered.rename_axis("statistic")
            .reset_index()
            .assign(random_guessing=lambda t: t["statistic"].map(baseline))
        ),
        "## 3. By factor",
        "",
        "![points by factor](points_by_factor.png)",
        "",
    ]
    for name in ("system", "category", "p", "boundary"):
        test = summary["by_factor_tests"][name]
        line = f"**{name}**: {test['test']['test']}"
        if test["test"].get("p_value") is not None:
            line += f", statistic {_fmt(test['test']['statistic'])}, p = "
            line += f"{_fmt(test['test']['p_value'], 4)}"
        if "spearman" in test and test["spearman"]["rho"] is not None:
            line += f"; Spearman rho = {_fmt(test['spearman']['rho'])} "
            line += f"(p = {_fmt(test['spearman']['p_value'], 4)}, n = {test['spearman']['n']})"
        key = {"p": "by_p"}.get(name, f"by_{name}")
        lines += [line + ".", "", _md_table(tables[key])]
    lr, sk = summary["learning"], summary["skill_range"]
    lines += [
        "## 4. Learning over time",
        "",
        "![learning](learning.png)",
        "",
        f"Annotators with at least {lr['min_rounds']} rounds: {lr['annotators']}; mean "
        f"per-annotator Spearman rho (points vs order) {_fmt(lr['mean_rho'])}, median "
        f"{_fmt(lr['median_rho'])}; Wilcoxon signed-rank p = {_fmt(lr['wilcoxon_p_value'], 4)}. "
        f"Pooled over rows: rho = {_fmt(lr['pooled']['rho'])} "
        f"(p = {_fmt(lr['pooled']['p_value'], 4)}).",
        "",
        "## 5. Skill range",
        "",
        "![skill range](skill_range.png)",
        "",
        f"Of {sk['annotators']} annotators with at least {sk['min_rounds']} rounds, the top "
        f"{sk['k']} averaged {_fmt(sk['top_mean'])} points and the bottom {sk['k']} "
        f"{_fmt(sk['bottom_mean'])}.",
        "",
        "## 6. Agreement",
        "",
        f"Examples with at least two annotations: {ag['examples_with_2plus']}; annotation pairs: "
        f"{ag['pairs']}; same sentence {_fmt(ag['pair_exact_rate'])}, within one sentence "
        f"{_fmt(ag['pair_within1_rate'])}. Krippendorff's alpha: interval "
        f"{_fmt(ag['krippendorff_alpha_interval'])}, nominal "
        f"{_fmt(ag['krippendorff_alpha_nominal'])}.",
        "",
        "## 7. Reasons and comments",
        "",
        "![reasons by category](reasons_by_category.png)",
        "",
        "Mean points of rounds citing each reason:",
        "",
        _md_table(tables["reason_points"]),
        f"Explanations: {comment.non_empty} non-empty of {comment.total}; {comment.unique_exact} "
        f"unique after normalising, {comment.unique_near} after merging near-duplicates. "
        + (comment.note or ""),
        "",
        "Rules (the first that matches wins):",
        "",
        _md_table(tables["comment_rules"]),
        "Comments per reason type:",
        "",
        _md_table(tables["comment_classes"]),
        "Clusters of the comments no rule matched (TF-IDF + NMF):",
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
        "See `heds.md` and `heds.json` (fields marked TODO are for the researcher).",
        "",
    ]
    return "\n".join(lines)
