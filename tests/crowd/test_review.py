"""`flask study review`: list the workers verify sent to review, decide them, and see the
decision in the next verify's files; Prolific's own APPROVED settles a review too."""

from __future__ import annotations

import csv
import io

import pytest
from sqlalchemy import func, select

from app.crowd import lookup
from app.extensions import db
from app.models import StudyBonus, StudyDecision
from tests.crowd.helpers import join, make_pool, play_slot
from tests.crowd.test_verify import BONUS, EXPORT_HEADER, create

MESSAGE = (
    "Thank you for your time. We cannot approve this submission: the code entered was not the "
    "code the study gave, and the answers were given faster than the texts could be read."
)


@pytest.fixture
def study(runner, ctx, tmp_path):
    make_pool(normal=20, human=6)
    assert create(runner, tmp_path, BONUS).exit_code == 0
    made = lookup.get_study("pilot")
    for name in ("w-typo", "w-other"):
        worker = join(made, name, name)
        for _ in range(6):
            play_slot(made, worker, flag_at=None)
    return made


def verify_run(runner, tmp_path, name, status="AWAITING REVIEW", *extra):
    export = tmp_path / f"{name}.csv"
    export.write_text(
        EXPORT_HEADER
        + f"s1,w-typo,{status},WRONG123\n"  # a typo in the code: review
        + f"s2,w-other,{status},WRONG456\n",
        encoding="utf-8",
    )
    out = tmp_path / name
    result = runner.invoke(
        args=[
            "study",
            "verify",
            "pilot",
            "--prolific-export",
            str(export),
            "--out",
            str(out),
            *extra,
        ]
    )
    assert result.exit_code == 0, result.output
    return out, result


def rows(path):
    return {r["worker_id"]: r for r in csv.DictReader(io.StringIO(path.read_text()))}


def test_review_lists_decides_and_verify_writes_the_decision(study, runner, tmp_path):
    verify_run(runner, tmp_path, "one", "AWAITING REVIEW", "--apply")
    listed = runner.invoke(args=["study", "review", "pilot"])
    assert listed.exit_code == 0, listed.output
    assert "2 worker(s) waiting for review" in listed.output
    assert "w-typo: completed, 6 of 6 rounds; checks 2 passed, 0 failed, 0 void" in listed.output
    assert "matches no code of this study" in listed.output

    short = runner.invoke(
        args=["study", "review", "pilot", "--reject", "w-other", "--message", "no"]
    )
    assert short.exit_code != 0 and "at least 100 characters" in short.output
    before = db.session.scalar(select(func.count()).select_from(StudyDecision))
    assert before == 2  # nothing recorded by the refusal

    approved = runner.invoke(args=["study", "review", "pilot", "--approve", "w-typo"])
    assert "Recorded run 2: w-typo approved in review" in approved.output
    again = runner.invoke(args=["study", "review", "pilot", "--approve", "w-typo"])
    assert "already decided approve; nothing recorded" in again.output
    rejected = runner.invoke(
        args=["study", "review", "pilot", "--reject", "w-other", "--message", MESSAGE,
              "--category", "BAD_CODE"]
    )  # fmt: skip
    assert rejected.exit_code == 0, rejected.output
    assert "nobody is waiting" in runner.invoke(args=["study", "review", "pilot"]).output

    out, _ = verify_run(runner, tmp_path, "two", "AWAITING REVIEW", "--apply")
    decided = rows(out / "decisions.csv")
    assert decided["w-typo"]["decision"] == "approve"
    assert decided["w-typo"]["reasons"].startswith("decided in review (run 2)")
    assert (out / "approve.txt").read_text() == "w-typo\n"
    assert (out / "bonus.csv").read_text() == "w-typo,0.20\n"  # approved: the bonus is owed
    reject = list(csv.DictReader(io.StringIO((out / "reject.csv").read_text())))
    assert reject == [
        {"participant_id": "w-other", "rejection_category": "BAD_CODE", "message": MESSAGE}
    ]
    # A third verify keeps the person's decisions (they stand over the rules).
    out3, _ = verify_run(runner, tmp_path, "three", "AWAITING REVIEW", "--apply")
    assert rows(out3 / "decisions.csv")["w-other"]["decision"] == "reject"
    assert (out3 / "bonus.csv").read_text() == ""  # paid once


def test_a_bonus_from_review_is_given_once_per_reason(study, runner, tmp_path):
    args = ["study", "review", "pilot", "--bonus", "w-typo", "--amount", "0.50"]
    first = runner.invoke(args=[*args, "--reason", "careful explanations"])
    assert first.exit_code == 0, first.output
    assert "a bonus of 0.50 GBP for w-typo" in first.output
    assert "the next `flask study verify pilot ... --apply` writes it" in first.output
    twice = runner.invoke(args=[*args, "--reason", "careful  explanations"])
    assert twice.exit_code != 0 and "paid once" in twice.output
    assert runner.invoke(args=[*args, "--reason", ""]).exit_code != 0
    assert runner.invoke(args=[*args[:-1], "-1", "--reason", "x"]).exit_code != 0
    assert db.session.scalar(select(func.count()).select_from(StudyBonus)) == 1
    # The score bonus is owed apart from it; verify's one bonus.csv pays both, once.
    runner.invoke(args=["study", "review", "pilot", "--approve", "w-typo"])
    preview, _ = verify_run(runner, tmp_path, "preview", "AWAITING REVIEW")
    assert (preview / "bonus.csv").read_text() == "w-typo,0.70\n"
    assert "do not upload it" in (preview / "README.md").read_text()
    out, _ = verify_run(runner, tmp_path, "one", "AWAITING REVIEW", "--apply")
    assert (out / "bonus.csv").read_text() == "w-typo,0.70\n"
    again, _ = verify_run(runner, tmp_path, "two", "AWAITING REVIEW", "--apply")
    assert (again / "bonus.csv").read_text() == ""


def test_prolifics_own_approved_settles_a_review(study, runner, tmp_path):
    out, _ = verify_run(runner, tmp_path, "one", "APPROVED", "--apply")
    decided = rows(out / "decisions.csv")
    assert decided["w-typo"]["decision"] == "approve"
    assert "approved on the platform" in decided["w-typo"]["reasons"]
    assert (out / "approve.txt").read_text() == ""  # already approved there: nothing to upload
    assert (out / "bonus.csv").read_text() == "w-typo,0.20\nw-other,0.20\n"


def test_undo_verify_reverts_a_review_decision(study, runner, tmp_path):
    verify_run(runner, tmp_path, "one", "AWAITING REVIEW", "--apply")
    runner.invoke(args=["study", "review", "pilot", "--approve", "w-typo"])
    undone = runner.invoke(args=["study", "undo-verify", "pilot"])
    assert "Reverted run 2: 1 decision(s) removed" in undone.output
    assert (
        "2 worker(s) waiting for review" in runner.invoke(args=["study", "review", "pilot"]).output
    )
    unknown = runner.invoke(args=["study", "review", "pilot", "--approve", "w-nobody"])
    assert unknown.exit_code != 0 and "no worker 'w-nobody'" in unknown.output
