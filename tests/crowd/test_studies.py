"""The study service on a real database: pools, checks, quotas, balancing, resume, outcomes."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from sqlalchemy import func, select

from app.crowd import admin, pool, ratings, serving, verdicts
from app.errors import BadRequest, Conflict, Forbidden
from app.extensions import db
from app.game import answers, reveals, rounds
from app.leaderboard import standings
from app.models import Example, Participant, ParticipantStatus, Player, PlayerTotal, Round, Study
from app.models.rounds import CHECK_ROUND, NORMAL_ROUND, PRACTICE_ROUND
from roftcore.boundary import points as boundary_points
from tests.crowd.helpers import join, make_pool, make_study, play_slot, study_round


def test_create_study_fixes_pool_and_builds_both_kinds_of_check(ctx):
    make_pool(normal=12, human=4)
    study = make_study(attention_check_rate=0.3, all_human_checks=1)
    assert len(study.pool["normal"]) == 16  # all news examples, all-human ones included
    human = db.session.scalars(select(Example).where(Example.id.in_(study.pool["checks"]))).all()
    assert len(human) == 1  # one all-human check per worker: one text is enough
    assert human[0].boundary == human[0].n_sentences == 10
    assert "attention check" in human[0].sentences[0]
    inside = db.session.scalars(
        select(Example).where(Example.id.in_(study.pool["inside_checks"]))
    ).all()
    assert len(inside) == 6  # two per worker, made three times over for variety
    sources = {e.external_id: e for e in db.session.scalars(select(Example))}
    for check in [*human, *inside]:
        assert check.kind == CHECK_ROUND and check.source["attention_check_for"] == "pilot"
    for check in inside:
        # The boundary is the check sentence, never the first (always human) sentence.
        assert 1 <= check.boundary < check.n_sentences == 10
        assert check.sentences[check.boundary] == pool.INSIDE_INSTRUCTION
        assert pool.INSIDE_INSTRUCTION not in check.sentences[: check.boundary]
        original = sources[check.source["from_example"]].sentences
        assert check.sentences[: check.boundary] == original[: check.boundary]
    assert len({c.boundary for c in inside}) > 1  # not always the same sentence
    # Checks never reach the public game.
    assert all(c.slug != "attention-check" for c in rounds.categories_with_examples())


def test_create_study_refuses_bad_pools(ctx):
    make_pool(normal=12, human=0)
    with pytest.raises(BadRequest, match="all-human texts are needed"):
        make_study(all_human_checks=1)
    with pytest.raises(BadRequest, match="unknown category"):
        make_study(categories=["poetry"])
    with pytest.raises(BadRequest, match="unknown example"):
        make_study(examples=["nope"])
    few = list(db.session.scalars(select(Example.external_id).limit(2)))
    with pytest.raises(BadRequest, match="fewer than the 8 normal rounds"):
        make_study(categories=[], examples=few)
    assert db.session.scalar(select(func.count()).select_from(Study)) == 0
    assert db.session.scalar(select(func.count()).where(Example.kind == CHECK_ROUND)) == 0


def test_duplicate_slug_is_refused(ctx):
    make_pool()
    make_study()
    with pytest.raises(Conflict):
        make_study()


def test_a_worker_plays_the_quota_and_gets_one_code_only_then(ctx):
    make_pool()
    study = make_study(completion_codes={"completed": "C1DONE01"}, platform="prolific")
    participant = join(study)
    kinds = []
    for slot in range(10):
        assert verdicts.completion_code(participant) is None  # no code before the quota
        assert participant.status == ParticipantStatus.started
        kinds.append(play_slot(study, participant).kind)
        assert participant.rounds_done == slot + 1
    assert Counter(kinds) == {NORMAL_ROUND: 8, CHECK_ROUND: 2}
    assert [k == CHECK_ROUND for k in kinds] == [k != "normal" for k in participant.schedule]
    assert participant.status == ParticipantStatus.completed
    assert participant.checks_passed == 2
    assert verdicts.completion_code(participant) == "C1DONE01"
    assert verdicts.completion_url(participant).endswith("cc=C1DONE01")
    assert study_round(study, participant) is None


def test_checks_earn_no_points_and_stay_off_totals(ctx):
    make_pool()
    study = make_study(rounds=5, attention_check_rate=0.4)
    participant = join(study)
    for _ in range(5):
        play_slot(study, participant, flag_at=3)
    answered = db.session.scalars(select(Round).where(Round.participant_id == participant.id)).all()
    check_points = [r.points for r in answered if r.kind == CHECK_ROUND]
    assert check_points == [0, 0]
    normal = [r for r in answered if r.kind == NORMAL_ROUND]
    # Each normal round earns what the scoring rule gives its stored guess (which text was drawn
    # is random: three all-human texts flagged at sentence 3 may all earn 0).
    assert len(normal) == 3
    assert [r.points for r in normal] == [
        boundary_points(r.guess, r.example.boundary) for r in normal
    ]
    total = db.session.get(PlayerTotal, participant.player_id)
    assert total.rounds == 3 and total.points == sum(r.points for r in normal)
    assert standings.top() == []  # crowd workers have no public name


def test_failing_two_checks_gives_the_failure_outcome_and_code(ctx):
    make_pool()
    study = make_study(completion_codes={"completed": "C1DONE01"}, platform="prolific")
    participant = join(study)
    for _ in range(10):
        play_slot(study, participant, pass_check=False)
    assert participant.checks_failed == 2
    assert participant.status == ParticipantStatus.failed_checks
    code = verdicts.completion_code(participant)
    assert code and code != "C1DONE01" and len(code) == 12  # per-worker code: none configured


def test_per_worker_codes_are_unique_on_generic_platforms(ctx):
    make_pool(normal=20, human=6)
    study = make_study(platform="generic", completion_codes={}, rounds=3, attention_check_rate=0)
    made = []
    for i in range(4):
        participant = join(study, worker=f"w{i}", session=None)
        for _ in range(3):
            play_slot(study, participant)
        made.append(verdicts.completion_code(participant))
    assert len(set(made)) == 4 and all(made)


def test_balancing_prefers_examples_under_k(ctx):
    make_pool(normal=4, human=2)
    study = make_study(rounds=2, attention_check_rate=0, target_per_example=1)
    seen = Counter()
    for i in range(6):
        participant = join(study, worker=f"w{i}", session=f"s{i}")
        for _ in range(2):
            seen[play_slot(study, participant).example_id] += 1
    # 6 examples in the pool, 12 rounds: every example is read, and within each kind (machine
    # or all human: each worker reads the pool's mix, app/crowd/balance.py) the least read
    # come first, so no example of a kind gets a third reading before the others have K = 1.
    assert set(seen) == set(study.pool["normal"])
    for human in (False, True):
        kind = [n for e, n in seen.items() if (db.session.get(Example, e).boundary == 10) == human]
        assert max(kind) - min(kind) <= 1


def test_returning_worker_resumes_only_with_proof(ctx):
    make_pool()
    study = make_study()
    first = join(study, worker="w1", session="secret-session")
    again = join(study, worker="w1", session="secret-session")  # Prolific reopened the link
    assert again.id == first.id
    bound = join(study, worker="w1", session="other", bound=first.id)  # this browser's session
    assert bound.id == first.id
    with pytest.raises(Forbidden):
        join(study, worker="w1", session="guessed")  # someone else with the worker's id
    assert db.session.scalar(select(func.count()).select_from(Participant)) == 1


def test_consent_and_screening(ctx):
    make_pool()
    screening = {
        "question": "Do you read English fluently?",
        "options": ["yes", "no"],
        "accept": ["yes"],
    }
    study = make_study(screening=screening)
    with pytest.raises(BadRequest, match="consent"):
        join(study, consent=False)
    out = join(study, worker="w2", session="s2", screening="no")
    assert out.status == ParticipantStatus.screened_out
    assert study_round(study, out) is None
    assert verdicts.completion_code(out)  # a per-worker code for the screened-out outcome


def test_closed_study_admits_no_one_new(ctx):
    make_pool()
    study = make_study()
    inside = join(study, worker="w1")
    admin.set_open(study, False)
    with pytest.raises(Conflict, match="closed"):
        join(study, worker="w2", session="s2")
    assert join(study, worker="w1", session="s1").id == inside.id  # those inside can go on


def test_practice_rounds_come_first_and_do_not_count(ctx):
    make_pool()
    practice = db.session.scalars(select(Example.external_id).order_by(Example.id).limit(2)).all()
    study = make_study(tutorial=list(practice), rounds=3, attention_check_rate=0)
    participant = join(study)
    first = play_slot(study, participant)
    second = play_slot(study, participant)
    assert [first.kind, second.kind] == [PRACTICE_ROUND, PRACTICE_ROUND]
    assert first.points == 0 and participant.rounds_done == 0
    for _ in range(3):
        assert play_slot(study, participant).kind == NORMAL_ROUND
    assert participant.status == ParticipantStatus.completed


def test_likert_ratings_are_validated_and_stored_once(ctx):
    make_pool()
    criterion = {
        "name": "fluency",
        "question": "How fluent is the flagged sentence?",
        "labels": ["Unreadable", "Awkward", "Acceptable", "Good", "Perfect"],
    }
    study = make_study(likert=[criterion], attention_check_rate=0)
    participant = join(study)
    done = play_slot(study, participant, rating=None)
    with pytest.raises(BadRequest):
        ratings.save_ratings(participant, done, {"rating_fluency": "9"})
    ratings.save_ratings(participant, done, {"rating_fluency": "4"})
    ratings.save_ratings(participant, done, {"rating_fluency": "1"})  # a replay changes nothing
    db.session.refresh(done)
    assert done.ratings == {"fluency": 4}


def test_concurrent_next_round_requests_make_one_round(app):
    with app.app_context():
        make_pool()
        study_id = make_study().id
        participant_id = join(db.session.get(Study, study_id)).id
    barrier = threading.Barrier(4)
    made = []

    def worker():
        with app.app_context():
            study = db.session.get(Study, study_id)
            participant = db.session.get(Participant, participant_id)
            barrier.wait()
            made.append(study_round(study, participant).id)
            db.session.remove()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(made) == 4 and len(set(made)) == 1
    with app.app_context():
        count = db.session.scalar(
            select(func.count()).where(Round.participant_id == participant_id)
        )
        assert count == 1


def test_optional_extra_rounds_up_to_max_rounds_keep_the_code(ctx):
    make_pool()
    study = make_study(rounds=3, max_rounds=5, attention_check_rate=0)
    participant = join(study)
    for _ in range(3):
        play_slot(study, participant)
    code = verdicts.completion_code(participant)
    assert participant.status == ParticipantStatus.completed
    assert study_round(study, participant) is None  # nothing more unless asked for
    assert serving.extra_rounds_left(study, participant) == 2
    for _ in range(2):
        extra = study_round(study, participant, extra=True)
        player = db.session.get(Player, participant.player_id)
        reveals.reveal_next(player, extra.id, 1)
        answers.submit_answer(player, extra.id, answers.parse_answer("machine", 2, ["generic"], ""))
        db.session.refresh(participant)
    assert participant.rounds_done == 5
    assert serving.extra_rounds_left(study, participant) == 0
    assert study_round(study, participant, extra=True) is None
    assert verdicts.completion_code(participant) == code
    assert participant.status == ParticipantStatus.completed
