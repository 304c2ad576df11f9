"""The analysis reads what the site exports for a study with conditions, a detector hint and a
frozen plan: preregistration.json (checked against its SHA-256, the plan's past-tense decisions
matching the export's), each round's condition and the hint levels it showed."""

from __future__ import annotations

from sqlalchemy import select

from analysis import confirmatory, hint
from analysis.load import load, read_preregistration
from app.crowd import hints, lookup, serving
from app.extensions import db
from app.models import Example, StudyDecision
from app.research import export_options, exports
from tests.crowd.helpers import answer, join, make_pool, make_study, study_round
from tests.crowd.test_detector_hint import write_detections

ARMS = [{"name": "alone"}, {"name": "hint", "detector_hint": True}]
PLAN = {
    "hypotheses": ["Workers shown the detector's hint find the boundary more often."],
    "outcome": "exact_hit",
    "contrast": "condition",
    "control": "alone",
    "exclude_decisions": ["rejected"],
    "planned_workers": 6,
    "planned_texts": 16,
    "stopping_rule": "Stop at 6 approved workers.",
}


def test_the_analysis_reads_the_sites_plan_conditions_and_hints(ctx, tmp_path):
    make_pool(normal=12, human=4)
    study = make_study(rounds=4, attention_check_rate=0, conditions=ARMS, preregistration=PLAN)
    texts = db.session.scalars(select(Example).where(Example.kind == "normal")).all()
    write_detections(tmp_path / "detections.csv", texts)
    hints.store(study, tmp_path / "detections.csv")
    workers = [join(study, f"w{i}", session=f"s{i}") for i in range(6)]
    for participant in workers:
        for _ in range(4):
            round_ = study_round(study, participant)
            serving.round_context(round_)  # the page: it stores the hint levels it shows
            right = participant.condition == "hint"
            answer(round_, round_.example.boundary if right else 5)
            db.session.refresh(participant)
    for run, participant in enumerate(workers, start=1):
        decision = "reject" if participant is workers[0] else "approve"
        db.session.add(
            StudyDecision(
                study_id=study.id, participant_id=participant.id, run=run, decision=decision
            )
        )
    db.session.commit()
    exports.export(
        export_options.ExportOptions(out=tmp_path / "dump", format="csv", study=study.slug)
    )

    prereg = read_preregistration(tmp_path / "dump")
    version = prereg["versions"][0]
    assert version["sha256_ok"] and version["plan"] == lookup.config_of(study).preregistration
    frame = load(tmp_path / "dump")
    assert sorted(frame["condition"].unique()) == ["alone", "hint"]
    assert set(frame["decision"]) == {"approve", "reject"}
    kept, excluded = confirmatory.apply_exclusions(frame, version["plan"])
    assert excluded == {"decisions reject": 4} and len(kept) == len(frame) - 4
    assert set(frame.loc[frame["condition"] == "hint", "detector_hints"].map(bool)) == {True}
    assert set(frame.loc[frame["condition"] == "alone", "detector_hints"]) == {""}
    assert hint.hint_conditions(frame) == ["hint"]
    rows, _ = hint.rows_compared(frame)
    # The detector answers from the levels the site computed, with the hint's rule. Here the top
    # third of the scores is the later machine sentences: it flags late, never early.
    by_id = {e.external_id: e for e in texts}
    for row in rows[rows["kind"] == hint.MACHINE].itertuples():
        example = by_id[row.example]
        guess = hint.hint_guess(hints.levels(study, example))
        assert example.boundary < guess < example.n_sentences
        assert row.detector_exact == 0.0 and row.detector_points == 5 - (guess - example.boundary)
    assert (rows["kind"] == hint.MACHINE).any()
