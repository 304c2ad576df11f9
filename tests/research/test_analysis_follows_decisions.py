"""The analysis of a study export follows the decisions: by default only approved workers'
rounds that are no attention check, with a table of who was left out and why; --all-workers
keeps everyone; a 7-round study gets a minimum rounds per annotator its workers reach.

The export is made by the real export code from a study played and verified on the site."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis import cleaning
from analysis.__main__ import main
from analysis.load import load
from app.crowd import review, verify, verify_runs, verify_submissions
from app.extensions import db
from app.models import Participant
from app.research import export_options, exports, pseudonyms
from tests.crowd.helpers import join, make_pool, make_study, play_slot
from tests.crowd.test_verify import pace

ROUNDS = 7
# worker -> (how they play, the platform's status in verify's file, the code they entered)
WORKERS = {
    "w-good1": ("all", "AWAITING REVIEW", "C1DONE01"),
    "w-good2": ("all", "AWAITING REVIEW", "C1DONE01"),
    "w-review-ok": ("all", "AWAITING REVIEW", "TYPO0001"),  # review, then approved by a person
    "w-cheat": ("fail", "AWAITING REVIEW", "C2FAIL02"),  # fails the checks: rejected
    "w-review": ("all", "AWAITING REVIEW", "TYPO0002"),  # review, still undecided
    "w-returned": (3, "RETURNED", None),
    "w-late": (2, "TIMED-OUT", None),
    "w-unlisted": ("all", None, None),  # not in the platform's file: no decision yet
}
APPROVED = {"w-good1", "w-good2", "w-review-ok"}
WHY = {
    "w-cheat": "rejected",
    "w-review": "under review",
    "w-returned": "returned",
    "w-late": "timed out",
    "w-unlisted": "no decision yet (run `flask study verify --apply`)",
}


@pytest.fixture
def export(ctx, tmp_path):
    make_pool(normal=40, human=10)
    study = make_study(rounds=ROUNDS, attention_check_rate=0.3, time_limit_minutes=600)
    for worker, (plan, _, _) in WORKERS.items():
        participant = join(study, worker, f"session-{worker}")
        n = ROUNDS if plan in ("all", "fail") else plan
        for _ in range(n):
            play_slot(study, participant, pass_check=plan != "fail", flag_at=None)
        pace(participant, 25)  # a careful pace: the speed filter keeps everyone
    listed = [
        verify_submissions.Submission(worker, code, status, {"Submission id": f"s-{worker}"})
        for worker, (_, status, code) in WORKERS.items()
        if status
    ]
    verify_runs.apply_decisions(study, verify.decide(study, listed))
    review.decide(study, "w-review-ok", verify_submissions.APPROVE)
    exports.export(export_options.ExportOptions(out=tmp_path / "dump", format="csv"))
    key = pseudonyms.pseudonym_key()
    names = {
        pseudonyms.pseudonym(p.player_id, key): p.worker_id
        for p in db.session.scalars(db.select(Participant))
    }
    return tmp_path / "dump", names


def test_only_approved_workers_non_check_rounds_are_kept(export):
    folder, names = export
    frame = load(folder)
    assert set(frame["annotator"].map(names)) == set(WORKERS)
    assert {names[a]: d for a, d in zip(frame["annotator"], frame["decision"], strict=True)} == {
        "w-good1": "approve",
        "w-good2": "approve",
        "w-review-ok": "approve",
        "w-cheat": "reject",
        "w-review": "review",
        "w-returned": "returned",
        "w-late": "returned",
        "w-unlisted": "",
    }
    cleaned = cleaning.clean(frame)
    kept = cleaned.frame
    assert set(kept["annotator"].map(names)) == APPROVED
    approved_rows = frame[frame["annotator"].map(names).isin(APPROVED)]
    assert len(kept) == int((~approved_rows["attention_check"]).sum())
    assert not kept["attention_check"].any()

    left = cleaned.left_out.assign(worker=cleaned.left_out["annotator"].map(names))
    whys = dict(zip(left["worker"], left["why"], strict=True))
    assert {w: whys[w] for w in WHY} == WHY
    for worker in APPROVED:  # approved: only their check rounds are left out
        assert whys[worker] == cleaning.CHECK_ROUNDS
    assert set(whys) == set(WHY) | APPROVED
    assert sorted(cleaned.dropped_annotators["decisions"]) == sorted(
        a for a, w in names.items() if w in WHY
    )
    for row in left.itertuples():
        mine = frame[frame["annotator"] == row.annotator]
        assert row.rounds_left_out + row.rounds_kept == len(mine)
    step = cleaned.steps.set_index("step").loc["decisions"]
    assert step["applicable"] and step["annotators_removed"] == len(WHY)
    assert "rejected: 1" in step["why"] and "timed out: 1" in step["why"]

    everyone = cleaning.clean(frame, cleaning.FilterSettings(approved_only=False))
    assert everyone.left_out.empty
    # Without the decisions the old rule applies: failed checks drop the cheat, nobody else.
    assert set(everyone.frame["annotator"].map(names)) == set(WORKERS) - {"w-cheat"}


def test_check_rounds_are_no_points_mismatch(export):
    frame = load(export[0])
    assert frame["attention_check"].any()
    assert (frame.loc[frame["attention_check"], "points_stored"] == 0).all()
    assert cleaning.points_mismatch(frame) == 0


def test_the_report_prints_who_was_left_out_and_fits_a_seven_round_study(export, tmp_path, capsys):
    folder, names = export
    assert main(["report", str(folder), "--out", str(tmp_path / "r"), "--bootstrap", "0"]) == 0
    printed = capsys.readouterr().out
    assert "Left out of the analysis (8 crowd worker(s)" in printed
    for annotator, worker in names.items():
        line = next(line for line in printed.splitlines() if annotator in line)
        assert (WHY.get(worker) or cleaning.CHECK_ROUNDS) in line
    left = pd.read_csv(tmp_path / "r" / "left_out.csv")
    assert set(left["annotator"].map(names)) == set(WORKERS)
    summary = (tmp_path / "r" / "report.md").read_text()
    assert "Crowd workers left out by the decisions step" in summary

    data = json.loads((tmp_path / "r" / "summary.json").read_text())
    kept_rounds = load(folder).pipe(cleaning.clean).frame.groupby("annotator").size()
    assert data["min_rounds"] == kept_rounds.min() <= ROUNDS
    assert data["filtered"]["n_annotators"] == len(APPROVED)
    # Every approved worker counts in the per-annotator sections: none is empty.
    assert f"Of {len(APPROVED)} annotators with at least {data['min_rounds']} rounds" in summary

    assert main(["report", str(folder), "--out", str(tmp_path / "all"), "--bootstrap", "0",
                 "--all-workers"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    assert "Left out of the analysis" not in printed
    data = json.loads((tmp_path / "all" / "summary.json").read_text())
    assert data["filtered"]["n_annotators"] == len(WORKERS) - 1  # the cheat fails the checks


def test_a_study_nobody_approved_says_what_to_do(ctx, tmp_path, capsys):
    make_pool(normal=20, human=6)
    study = make_study(rounds=4, attention_check_rate=0.5)
    worker = join(study, "w-only", "s-only")
    for _ in range(4):
        play_slot(study, worker, flag_at=None)
    pace(worker, 25)
    exports.export(export_options.ExportOptions(out=tmp_path / "dump", format="csv"))
    assert main(["report", str(tmp_path / "dump"), "--out", str(tmp_path / "r")]) == 2
    error = capsys.readouterr().err
    assert "no crowd worker is approved yet" in error and "--all-workers" in error
