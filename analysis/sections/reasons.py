"""Section 7: reasons and free-text comments. The calls into analysis.comments and
analysis.taxonomy live here, as thin as the report had them."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import comments, inference, taxonomy
from analysis.render import errorbars, md_table, save
from analysis.sections import Context, Section
from analysis.sections.limits import MIN_COMMENTS_FOR_SHARES, MIN_ROUNDS_PER_REASON
from roftcore.reasons import REASON_NAMES


def figure(out: Path, reasons_cat: pd.DataFrame) -> str:
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
            errorbars(ax, xs, part, "mean", "ci_low", "ci_high")
        ax.set_xticks(x, [r.replace("_", " ") for r in REASON_NAMES], rotation=25, ha="right")
        ax.legend(frameon=False, title="category (rounds)")
    ax.set_ylabel("share of rounds citing the reason")
    ax.set_title("Reasons by category (95% CI over annotators)")
    ax.set_ylim(bottom=0)
    return save(fig, out / "reasons_by_category.png")


def _denominator(reasons: pd.DataFrame) -> str:
    """What the shares are of: every round, those that could cite no reason included."""
    human = int((reasons["guess"] >= reasons["n_sentences"]).sum())
    padded = ";" + reasons["reasons"].astype("str").fillna("") + ";"
    outside = {
        label: int(padded.str.contains(f";{label};", regex=False).sum())
        for label in comments.REASON_LABELS
        if label not in REASON_NAMES
    }
    listed = ", ".join(f"'{label}' {count}" for label, count in outside.items() if count)
    none = int((padded == ";;").sum())
    return (
        f"Shares (figure and table) are of all {len(reasons):,} rounds, of which {human:,} "
        f"answered 'all human' and {none:,} cite no reason"
        + (f"; rounds citing labels the figure does not show: {listed}." if listed else ".")
    )


def run(ctx: Context) -> Section:
    filtered, boot, seed, settings = ctx.filtered, ctx.boot, ctx.seed, ctx.settings
    reasons = filtered.assign(reasons=comments.canonical_reasons(filtered["reasons"]))
    flags = comments.reason_flags(reasons).astype(float)
    reasons_cat = inference.many_level_means(
        reasons, "category", {name: flags[name] for name in REASON_NAMES}, boot, seed
    )
    reason_pts = comments.reason_points(reasons, boot, seed)
    few = (reason_pts["rounds"] > 0) & (reason_pts["rounds"] < MIN_ROUNDS_PER_REASON)
    reason_pts.loc[few, ["mean_points", "ci_low", "ci_high"]] = np.nan
    comment = comments.explanation_report(
        filtered, settings.max_comments, settings.clusters, settings.seed
    )
    taxonomy_scores = taxonomy.heldout_scores()
    tables = {
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
    lines = [
        "## 7. Reasons and comments",
        "",
        "![reasons by category](reasons_by_category.png)",
        "",
        _denominator(reasons),
        "",
        "Mean points of rounds citing each reason (95% intervals over annotators):",
        "",
        md_table(reason_pts),
        *(
            [
                f"Reasons cited in fewer than {MIN_ROUNDS_PER_REASON} rounds: too few to estimate "
                f"their mean points ({', '.join(reason_pts.loc[few, 'reason'])}).",
                "",
            ]
            if few.any()
            else []
        ),
        f"Explanations: {comment.non_empty} non-empty of {comment.total}; {comment.unique_exact} "
        f"unique after normalising, {comment.unique_near} after merging near-duplicates. "
        + (comment.note or ""),
        "",
    ]
    lines += (
        _comment_lines(comment)
        if comment.non_empty
        else [
            "The input has no free-text explanations: there are no comments to classify or "
            "cluster.",
            "",
        ]
    )
    return Section(
        markdown=lines,
        tables=tables,
        figures=[figure(ctx.out, reasons_cat)],
        summary={
            "comments": {
                "total": comment.total,
                "non_empty": comment.non_empty,
                "unique_exact": comment.unique_exact,
                "unique_near": comment.unique_near,
                "sampled": comment.sampled,
                "sample_size": comment.sample_size,
                "note": comment.note,
                "taxonomy_heldout": taxonomy_scores,
            }
        },
    )


def _comment_lines(comment: comments.CommentReport) -> list[str]:
    """Classes, frequent comments and clusters of the free-text explanations."""
    classes = comment.classes
    shares = (
        f"Shares are of the {comment.unique_near} unique comments."
        if comment.unique_near >= MIN_COMMENTS_FOR_SHARES
        else f"{comment.unique_near} unique comments: too few for shares (at least "
        f"{MIN_COMMENTS_FOR_SHARES} needed), so only counts are shown."
    )
    if comment.unique_near < MIN_COMMENTS_FOR_SHARES:
        classes = classes.drop(columns=["share"])
    lines = [
        "Each unique comment gets every reason it states, or `unclassified` when the "
        "taxonomy is unsure (cue rules with fuzzy matching and negation, plus a model trained on "
        "the team's labelled development set); RoFT's own reason labels, `other` included, are "
        "kept as they were given. Every comment, its reasons and what decided them: "
        "`comments.csv`.",
        "",
        f"_{comment.heldout}_",
        "",
        shares,
        "",
        md_table(classes),
        "The most frequent comments:",
        "",
        md_table(comment.table.head(15)),
        "Clusters of the comments given no reason (TF-IDF + NMF):",
        "",
    ]
    for c in comment.clusters:
        lines.append(f"- cluster {c['cluster']} ({c['size']}): {', '.join(c['top_terms'])}")
        lines += [f"  - “{e}”" for e in c["examples"]]
    if not comment.clusters:
        lines.append("_(too few comments to cluster)_")
    lines.append("")
    return lines
