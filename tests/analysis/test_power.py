"""`python -m analysis power`: simulated studies analysed with the planned model."""

from __future__ import annotations

import math

import pytest

from analysis import confirmatory, mixed, power
from analysis.__main__ import main


def test_a_simulated_study_has_the_planned_shape():
    scenario = power.Scenario(rounds=6)
    frame = power.simulate(scenario, workers=10, texts=8, seed=1)
    assert len(frame) == 60 and frame["annotator"].nunique() == 10
    per_worker = frame.groupby("annotator")
    assert (per_worker["example"].nunique() == 6).all()  # distinct texts per worker
    assert (per_worker["condition"].nunique() == 1).all()  # one condition per worker
    assert frame.drop_duplicates("annotator")["condition"].value_counts().tolist() == [5, 5]
    assert set(frame["exact_hit"]) <= {0.0, 1.0}
    assert list(frame["order"].head(6)) == [1, 2, 3, 4, 5, 6]


def test_the_grid_counts_rejections_with_their_monte_carlo_error():
    scenario = power.Scenario(outcome="points", base=2.0, effect=1.5, sd_residual=1.0, rounds=5)
    table = power.grid(scenario, [8, 24], [10], simulations=12, jobs=1, progress=False)
    assert list(table["workers"]) == [8, 24] and (table["simulations"] == 12).all()
    for _, row in table.iterrows():
        assert row["mc_se"] == pytest.approx(math.sqrt(row["power"] * (1 - row["power"]) / 12))
    assert table["power"].iloc[1] >= table["power"].iloc[0]  # more workers, more power
    assert table["power"].iloc[1] > 0.8
    best = power.smallest(table, 0.8)
    assert best is not None and best["workers"] == table.loc[table["power"] >= 0.8, "workers"].min()
    assert power.smallest(table, 1.01) is None


def test_a_pilot_gives_the_variances_of_the_planned_model():
    truth = power.Scenario(
        outcome="points", base=2.0, effect=0.4, sd_annotator=0.8, sd_text=0.6, sd_residual=1.0
    )
    pilot = power.simulate(truth, workers=150, texts=100, seed=4).assign(decision="approve")
    plan = {"outcome": "points", "contrast": "condition", "control": "control", "alpha": 0.05}
    scenario, notes = power.from_pilot(pilot, plan, effect=0.3)
    assert scenario.effect == 0.3 and scenario.rounds == 10
    assert scenario.sd_annotator == pytest.approx(0.8, abs=0.2)
    assert scenario.sd_text == pytest.approx(0.6, abs=0.2)
    assert scenario.sd_residual == pytest.approx(1.0, abs=0.1)
    assert scenario.base == pytest.approx(2.0, abs=0.3)
    assert notes[0].startswith("pilot fitted by")
    _, notes = power.from_pilot(pilot, plan, effect=None)
    assert any("pilot's estimate" in n for n in notes)


def test_a_plan_the_data_cannot_answer_is_a_clear_error():
    frame = power.simulate(power.Scenario(), workers=6, texts=6, seed=1)
    with pytest.raises(confirmatory.PlanError, match="outcome 'speed' is not one of"):
        confirmatory.fit_plan(frame, {"outcome": "speed", "contrast": "condition"})
    with pytest.raises(confirmatory.PlanError, match="control condition 'none' is not in"):
        confirmatory.fit_plan(
            frame, {"outcome": "exact_hit", "contrast": "condition", "control": "none"}
        )
    one = frame.assign(condition="control")
    with pytest.raises(confirmatory.PlanError, match="1 level"):
        confirmatory.fit_plan(one, {"outcome": "exact_hit", "contrast": "condition"})


def test_the_command_prints_power_and_the_smallest_design(capsys):
    options = "--outcome points --effect 1.5 --sd-residual 1 --rounds 4 --jobs 1 --no-progress"
    code = main(
        ["power", "--workers", "6", "30", "--texts", "8", "--simulations", "6", *options.split()]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Scenario: outcome=points" in out and "effect=1.5" in out
    assert "| 30 | 8 | 120 |" in out and "±" in out
    assert "Smallest design reaching power 0.8: 30 workers × 8 texts" in out


def test_help_says_what_the_command_does(capsys):
    with pytest.raises(SystemExit) as done:
        main(["power", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert done.value.code == 0
    assert "Monte-Carlo error" in text and "smallest design" in text and "PILOT" in text


def test_bad_pilot_is_a_clear_error(tmp_path, capsys):
    assert main(["power", str(tmp_path), "--jobs", "1"]) == 2
    assert "no rounds.csv" in capsys.readouterr().err


@pytest.mark.skipif(mixed.r_available() is None, reason="R with lme4 is not installed")
def test_a_pilot_export_with_its_plan_sizes_the_study(tmp_path, capsys):
    from tests.analysis.test_confirmatory import study_export

    pilot = study_export(tmp_path / "pilot", workers=40)
    options = "--workers 20 60 --texts 40 --simulations 8 --jobs 1 --no-progress --effect 0.35"
    assert main(["power", str(pilot), *options.split()]) == 0
    out = capsys.readouterr().out
    assert "note: plan from preregistration.json" in out
    assert "Scenario: outcome=exact_hit, contrast=condition:order" in out
    assert "effect=0.35" in out and "rounds=10" in out
    assert "| 60 | 40 | 600 |" in out


def test_a_pilot_plan_without_conditions_is_a_clear_error():
    frame = power.simulate(power.Scenario(), workers=6, texts=6, seed=1).assign(system="gpt2")
    with pytest.raises(confirmatory.PlanError, match="needs a contrast of condition"):
        power.from_pilot(frame, {"outcome": "exact_hit", "contrast": "system"}, 0.3)
