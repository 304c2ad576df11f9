"""Inference a statistician signs, on a roft.csv-shaped set built like the data that broke the old
tests (tests/analysis/data/make_confounded.py): 25 players, about 150 annotations on texts with a
machine part, each system wrote one category, no sessions, no round numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from analysis import factors, inference, learning
from analysis.__main__ import main
from analysis.load import load
from analysis.report import ReportSettings, build_report
from tests.analysis.test_load_and_boundary import frame

CONFOUNDED = Path(__file__).parent / "data" / "roft_confounded.csv"


@pytest.fixture(scope="module")
def rows() -> pd.DataFrame:
    return inference.with_codes(load(CONFOUNDED))


@pytest.fixture(scope="module")
def by_factor(rows) -> dict:
    return factors.by_factor(rows, n_boot=100)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[dict, Path]:
    out = tmp_path_factory.mktemp("report")
    return build_report(CONFOUNDED, out, ReportSettings(bootstrap=100, min_rounds=5)), out


def test_fixture_is_the_shape_that_broke_the_old_tests(rows):
    machine = rows[rows["boundary"] < rows["n_sentences"]]
    assert machine["annotator"].nunique() == 25 and 140 <= len(machine) <= 200
    pairs = machine[["system", "category"]].drop_duplicates()
    assert len(pairs) == 3 and pairs["system"].is_unique  # each system wrote one category
    assert (rows["study"] == "").all() and (rows["source"] == "roft-csv").all()


def test_boundary_effect_is_not_fifty_orders_of_magnitude_too_significant(rows, by_factor):
    # Clipping the non-PSD two-way covariance (the old code) gave chi2 = 368, p = 1e-74 here.
    machine = rows[rows["boundary"] < rows["n_sentences"]]
    clustered = inference.factor_test(machine, "boundary")
    assert clustered["covariance"].startswith("conservative")  # two-way was not PSD: said so
    assert clustered["few"] and "42 clusters" in clustered["warnings"][-1]
    assert clustered["p_value"] is None or clustered["p_value"] > 0.01
    test = by_factor["boundary"]["test"]
    # The permutation test over texts and the crossed random-effects model agree: no effect.
    assert test["p_value"] > 0.2 and test["mixed_p_value"] > 0.2
    assert abs(np.log(test["p_value"] / test["mixed_p_value"])) < np.log(3)
    assert test["mixed"]["test"]["df"] == machine["boundary"].nunique() - 1


def test_mixed_model_against_statsmodels_formula_and_permutation(rows, by_factor):
    from statsmodels.regression.mixed_linear_model import MixedLM

    machine = rows[rows["boundary"] < rows["n_sentences"]].copy()
    machine["g"] = 0
    vc = {"a": "0 + C(annotator)", "t": "0 + C(example)"}
    full = MixedLM.from_formula("points ~ C(system)", machine, groups="g", vc_formula=vc)
    full = full.fit(reml=True, method=["powell", "lbfgs"])  # another optimiser than ours
    assert full.converged and _all_converged(by_factor)
    test = by_factor["system"]["test"]
    effects = {e["term"]: e for e in test["effects"]}
    # lme4 (or, without R, statsmodels itself) finds the same REML estimates and errors.
    assert effects["gpt2"]["estimate"] == pytest.approx(full.fe_params["C(system)[T.gpt2]"], 1e-3)
    assert effects["gpt2"]["se"] == pytest.approx(full.bse_fe["C(system)[T.gpt2]"], rel=0.02)
    # A second method, no model: the permutation test over texts says the same thing.
    assert test["p_value"] > 0.05 and test["mixed_p_value"] > 0.05
    assert test["effects_from"].startswith("mixed model (")


def _all_converged(by_factor) -> bool:
    return all(e["test"]["mixed"]["converged"] for e in by_factor.values() if "aliases" in e)


def test_model_names_its_library_and_reports_its_warnings(rows, by_factor):
    model = by_factor["boundary"]["test"]["mixed"]
    assert model["library"].startswith(("R ", "statsmodels"))
    assert isinstance(model["warnings"], list)


def test_confounded_factors_are_one_contrast_with_a_warning(by_factor, report):
    assert by_factor["category"]["aliased_with"] == "system"
    assert by_factor["category"]["test"]["p_value"] is None  # not tested twice
    system = by_factor["system"]
    assert system["aliases"] == ["system", "category"]
    assert "cannot be attributed" in system["test"]["notes"][0]
    # Holm counts the contrast once: three tests (system & category, p, boundary).
    tested = [n for n, e in by_factor.items() if e["test"].get("p_holm") is not None]
    assert sorted(tested) == ["boundary", "p", "system"]
    p = {n: by_factor[n]["test"]["p_value"] for n in tested}
    smallest = min(p, key=p.get)
    assert by_factor[smallest]["test"]["p_holm"] == pytest.approx(min(1, 3 * p[smallest]))
    from analysis.sections import factors as section

    assert [name for name, _ in section.shown(by_factor)] == ["system", "p", "boundary"]  # panels
    text = (report[1] / "report.md").read_text()
    assert text.count("**system & category (one split)**") == 1
    assert "**category**" not in text and "cannot be attributed" in text


def test_clustered_fallback_equals_the_sum_of_one_way_covariances(rows):
    sm = pytest.importorskip("statsmodels.api")
    machine = rows[rows["boundary"] < rows["n_sentences"]]
    x, levels = inference.dummies(machine["boundary"])
    y = machine["points"].to_numpy(float)
    fit = inference.clustered_ols(y, x, levels, machine["annotator"], machine["example"])
    assert fit.covariance.startswith("conservative")
    one_way = [
        sm.OLS(y, x).fit(cov_type="cluster", cov_kwds={"groups": pd.factorize(machine[c])[0]})
        for c in ("annotator", "example")
    ]
    expected = one_way[0].cov_params() + one_way[1].cov_params()
    assert fit.cov == pytest.approx(np.asarray(expected), rel=1e-6, abs=1e-12)
    assert np.linalg.eigvalsh(fit.cov).min() >= -1e-12
    assert fit.df == 24  # 25 annotators: t and F with G - 1 degrees of freedom


def test_wald_declines_what_few_clusters_cannot_identify():
    rng = np.random.default_rng(1)
    n = 60
    df = pd.DataFrame(
        {
            "annotator": rng.integers(0, 4, n).astype(str),  # 4 annotators: 3 df at most
            "example": rng.integers(0, 30, n).astype(str),
            "points": rng.integers(0, 6, n).astype(float),
        }
    )
    df["level"] = (df["example"].astype(int) % 6).astype(str)  # 5 contrasts
    test = inference.factor_test(df, "level")
    assert test["p_value"] is None and not test["identified"] and "not identified" in test["why"]


def test_permutation_test_by_hand():
    # Four texts, one annotation each, by one annotator: values 0, 1, 4, 5 and levels a, a, b, b.
    # Of the 6 ways to give two texts "a", {0,1} and {4,5} are the most extreme: p = 2/6.
    df = frame([("x", f"t{i}", 5, 5) for i in range(4)])
    df["points"] = [0.0, 1.0, 4.0, 5.0]
    df["level"] = ["a", "a", "b", "b"]
    test = inference.permutation_test(df, "level", n_perm=4000, seed=1)
    assert test["p_value"] == pytest.approx(1 / 3, abs=0.03)
    numeric = inference.permutation_test(df.assign(level=[1, 2, 3, 4]), "level", numeric=True)
    assert numeric["p_value"] == pytest.approx(2 / 24, abs=0.02)  # only 1234 and 4321


def test_holm_by_hand():
    adjusted = inference.holm({"a": 0.01, "b": 0.04, "c": 0.03, "d": None})
    assert adjusted == {"a": 0.03, "b": 0.06, "c": 0.06, "d": None}


def test_no_sessions_are_invented(report):
    summary, out = report
    clustered = summary["learning"]["clustered"]
    assert clustered["within_session"] is None and clustered["sessions"] == 0
    assert pd.read_csv(out / "learning_by_session_position.csv").empty
    text = (out / "report.md").read_text()
    assert "This data has no sessions" in text and "within a session of" not in text
    long_term = clustered["long_term"]
    assert long_term["method"] == "permutation of each annotator's rounds"
    assert long_term["p_value"] > 0.05  # no learning was simulated
    from PIL import Image

    with Image.open(out / "learning.png") as image:  # one panel: no session panel
        assert image.size[0] < 1000


def test_order_from_tied_dates_is_not_a_learning_curve(rows):
    tied = rows.assign(date=rows["date"].dt.normalize())  # dates without a time of day
    basis = learning.order_basis(tied)
    assert not basis["known"] and "share their date" in basis["note"]
    assert learning.clustered_trends(tied)["long_term"] is None


def test_sessions_come_from_crowd_studies():
    df = frame([("w", f"e{i}", 5, 5 + i % 2) for i in range(6)] + [("p", "e0", 5, 5)])
    df["study"] = ["pilot"] * 6 + [""]
    df["source"] = "dump"
    s = learning.sessions(df)
    assert s["session"].unique().tolist() == ["w / pilot"] and s["position"].tolist() == [
        *range(1, 7)
    ]


def test_a_crowd_study_export_has_sessions_and_its_learning_is_reported(tmp_path):
    raw = pd.read_csv(CONFOUNDED)
    raw["example_id"] = "ex" + raw["prompt"].astype(str)
    raw["study"] = "pilot"
    raw["participant_kind"] = "crowd"
    raw["order_index"] = raw.groupby("annotator").cumcount() + 1
    raw.to_csv(tmp_path / "rounds.csv", index=False)
    rows = load(tmp_path / "rounds.csv")
    assert (rows["source"] == "dump").all()
    trends = learning.clustered_trends(rows)
    assert trends["order"]["source"] == "round number" and trends["sessions"] == 25
    within = trends["within_session"]
    assert within["method"] == "permutation of each annotator's rounds" and within["p_value"] > 0
    table = learning.by_session_position(rows, session_length=10)
    assert table["position"].tolist() == list(range(1, 11))
    assert table["rows"].sum() == len(rows)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--category", "poetry"], "--category poetry matches no annotations (category values"),
        (["--system", "gpt9"], "--system gpt9 matches no annotations (system values"),
        (["--since", "2030-01-01"], "--since 2030-01-01 matches no annotations (the latest"),
        (["--category", "news", "--system", "ctrl"], "--category news with --system ctrl match"),
    ],
)
def test_a_selection_that_matches_nothing_is_an_error(tmp_path, capsys, options, message):
    out = tmp_path / "r"
    assert main(["report", str(CONFOUNDED), "--out", str(out), *options]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_report_prints_no_unsupported_claim(report):
    out = report[1]
    text = (out / "report.md").read_text()
    assert "e-" not in text.split("## 3.")[1].split("## 4.")[0]  # no p = 1e-74 and the like
    saved = json.loads((out / "summary.json").read_text())
    boundary = saved["by_factor_tests"]["boundary"]["test"]
    assert boundary["p_value"] > 0.05 and boundary["clustered"]["covariance"].startswith("cons")


def test_boundary_is_read_against_always_all_human_at_the_same_boundary(rows, by_factor):
    from analysis.load import recompute_points

    boundary = by_factor["boundary"]
    gain = boundary["gain"]
    raw = {e["term"]: e["estimate"] for e in boundary["test"]["effects"]}
    ceiling = {b: float(recompute_points(np.array([10]), np.array([b]))[0]) for b in range(1, 10)}
    # Always "all human" earns 0 at boundary 1 and 4 at boundary 9: the gain over it removes
    # exactly that difference from each boundary's effect.
    assert ceiling[1] == 0 and ceiling[9] == 4
    for effect in gain["effects"][1:]:
        b = int(effect["term"])
        assert effect["estimate"] == pytest.approx(
            raw[str(b)] - (ceiling[b] - ceiling[1]), abs=1e-3
        )
        assert np.sign(effect["d"]) == np.sign(effect["estimate"])  # standardised beside raw
    assert gain["p_value"] is not None and len(gain["table"]) == 9
