"""Sizes and the filtered set, following the seed study's cleaning; every filter explains itself.

Filters, applied in this order; each reports how many rows and annotators it removed and why, or
"not applicable" when the input lacks what it needs:

1. duplicates: an annotator's repeated answers to one text. A *double submission* is the same
   guess again within `double_submit_seconds` of the previous answer (a double click, a resent
   form): one answer counted twice. A *replay* is a later answer to a text the annotator already
   answered (after seeing the truth). Both are removed, keeping the first answer; they are counted
   apart. Without times, every repeat counts as a replay.
2. attention checks: drop annotators who failed any, then the check rows themselves;
3. speed: drop annotators whose median seconds per round is below a threshold;
4. straight-lining: drop annotators who gave the same guess position k times in a row.

Points: the points stored with each row are compared with the rule; each mismatch gets a cause
(`mismatch_causes`), and stored values no rule can give are listed (`impossible_points`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from roftcore.boundary import MAX_POINTS


@dataclass(frozen=True)
class FilterSettings:
    min_median_seconds: float = 5.0
    straight_line_k: int = 10
    double_submit_seconds: float = 30.0


@dataclass
class Cleaned:
    frame: pd.DataFrame
    steps: pd.DataFrame
    dropped_annotators: dict[str, list[str]] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)


def sizes(frame: pd.DataFrame) -> dict[str, int]:
    return {
        "n_annotations": len(frame),
        "n_annotators": int(frame["annotator"].nunique()),
        "n_examples": int(frame["example"].nunique()),
    }


def points_mismatch(frame: pd.DataFrame) -> int:
    """Rows whose stored points differ from the recomputed ones (rows without stored points: 0)."""
    stored = frame["points_stored"]
    return int((stored.notna() & (stored != frame["points"])).sum())


IMPOSSIBLE = "impossible stored value"
HUMAN_TEXT_ZERO = "all-human text answered 'all human' but stored 0"
ALL_HUMAN_ON_MACHINE = "'all human' answer on a machine text"
OTHER_CAUSE = "other"


def mismatch_causes(frame: pd.DataFrame) -> pd.Series:
    """The cause of each row whose stored points disagree with the rule (other rows: "")."""
    stored = frame["points_stored"]
    wrong = stored.notna() & (stored != frame["points"])
    n, g, b = frame["n_sentences"], frame["guess"], frame["boundary"]
    impossible = (stored < 0) | (stored > MAX_POINTS) | (stored != np.round(stored))
    cause = np.select(
        [impossible, (b == n) & (g == n) & (stored == 0), (g == n) & (b < n)],
        [IMPOSSIBLE, HUMAN_TEXT_ZERO, ALL_HUMAN_ON_MACHINE],
        OTHER_CAUSE,
    )
    return pd.Series(np.where(wrong, cause, ""), index=frame.index)


def mismatch_table(frame: pd.DataFrame) -> pd.DataFrame:
    """Mismatching rows by cause: rows, annotators, texts, and the stored vs recomputed points."""
    causes = mismatch_causes(frame)
    wrong = frame[causes != ""].assign(cause=causes[causes != ""])
    if wrong.empty:
        return pd.DataFrame(columns=["cause", "rows", "annotators", "examples", "stored", "rule"])
    return (
        wrong.groupby("cause")
        .agg(
            rows=("points", "size"),
            annotators=("annotator", "nunique"),
            examples=("example", "nunique"),
            stored=("points_stored", lambda s: ", ".join(f"{v:g}" for v in sorted(set(s))[:5])),
            rule=("points", lambda s: ", ".join(str(v) for v in sorted(set(s))[:5])),
        )
        .reset_index()
        .sort_values("rows", ascending=False)
    )


def impossible_points(frame: pd.DataFrame) -> pd.DataFrame:
    """Every row whose stored points no rule can give (outside 0..5 or not a whole number)."""
    rows = frame[mismatch_causes(frame) == IMPOSSIBLE]
    return rows[["annotator", "example", "date", "boundary", "guess", "points_stored", "points"]]


def duplicate_kinds(frame: pd.DataFrame, window_seconds: float) -> pd.Series:
    """For each row: "" (first answer to the text), "double submission" or "replay"."""
    kinds = pd.Series("", index=frame.index, dtype=object)
    involved = frame.duplicated(["annotator", "example"], keep=False)
    if not involved.any():
        return kinds
    ordered = sort_by_order(frame[involved])
    repeat = ordered.duplicated(["annotator", "example"])
    key = [ordered["annotator"], ordered["example"]]
    previous_guess = ordered.groupby(key, sort=False)["guess"].shift()
    previous_date = ordered.groupby(key, sort=False)["date"].shift()
    gap = (ordered["date"] - previous_date).dt.total_seconds()
    double = repeat & (ordered["guess"] == previous_guess) & (gap.abs() <= window_seconds)
    kinds.loc[ordered.index] = np.where(double, "double submission", np.where(repeat, "replay", ""))
    return kinds


def duplicate_pairs(frame: pd.DataFrame) -> int:
    """Rows that repeat an (annotator, example) pair already seen."""
    return int(frame.duplicated(["annotator", "example"]).sum())


def sort_by_order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(["annotator", "order", "date"], kind="stable")


def straight_liners(frame: pd.DataFrame, k: int) -> pd.Index:
    """Annotators with a run of at least k equal guesses in a row (by their round order)."""
    if k < 2 or frame.empty:
        return pd.Index([])
    ordered = sort_by_order(frame)
    annotator = ordered["annotator"].to_numpy()
    guess = ordered["guess"].to_numpy()
    new_run = np.ones(len(ordered), dtype=bool)
    new_run[1:] = (guess[1:] != guess[:-1]) | (annotator[1:] != annotator[:-1])
    run_id = np.cumsum(new_run)
    lengths = np.bincount(run_id)[run_id]
    return pd.Index(pd.unique(annotator[lengths >= k]))


def too_fast(frame: pd.DataFrame, min_median_seconds: float) -> pd.Index:
    """Annotators whose median seconds per round is below the threshold (unknown times pass)."""
    medians = frame.groupby("annotator")["seconds"].median()
    return medians.index[(medians < min_median_seconds).to_numpy()]


def failed_attention(frame: pd.DataFrame) -> pd.Index:
    failed = frame.loc[frame["attention_passed"] == 0.0, "annotator"]
    return pd.Index(pd.unique(failed))


def clean(frame: pd.DataFrame, settings: FilterSettings | None = None) -> Cleaned:
    """The filtered set and a table of each step's effect and reason."""
    settings = settings or FilterSettings()
    rows = []

    def record(step: str, rule: str, before: pd.DataFrame, after, why: str) -> pd.DataFrame:
        applicable = after is not None
        after = before if after is None else after
        removed = len(before) - len(after)
        rows.append(
            {
                "step": step,
                "rule": rule,
                "applicable": applicable,
                "rows_removed": removed,
                "annotators_removed": before["annotator"].nunique() - after["annotator"].nunique(),
                "rows_left": len(after),
                "annotators_left": after["annotator"].nunique(),
                "why": why if applicable else f"not applicable: {why}",
            }
        )
        return after

    dropped: dict[str, list[str]] = {}
    kinds = duplicate_kinds(frame, settings.double_submit_seconds)
    counts = {
        "double_submissions": int((kinds == "double submission").sum()),
        "replays": int((kinds == "replay").sum()),
    }
    timed = frame["date"].notna().any()
    why = (
        f"{counts['double_submissions']} double submission(s) (the same guess again within "
        f"{settings.double_submit_seconds:g} s) and {counts['replays']} replay(s) (a later answer "
        "to a text already answered); the first answer is kept"
    )
    if not timed:
        why += "; the input has no times, so every repeat counts as a replay"
    current = record(
        "duplicates",
        "keep each annotator's first answer to a text",
        frame,
        frame[kinds == ""],
        why,
    )

    has_checks = bool(current["attention_check"].any()) or current["attention_passed"].notna().any()
    bad = failed_attention(current)
    dropped["attention"] = sorted(map(str, bad))
    after = current[~current["annotator"].isin(bad) & ~current["attention_check"]]
    checks = int(current["attention_check"].sum())
    current = record(
        "attention",
        "drop annotators who failed a check, then the check rows",
        current,
        after if has_checks else None,
        f"{len(bad)} annotator(s) failed a check; {checks} check row(s) removed"
        if has_checks
        else "the input has no attention checks",
    )

    timed_rounds = current["seconds"].notna().any()
    bad = too_fast(current, settings.min_median_seconds)
    dropped["speed"] = sorted(map(str, bad)) if timed_rounds else []
    current = record(
        "speed",
        f"median seconds per round < {settings.min_median_seconds:g}",
        current,
        current[~current["annotator"].isin(bad)] if timed_rounds else None,
        f"{len(bad)} annotator(s) answered faster than that"
        if timed_rounds
        else "the input has no seconds per round",
    )

    ordered = current["order"].notna().any()
    bad = straight_liners(current, settings.straight_line_k)
    dropped["straight_lining"] = sorted(map(str, bad)) if ordered else []
    current = record(
        "straight_lining",
        f"same guess position {settings.straight_line_k} times in a row",
        current,
        current[~current["annotator"].isin(bad)] if ordered else None,
        f"{len(bad)} annotator(s) gave the same answer {settings.straight_line_k} times in a row"
        if ordered
        else "the input has no round order or dates",
    )

    return Cleaned(
        frame=current.sort_index().reset_index(drop=True),
        steps=pd.DataFrame(rows),
        dropped_annotators=dropped,
        duplicates=counts,
    )
