"""Section 3: points by system, category, decoding p and boundary position on texts with a
machine part (analysis.factors), with the tests and caveats a reviewer asks for."""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from analysis import factors
from analysis.render import HUMAN, PLAYERS, RANDOM, errorbars, fmt, fmt_p, fmt_pe, md_table, save
from analysis.sections import Context, Section


def shown(factor: dict) -> list[tuple[str, dict]]:
    """The factors to show, one per contrast (an alias is shown under the first of its group)."""
    return [
        (name, factor[name]) for name, _ in factors.FACTORS if "aliased_with" not in factor[name]
    ]


def _title(name: str, entry: dict) -> str:
    test = entry["test"]
    label = entry.get("label", "decoding p (bins)" if name == "p" else name)
    title = f"by {label}"
    if test.get("p_value") is not None:
        title += f"\np {fmt_pe(test['p_value'])} (Holm {fmt_p(test.get('p_holm'))})"
    if entry.get("aliases"):
        title += "\nconfounded: one contrast"
    return title


def figure(out: Path, factor: dict) -> str:
    panels = shown(factor)
    widths = [max(len(entry["table"]), 2.5) for _, entry in panels]
    fig, axes = plt.subplots(
        1,
        len(panels),
        figsize=(3.2 * len(panels) + 1.5, 4.6),
        sharey=True,
        squeeze=False,
        gridspec_kw={"width_ratios": widths},
    )
    axes = axes[0]
    for ax, (name, entry) in zip(axes, panels, strict=True):
        table, column = entry["table"], entry["column"]
        if not table.empty:
            x = np.arange(len(table))
            ax.bar(x, table["mean_points"], color=PLAYERS, width=0.7, label="players, 95% CI")
            errorbars(ax, x, table, "mean_points", "points_ci_low", "points_ci_high")
            ax.scatter(
                x,
                table["random_points"],
                marker="_",
                s=400,
                color=RANDOM,
                lw=2.5,
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
            labels = [f"{v}\nn={n:,}" for v, n in zip(table[column], table["rows"], strict=True)]
            long = max(len(str(v)) for v in table[column]) > 8
            ax.set_xticks(
                x, labels, fontsize=8, rotation=30 if long else 0, ha="right" if long else "center"
            )
            ax.set_xlim(-0.6, len(table) - 0.4)
        ax.set_title(_title(name, entry), fontsize=9.5)
    axes[0].set_ylabel("mean points (texts with a machine part)")
    axes[0].set_ylim(0, 5)
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(plt.Line2D([], [], lw=0))
    labels.append("n = annotations per bar; p: permutation over texts")
    fig.legend(handles, labels, loc="lower center", ncol=4, frameon=False)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    return save(fig, out / "points_by_factor.png")


def _effects_table(test: dict, unit: str = "points") -> pd.DataFrame:
    rows = [e for e in test.get("effects", []) if not str(e["term"]).startswith("(reference)")]
    if not rows:
        return pd.DataFrame()
    reference = next(
        (e["term"][12:] for e in test["effects"] if str(e["term"]).startswith("(reference)")), ""
    )
    table = pd.DataFrame(
        {
            "level": [e["term"] for e in rows],
            f"{unit} vs {reference} [95% CI]": [
                f"{fmt(e['estimate'])} [{fmt(e['ci_low'])}, {fmt(e['ci_high'])}]" for e in rows
            ],
        }
    )
    if all("d" in e for e in rows):
        table["standardised (d)"] = [fmt(e["d"], 2) for e in rows]
    return table


def _line(name: str, entry: dict) -> list[str]:
    test = entry["test"]
    label = entry.get("label", name)
    if test.get("p_value") is None:
        return [f"**{label}**: not tested ({test.get('method', 'one level')}).", ""]
    line = (
        f"**{label}**: permutation test over {test['texts']} texts "
        f"({test['permutations']} permutations) p {fmt_pe(test['p_value'])}, Holm-adjusted over "
        f"the factors {fmt_p(test.get('p_holm'))}"
    )
    model = test.get("mixed")
    if model and model.get("test") and model["test"].get("p_value") is not None:
        joint = model["test"]
        line += (
            f"; {model['model']} ({model['library']}): {joint['kind']} = "
            f"{fmt(joint['statistic'], 2)} (df {joint['df']}), p {fmt_pe(joint['p_value'])}"
        )
    trend = entry.get("trend")
    if trend and trend.get("slope") is not None:
        line += (
            f". Slope per unit of {name}: {fmt(trend['slope'])} [{fmt(trend['ci_low'])}, "
            f"{fmt(trend['ci_high'])}] ({trend['slope_from']}), permutation p "
            f"{fmt_pe(trend['p_value'])}"
        )
    lines = [line + ".", ""]
    for note in test.get("notes", []):
        lines += [f"> ⚠ {note}.", ""]
    for note in (model or {}).get("warnings", []):
        lines += [f"> ⚠ mixed model: {note}", ""]
    for note in test.get("clustered", {}).get("warnings", []):
        lines += [f"> ⚠ clustered test (diagnostic): {note}.", ""]
    effects = _effects_table(test)
    if len(effects):
        lines += [f"Effects ({test['effects_from']}):", "", md_table(effects)]
    if entry.get("gain"):
        lines += ["", *_gain_lines(entry["gain"])]
    return lines


def _gain_lines(gain: dict) -> list[str]:
    """The boundary read against always answering "all human" at the same boundary."""
    lines = [
        "Against the scoring ceiling: always answering 'all human' earns more the later the "
        "boundary, so the raw boundary effect is partly the scoring rule. Points above what "
        "always 'all human' earns on the same text, by boundary: permutation test over texts "
        f"p {fmt_pe(gain['p_value'])}"
        + (
            f", mixed model p {fmt_pe(gain['mixed_p_value'])}"
            if gain.get("mixed_p_value") is not None
            else ""
        )
        + ".",
        "",
        md_table(gain["table"]),
        "",
    ]
    for note in (gain.get("mixed") or {}).get("warnings", []):
        lines += [f"> ⚠ mixed model: {note}", ""]
    effects = _effects_table(gain, "gain")
    if len(effects):
        lines += ["Effects on the gain (mixed model):", "", md_table(effects), ""]
    return lines


def _unknown_p(frame: pd.DataFrame) -> list[str]:
    """Name the systems behind the level 'unknown' of p when it is exactly their texts (the
    splice baseline has no p): its contrast is then one of systems."""
    machine = frame[frame["boundary"] < frame["n_sentences"]]
    systems = sorted(machine.loc[machine["p"].isna(), "system"].astype(str).unique())
    with_p = set(machine.loc[machine["p"].notna(), "system"].astype(str))
    if not systems or with_p.intersection(systems):  # no level, or not one of whole systems
        return []
    return [
        f"> ⚠ level 'unknown' of p is the texts without a decoding p (system "
        f"{', '.join(systems)}): its difference from the p bins is also a difference between "
        "systems, not an effect of p.",
        "",
    ]


def run(ctx: Context) -> Section:
    factor = factors.by_factor(ctx.filtered, ctx.boot, ctx.seed)
    lines = [
        "## 3. By factor (texts with a machine part)",
        "",
        "![points by factor](points_by_factor.png)",
        "",
        "Bars: mean points with 95% intervals over annotators, n = annotations per bar; dashes: "
        "random guessing on the same texts; crosses: always 'all human'. Every factor here is a "
        "property of the text, so the p-value is a permutation test over texts on points centred "
        "by annotator, Holm-adjusted over the factors tested. A mixed model with crossed "
        "random intercepts for annotator and text, on every annotation, gives a second p-value "
        "and the effects with 95% intervals (the library that fitted it is named).",
        "",
    ]
    for name, entry in shown(factor):
        lines += _line(name, entry)
        if name == "p":
            lines += _unknown_p(ctx.filtered)
        columns = [
            entry["column"],
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
        lines += [md_table(entry["table"][columns])] if len(entry["table"]) else []
    summary = {
        name: {
            "test": {k: v for k, v in entry["test"].items() if k != "effects"},
            **{k: entry[k] for k in ("aliases", "aliased_with", "label") if k in entry},
            **({"trend": entry["trend"]} if "trend" in entry else {}),
            **(
                {"gain": {k: v for k, v in entry["gain"].items() if k != "table"}}
                if entry.get("gain")
                else {}
            ),
        }
        for name, entry in factor.items()
    }
    ctx.shared["factor"] = factor
    return Section(
        markdown=lines,
        tables={f"by_{name}": factor[name]["table"] for name, _ in factors.FACTORS},
        figures=[figure(ctx.out, factor)],
        summary={"by_factor_tests": summary},
    )
