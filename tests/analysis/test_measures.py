"""Agreement, learning, skill range, factors, reasons and comments on hand-made frames."""

from __future__ import annotations

import pandas as pd
import pytest

from analysis import agreement, comments, factors, learning
from tests.analysis.test_load_and_boundary import frame


def guesses(rows: list[tuple[str, int]]) -> pd.DataFrame:
    """(example, guess) rows, each by a different annotator."""
    return frame([(f"a{i}", ex, 1, g) for i, (ex, g) in enumerate(rows)])


def test_alpha_and_pairs_by_hand():
    # u1 {1,1}, u2 {1,2}, u3 {2,2}: Do = 2/6, De = 2*3*3/30 = 0.6 → alpha = 1 - (1/3)/0.6 = 4/9.
    df = guesses([("u1", 1), ("u1", 1), ("u2", 1), ("u2", 2), ("u3", 2), ("u3", 2)])
    result = agreement.agreement(df)
    assert result["pairs"] == 3
    assert result["pair_exact_rate"] == pytest.approx(2 / 3)
    assert result["pair_within1_rate"] == pytest.approx(1.0)
    assert result["krippendorff_alpha_interval"] == pytest.approx(4 / 9)
    assert result["krippendorff_alpha_nominal"] == pytest.approx(4 / 9)


def test_interval_and_nominal_alpha_differ_by_hand():
    # u1 {1,1}, u2 {1,2}, u3 {3,3}: n1=3, n2=1, n3=2, n=6, Do = 2/6 (one pair 1-2, both ways).
    # nominal De = 2(3*1 + 3*2 + 1*2)/30 = 22/30 → 6/11;
    # interval De = 2(3*1*1 + 3*2*4 + 1*2*1)/30 = 58/30 → 24/29.
    df = guesses([("u1", 1), ("u1", 1), ("u2", 1), ("u2", 2), ("u3", 3), ("u3", 3)])
    result = agreement.agreement(df)
    assert result["krippendorff_alpha_nominal"] == pytest.approx(6 / 11)
    assert result["krippendorff_alpha_interval"] == pytest.approx(24 / 29)
    assert result["pair_within1_rate"] == pytest.approx(1.0)  # exact, adjacent, exact


def test_agreement_ignores_single_annotations_and_counts_pairs():
    # x: guesses 3,3,4,6 → C(4,2)=6 pairs, exact 1, adjacent 3-4 twice → within1 3; y alone.
    df = guesses([("x", 3), ("x", 3), ("x", 4), ("x", 6), ("y", 2)])
    result = agreement.agreement(df)
    assert result["examples_with_2plus"] == 1 and result["pairs"] == 6
    assert result["pair_exact_rate"] == pytest.approx(1 / 6)
    assert result["pair_within1_rate"] == pytest.approx(3 / 6)
    assert agreement.agreement(guesses([("x", 1)]))["pair_exact_rate"] is None


def test_learning_trends_by_hand():
    # "up" improves every round (points 0..5: rho 1); "down" gets worse (rho -1); "flat" has no rho.
    up = [("up", f"e{i}", 5, 10 - i) for i in range(6)]  # guesses 10..5 → points 0..5
    down = [("down", f"e{i}", 5, 5 + i) for i in range(6)]  # points 5..0
    flat = [("flat", f"e{i}", 5, 5) for i in range(6)]
    df = frame(up + down + flat)
    trends = learning.annotator_trends(df, min_rounds=6).set_index("annotator")
    assert trends.loc["up", "rho"] == pytest.approx(1.0)
    assert trends.loc["down", "rho"] == pytest.approx(-1.0)
    assert pd.isna(trends.loc["flat", "rho"])
    assert learning.annotator_trends(df, min_rounds=7).empty
    summary = learning.trend_summary(df, min_rounds=6)
    assert summary["annotators"] == 3 and summary["annotators_with_rho"] == 2
    assert summary["mean_rho"] == pytest.approx(0.0)
    by_order = learning.by_order(df, cap=4).set_index("n")
    assert by_order.loc[1, "mean_points"] == pytest.approx((0 + 5 + 5) / 3)
    assert by_order.loc[4, "rows"] == 9  # rounds 4, 5 and 6 pooled
    # Sessions come from the data, never from cutting rows: these rows are in no study.
    assert learning.by_session_position(df, session_length=3).empty
    studied = df.assign(study=["s"] * 6 + [""] * 12)  # "up" played a study of six rounds
    session = learning.by_session_position(studied, session_length=4).set_index("position")
    assert session["rows"].tolist() == [1, 1, 1, 3]  # positions 4, 5 and 6 pooled into 4
    assert session.loc[1, "mean_points"] == 0 and session.loc[4, "mean_points"] == 4


def test_skill_range_top_and_bottom_five_percent():
    rows = []
    for a in range(40):  # annotator a scores a % 6 on each of its 2 rounds
        pts = a % 6
        rows += [(f"n{a}", f"e{i}", 5, 5 + (5 - pts)) for i in range(2)]
    rows += [("one-round", "e0", 5, 5)]
    df = frame(rows)
    result = learning.skill_range(df, min_rounds=2)
    assert result["annotators"] == 40 and result["k"] == 2  # ceil(0.05 * 40)
    assert result["top_mean"] == pytest.approx(5.0) and result["bottom_mean"] == pytest.approx(0.0)


def test_factor_tables_with_intervals_baselines_and_clustered_tests():
    df = frame([("a", "x", 3, 3), ("b", "x", 3, 3), ("a", "y", 3, 9), ("b", "y", 3, 9)])
    df = pd.concat([df, frame([("a", "h", 10, 10)])], ignore_index=True)  # all human: apart
    df["system"] = ["s1", "s1", "s2", "s2", "human"]
    df["category"] = "news"
    df["p"] = [0.1, 0.1, float("nan"), 0.95, float("nan")]
    out = factors.by_factor(df, n_boot=200)
    table = out["system"]["table"].set_index("system")
    assert "human" not in table.index  # all-human texts are reported apart
    assert table.loc["s1", "mean_points"] == 5 and table.loc["s2", "mean_points"] == 0
    assert table.loc["s1", "points_ci_low"] <= 5 <= table.loc["s1", "points_ci_high"]
    # Random guessing on boundary 3 of 10: guesses 3..7 score 5..1, the others 0 → 1.5.
    assert table.loc["s1", "random_points"] == pytest.approx(1.5)
    assert table.loc["s1", "always_human_points"] == 0
    test = out["system"]["test"]
    assert test["method"].startswith("permutation over texts") and test["texts"] == 2
    # Two texts: the only other labelling swaps them, which gives the same statistic.
    assert test["p_value"] == 1.0
    assert test["clustered"]["test"].startswith("Wald")
    assert test["clustered"]["few"]  # two annotators, two texts: flagged, with the reason
    assert "fewer than 42 clusters" in test["clustered"]["warnings"][0]
    assert out["category"]["test"]["p_value"] is None  # one level: nothing to test
    assert factors.p_bin(df["p"]).tolist()[:4] == ["0.0-0.2", "0.0-0.2", "unknown", "0.8-1.0"]


def test_reason_shares_and_points():
    df = frame([("a", "x", 3, 3), ("b", "x", 3, 5), ("c", "x", 3, 9)])
    df["reasons"] = ["grammar", "grammar;irrelevant", ""]
    df["system"] = ["s", "s", "t"]
    shares = comments.reason_shares(df, "system").set_index("system")
    assert shares.loc["s", "grammar"] == 1.0 and shares.loc["s", "irrelevant"] == 0.5
    assert shares.loc["t", "grammar"] == 0.0 and shares.loc["s", "rows"] == 2
    pts = comments.reason_points(df).set_index("reason")
    assert pts.loc["grammar", "rounds"] == 2 and pts.loc["grammar", "mean_points"] == 4.0
    assert pd.isna(pts.loc["generic", "mean_points"])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("It repeats the same phrase twice", "repetition"),
        ("bad punctuation and a typo", "grammar"),
        ("This contradicts the first sentence", "contradicts_sentence"),
        ("The date is factually wrong", "contradicts_knowledge"),
        ("A fish cannot climb stairs, makes no sense", "common_sense"),
        ("Suddenly the pronoun refers to someone else", "coreference"),
        ("completely off-topic", "irrelevant"),
        ("very vague and generic", "generic"),
        ("I just had a feeling", "not_a_reason"),
        ("qwxz bnmv", "not_a_reason"),  # no English word: no reason given
    ],
)
def test_rule_classifier(text, reason):
    assert comments.classify(text) == reason


def test_explanations_are_deduplicated_and_clustered():
    texts = ["It repeats itself!", "it repeats itself", "It repeats itself."]  # exact after norm
    texts += ["the word salad about the weather feels odd today"] * 2
    texts += [
        "the word salad about the weather feels odd today really",  # near-duplicate
        "",
    ]
    texts += [f"banana phone purple {w}" for w in ("one", "two", "three")]
    texts += [f"zebra kettle lamp {w}" for w in ("one", "two", "three")]
    df = frame([(f"a{i}", f"e{i}", 3, 3) for i in range(len(texts))])
    df["explanation"] = texts
    report = comments.explanation_report(df, max_comments=1000, n_clusters=2)
    assert report.total == 13 and report.non_empty == 12
    assert report.unique_exact == 9  # 3 + 1 + 1 + 3 + 3 normalised texts minus 2 exact copies
    assert report.unique_near == 8
    classes = report.classes.set_index("reason_type")["comments"]
    assert classes["repetition"] == 1
    table = report.table.set_index("text")
    assert table.loc["It repeats itself!", "rows"] == 3  # three rows wrote it
    assert table.loc["It repeats itself!", "labels"] == "repetition"
    assert table.loc["It repeats itself!", "decided_by"].startswith("rule: repetition")
    assert classes.sum() >= report.unique_near
    # no cue and a model unsure of them: "unclassified", clustered ("word salad" is a grammar
    # cue; a bare "... one" reads like "this one", a comment that gives no reason)
    assert classes["unclassified"] >= 4
    assert len(report.clusters) == 2
    assert 0 < sum(c["size"] for c in report.clusters) <= classes["unclassified"]
    sampled = comments.explanation_report(df, max_comments=4)
    assert sampled.sampled and sampled.sample_size == 4 and "sample" in sampled.note
