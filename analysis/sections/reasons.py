"""Section 7: reasons and free-text comments. The calls into analysis.comments and
analysis.taxonomy live here, as thin as the report had them."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import comments, inference, taxonomy, validation
from analysis.load import LoadError
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
    side_by_side, checked, check_lines = _chips_and_coded(reasons, comment, settings, boot, seed)
    tables = {
        "reasons_by_category": reasons_cat,
        "reason_points": reason_pts,
        "comment_rules": comments.rules_table(),
        "comment_classes": comment.classes,
        "reasons_chips_and_coded": side_by_side,
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
    lines += check_lines
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
                "coder_validation": checked,
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


def _coded_main_classes(comment: comments.CommentReport) -> list[str]:
    """Each unique comment's main class from the coder, in the researchers' terms."""
    out: list[str] = []
    for row in comment.classes.itertuples():
        name = row.reason_type
        label = validation.coder_label((name,) if name != taxonomy.UNCLASSIFIED else (), name)
        out += [label] * int(row.as_main_reason)
    return out


def _chips_and_coded(
    reasons: pd.DataFrame, comment: comments.CommentReport, settings, boot: int, seed: int
) -> tuple[pd.DataFrame, dict | None, list[str]]:
    """Players' chips (primary) beside the coded free text: raw shares marked uncorrected, or,
    with researchers' labels (--coder-labels), corrected shares with their interval."""
    flags = comments.reason_flags(reasons)
    chips = {name: float(flags[name].mean()) if len(flags) else np.nan for name in REASON_NAMES}
    coded_all = _coded_main_classes(comment)
    table = pd.DataFrame({"reason": list(validation.LABELS)})
    table["chips_share_of_rounds"] = [chips.get(name, np.nan) for name in validation.LABELS]
    total = max(len(coded_all), 1)
    table["coded_share_of_comments"] = [coded_all.count(n) / total for n in validation.LABELS]
    checked = None
    lines = [
        "Players' own reason chips, chosen in the game, are the primary reason data; the coded "
        "free text is secondary. Side by side (chips: share of rounds citing the reason; coded: "
        "share of unique comments whose main reason it is):",
        "",
    ]
    if settings.coder_labels and coded_all:
        try:
            rows = validation.read_labels(settings.coder_labels)
        except validation.LabelsError as error:
            raise LoadError(str(error)) from None
        found = taxonomy.classify_many([text for text, _ in rows])
        coded_sample = [validation.coder_label(c.labels, c.primary) for c in found]
        checked = validation.report(
            [label for _, label in rows], coded_sample, coded_all, None, max(boot, 200), seed
        )
        shares = checked["shares"].set_index("class")
        table["coded_corrected"] = table["reason"].map(shares["corrected_share"])
        table["coded_ci_low"] = table["reason"].map(shares["ci_low"])
        table["coded_ci_high"] = table["reason"].map(shares["ci_high"])
        lines += [md_table(table), *validation.markdown(checked)]
        checked = {
            "sample": checked["sample"],
            "kappa": checked["kappa"],
            "per_class": checked["per_class"].to_dict("records"),
            "shares": checked["shares"].to_dict("records"),
        }
    else:
        table = table.rename(columns={"coded_share_of_comments": "coded_share_uncorrected"})
        lines += [
            md_table(table),
            f"Coded shares: {validation.correction.UNCORRECTED_NOTE} (label a sample with "
            "`flask validation` and pass --coder-labels).",
            "",
        ]
    return table, checked, lines
