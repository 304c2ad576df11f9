"""The game service on a real database: selection, reveals, answers, points and totals."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from app.errors import BadRequest
from app.extensions import db
from app.game import answers, reveals, starts
from app.models import CategoryTotal, Example, PlayerTotal, Round
from tests import factories


def machine(seen: int, reasons=("repetition",), explanation: str = "") -> answers.Answer:
    return answers.parse_answer("machine", seen, list(reasons), explanation)


def human(seen: int) -> answers.Answer:
    return answers.parse_answer("human", seen, [], "")


def reveal_until(player, round_, shown: int) -> None:
    while round_.revealed < shown:
        reveals.reveal_next(player, round_.id, round_.revealed)


def test_reveal_one_at_a_time_with_server_timestamps(ctx):
    factories.example(boundary=4)
    player = factories.player()
    round_ = factories.started(player, "news")
    reveals.reveal_next(player, round_.id, 1)
    reveals.reveal_next(player, round_.id, 2)
    db.session.refresh(round_)
    assert round_.revealed == 3
    times = [r.revealed_at for r in round_.reveals]
    assert [r.sentence_index for r in round_.reveals] == [0, 1, 2]
    assert times == sorted(times) and all(t.tzinfo is not None for t in times)


@pytest.mark.parametrize(
    ("boundary", "flag_at", "expected_points", "expected_guess"),
    [(4, 4, 5, 4), (4, 6, 3, 6), (4, 2, 0, 2), (1, 1, 5, 1), (2, 9, 0, 9)],
)
def test_machine_answer_scores_the_latest_sentence(
    ctx, boundary, flag_at, expected_points, expected_guess
):
    factories.example(boundary=boundary)
    player = factories.player()
    round_ = factories.started(player, "news")
    reveal_until(player, round_, flag_at + 1)  # sentence index flag_at is the latest shown
    done = answers.submit_answer(player, round_.id, machine(flag_at + 1))
    assert done.guess == expected_guess
    assert done.points == expected_points
    assert done.reasons == ["repetition"]
    assert db.session.get(Round, round_.id).answered_at is not None


def test_all_human_only_at_the_last_sentence(ctx):
    factories.example(boundary=10)
    player = factories.player()
    round_ = factories.started(player, "news")
    reveal_until(player, round_, 9)
    with pytest.raises(BadRequest):
        answers.submit_answer(player, round_.id, human(9))
    reveal_until(player, round_, 10)
    done = answers.submit_answer(player, round_.id, human(10))
    assert done.guess == 10 and done.points == 5


def test_answer_needs_a_reason_or_explanation():
    with pytest.raises(BadRequest, match="at least one reason"):
        answers.parse_answer("machine", 3, [], "   ")
    assert answers.parse_answer("machine", 3, [], "It repeats itself").explanation == (
        "It repeats itself"
    )
    with pytest.raises(BadRequest, match="Unknown reason"):
        answers.parse_answer("machine", 3, ["vibes"], "")
    with pytest.raises(BadRequest):
        answers.parse_answer("maybe", 3, [], "x")
    with pytest.raises(BadRequest):
        answers.parse_answer("machine", "three", ["grammar"], "")
    with pytest.raises(BadRequest, match="under 2000"):
        answers.parse_answer("machine", 3, [], "x" * 2001)


def test_reasons_are_kept_in_canonical_order_without_duplicates():
    answer = answers.parse_answer("machine", 2, ["generic", "grammar", "generic"], "")
    assert answer.reasons == ["grammar", "generic"]


def test_start_resumes_the_open_round(ctx):
    factories.example(boundary=2)
    factories.example(boundary=3)
    player = factories.player()
    first = factories.started(player, "news")
    again = factories.started(player, "random")
    assert again.id == first.id


def test_never_the_same_text_twice_then_a_clear_message(ctx):
    examples = {factories.example(boundary=2).id for _ in range(3)}
    factories.example(boundary=2, category_slug="stories")
    player = factories.player()
    seen = set()
    for _ in range(3):
        round_ = factories.started(player, "news")
        seen.add(round_.example_id)
        reveal_until(player, round_, 3)
        answers.submit_answer(player, round_.id, machine(3))
    assert seen == examples
    with pytest.raises(starts.NoExamplesLeft, match="every text in News"):
        factories.started(player, "news")
    other = factories.started(player, "random")
    assert other.example.category.slug == "stories"
    orders = db.session.scalars(select(Round.order_index).order_by(Round.id)).all()
    assert orders == [1, 2, 3, 4]


def test_answers_increment_annotation_counts_and_totals(ctx):
    example = factories.example(boundary=3)
    factories.example(boundary=5, category_slug="stories")
    player = factories.player("ada")
    r1 = factories.started(player, "news")
    reveal_until(player, r1, 5)  # flags index 4: one late -> 4 points
    answers.submit_answer(player, r1.id, machine(5))
    r2 = factories.started(player, "stories")
    reveal_until(player, r2, 3)  # flags index 2 of boundary 5: too early -> 0
    answers.submit_answer(player, r2.id, machine(3))
    db.session.refresh(example)
    assert example.annotation_count == 1
    overall = db.session.get(PlayerTotal, player.id)
    assert (overall.points, overall.rounds, overall.exact, overall.too_early) == (4, 2, 0, 1)
    assert overall.distance_sum == 1 + (-3)
    assert overall.abs_distance_sum == 4
    per_category = {
        row.category_id: row.points
        for row in db.session.scalars(
            select(CategoryTotal).where(CategoryTotal.player_id == player.id)
        )
    }
    assert sorted(per_category.values()) == [0, 4]
    stored_sum = db.session.scalar(
        select(func.sum(Round.points)).where(Round.player_id == player.id)
    )
    assert stored_sum == overall.points


def test_unique_player_example_is_enforced_by_the_database(ctx):
    from sqlalchemy.exc import IntegrityError

    example = factories.example(boundary=2)
    player = factories.player()
    db.session.add(
        Round(player_id=player.id, example_id=example.id, order_index=1, chosen_category="news")
    )
    db.session.commit()
    db.session.add(
        Round(player_id=player.id, example_id=example.id, order_index=2, chosen_category="news")
    )
    with pytest.raises(IntegrityError):
        db.session.commit()
    db.session.rollback()
    assert db.session.scalar(select(func.count()).select_from(Example)) == 1
