"""The confirmatory analysis is calibrated: under no effect it rejects at the nominal rate, and
under a set effect it rejects as often as `analysis power` predicts (bench/calibration.py runs
the longer version, with the exact hit as outcome)."""

from __future__ import annotations

import pytest
from scipy import stats

from analysis import mixed, power

pytestmark = pytest.mark.skipif(
    mixed.r_available() is None, reason="R with lme4 is not installed (scripts/ensure-r.sh)"
)
DESIGN = {"workers": 16, "texts": 12}  # 96 rows per study: 6 rounds per worker
SCENARIO = power.Scenario(outcome="points", base=2.0, sd_residual=1.0, rounds=6)


@pytest.mark.timeout(600)
def test_no_effect_rejects_at_the_nominal_rate():
    null = power.replace(SCENARIO, effect=0.0)
    table = power.grid(null, [DESIGN["workers"]], [DESIGN["texts"]], 200, seed=0, jobs=2)
    row = table.iloc[0]
    assert row["simulations"] == 200
    rejected = round(row["power"] * 200)
    # Two-sided binomial test of the rejection rate against alpha = 0.05 at the 1% level: 200
    # draws allow 3 to 19 rejections.
    assert stats.binomtest(rejected, 200, 0.05).pvalue > 0.01, rejected


@pytest.mark.timeout(600)
def test_observed_power_is_within_ten_points_of_the_prediction():
    effect = power.replace(SCENARIO, effect=1.0)
    predicted = power.grid(effect, [DESIGN["workers"]], [DESIGN["texts"]], 100, seed=0, jobs=2)
    # Other studies, analysed the report's way (a preregistration, analysis.confirmatory).
    observed, analysed = power.observed_power(effect, **DESIGN, studies=100, seed=10**6)
    assert analysed == 100
    assert 0.5 < predicted["power"].iloc[0] < 0.95  # neither trivial nor hopeless
    assert abs(observed - predicted["power"].iloc[0]) <= 0.10
