"""Sizes and the filtered set, following the seed study's cleaning; every filter explains itself.

Filters, applied in this order; each reports how many rows and annotators it removed and why, or
"not applicable" when the input lacks what it needs:

0. decisions (crowd studies): keep only the rounds of workers whose current decision is
   "approve", and of those only the rounds that are no attention check. Everyone else left out
   is listed with the reason (rejected, returned, timed out, under review, still working, no
   decision yet) in `Cleaned.left_out`. `FilterSettings(approved_only=False)` keeps every
   worker (the attention step then judges the checks). Public players are never affected.
1. duplicates: an annotator's repeated answers to one text. A *double submission* is the same
   guess again within `double_submit_seconds` of the previous answer (a double click, a resent
   form): one answer counted twice. A *replay* is a later answer to a text the annotator already
   answered (after seeing the truth). Both are removed, keeping the first answer; they are counted
   apart. Without times, every repeat counts as a replay.
2. attention checks: drop annotators who failed any that counted, then the check rows themselves
   (a check answered before its instruction was shown is void, as on the site: `void_checks`);
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
    approved_only: bool = True  # crowd studies: only approved workers' non-check rounds


LEFT_OUT_COLUMNS = [
    "study", "annotator", "decision", "participant_status", "why", "rounds_left_out", "rounds_kept",
]  # fmt: skip


@dataclass
class Cleaned:
    frame: pd.DataFrame
    steps: pd.DataFrame
    dropped_annotators: dict[str, list[str]] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    # Crowd workers (and approved workers' check rounds) the decisions step left out, and why.
    left_out: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LEFT_OUT_COLUMNS))


APPROVED = "approve"
CHECK_ROUNDS = "attention-check rounds (the worker is approved: their other rounds are kept)"


def left_out_reason(decision: str, status: str) -> str | None:
    """Why a crowd worker's rounds are left out of the analysis (None: they are kept), from the
    worker's current decision and their outcome on the site."""
    if decision == APPROVED:
        return None
    if decision == "reject":
        return "rejected"
    if status == "timed_out":
        return "timed out"
    if decision == "returned" or status == "returned":
        return "returned"
    if decision == "review":
        return "under review"
    if decision == "pending":
        return "still working on the platform"
    return "no decision yet (run `flask study verify --apply`)"


def decision_filter(frame: pd.DataFrame) -> tuple[pd.Series, pd.DataFrame]:
    """Which rows the decisions step keeps (public players' rows, approved workers' non-check
    rounds) and the table of who was left out and why, one row per (study, annotator)."""
    crowd = _text(frame, "study") != ""
    approved = _text(frame, "decision") == APPROVED
    keep = ~crowd | (approved & ~frame["attention_check"].astype(bool))
    rows = []
    workers = frame[crowd].assign(
        study=_text(frame, "study")[crowd],
        kept=keep[crowd],
        decision=_text(frame, "decision")[crowd],
        participant_status=_text(frame, "participant_status")[crowd],
    )
    for (study, annotator), mine in workers.groupby(["study", "annotator"], sort=True):
        dropped = int((~mine["kept"]).sum())
        if not dropped:
            continue
        last = mine.iloc[-1]
        why = left_out_reason(str(last["decision"]), str(last["participant_status"]))
        rows.append(
            {
                "study": study,
                "annotator": annotator,
                "decision": last["decision"],
                "participant_status": last["participant_status"],
                "why": why or CHECK_ROUNDS,
                "rounds_left_out": dropped,
                "rounds_kept": int(mine["kept"].sum()),
            }
        )
    return keep, pd.DataFrame(rows, columns=LEFT_OUT_COLUMNS)


def _text(frame: pd.DataFrame, column: str) -> pd.Series:
    """A text column, or "" on every row when the frame has none (an older export)."""
    if column not in frame.columns:
        return pd.Series("", index=frame.index, dtype=object)
    return frame[column].fillna("").astype(str)


def left_out_summary(left_out: pd.DataFrame) -> pd.DataFrame:
    """The left-out table by reason: how many workers and rounds each reason took."""
    if left_out.empty:
        return pd.DataFrame(columns=["why", "workers", "rounds_left_out"])
    return (
        left_out.groupby("why", sort=False)
        .agg(workers=("annotator", "size"), rounds_left_out=("rounds_left_out", "sum"))
        .reset_index()
        .sort_values("rounds_left_out", ascending=False, kind="stable")
        .reset_index(drop=True)
    )


def default_min_rounds(frame: pd.DataFrame, ceiling: int = 10) -> int:
    """The rounds an annotator needs for per-annotator measures, by default: `ceiling`, or fewer
    when a crowd study gives its kept workers fewer rounds (its smallest count), so a short
    study's workers are all counted instead of none."""
    crowd = frame[_text(frame, "study") != ""]
    if crowd.empty:
        return ceiling
    per_worker = crowd.groupby(["study", "annotator"]).size()
    return max(1, min(ceiling, int(per_worker.min())))


def sizes(frame: pd.DataFrame) -> dict[str, int]:
    return {
        "n_annotations": len(frame),
        "n_annotators": int(frame["annotator"].nunique()),
        "n_examples": int(frame["example"].nunique()),
    }


def points_mismatch(frame: pd.DataFrame) -> int:
    """Rows whose stored points differ from the recomputed ones (rows without stored points and
    attention checks, which earn no points by design: 0)."""
    return int((mismatch_causes(frame) != "").sum())


IMPOSSIBLE = "impossible stored value"
HUMAN_TEXT_ZERO = "all-human text answered 'all human' but stored 0"
ALL_HUMAN_ON_MACHINE = "'all human' answer on a machine text"
OTHER_CAUSE = "other"


def mismatch_causes(frame: pd.DataFrame) -> pd.Series:
    """The cause of each row whose stored points disagree with the rule (other rows: ""). An
    attention check stores no points by design, so it is never a mismatch."""
    stored = frame["points_stored"]
    wrong = stored.notna() & (stored != frame["points"]) & ~frame["attention_check"].astype(bool)
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


def void_checks(frame: pd.DataFrame) -> pd.Series:
    """Check rows answered before their instruction was shown: an instruction inside a machine
    text (boundary < N) flagged at an earlier sentence. The site counts them neither passed nor
    failed (app/crowd/schedule.py); an all-human check's instruction is its first sentence."""
    return (
        frame["attention_check"].astype(bool)
        & (frame["boundary"] < frame["n_sentences"])
        & (frame["guess"] < frame["boundary"])
    )


def failed_attention(frame: pd.DataFrame) -> pd.Index:
    """Annotators who failed a check that counted (void checks, never seen, do not count)."""
    failed = frame.loc[(frame["attention_passed"] == 0.0) & ~void_checks(frame), "annotator"]
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
    has_crowd = bool((_text(frame, "study") != "").any())
    keep, left_out = decision_filter(frame)
    decided = has_crowd and settings.approved_only
    if decided:
        why = (
            f"{left_out['why'].ne(CHECK_ROUNDS).sum()} worker(s) not approved left out "
            f"({left_out_reasons(left_out)}); {int(frame.loc[~keep, 'attention_check'].sum())} "
            "attention-check round(s) left out"
        )
    elif has_crowd:
        why = "every worker kept (--all-workers)"
        left_out = left_out.iloc[0:0]
    else:
        why = "the input has no crowd-study rounds"
        left_out = left_out.iloc[0:0]
    dropped["decisions"] = sorted(
        map(str, left_out.loc[left_out["why"] != CHECK_ROUNDS, "annotator"].unique())
    )
    frame = record(
        "decisions",
        "crowd studies: only approved workers' rounds that are no attention check",
        frame,
        frame[keep] if decided else None,
        why,
    )

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
    checks_note = (
        "the decisions step left the check rows out: the site judged the checks"
        if decided
        else "the input has no attention checks"
    )
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
        else checks_note,
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
        left_out=left_out.reset_index(drop=True),
    )


def left_out_reasons(left_out: pd.DataFrame) -> str:
    """ "rejected: 2, returned: 1": the reasons that left workers out, with how many each."""
    shown = left_out[left_out["why"] != CHECK_ROUNDS]
    if shown.empty:
        return "none"
    counts = shown["why"].value_counts(sort=False)
    return ", ".join(f"{why}: {n}" for why, n in counts.items())
