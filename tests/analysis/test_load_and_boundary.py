"""Loading (our schema from roft.csv) and boundary distance, on data worked out by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import boundary, cleaning
from analysis.load import CANONICAL, LoadError, apply_selection, load, recompute_points
from app.game.scoring import points

DATA = Path(__file__).parent / "data"
ROFT = DATA / "roft_sample.csv"


def frame(rows: list[tuple], **extra) -> pd.DataFrame:
    """Rows of (annotator, example, boundary, guess) with N = 10 and canonical defaults."""
    out = pd.DataFrame(rows, columns=["annotator", "example", "boundary", "guess"])
    out["n_sentences"] = 10
    out["points"] = recompute_points(out["guess"], out["boundary"])
    out["points_stored"] = np.nan
    out["order"] = out.groupby("annotator").cumcount() + 1.0
    out["date"] = pd.NaT
    out["seconds"] = np.nan
    out["attention_check"] = False
    out["attention_passed"] = np.nan
    for key, value in extra.items():
        out[key] = value
    return out


def test_vectorised_points_match_the_scoring_function():
    g, b = np.meshgrid(np.arange(0, 21), np.arange(1, 21))
    expected = [points(int(x), int(y)) for x, y in zip(g.ravel(), b.ravel(), strict=True)]
    assert recompute_points(g.ravel(), b.ravel()).tolist() == expected


def test_roft_csv_loads_with_its_quirks():
    df = load(ROFT)
    assert list(df.columns) == list(CANONICAL)
    assert len(df) == 27 and df["annotator"].nunique() == 6 and df["example"].nunique() == 5
    # 9 = all human becomes boundary 10 = N; predicted index 9 becomes guess 10.
    human = df[df["system"] == "human"]
    assert (human["boundary"] == 10).all() and (human["n_sentences"] == 10).all()
    assert df["p"].isna().sum() == 10  # two texts without p, read 5 times each
    assert (df.loc[df["annotator"] == "a2", "news_familiarity"] == -1).all()
    assert df.loc[0, "reasons"] == "irrelevant"
    assert df.loc[1, "reasons"] == "grammar;repetition"
    assert df.loc[df["annotator"] == "a1", "order"].tolist() == [1, 2, 3, 4, 5]
    # Hand-worked: 87 points over 27 rows, 12 exact, signed distances sum to 23.
    assert df["points"].sum() == 87
    assert (df["guess"] == df["boundary"]).sum() == 12
    assert (df["guess"] - df["boundary"]).sum() == 23
    # The one stored value that disagrees with the rule (5 instead of 2) is counted, not used.
    assert cleaning.points_mismatch(df) == 1
    row = df[(df.annotator == "a4") & (df.points_stored == 5)]
    assert row["points"].tolist() == [2]


def test_load_rejects_what_it_does_not_know(tmp_path):
    bad = tmp_path / "x.txt"
    bad.write_text("hello")
    with pytest.raises(LoadError):
        load(bad)
    with pytest.raises(LoadError):
        load(tmp_path / "missing")
    wrong = pd.read_csv(ROFT)
    wrong.loc[0, "true_boundary_index"] = 12
    wrong.to_csv(tmp_path / "wrong.csv", index=False)
    with pytest.raises(LoadError, match="outside"):
        load(tmp_path / "wrong.csv")


def test_selection_filters():
    df = load(ROFT)
    assert set(apply_selection(df, categories=["news"])["category"]) == {"news"}
    assert len(apply_selection(df, systems=["human"])) == 5
    assert len(apply_selection(df, since="2021-02-07")) == 5 + 2  # a5 and a6


def test_histogram_and_random_baseline_by_hand():
    # boundaries 4, 4, 10; guesses 4 (d 0), 6 (d 2), 9 (d -1)
    df = frame([("a", "x", 4, 4), ("b", "x", 4, 6), ("a", "y", 10, 9)])
    hist = boundary.histogram(df).set_index("distance")
    assert hist.loc[0, "observed"] == 1 and hist.loc[2, "observed"] == 1
    assert hist.loc[-1, "observed"] == 1 and hist["observed"].sum() == 3
    # Random: b=4 twice → distances -3..6 each 2/10; b=10 → -9..0 each 1/10.
    assert hist.loc[-3, "random"] == pytest.approx(0.3)
    assert hist.loc[0, "random"] == pytest.approx(0.3)
    assert hist.loc[6, "random"] == pytest.approx(0.2)
    assert hist.loc[-9, "random"] == pytest.approx(0.1)
    assert hist["random"].sum() == pytest.approx(3)
    base = boundary.random_baseline(df)
    assert base["exact_rate"] == pytest.approx(0.1)
    # b=4: points for g=4..9 are 5,4,3,2,1,0 → 15/10; b=10: only g=10 → 5/10.
    assert base["mean_points"] == pytest.approx((1.5 * 2 + 0.5) / 3)
    assert base["too_early"] == pytest.approx((0.3 * 2 + 0.9) / 3)


def test_statistics_with_bootstrap_intervals():
    df = frame([("a", "x", 4, 4), ("a", "y", 4, 5), ("b", "x", 4, 3), ("b", "y", 4, 4)])
    stats = boundary.statistics(df, n_boot=500, seed=1)
    assert stats.loc["exact_rate", "estimate"] == pytest.approx(0.5)
    assert stats.loc["mean_points", "estimate"] == pytest.approx((5 + 4 + 0 + 5) / 4)
    assert stats.loc["mean_signed_distance", "estimate"] == pytest.approx(0)
    assert stats.loc["too_early", "estimate"] == pytest.approx(0.25)
    # Both annotators have exact rate 0.5: every resample gives 0.5.
    assert stats.loc["exact_rate", ["ci_low", "ci_high"]].tolist() == pytest.approx([0.5, 0.5])
    # Annotator means 4.5 and 2.5: resampled means lie between them, and cover both ends.
    assert stats.loc["mean_points", "ci_low"] == pytest.approx(2.5)
    assert stats.loc["mean_points", "ci_high"] == pytest.approx(4.5)


def test_cleaning_filters_each_report_their_effect():
    rows = [("fast", f"e{i}", 3, 3) for i in range(3)]
    rows += [("liner", f"e{i}", 3 + i % 2, 10) for i in range(4)]
    rows += [("good", f"e{i}", 3, 3 + i) for i in range(4)]
    rows += [("good", "e0", 3, 9)]  # a duplicate pair
    rows += [("cheat", "e0", 3, 3), ("cheat", "check", 10, 5)]
    df = frame(rows)
    df["seconds"] = np.where(df["annotator"] == "fast", 2.0, 30.0)
    check = df["example"] == "check"
    df.loc[check, "attention_check"] = True
    df.loc[check, "attention_passed"] = 0.0
    assert cleaning.duplicate_pairs(df) == 1
    result = cleaning.clean(df, cleaning.FilterSettings(min_median_seconds=5, straight_line_k=4))
    steps = result.steps.set_index("step")
    assert steps.loc["duplicates", "rows_removed"] == 1
    assert steps.loc["attention", "annotators_removed"] == 1
    assert steps.loc["speed", "rows_removed"] == 3
    assert steps.loc["straight_lining", "rows_removed"] == 4
    assert set(result.frame["annotator"]) == {"good"} and len(result.frame) == 4
    assert result.frame["guess"].tolist() == [3, 4, 5, 6]  # the first answer to e0 is kept


def test_a_check_answered_before_its_instruction_is_void_not_failed():
    # An instruction at sentence 6 of a 10-sentence text: flagging sentence 3 came before it
    # was shown (void); flagging sentence 8 went past it (failed); an all-human check (boundary
    # N) flagged anywhere is failed.
    df = frame([("early", "c1", 6, 3), ("late", "c1", 6, 8), ("human", "c2", 10, 2),
                ("early", "e1", 4, 4), ("late", "e1", 4, 4), ("human", "e1", 4, 4)])  # fmt: skip
    check = df["example"].str.startswith("c")
    df.loc[check, "attention_check"] = True
    df.loc[check, "attention_passed"] = 0.0
    assert cleaning.void_checks(df).tolist() == [True, False, False, False, False, False]
    assert sorted(cleaning.failed_attention(df)) == ["human", "late"]
    kept = cleaning.clean(df, cleaning.FilterSettings(min_median_seconds=0)).frame
    assert kept["annotator"].tolist() == ["early"]
