"""The share correction on synthetic data with a known truth and a known confusion matrix."""

from __future__ import annotations

import numpy as np

from analysis import correction

CLASSES = ["a", "b", "c"]
COLUMNS = ["a", "b", "c", "none"]  # the coder may abstain
TRUE = np.array([0.5, 0.3, 0.2])
# rows: truth; columns: what the coder says
CONFUSION = np.array(
    [
        [0.70, 0.10, 0.05, 0.15],
        [0.20, 0.60, 0.10, 0.10],
        [0.05, 0.25, 0.60, 0.10],
    ]
)


def _draw(rng, n):
    truth = rng.choice(3, size=n, p=TRUE)
    coded = np.array([rng.choice(4, p=CONFUSION[t]) for t in truth])
    return [CLASSES[t] for t in truth], [COLUMNS[c] for c in coded]


def test_inversion_is_exact_on_exact_rates():
    observed = CONFUSION.T @ TRUE
    assert np.allclose(correction.invert(CONFUSION, observed), TRUE)


def test_raw_shares_are_biased_and_the_correction_recovers_the_truth():
    rng = np.random.default_rng(1)
    truth, coded_sample = _draw(rng, 400)
    _, coded_all = _draw(rng, 4000)
    table = correction.corrected_shares(
        truth, coded_sample, coded_all, CLASSES, COLUMNS, n_boot=400, seed=2
    )
    assert (table["ci_low"] <= TRUE).all() and (table["ci_high"] >= TRUE).all(), table
    # the coder's own share of "a" is off by more than sampling error; the corrected one is not
    assert abs(table.loc[0, "raw_share"] - TRUE[0]) > 0.05
    assert abs(table.loc[0, "corrected_share"] - TRUE[0]) < 0.05
    assert table["labelled"].sum() == 400


def test_interval_coverage_is_near_nominal():
    rng = np.random.default_rng(3)
    covered = np.zeros(3)
    runs = 60
    for run in range(runs):
        truth, coded_sample = _draw(rng, 200)
        _, coded_all = _draw(rng, 1500)
        table = correction.corrected_shares(
            truth, coded_sample, coded_all, CLASSES, COLUMNS, n_boot=200, seed=run
        )
        covered += ((table["ci_low"] <= TRUE) & (table["ci_high"] >= TRUE)).to_numpy()
    rate = covered / runs
    # nominal 95%; with 60 runs a rate under 85% would be far outside sampling error
    assert (rate >= 0.85).all(), rate


def test_a_class_missing_from_the_sample_is_not_estimated():
    rates = correction.confusion_rates(["a", "a", "b"], ["a", "b", "b"], CLASSES, COLUMNS)
    shares = correction.invert(rates, np.array([0.5, 0.5, 0.0, 0.0]))
    assert np.isnan(shares[2]) and np.isclose(np.nansum(shares), 1.0)
