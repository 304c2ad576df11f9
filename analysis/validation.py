"""The coder checked against researchers' labels on the study's own comments.

Researchers give each comment of a random sample one main class from `LABELS` (RoFT's eight
reasons, "other" for a reason outside them, "not_a_reason"). The coder's main class is read in the
same terms (`coder_label`: the taxonomy's "style" is a reason outside the eight, so "other"; an
abstention is "unclassified"). `report` then gives Cohen's κ between coder and researcher with a
bootstrap interval over comments, per-class precision and recall (scikit-learn), the two
researchers' agreement with each other where both labelled (Cohen's κ and Krippendorff's α), and
the reason shares corrected for the coder's confusion (`analysis.correction`).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from analysis import correction
from roftcore.reasons import REASON_NAMES

LABELS: tuple[str, ...] = (*REASON_NAMES, "other", "not_a_reason")
UNCLASSIFIED = "unclassified"
COLUMNS: tuple[str, ...] = (*LABELS, UNCLASSIFIED)


def coder_label(labels: tuple[str, ...] | list[str], primary: str) -> str:
    """The coder's main class in the researchers' terms."""
    if not labels:
        return UNCLASSIFIED
    return "other" if primary == "style" else primary


def kappa(a: list[str], b: list[str], n_boot: int = 1000, seed: int = 0) -> dict:
    """Cohen's κ (scikit-learn) with a 95% percentile bootstrap interval over comments."""
    from sklearn.metrics import cohen_kappa_score

    a_arr, b_arr = np.array(a, dtype=object), np.array(b, dtype=object)
    labels = sorted(set(a) | set(b))
    if len(a_arr) == 0:
        return {"n": 0, "kappa": None, "ci_low": None, "ci_high": None}
    point = cohen_kappa_score(a_arr, b_arr, labels=labels) if len(labels) > 1 else 1.0
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        pick = rng.integers(0, len(a_arr), len(a_arr))
        x, y = a_arr[pick], b_arr[pick]
        if len(set(x) | set(y)) > 1:
            draws.append(cohen_kappa_score(x, y, labels=labels))
    low, high = np.quantile(draws, [0.025, 0.975]) if draws else (np.nan, np.nan)
    return {"n": len(a_arr), "kappa": float(point), "ci_low": float(low), "ci_high": float(high)}


def per_class(truth: list[str], coded: list[str]) -> pd.DataFrame:
    """Precision and recall of the coder per researcher class (an abstention counts against
    recall; precision is of the comments the coder put in the class)."""
    from sklearn.metrics import precision_recall_fscore_support

    precision, recall, _, support = precision_recall_fscore_support(
        truth, coded, labels=list(LABELS), zero_division=np.nan
    )
    given = pd.Series(coded).value_counts()
    return pd.DataFrame(
        {
            "class": LABELS,
            "researchers": support.astype(int),
            "coder": [int(given.get(c, 0)) for c in LABELS],
            "precision": precision,
            "recall": recall,
        }
    )


def between_researchers(first: list[str], second: list[str], seed: int = 0) -> dict:
    """Agreement of two researchers on the comments both labelled."""
    import krippendorff

    result = kappa(first, second, seed=seed)
    if len(first) >= 2 and len(set(first) | set(second)) > 1:
        codes = {name: i for i, name in enumerate(sorted(set(first) | set(second)))}
        data = np.array([[codes[x] for x in first], [codes[x] for x in second]], dtype=float)
        result["alpha"] = float(krippendorff.alpha(data, level_of_measurement="nominal"))
    else:
        result["alpha"] = None
    return result


def report(
    truth: list[str],
    coded_sample: list[str],
    coded_all: list[str],
    pairs: tuple[list[str], list[str]] | None = None,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """Everything the validation says: sample size, κ, per-class figures, corrected shares and,
    with two researchers' labels of the same comments (`pairs`), their agreement."""
    return {
        "sample": len(truth),
        "coded_comments": len(coded_all),
        "kappa": kappa(truth, coded_sample, n_boot, seed),
        "per_class": per_class(truth, coded_sample),
        "shares": correction.corrected_shares(
            truth, coded_sample, coded_all, list(LABELS), list(COLUMNS), n_boot, seed
        ),
        "researchers": between_researchers(*pairs, seed=seed) if pairs and pairs[0] else None,
    }


def _f(value) -> str:
    return (
        "–" if value is None or (isinstance(value, float) and np.isnan(value)) else f"{value:.2f}"
    )


def markdown(result: dict) -> list[str]:
    """The validation as Markdown lines (the report and `flask validation report` print these)."""
    k = result["kappa"]
    lines = [
        f"The coder against researchers' labels on {result['sample']} comments of this data "
        f"(a random sample of {result['coded_comments']}): Cohen's κ {_f(k['kappa'])} "
        f"(95% CI {_f(k['ci_low'])} to {_f(k['ci_high'])}).",
        "",
    ]
    two = result.get("researchers")
    if two:
        lines += [
            f"The two researchers on the {two['n']} comments both labelled: Cohen's κ "
            f"{_f(two['kappa'])} (95% CI {_f(two['ci_low'])} to {_f(two['ci_high'])}), "
            f"Krippendorff's α {_f(two['alpha'])}.",
            "",
        ]
    lines += ["| class | researchers | coder | precision | recall |", "|---|---:|---:|---:|---:|"]
    for row in result["per_class"].itertuples():
        lines.append(
            f"| {row[1]} | {row.researchers} | {row.coder} | {_f(row.precision)} | "
            f"{_f(row.recall)} |"
        )
    lines += [
        "",
        "Main-reason shares, corrected for the coder's confusion on the labelled sample (95% CI "
        "over both the labelled sample and the coded comments):",
        "",
        "| class | labelled | coder's share (raw) | corrected share | 95% CI |",
        "|---|---:|---:|---:|---|",
    ]
    for row in result["shares"].itertuples():
        lines.append(
            f"| {row[1]} | {row.labelled} | {_f(row.raw_share)} | {_f(row.corrected_share)} | "
            f"{_f(row.ci_low)} to {_f(row.ci_high)} |"
        )
    return [*lines, ""]


class LabelsError(ValueError):
    """A researchers' labels file that cannot be read; the message names the file and line."""


def read_labels(path) -> list[tuple[str, str]]:
    """(explanation, label) rows from a CSV with an `explanation` (or `text`) column and a `label`
    column holding one of `LABELS` (what `flask validation export` writes)."""
    import csv
    from pathlib import Path

    from roftcore.spreadsheet import restore

    path = Path(path)
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as error:
        raise LabelsError(f"{path}: cannot open ({error.strerror})") from None
    rows = []
    with handle:
        try:
            reader = csv.DictReader(handle)
            header = reader.fieldnames or []
            text = next((c for c in ("explanation", "text") if c in header), None)
            if text is None or "label" not in header:
                raise LabelsError(
                    f"{path}:1: the header needs an 'explanation' (or 'text') column and a "
                    f"'label' column; found: {', '.join(header) or 'nothing'}"
                )
            for row in reader:
                label = (row.get("label") or "").strip()
                if label not in LABELS:
                    raise LabelsError(
                        f"{path}:{reader.line_num}: unknown label {label!r}; labels are: "
                        f"{', '.join(LABELS)}"
                    )
                if not (row.get(text) or "").strip():
                    raise LabelsError(f"{path}:{reader.line_num}: the explanation is empty")
                rows.append((restore(row[text]).strip(), label))
        except UnicodeDecodeError:
            raise LabelsError(f"{path}: not UTF-8 text") from None
        except csv.Error as error:
            raise LabelsError(f"{path}:{reader.line_num}: {error}") from None
    if not rows:
        raise LabelsError(f"{path}: no rows under the header")
    return rows
