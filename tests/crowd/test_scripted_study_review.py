"""The scripted study (test_scripted_study.py) taken to its end, as the issue's "Done when" asks.

After the workers play, verify sends four of them to review: the returning worker and a paster
who mistyped their codes, a worker from the shared browser with a typo too, and the worker who
ran out of time (no code). A researcher decides every one of them on the review page, by the
forms a browser sends (signed in, with the CSRF token), and gives bonuses there. Then:

- nobody is left waiting for review;
- the payment files hold those decisions: approve.txt / reject.csv, and one bonus.csv per
  applied run with the score bonuses and the review bonuses, each paid exactly once after
  verify, a review bonus given later, a verify whose bonus.csv is thrown away (undo
  --drop-bonuses), verify again, undo-verify and verify;
- the research export and the analysis (`python -m analysis report` through analysis.__main__)
  leave out exactly the workers not approved;
- every fraud case is flagged on the review page.

On SQLite, and on PostgreSQL with TEST_DATABASE_URL (tests/conftest.py).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from decimal import Decimal

import pandas as pd
from sqlalchemy import select

from analysis import cleaning
from analysis.__main__ import main as analysis_main
from analysis.load import load
from app.crowd import fraud, lookup, verdicts, verify
from app.crowd.reports import worker_stats
from app.extensions import db
from app.models import Participant, ParticipantStatus, StudyBonus
from app.research import export_options, exports, pseudonyms
from tests.conftest import csrf_token, sign_in
from tests.crowd.test_scripted_study import run_study

MESSAGE = (
    "Thank you for taking part. We cannot approve this submission: the explanations you gave "
    "are the same, word for word, as another participant's, which the study's instructions ask "
    "you not to do."
)
# Sent to review by the export below, and what the researcher decides for each.
TYPO = {"returning": "approve", "paste-one": "reject", "dup-two": "reject"}
REVIEWED = {**TYPO, "timed-out": "approve"}
NOT_APPROVED = {"lazy", "paste-one", "dup-two"}


def export_file(tmp_path, participants: dict[str, Participant]):
    lines = ["Submission id,Participant id,Status,Completion code"]
    for n, (worker, p) in enumerate(participants.items()):
        if worker == "timed-out":
            code = "NOCODE"  # the platform let them submit without a code
        elif worker in TYPO:
            code = "TYPO0000"
        else:
            code = verdicts.completion_code(p)
        lines.append(f"sub{n},{worker},AWAITING REVIEW,{code}")
    path = tmp_path / "prolific.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def verify_run(runner, export, out, *extra) -> tuple[dict, dict[str, int]]:
    result = runner.invoke(
        args=["study", "verify", "pilot", "--prolific-export", str(export), "--out", str(out),
              *extra]
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    decisions = {
        r["worker_id"]: r for r in csv.DictReader(io.StringIO((out / "decisions.csv").read_text()))
    }
    bonus: dict[str, int] = {}
    for line in (out / "bonus.csv").read_text().splitlines():
        worker, amount = line.split(",")
        assert worker not in bonus  # one line a worker
        bonus[worker] = int(Decimal(amount) * 100)
    return decisions, bonus


def listed(lab, show: str) -> list[str]:
    page = lab.get(f"/research/studies/pilot/review?show={show}")
    assert page.status_code == 200
    return re.findall(r'<tr data-worker="([^"]+)">', page.get_data(as_text=True))


def decide_on_the_page(lab, worker: str, decision: str) -> None:
    path = f"/research/studies/pilot/review/{worker}"
    token = csrf_token(lab, path)
    form = {"csrf_token": token, "show": "review"}
    if decision == "reject":
        form |= {"message": MESSAGE, "category": "LOW_EFFORT"}
    done = lab.post(f"{path}/{decision}", data=form)
    assert done.status_code == 302, done.get_data(as_text=True)


def bonus_on_the_page(lab, worker: str, amount: str, reason: str) -> None:
    path = f"/research/studies/pilot/review/{worker}"
    token = csrf_token(lab, path)
    done = lab.post(f"{path}/bonus", data={"csrf_token": token, "amount": amount, "reason": reason})
    assert done.status_code == 302, done.get_data(as_text=True)
    replay = lab.post(
        f"{path}/bonus", data={"csrf_token": token, "amount": amount, "reason": reason}
    )
    assert replay.status_code == 409  # a double submit pays nothing more


def test_every_review_is_decided_on_the_page_and_the_files_and_analysis_follow(
    app, runner, clock, tmp_path
):
    run_study(app, runner, clock, tmp_path)
    with app.app_context():
        participants = {
            p.worker_id: p for p in db.session.scalars(select(Participant).order_by(Participant.id))
        }
        assert participants["timed-out"].status == ParticipantStatus.timed_out
        export = export_file(tmp_path, participants)
    lab = sign_in(app)
    assert listed(lab, "undecided") == list(participants)  # nothing decided before verify

    decisions, first = verify_run(runner, export, tmp_path / "one", "--apply")
    waiting = {w for w, d in decisions.items() if d["decision"] == "review"}
    assert waiting == set(REVIEWED)
    assert set(listed(lab, "review")) == waiting
    assert decisions["lazy"]["decision"] == "reject"
    paid: Counter = Counter(first)  # the researcher uploads run one's bonus.csv

    # Each fraud case is flagged on the review page, with the other worker named.
    for me, other, signal in (
        ("dup-one", "dup-two", fraud.SHARED_DEVICE),
        ("dup-two", "dup-one", fraud.SHARED_DEVICE),
        ("paste-one", "paste-two", fraud.COPIED_EXPLANATION),
        ("paste-two", "paste-one", fraud.COPIED_EXPLANATION),
    ):
        page = lab.get(f"/research/studies/pilot/review/{me}").get_data(as_text=True)
        flags = page[page.index('id="review-flags"') :]
        assert f'data-signal="{signal}"' in flags and other in flags, me
    for worker in ("honest-a", "honest-b", "early", "returning", "lazy", "timed-out"):
        page = lab.get(f"/research/studies/pilot/review/{worker}").get_data(as_text=True)
        assert "data-signal=" not in page, worker

    # Every review decided from the page; bonuses given there.
    for worker, decision in REVIEWED.items():
        decide_on_the_page(lab, worker, decision)
    bonus_on_the_page(lab, "timed-out", "0.10", "ran out of time through no fault of theirs")
    bonus_on_the_page(lab, "honest-a", "0.05", "careful explanations")
    assert listed(lab, "review") == []
    assert listed(lab, "undecided") == []
    review_bonus = {"timed-out": 10, "honest-a": 5}

    # The next verify writes the decisions into the files, with score and review bonuses.
    decisions, second = verify_run(runner, export, tmp_path / "two", "--apply")
    for worker, decision in REVIEWED.items():
        assert decisions[worker]["decision"] == decision, worker
        assert decisions[worker]["reasons"].startswith("decided in review")
    assert not any(d["decision"] == "review" for d in decisions.values())
    approve = set((tmp_path / "two" / "approve.txt").read_text().split())
    assert approve == {w for w, d in decisions.items() if d["decision"] == "approve"}
    assert {"returning", "timed-out"} <= approve and not approve & NOT_APPROVED
    rejected = list(csv.DictReader(io.StringIO((tmp_path / "two" / "reject.csv").read_text())))
    assert {r["participant_id"]: r["message"] for r in rejected if r["participant_id"] in TYPO} == {
        "paste-one": MESSAGE,
        "dup-two": MESSAGE,
    }
    assert {r["participant_id"] for r in rejected} == NOT_APPROVED
    for worker, amount in review_bonus.items():
        assert second[worker] >= amount, worker  # in the worker's one line
    paid += Counter(second)  # uploaded

    # A bonus given later goes into a bonus.csv that is thrown away: owed again, paid once.
    bonus_on_the_page(lab, "honest-b", "0.05", "clear notes")
    review_bonus["honest-b"] = 5
    _d, thrown = verify_run(runner, export, tmp_path / "three", "--apply")
    assert thrown == {"honest-b": 5}
    dropped = runner.invoke(args=["study", "undo-verify", "pilot", "--drop-bonuses"])
    assert dropped.exit_code == 0 and "are owed again" in dropped.output, dropped.output
    _d, fourth = verify_run(runner, export, tmp_path / "four", "--apply")
    assert fourth == {"honest-b": 5}
    paid += Counter(fourth)
    undone = runner.invoke(args=["study", "undo-verify", "pilot"])
    assert undone.exit_code == 0, undone.output
    decisions, fifth = verify_run(runner, export, tmp_path / "five", "--apply")
    assert fifth == {}
    paid += Counter(fifth)

    with app.app_context():
        study = lookup.get_study("pilot")
        config = lookup.config_of(study)
        score = {w.worker_id: verify.owed_minor(config, w) for w in worker_stats(study)}
        rows = db.session.scalars(select(StudyBonus).where(StudyBonus.study_id == study.id)).all()
        live = Counter()
        for row in rows:
            if row.state in ("issued", "requested", "sent", "paid"):
                live[(row.participant_id, row.reason)] += 1
        assert all(n == 1 for n in live.values())
        assert all(r.state == "issued" for r in rows if r.reason.startswith("review: "))
    approved = {w for w, d in decisions.items() if d["decision"] == "approve"}
    assert approved == set(participants) - NOT_APPROVED
    assert all(score[w] > 0 for w in ("honest-a", "honest-b", "early", "returning"))
    for worker in participants:
        owed = (score[worker] if worker in approved else 0) + review_bonus.get(worker, 0)
        assert paid[worker] == owed, (worker, paid[worker], owed)

    # The research export and the analysis leave out exactly the workers not approved.
    with app.app_context():
        exports.export(export_options.ExportOptions(out=tmp_path / "dump", format="csv"))
        key = pseudonyms.pseudonym_key()
        names = {
            pseudonyms.pseudonym(p.player_id, key): p.worker_id
            for p in db.session.scalars(select(Participant))
        }
    frame = load(tmp_path / "dump")
    cleaned = cleaning.clean(frame)
    assert set(cleaned.frame["annotator"].map(names)) <= approved
    assert {names[a] for a in cleaned.dropped_annotators["decisions"]} == NOT_APPROVED
    out = tmp_path / "report"
    report = ["report", str(tmp_path / "dump"), "--out", str(out), "--bootstrap", "0"]
    assert analysis_main(report) == 0
    left = pd.read_csv(out / "left_out.csv")
    whole = {names[a]: why for a, why in zip(left["annotator"], left["why"], strict=True)}
    assert {w for w, why in whole.items() if why != cleaning.CHECK_ROUNDS} == NOT_APPROVED
