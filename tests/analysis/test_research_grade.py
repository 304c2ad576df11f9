"""What a reviewer asks for: the comment taxonomy on held-out player language, cleaning that
explains itself, honest datasheets, clustered inference, agreement with intervals and chance,
an item-response model, and the zero-shot detector beside the players on the same texts."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import krippendorff
import numpy as np
import pandas as pd
import pytest

from analysis import agreement, cleaning, detect, heds, inference, irt, taxonomy
from analysis.__main__ import main
from analysis.load import load
from analysis.report import ReportSettings, build_report
from tests.analysis.test_load_and_boundary import frame

ROFT = Path(__file__).parent / "data" / "roft_sample.csv"


# -- the comment taxonomy ---------------------------------------------------------------------


def test_held_out_split_is_classified_strictly_at_least_seven_in_ten():
    rows = taxonomy.read_development_set()
    test = [r for r in rows if r.split == "test"]
    assert len(rows) >= 300 and len(test) >= 100
    assert not {r.text for r in test} & {r.text for r in rows if r.split == "train"}
    assert sum(len(r.labels) > 1 for r in rows) >= 40  # several reasons in one comment
    scores = taxonomy.evaluate("test")
    assert scores["strict_accuracy"] >= 0.7
    assert scores["coverage"] >= 0.9


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("repitition of the same words", ("repetition",)),
        ("un-grammatical", ("grammar",)),
        ("commen-sense error, a cat cant drive", ("common_sense",)),
        ("doesnt follow at all", ("irrelevant",)),
        ("the story suddenly changed topics", ("irrelevant",)),
        ("steps out of order", ("common_sense",)),
        ("who is 'she'??", ("coreference",)),
        ("weird wording", ("grammar",)),
        ("weird topic change", ("irrelevant",)),
        ("not repetitive, just off topic", ("irrelevant",)),
        ("the grammar is fine but it contradicts sentence 2", ("contradicts_sentence",)),
        ("repeats itself and has typos", ("grammar", "repetition")),
    ],
)
def test_player_language(text, labels):
    found = taxonomy.classify_comment(text)
    assert found.labels == labels, found
    assert found.decided_by != "none"


def test_normalise_fixes_hyphens_apostrophes_and_misspelt_cues():
    assert taxonomy.normalise("Doesn't make SENSE!!!") == "doesnt make sense!!!"
    assert taxonomy.normalise("un-grammatical / irelevant") == "un grammatical irrelevant"
    assert taxonomy.normalise("contridicts") == "contradicts"
    assert taxonomy.normalise("cliché") == "cliche"


# -- cleaning ---------------------------------------------------------------------------------


def test_duplicates_are_told_apart_and_absent_filters_say_so():
    df = frame([("a", "x", 3, 3), ("a", "x", 3, 3), ("a", "x", 3, 5), ("b", "x", 3, 4)])
    df["date"] = pd.to_datetime(
        [
            "2026-01-01 10:00:00",
            "2026-01-01 10:00:04",
            "2026-01-02 09:00:00",
            "2026-01-01 11:00:00",
        ],
        utc=True,
    )
    kinds = cleaning.duplicate_kinds(df, 30).tolist()
    assert kinds == ["", "double submission", "replay", ""]
    result = cleaning.clean(df)
    steps = result.steps.set_index("step")
    assert result.duplicates == {"double_submissions": 1, "replays": 1}
    assert steps.loc["duplicates", "rows_removed"] == 2
    assert "1 double submission(s)" in steps.loc["duplicates", "why"]
    for step in ("attention", "speed"):  # no checks and no times in this input
        assert not steps.loc[step, "applicable"]
        assert steps.loc[step, "why"].startswith("not applicable")
        assert steps.loc[step, "rows_removed"] == 0


def test_mismatches_are_broken_down_and_impossible_values_listed():
    df = frame([("a", "h", 10, 10), ("a", "m", 8, 10), ("b", "m", 8, 8), ("c", "m", 8, 9)])
    df["points_stored"] = [0, 5, 1e9, 3]  # old site: 0 for an all-human text; etc.
    table = cleaning.mismatch_table(df).set_index("cause")
    assert table.loc[cleaning.HUMAN_TEXT_ZERO, "rows"] == 1
    assert table.loc[cleaning.ALL_HUMAN_ON_MACHINE, "rows"] == 1
    assert table.loc[cleaning.IMPOSSIBLE, "rows"] == 1
    assert table.loc[cleaning.OTHER_CAUSE, "rows"] == 1
    impossible = cleaning.impossible_points(df)
    assert impossible["points_stored"].tolist() == [1e9] and impossible["points"].tolist() == [5]


# -- datasheet --------------------------------------------------------------------------------


def test_heds_asserts_nothing_the_input_cannot_know():
    df = load(ROFT)
    cleaned = cleaning.clean(df)
    sheet = heds.datasheet(df, cleaned.frame, cleaned.steps, {}, {}, {"input_sha256": "x"})
    text = json.dumps(sheet)
    for claim in ("volunteer", "unpaid", "time limits: none", "consented"):
        assert claim not in text.lower()
    assert sheet["evaluators"]["paid"].startswith(heds.UNKNOWN)
    assert sheet["design"]["time_limits"].startswith(heds.UNKNOWN)
    assert sheet["ethics"]["pseudonymised"].startswith(heds.UNKNOWN)
    assert {"evaluators.paid", "design.time_limits", "ethics.consent"} <= set(sheet["to_fill"])
    site = {"source": "roft-site", "private": False, "task_instruction": "Read and decide."}
    filled = heds.datasheet(df, cleaned.frame, cleaned.steps, {}, site)
    assert filled["design"]["time_limits"].startswith("none")
    assert filled["ethics"]["pseudonymised"] is True
    assert filled["criterion"]["verbatim_instruction"] == "Read and decide."
    assert "design.time_limits" not in filled["to_fill"]


# -- inference --------------------------------------------------------------------------------


def synthetic(n_annotators=60, n_texts=80, rows=4000, seed=1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_annotators, rows)
    t = rng.integers(0, n_texts, rows)
    skill = rng.normal(0, 1.2, n_annotators)
    difficulty = rng.normal(0, 1.0, n_texts)
    p = 1 / (1 + np.exp(-(-1.0 + skill[a] - difficulty[t])))
    exact = rng.random(rows) < p
    boundary = 1 + t % 9
    guess = np.where(exact, boundary, np.minimum(boundary + 1 + rng.integers(0, 3, rows), 10))
    out = frame(
        [(f"a{x}", f"t{y}", b, g) for x, y, b, g in zip(a, t, boundary, guess, strict=True)]
    )
    out["system"] = np.where(t % 2, "big", "small")
    out["category"] = "news"
    return out, skill, difficulty


def test_two_way_clustered_errors_match_statsmodels():
    sm = pytest.importorskip("statsmodels.api")
    df, _, _ = synthetic()
    codes = (df["system"] == "big").to_numpy(dtype=float)
    x = np.column_stack([np.ones(len(df)), codes])
    ours = inference.clustered_ols(df["points"], x, ["c", "big"], df["annotator"], df["example"])
    groups = np.column_stack([pd.factorize(df["annotator"])[0], pd.factorize(df["example"])[0]])
    theirs = sm.OLS(df["points"].to_numpy(float), x).fit(
        cov_type="cluster", cov_kwds={"groups": groups}
    )
    assert ours.coef == pytest.approx(theirs.params)
    assert ours.se == pytest.approx(theirs.bse, rel=1e-6)
    # Clustering widens the interval compared with rows taken as independent.
    naive = sm.OLS(df["points"].to_numpy(float), x).fit()
    assert ours.se[1] > naive.bse[1]
    # The factor test's Wald statistic uses the whole clustered covariance.
    df["level"] = np.where(df["example"].str[1:].astype(int) % 3 == 0, "c", df["system"])
    test = inference.factor_test(df, "level")
    levels = sorted(df["level"].unique())
    dummies = np.column_stack([np.ones(len(df))] + [(df["level"] == v) for v in levels[1:]])
    full = sm.OLS(df["points"].to_numpy(float), dummies.astype(float)).fit(
        cov_type="cluster", cov_kwds={"groups": groups}
    )
    wald = full.wald_test(np.eye(3)[1:], use_f=False, scalar=True)
    assert test["statistic"] == pytest.approx(float(wald.statistic), rel=1e-6)


def test_level_means_interval_resamples_annotators():
    df = frame([("a", "x", 3, 3), ("a", "y", 3, 3), ("b", "x", 3, 9), ("b", "y", 3, 9)])
    df["level"] = "one"
    table = inference.level_means(df, "level", n_boot=300).iloc[0]
    assert table["mean"] == 2.5 and table["annotators"] == 2
    assert table["ci_low"] == 0 and table["ci_high"] == 5  # both annotators drawn twice


def test_item_response_model_recovers_skill_and_difficulty():
    df, skill, difficulty = synthetic(rows=8000)
    fit = irt.fit(df)
    got = fit.annotators.set_index("annotator")["skill"]
    truth = pd.Series(skill, index=[f"a{i}" for i in range(len(skill))]).reindex(got.index)
    assert np.corrcoef(got, truth)[0, 1] > 0.8
    hard = fit.texts.set_index("example")["difficulty"]
    true_hard = pd.Series(difficulty, index=[f"t{i}" for i in range(len(difficulty))])
    assert np.corrcoef(hard, true_hard.reindex(hard.index))[0, 1] > 0.6
    assert fit.converged and {"skill_se", "rounds"} <= set(fit.annotators.columns)


# -- agreement --------------------------------------------------------------------------------


def test_alpha_from_counts_matches_krippendorff_and_has_an_interval():
    rng = np.random.default_rng(3)
    rows = [(f"a{i}", f"u{i % 40}", 1, int(rng.integers(1, 6))) for i in range(200)]
    df = frame(rows)
    counts, values = agreement.value_counts_matrix(df)
    for level in ("interval", "nominal"):
        expected = krippendorff.alpha(
            value_counts=counts, value_domain=values, level_of_measurement=level
        )
        assert agreement.alpha_from_counts(counts, values, level) == pytest.approx(expected)
    result = agreement.alpha_interval(df, n_boot=300)
    assert result["ci_low"] <= result["alpha"] <= result["ci_high"]


def test_tolerance_curve_by_hand_with_chance_levels():
    # u1 {1,1}, u2 {1,2}, u3 {2,4}: 3 pairs; exact 1; within 1: 2; within 2: 3.
    df = frame([("a", "u1", 1, 1), ("b", "u1", 1, 1), ("a", "u2", 1, 1), ("b", "u2", 1, 2)])
    df = pd.concat([df, frame([("a", "u3", 1, 2), ("b", "u3", 1, 4)])], ignore_index=True)
    curve = agreement.tolerance_curve(df, n_boot=0).set_index("tolerance")
    assert curve["rate"].tolist() == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert curve["chance_uniform"].tolist() == pytest.approx([0.1, 0.28, 0.44])  # N = 10
    shares = np.array([3, 2, 1]) / 6  # guesses 1, 2, 4
    assert curve.loc[0, "chance_marginal"] == pytest.approx((shares**2).sum())


# -- the zero-shot detector ---------------------------------------------------------------------


def test_change_point_rule():
    # gap 5.025, sd 2.69 over all eight, sqrt(1/4 + 1/4): z = 2.64.
    assert detect.change_point([0, 0, 0, 0, 5, 5, 5, 5.1]) == (4, pytest.approx(2.64, abs=0.01))
    assert detect.change_point([1, 1.1, 0.9, 1, 1.05, 0.95])[0] == 6  # nothing stands out
    assert detect.change_point([0, 0, 0, 0, 5, 5, 5, 5.1], threshold=1000)[0] == 8


def test_detector_beside_players_on_the_same_texts(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "detect"
    args = ["detect", str(ROFT), "--out", str(out), "--model", str(tiny_model_dir)]
    assert main([*args, "--no-progress", "--threshold", "1.0"]) == 0
    found = pd.read_csv(out / "detections.csv")
    players = load(ROFT)
    assert set(found["example"]) == set(players["example"])  # every text, scored once
    for column in ("logrank_offline", "logrank_online", "curvature_offline", "curvature_online"):
        assert found[column].between(1, 10).all()
    for column in ("loglik_sentences", "logrank_sentences", "curvature_sentences"):
        assert all(len(json.loads(v)) == 10 for v in found[column])
    summary = json.loads((out / "detect_summary.json").read_text())
    assert summary["texts"] == 5 and summary["annotations"] == len(cleaning.clean(players).frame)
    assert summary["model"]["weights_sha256"]
    table = pd.read_csv(out / "comparison.csv")
    per_text = table[(table.weighting == "per text") & (table.who == "detector offline")]
    machine = found[found["boundary"] < 10]
    expected = [
        max(min(5, 5 - (g - b)), 0) if g >= b else 0
        for g, b in zip(machine.logrank_offline, machine.boundary, strict=True)
    ]
    row = per_text[(per_text.kind == "machine texts") & per_text.model.str.startswith("logrank")]
    assert row["points"].item() == pytest.approx(np.mean(expected))
    assert (out / "detector_vs_players.png").stat().st_size > 5000
    # The report adds the comparison when given the detections.
    report = tmp_path / "report"
    settings = ReportSettings(bootstrap=50, detections=str(out / "detections.csv"))
    summary = build_report(ROFT, report, settings)
    assert summary["detector"]["texts"] == 5
    assert "## 9. Machine baseline on the same texts" in (report / "report.md").read_text()


# -- the report as a whole --------------------------------------------------------------------


def test_report_states_provenance_and_separates_all_human_texts(tmp_path):
    summary = build_report(ROFT, tmp_path, ReportSettings(bootstrap=100, straight_line_k=5))
    prov = summary["provenance"]
    assert prov["input_sha256"] == hashlib.sha256(ROFT.read_bytes()).hexdigest()
    assert prov["code_version"].startswith("analysis ") and prov["date"].startswith("20")
    assert "SHA-256" in (tmp_path / "report.md").read_text()
    machine = summary["statistics_machine_texts"]["exact_rate"]
    human = summary["statistics_all_human_texts"]["exact_rate"]
    assert machine["ci_low"] <= machine["estimate"] <= machine["ci_high"]
    assert human["estimate"] is not None
    hist = pd.read_csv(tmp_path / "distance_histogram.csv")
    assert hist.loc[hist["distance"] == -9, "observed"].sum() == 0  # no all-human spike
    assert (tmp_path / "comments.csv").exists() and (tmp_path / "annotator_skill.csv").exists()
    heldout = summary["comments"]["taxonomy_heldout"]
    assert heldout["split"] == "test" and heldout["n"] >= 100
    report = (tmp_path / "report.md").read_text()
    # This fixture has no free-text explanations: no comment classes, so no taxonomy figure at
    # all (the caveat that goes with one: tests/analysis/test_report_claims.py).
    assert summary["comments"]["non_empty"] == 0
    assert "The input has no free-text explanations" in report
    assert "held-out explanations" not in report
    assert "strict accuracy" not in report
    from PIL import Image

    for name in summary["figures"]:
        with Image.open(tmp_path / name) as image:
            assert round(image.info["dpi"][0]) == 150, name


def test_free_text_reasons_are_mapped_to_reason_names(tmp_path):
    from analysis import comments

    raw = pd.Series(["irrelevant;grammar", "the topic changes", "", "it repeats itself"])
    assert comments.canonical_reasons(raw).tolist() == [
        "irrelevant;grammar",
        "irrelevant",
        "",
        "repetition",
    ]
    rows = pd.read_csv(ROFT)
    rows["reason"] = "the sentence has nothing to do with the topic"
    rows.to_csv(tmp_path / "free.csv", index=False)
    build_report(tmp_path / "free.csv", tmp_path / "out", ReportSettings(bootstrap=20))
    shares = pd.read_csv(tmp_path / "out" / "reasons_by_category.csv")
    irrelevant = shares[shares["value"] == "irrelevant"]
    assert (irrelevant["mean"] == 1.0).all()  # the figure is not empty
