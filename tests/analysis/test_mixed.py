"""analysis.mixed: crossed mixed models through lme4, checked against statsmodels, with every
warning reported and the library named."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from analysis import mixed

needs_r = pytest.mark.skipif(
    mixed.r_available() is None, reason="R with lme4 is not installed (scripts/ensure-r.sh)"
)


def crossed(
    workers: int = 40,
    texts: int = 30,
    rounds: int = 10,
    effect: float = 0.5,
    sd_worker: float = 0.7,
    sd_text: float = 0.7,
    seed: int = 1,
) -> pd.DataFrame:
    """Workers in two conditions (alternating) read `rounds` texts each; a latent score with
    random intercepts gives an exact hit (logistic) and points (linear)."""
    rng = np.random.default_rng(seed)
    skill, difficulty = rng.normal(0, sd_worker, workers), rng.normal(0, sd_text, texts)
    rows = []
    for a in range(workers):
        for t in rng.choice(texts, rounds, replace=False):
            eta = -0.5 + effect * (a % 2) + skill[a] + difficulty[t]
            rows.append(
                {
                    "annotator": f"w{a}",
                    "example": f"t{t}",
                    "condition": "feedback" if a % 2 else "none",
                    "exact_hit": float(rng.random() < 1 / (1 + np.exp(-eta))),
                    "points": 2 + 1.5 * eta + rng.normal(0, 1),
                }
            )
    return pd.DataFrame(rows)


@needs_r
def test_lme4_agrees_with_statsmodels_on_a_linear_model():
    frame = crossed()
    x, names = mixed.design(frame, "condition", reference="none")
    r = mixed.fit(frame, x, names, [1], "points")
    sm = mixed.fit(frame, x, names, [1], "points", engine="statsmodels")
    assert r.library.startswith("R ") and "lme4" in r.library
    assert sm.library.startswith("statsmodels") and "MixedLM" in sm.library
    assert names == ["(reference) none", "feedback"]
    for a, b in zip(r.effects, sm.effects, strict=True):
        assert a["estimate"] == pytest.approx(b["estimate"], abs=1e-3)
        assert a["se"] == pytest.approx(b["se"], rel=0.01)
    for part in ("annotator", "text", "residual"):
        assert r.variances[part] == pytest.approx(sm.variances[part], rel=0.02)
    assert r.test["kind"] == "F (Satterthwaite)" and 0 < r.test["df_denominator"] < 40
    assert r.converged and r.warnings == []


@needs_r
def test_logistic_model_finds_a_set_odds_ratio():
    frame = crossed(workers=200, texts=60, effect=0.8, seed=3)
    x, names = mixed.design(frame, "condition", reference="none")
    result = mixed.fit(frame, x, names, [1], "exact_hit")
    effect = result.effects[1]
    assert "glmer" in result.library and result.family == "binomial"
    assert effect["ci_low"] < 0.8 < effect["ci_high"] and effect["p_value"] < 0.01
    assert effect["odds_ratio"] == pytest.approx(np.exp(effect["estimate"]))
    assert effect["or_ci_low"] < effect["odds_ratio"] < effect["or_ci_high"]
    assert result.test["kind"] == "Wald χ²" and result.test["p_value"] == pytest.approx(
        effect["p_value"]
    )


@needs_r
def test_above_the_laplace_limit_the_logistic_model_is_nagq0_and_says_so(monkeypatch):
    frame = crossed(workers=200, texts=60, effect=0.8, seed=3)
    x, names = mixed.design(frame, "condition", reference="none")
    laplace = mixed.fit(frame, x, names, [1], "exact_hit")
    monkeypatch.setattr(mixed, "LAPLACE_MAX_ROWS", len(frame) - 1)
    fast = mixed.fit(frame, x, names, [1], "exact_hit")
    assert "Laplace" in laplace.library and not any("nAGQ" in w for w in laplace.warnings)
    assert "nAGQ = 0" in fast.library and any("nAGQ = 0" in w for w in fast.warnings)
    assert fast.converged  # the note is not read as a convergence failure
    # The faster fit lands close to the Laplace fit on the same data (2,000 rows).
    for a, b in zip(fast.effects, laplace.effects, strict=True):
        assert a["estimate"] == pytest.approx(b["estimate"], abs=0.05)
        assert a["se"] == pytest.approx(b["se"], rel=0.1)
    # The linear models are exact at any size: the limit does not touch them.
    points = mixed.fit(frame, x, names, [1], "points")
    assert "lmer" in points.library and not any("nAGQ" in w for w in points.warnings)


@needs_r
def test_a_singular_fit_is_reported_and_an_unsupported_slope_is_dropped():
    # No annotator variance at all, no slope variance: lme4 says the fit is singular.
    frame = crossed(sd_worker=0.0, sd_text=0.0, seed=5)
    x, names = mixed.design(frame, "condition", reference="none")
    result = mixed.fit(frame, x, names, [1], "points", slopes=[1])
    assert not result.random_slope
    assert "random slope of feedback by text was dropped" in result.warnings[0]
    assert any("singular" in w for w in result.warnings)
    assert "(1 | text)" in result.model


@needs_r
def test_a_supported_random_slope_is_kept_with_its_variance():
    rng = np.random.default_rng(7)
    frame = crossed(workers=120, texts=40, seed=7)
    slope = dict(zip([f"t{i}" for i in range(40)], rng.normal(0, 1.5, 40), strict=True))
    treated = frame["condition"].eq("feedback")
    frame.loc[treated, "points"] += frame.loc[treated, "example"].map(slope)
    x, names = mixed.design(frame, "condition", reference="none")
    result = mixed.fit(frame, x, names, [1], "points", slopes=[1])
    assert result.random_slope and "(1 + slope | text)" in result.model
    assert result.variances["text slope feedback"] > 0.5


def test_the_fallbacks_are_named_and_agree_on_the_direction():
    frame = crossed(workers=80, effect=1.0, seed=11)
    x, names = mixed.design(frame, "condition", reference="none")
    linear = mixed.fit(frame, x, names, [1], "points", engine="statsmodels")
    logistic = mixed.fit(frame, x, names, [1], "exact_hit", engine="statsmodels")
    clustered = mixed.fit(frame, x, names, [1], "points", engine="clustered")
    assert "MixedLM" in linear.library and linear.is_mixed
    assert "logistic GLM, two-way clustered" in logistic.library and not logistic.is_mixed
    assert any("no mixed model" in w for w in logistic.warnings)
    assert "least squares" in clustered.library
    for result in (linear, logistic, clustered):
        assert result.effects[1]["estimate"] > 0 and result.p_value is not None


@pytest.mark.parametrize("engine", ["auto", "statsmodels"])
def test_twenty_rows_fit_and_too_few_rows_do_not(engine):
    frame = crossed(workers=4, texts=10, rounds=5, seed=2)
    x, names = mixed.design(frame, "condition", reference="none")
    result = mixed.fit(frame, x, names, [1], "points", engine=engine)
    assert result is not None and result.n == 20
    assert mixed.fit(frame.head(4), x[:4], names, [1], "points", engine=engine) is None


def test_outcomes_come_from_guess_and_boundary():
    frame = pd.DataFrame({"guess": [3, 5, 2], "boundary": [3, 4, 4], "points": [5, 4, 0]})
    assert list(mixed.outcome_values(frame, "exact_hit")) == [1, 0, 0]
    assert list(mixed.outcome_values(frame, "distance")) == [0, 1, -2]
    with pytest.raises(ValueError, match="unknown outcome 'speed'"):
        mixed.outcome_values(frame, "speed")


@needs_r
def test_data_lme4_refuses_falls_back_and_says_why():
    # Every text read once: as many text levels as rows, which lme4 refuses to fit.
    frame = crossed(workers=6, texts=60, rounds=5, seed=4)
    frame["example"] = [f"t{i}" for i in range(len(frame))]
    x, names = mixed.design(frame, "condition", reference="none")
    result = mixed.fit(frame, x, names, [1], "points")
    assert result is not None and not result.library.startswith("R ")
    assert "lme4 could not fit this data (number of levels" in result.warnings[0]


def test_starting_r_leaves_the_environment_of_later_programs_alone():
    """R sets LD_LIBRARY_PATH when it starts; a program started afterwards (a server, a test's
    subprocess) must still load its own Python's libraries."""
    import os
    import subprocess
    import sys

    before = os.environ.get("LD_LIBRARY_PATH")
    mixed.r_available.cache_clear()
    mixed.r_available()
    assert os.environ.get("LD_LIBRARY_PATH") == before
    assert "/usr/lib/R" not in os.environ.get("LD_LIBRARY_PATH", "")  # nor from an earlier start
    child = subprocess.run(
        [sys.executable, "-c", "import ssl, sqlite3; print('ok')"], capture_output=True, text=True
    )
    assert child.stdout.strip() == "ok", child.stderr[-500:]
