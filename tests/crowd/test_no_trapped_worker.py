"""No worker is trapped without a text: a study's schedule is complete before the first round.

A pool of passages in several versions, spliced baselines among them (a splice shows its own
passage and the donor's), inside-text checks (each shows its source's passage): `flask study
check` refuses a study one passage short and says so; with that passage, every place gets a
complete schedule with no passage twice. A worker the pool cannot serve in full is not admitted
to the rounds and leaves with the screened-out code; a worker whose schedule was stored
incomplete (before schedules were complete at entry) finishes with the completed code when
the text is missing; verify and the dashboard name both, with the cause. On SQLite, and on
PostgreSQL with TEST_DATABASE_URL.
"""

from __future__ import annotations

import random
from collections import Counter
from datetime import timedelta

from sqlalchemy import select, update

from app.crowd import admission, fill, lookup, slots, verdicts, verify, verify_submissions
from app.crowd.reports import worker_stats
from app.extensions import db
from app.models import ExamplePassage, ParticipantStatus, Round, Study, StudySlot
from tests import factories
from tests.crowd.helpers import join, play_slot, study_round
from tests.crowd.test_crowd_http import join_http
from tests.crowd.test_scripted_study_review import sign_in
from tests.crowd.test_study_cli import STUDY_TOML, create

# Eight rounds, two of them inside-text checks: each worker needs eight passages.
TOML = (
    STUDY_TOML.replace("rounds = 6", "rounds = 8\nplaces = 6")
    .replace("attention_check_rate = 0.34", "attention_check_rate = 0.25")
    .replace("[completion_codes]", '[completion_codes]\nscreened_out = "C3OUT003"')
)


def passages(count: int) -> None:
    """`count` passages, each as an all-human text, a machine continuation and a splice whose
    second half comes from the next passage (the last one's from the first)."""
    for i in range(count):
        factories.example(boundary=10, passage=f"doc-{i}")
        factories.example(boundary=4, passage=f"doc-{i}")
        factories.example(
            boundary=5, system_name="splice-baseline", passage=f"doc-{i}",
            splice=f"doc-{(i + 1) % count}",
        )  # fmt: skip


def passages_of(example_ids) -> Counter:
    found: Counter = Counter()
    for example_id in example_ids:
        found.update(
            db.session.scalars(
                select(ExamplePassage.passage_id).where(ExamplePassage.example_id == example_id)
            )
        )
    return found


def test_a_pool_one_passage_short_is_refused_with_the_count(runner, ctx, tmp_path):
    passages(7)
    refused = create(runner, tmp_path, TOML, command="check")
    assert refused.exit_code != 0
    assert "6 of 6 workers would find no text for up to 1 of their 8 rounds" in refused.output
    assert "at least 1 more source passage(s) are needed" in refused.output
    made = create(runner, tmp_path, TOML)
    assert made.exit_code != 0 and "the pool can run out" in made.output
    assert db.session.scalar(select(Study.id)) is None


def test_with_enough_passages_every_place_has_a_complete_schedule(runner, ctx, tmp_path):
    passages(8)
    checked = create(runner, tmp_path, TOML, command="check")
    assert checked.exit_code == 0, checked.output
    assert "none runs out" in checked.output
    assert create(runner, tmp_path, TOML).exit_code == 0
    study = lookup.get_study("pilot")
    for n in range(6):
        worker = join(study, f"w{n}", f"s{n}")
        assert worker.status == ParticipantStatus.started
        texts = [s.example_id for s in slots.stored(worker)]
        assert len(texts) == 8 and None not in texts
        # Every passage once: the splices, which take two, had to give way.
        assert sorted(passages_of(texts).values()) == [1] * 8
        while study_round(study, worker) is not None:
            play_slot(study, worker, flag_at=None)
        db.session.refresh(worker)
        assert worker.status == ParticipantStatus.completed and worker.rounds_done == 8


def test_a_worker_the_pool_cannot_serve_is_not_admitted_and_gets_a_code(app, runner, ctx, tmp_path):
    passages(8)
    assert create(runner, tmp_path, TOML).exit_code == 0
    study = lookup.get_study("pilot")
    # A study made before the pool was checked: the researcher cut its pool by hand.
    pool = dict(study.pool)
    pool["normal"] = pool["normal"][:5]
    study.pool = pool
    db.session.commit()
    browser = app.test_client()
    page = join_http(browser).headers["Location"]
    page = browser.get(page, follow_redirects=True).get_data(as_text=True)
    assert "This is not because of anything you did" in page and "C3OUT003" in page
    assert "run out of texts" not in page
    worker = join(study, "w-late", "s-late")
    assert worker.status == ParticipantStatus.screened_out
    assert worker.outcome == admission.NO_TEXTS
    assert verdicts.completion_code(worker) == "C3OUT003"
    assert slots.stored(worker) == [] and study_round(study, worker) is None
    stats = {w.worker_id: w for w in worker_stats(study)}
    assert "not admitted: the pool had no complete schedule" in stats["w-late"].trouble
    page = sign_in(app).get("/research/studies/pilot").get_data(as_text=True)
    assert "not admitted: the pool had no complete schedule" in page
    decided = verify.decide(
        study, [verify_submissions.Submission("w-late", "C3OUT003", "AWAITING REVIEW")]
    )
    assert decided[0].decision == verify_submissions.REVIEW
    assert any("the pool had no complete schedule" in r for r in decided[0].reasons)


def test_a_schedule_stored_short_finishes_the_worker_with_the_completed_code(runner, ctx, tmp_path):
    passages(8)
    assert create(runner, tmp_path, TOML).exit_code == 0
    study = lookup.get_study("pilot")
    worker = join(study, "w-old", "s-old")
    plan = slots.stored(worker)
    gap = max(s.position for s in plan if s.kind == "normal")
    # Stored before schedules were complete at entry: a round has no text, and the pool has
    # none left that this worker has not read (the researcher cut it to their other texts).
    pool = dict(study.pool)
    pool["normal"] = [s.example_id for s in plan if s.kind == "normal" and s.position != gap]
    study.pool = pool
    db.session.execute(
        update(StudySlot)
        .where(StudySlot.participant_id == worker.id, StudySlot.position == gap)
        .values(example_id=None)
    )
    db.session.commit()
    stats = {w.worker_id: w for w in worker_stats(study)}
    assert stats["w-old"].trouble == f"no text for round {gap + 1} of their schedule"
    for _ in range(gap):
        play_slot(study, worker, flag_at=None)
    assert study_round(study, worker) is None  # never a dead end
    db.session.refresh(worker)
    assert worker.status == ParticipantStatus.completed and worker.outcome == admission.RAN_OUT
    assert verdicts.completion_code(worker) == "C1DONE01"
    played = db.session.scalars(select(Round.id).where(Round.participant_id == worker.id))
    assert len(list(played)) == gap
    decided = verify.decide(
        study, [verify_submissions.Submission("w-old", "C1DONE01", "AWAITING REVIEW")]
    )
    assert decided[0].decision == verify_submissions.APPROVE
    assert any(f"the pool ran out at round {gap + 1}" in r for r in decided[0].reasons)


def test_fill_finds_a_complete_schedule_where_splices_first_would_not():
    # Passages 1..4; texts 10+p show passage p alone, text 99 shows passages 1 and 2.
    tokens = {10 + p: frozenset({("passage", p), ("example", 10 + p)}) for p in range(1, 5)}
    tokens[99] = frozenset({("passage", 1), ("passage", 2), ("example", 99)})

    # The splice is the least read, so it comes first; taking it would leave three passages
    # for four rounds.
    filled = fill.fill(
        ["normal"] * 4, 4, {"normal": [99, 11, 12, 13, 14]}, tokens, set(), random.Random(1)
    )
    assert filled.complete and sorted(filled.texts.values()) == [11, 12, 13, 14]
    short = fill.fill(["normal"] * 5, 5, {"normal": [99, 11, 12]}, tokens, set(), random.Random(1))
    assert not short.complete and len(short.missing) == 3


def test_every_kind_of_worker_ends_with_the_right_code_and_decision(runner, ctx, tmp_path):
    """The tight pool (every worker reads all eight passages): careful, lazy, returning, timed
    out, screened out, failed checks and a returner who never joined, each decided in the tool."""
    passages(8)
    toml = (
        TOML.replace("stop_after_failed_checks = false", "stop_after_failed_checks = true").replace(
            "rounds = 8", "rounds = 8\ntime_limit_minutes = 30\nscreened_out_pay = 0.30"
        )
        + '\n[screening]\nquestion = "Do you read English daily?"\noptions = ["Yes", "No"]\n'
        'accept = ["Yes"]\n'
    )
    assert create(runner, tmp_path, toml, command="check").exit_code == 0
    assert create(runner, tmp_path, toml).exit_code == 0
    study = lookup.get_study("pilot")

    def enter(worker: str, answer: str = "Yes"):
        return join(study, worker, f"s-{worker}", screening=answer)

    careful = enter("careful")
    while study_round(study, careful) is not None:
        play_slot(study, careful, flag_at=None)
    lazy = enter("lazy")
    while study_round(study, lazy) is not None:
        play_slot(study, lazy, pass_check=False)
    returning = enter("returning")
    for _ in range(3):
        play_slot(study, returning, flag_at=None)
    assert enter("returning").id == returning.id  # the link opened again: the same schedule
    while study_round(study, returning) is not None:
        play_slot(study, returning, flag_at=None)
    late = enter("late")
    play_slot(study, late, flag_at=None)
    late.started_at -= timedelta(minutes=31)
    db.session.commit()
    admission.check_time(late)
    out = enter("out", "No")

    # Twenty seconds a round for everyone: the speed flag compares workers' times, which on a
    # busy machine would otherwise differ by chance.
    for round_ in db.session.scalars(
        select(Round).where(Round.participant_id.is_not(None), Round.answered_at.is_not(None))
    ):
        round_.answered_at = round_.started_at + timedelta(seconds=20)
    db.session.commit()
    codes = {w.worker_id: verdicts.completion_code(w) for w in (careful, lazy, returning, out)}
    assert codes == {
        "careful": "C1DONE01", "lazy": "C2FAIL02", "returning": "C1DONE01", "out": "C3OUT003"
    }  # fmt: skip
    assert lazy.status == ParticipantStatus.failed_checks and lazy.rounds_done < 8
    assert late.status == ParticipantStatus.timed_out and verdicts.completion_code(late) is None
    rows = [
        verify_submissions.Submission("careful", "C1DONE01", "AWAITING REVIEW"),
        verify_submissions.Submission("lazy", "C2FAIL02", "AWAITING REVIEW"),
        verify_submissions.Submission("returning", "C1DONE01", "AWAITING REVIEW"),
        verify_submissions.Submission("late", "NOCODE", "AWAITING REVIEW"),
        verify_submissions.Submission("out", "C3OUT003", "AWAITING REVIEW"),
        verify_submissions.Submission("ghost", None, "RETURNED"),
    ]
    decided = {d.worker_id: d for d in verify.decide(study, rows)}
    assert {w: d.decision for w, d in decided.items()} == {
        "careful": verify_submissions.APPROVE,
        "lazy": verify_submissions.REJECT,
        "returning": verify_submissions.APPROVE,
        "late": verify_submissions.REVIEW,
        "out": verify_submissions.RETURNED,
        "ghost": verify_submissions.RETURNED,
    }
    assert any("ran out of time after 1 round" in r for r in decided["late"].reasons)
    assert decided["out"].bonus_minor == 30
    for worker in (careful, lazy, returning):
        texts = [s.example_id for s in slots.stored(worker)]
        assert None not in texts and max(passages_of(texts).values()) == 1
