"""What every section of the report shares: the figure style, number formatting, Markdown tables.

One look for all figures (150 dpi, no top/right spines, the same three colours: players, random
guessing, always "all human"), and one way to print a number, an interval and a table.
"""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

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


def clean_json(value):
    """Plain JSON values: numpy scalars unwrapped, NaN and infinities as None."""
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):  # numpy scalars
        return clean_json(value.item())
    return value


def fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        return f"{value:.{digits}f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def fmt_p(value) -> str:
    """A p-value as a reader wants it: '< 0.001' rather than a long tail of digits."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return "< 0.001" if value < 0.001 else f"{value:.3f}"


def fmt_pe(value) -> str:
    """What follows "p" in a sentence: '= 0.232' or '< 0.001'."""
    text = fmt_p(value)
    return text if text.startswith("<") else f"= {text}"


def md_table(frame: pd.DataFrame, digits: int = 3) -> str:
    if frame.empty:
        return "_(no rows)_\n"
    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = [
        "| " + " | ".join(fmt(v, digits) for v in row) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([header, rule, *body]) + "\n"


def ci(row, estimate="estimate", low="ci_low", high="ci_high", digits=3) -> str:
    return f"{fmt(row[estimate], digits)} [{fmt(row[low], digits)}, {fmt(row[high], digits)}]"


def save(fig, path: Path) -> str:
    if not fig.get_layout_engine():
        fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path.name


def errorbars(ax, x, table, estimate, low, high, **kwargs):
    y = table[estimate].to_numpy(dtype=float)
    err = np.vstack([y - table[low].to_numpy(dtype=float), table[high].to_numpy(dtype=float) - y])
    ax.errorbar(x, y, yerr=np.clip(err, 0, None), fmt="none", ecolor="black", capsize=2.5, lw=1)
