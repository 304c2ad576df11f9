"""The boards' counts as `board_counts` plus the deltas not folded into it yet
(app/models/standings.py): ranks and gaps exact after any sequence of writes and folds, the
migration that adds the deltas, and folds running at once with each other and with answers.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from datetime import timedelta

import pytest
from flask_migrate import downgrade, upgrade
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, event, func, select, text

from app.extensions import db
from app.game.scoring import Verdict
from app.leaderboard import recording, skill, standings
from app.models import BoardCount, BoardCountDelta, BoardTotal, CategoryTotal, Player, PlayerTotal
from app.models.base import utcnow
from app.models.standings import POINTS, SKILL
from tests import factories
from tests.test_leaderboard import counts_from_totals, folded_counts, stored_counts
from tests.test_migrations import MIGRATIONS, backend_url

SLOTS = 4  # players at once; a deleted one's slot gets a new guest on its next answer
CATEGORIES = ("news", "stories")
DETECTIONS = ((1, 5, 0, 0), (1, 4, 0, 0), (1, 0, 0, 0), (0, 0, 1, 1), (0, 0, 1, 0))
AGES = (0, 8, 40, 400)  # days before now: this week, last week, an earlier month, a year ago

answers = st.tuples(
    st.just("answer"),
    st.integers(0, SLOTS - 1),
    st.integers(0, len(CATEGORIES) - 1),
    st.integers(0, 5),  # points
    st.integers(0, len(DETECTIONS) - 1),
    st.integers(0, len(AGES) - 1),
    # Rounds in a row: enough of them put a row on the skill board (MIN_ROUNDS).
    st.sampled_from((1, 1, 2, skill.MIN_ROUNDS)),
    st.booleans(),  # the answer finds the record implausible and takes the player off
)
steps = st.one_of(
    answers,
    st.tuples(st.sampled_from(("sign_up", "unlist", "restore", "delete")), st.integers(0, 3)),
    st.tuples(st.just("fold")),
)


def _clear() -> None:
    for model in (BoardCountDelta, BoardCount, BoardTotal, CategoryTotal, PlayerTotal, Player):
        db.session.execute(delete(model))
    db.session.commit()


def _expected(board: list[BoardTotal], measure: str, mine: int) -> tuple[int, int | None]:
    """Brute force: 1 + the rows on the board above `mine`, and the smallest value above."""
    above = [getattr(row, measure) for row in board if getattr(row, measure) > mine]
    return 1 + len(above), min(above) if above else None


def _check_every_standing() -> None:
    """Each row's rank and next value above, on both measures, as the app reads them (the
    counts plus the deltas), against a count of the board rows."""
    rows = db.session.scalars(select(BoardTotal)).all()
    boards: dict[tuple[str, int], list[BoardTotal]] = {}
    for row in rows:
        boards.setdefault((row.period, row.scope), []).append(row)
    for row in rows:
        for measure, on_board in ((POINTS, "listed"), (SKILL, "ranked")):
            board = [other for other in boards[row.period, row.scope] if getattr(other, on_board)]
            read = db.session.execute(
                standings._standing_query(measure),
                {"period": row.period, "scope": row.scope, "player_id": row.player_id},
            ).one()
            expected = _expected(board, measure, getattr(row, measure))
            assert (read.better + 1, read.above) == expected, (row.period, row.scope, measure)
    assert stored_counts() == counts_from_totals()
    # The folded counts are a past moment's exact counts: none at 0 or below.
    assert db.session.scalar(select(func.count()).where(BoardCount.players <= 0)) == 0


def _run(sequence: list[tuple], fold_every: int) -> None:
    _clear()
    categories = [factories.category(slug).id for slug in CATEGORIES]
    db.session.commit()
    slots: list[int | None] = [
        factories.player(f"named{slot}" if slot < 2 else None).id for slot in range(SLOTS)
    ]
    now = utcnow()
    for step in sequence:
        kind, *args = step
        if kind == "answer":
            slot, category, points, detection, age, repeat, implausible = args
            if slots[slot] is None:
                slots[slot] = factories.player(None).id
            player = db.session.get(Player, slots[slot])
            for _ in range(repeat):
                off: list[bool] = []

                def review(stats, off=off, implausible=implausible, player=player) -> bool:
                    off.append(implausible and player.restored_at is None)
                    return off[-1]

                recording.record_answer(
                    player.id,
                    categories[category],
                    Verdict(points, int(points == 5), ""),
                    when=now - timedelta(days=AGES[age]),
                    detection=DETECTIONS[detection],
                    review=review,
                )
                if off[-1]:
                    # As app/leaderboard/integrity.py does: the rows have left the boards.
                    player.unlisted_at, player.unlisted_reason = now, "implausible"
                db.session.commit()
                recording.fold_if_due()
        elif kind == "fold":
            assert recording.fold() is not None
        else:
            slot = args[0]
            if slots[slot] is None:
                continue
            player = db.session.get(Player, slots[slot])
            if kind == "sign_up":
                if player.username is None:
                    player.username, player.is_guest = f"joined{player.id}", False
            elif kind == "unlist":
                player.unlisted_at, player.unlisted_reason = now, "by hand"
            elif kind == "restore":
                if player.unlisted_at is not None:
                    player.unlisted_at, player.restored_at = None, now
            else:
                db.session.delete(player)
                slots[slot] = None
            db.session.commit()
        _check_every_standing()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(sequence=st.lists(steps, min_size=1, max_size=14), fold_every=st.integers(1, 40))
def test_ranks_and_gaps_stay_exact_through_any_writes_and_folds(ctx, sequence, fold_every):
    """Random answers (some that take their player off the boards), sign-ups, unlistings,
    restores, deletions and folds, with folds after every `fold_every`-th delta: after every
    step each board row's rank and gap equal a count of the board rows."""
    ctx.config["BOARD_FOLD_EVERY"] = fold_every
    _run(sequence, fold_every)


def test_a_key_whose_count_is_emptied_by_deltas_is_not_the_next_value_above(ctx):
    """Bob, at 4, leaves his count in a delta not folded yet: the count row of 4 still says 1,
    and Ada, at 3, must see the gap to Cyd at 5 and rank 2, not to a count of nobody."""
    ctx.config["BOARD_FOLD_EVERY"] = 10**9
    news = factories.category("news")
    ada, bob, cyd = (factories.player(name) for name in ("ada", "bob", "cyd"))
    for player, points in ((ada, 3), (bob, 4), (cyd, 5)):
        recording.record_answer(player.id, news.id, Verdict(points, 0, ""))
    db.session.commit()
    assert folded_counts()["all", 0, POINTS, 4] == 1
    recording.record_answer(bob.id, news.id, Verdict(5, 0, ""))  # bob: 4 -> 9
    db.session.commit()
    mine = standings.standing_of(ada, **{"measure": POINTS})
    assert (mine.rank, mine.gap) == (3, 2)
    assert db.session.scalar(select(BoardCount.players).where(BoardCount.value == 4)) == 1
    _check_every_standing()


def test_answers_fold_when_their_deltas_take_an_id_that_is_a_multiple(ctx):
    ctx.config["BOARD_FOLD_EVERY"] = 5
    news = factories.category("news")
    ada = factories.player("ada")
    pending = []
    for points in (1, 2, 3, 4):
        recording.record_answer(ada.id, news.id, Verdict(points, 0, ""))
        db.session.commit()
        recording.fold_if_due()
        pending.append(db.session.scalar(select(func.count()).select_from(BoardCountDelta)))
    # The first answer appends 6 deltas (points on the overall and category boards of three
    # periods), each later one 12 (6 values left, 6 entered): ids 1-6 fold at 5, 7-18 at 10 and
    # 15, 19-30 at 20, 25 and 30, 31-42 at 35 and 40.
    assert pending == [0, 0, 0, 0]
    ctx.config["BOARD_FOLD_EVERY"] = 1000
    recording.record_answer(ada.id, news.id, Verdict(5, 0, ""))
    db.session.commit()
    recording.fold_if_due()
    assert db.session.scalar(select(func.count()).select_from(BoardCountDelta)) == 12
    _check_every_standing()


def test_an_answer_moves_its_counts_in_one_insert_and_touches_no_count_row(ctx):
    """An answer that moves its player on six boards and both measures (12 counts left, 12
    entered) appends 24 deltas in one statement, and reads or writes no row of `board_counts`
    (the old upsert and the DELETE of emptied counts made two statements that locked them)."""
    ctx.config["BOARD_FOLD_EVERY"] = 10**9
    news = factories.category("news")
    ada = factories.player("ada")
    for _ in range(skill.MIN_ROUNDS):
        recording.record_answer(ada.id, news.id, Verdict(2, 0, ""), detection=(1, 2, 0, 0))
    db.session.commit()
    before = db.session.scalar(select(func.max(BoardCountDelta.id)))
    statements: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany):
        statements.append(statement)

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        recording.record_answer(ada.id, news.id, Verdict(5, 0, ""), detection=(1, 5, 0, 0))
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    # One statement appends the deltas (on PostgreSQL the same one that writes the rows), and
    # none names `board_counts`.
    touching = [s for s in statements if "board_count" in s]
    assert len(touching) == 1
    assert "INSERT INTO board_count_deltas" in touching[0]
    assert not re.search(r"\bboard_counts\b", touching[0])
    db.session.commit()
    assert db.session.scalar(select(func.max(BoardCountDelta.id))) - before == 24
    _check_every_standing()


def test_the_fold_command(ctx):
    news = factories.category("news")
    ada = factories.player("ada")
    recording.record_answer(ada.id, news.id, Verdict(3, 0, ""))
    db.session.commit()
    runner = ctx.test_cli_runner()
    result = runner.invoke(args=["boards", "fold"])
    assert result.exit_code == 0, result.output
    assert "Folded 6 pending change(s)" in result.output
    assert db.session.scalar(select(func.count()).select_from(BoardCountDelta)) == 0
    assert stored_counts() == counts_from_totals()
    result = runner.invoke(args=["boards", "fold"])
    assert "Folded 0 pending change(s)" in result.output


def test_a_failed_fold_is_logged_and_leaves_the_deltas(ctx, caplog):
    news = factories.category("news")
    ada = factories.player("ada")
    recording.record_answer(ada.id, news.id, Verdict(3, 0, ""))
    db.session.commit()

    def refuse(conn, cursor, statement, parameters, context, executemany):
        if "INSERT INTO board_counts" in statement:
            raise RuntimeError("the database said no")

    event.listen(db.engine, "before_cursor_execute", refuse)
    try:
        db.session.info[recording._FOLD_DUE] = True
        recording.fold_if_due()  # does not raise
    finally:
        event.remove(db.engine, "before_cursor_execute", refuse)
    assert "folding the leaderboard counts failed" in caplog.text
    # Rolled back: the deltas are still there and the counts unchanged.
    assert db.session.scalar(select(func.count()).select_from(BoardCountDelta)) == 6
    assert db.session.scalar(select(func.count()).select_from(BoardCount)) == 0
    assert stored_counts() == counts_from_totals()
    assert folded_counts() == counts_from_totals()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0017_keeps_the_counts_both_ways(make_app, tmp_path, backend):
    """Counts partly folded, partly pending: the downgrade folds the pending deltas into
    `board_counts` (dropping counts that reach 0), and upgrading again starts with no deltas and
    the same counts."""
    app = make_app(SQLALCHEMY_DATABASE_URI=backend_url(tmp_path, backend), BOARD_FOLD_EVERY=10**9)
    with app.app_context():
        upgrade(directory=MIGRATIONS, revision="head")
        news, stories = factories.category("news"), factories.category("stories")
        players = [factories.player(name) for name in ("ada", "bob", "cyd", None)]
        for index, player in enumerate(players):
            for category in (news, stories, news):
                recording.record_answer(player.id, category.id, Verdict(index % 3 + 1, 0, ""))
        db.session.commit()
        assert recording.fold() is not None
        # Pending: Bob moves (emptying his old values), Cyd leaves, the guest joins.
        recording.record_answer(players[1].id, news.id, Verdict(5, 0, ""))
        db.session.delete(players[2])
        players[3].username = "dee"
        db.session.commit()
        expected = counts_from_totals()
        assert stored_counts() == expected
        pending = db.session.scalar(select(func.count()).select_from(BoardCountDelta))
        assert pending > 0
        db.session.remove()

        downgrade(directory=MIGRATIONS, revision="0016_levels")
        with db.engine.connect() as conn:
            rows = conn.execute(
                text("SELECT period, scope, measure, value, players FROM board_counts")
            ).all()
        assert {tuple(row[:4]): row[4] for row in rows} == expected
        assert all(row.players > 0 for row in rows)

        upgrade(directory=MIGRATIONS, revision="head")
        assert db.session.scalar(select(func.count()).select_from(BoardCountDelta)) == 0
        assert stored_counts() == expected
        db.session.remove()
        downgrade(directory=MIGRATIONS, revision="base")
        db.engine.dispose()


# -- folds at once, on PostgreSQL --------------------------------------------------------------

WAIT = 10


def _postgres_only() -> None:
    if db.engine.dialect.name != "postgresql":
        pytest.skip("concurrent transactions are PostgreSQL's (SQLite has one writer)")


def _pending() -> int:
    return db.session.scalar(select(func.count()).select_from(BoardCountDelta))


def test_a_second_fold_takes_nothing_and_answers_go_on_while_one_folds(app):
    """Fold A has taken the deltas and holds its transaction open (the counts' rows locked):
    fold B, started meanwhile, takes nothing and returns at once; an answer appends its deltas
    and commits meanwhile, and they are left for the next fold (A's DELETE did not see them)."""
    app.config["BOARD_FOLD_EVERY"] = 10**9
    with app.app_context():
        _postgres_only()
        news = factories.category("news").id
        players = [factories.player(f"p{index}").id for index in range(6)]
        for index, player_id in enumerate(players):
            recording.record_answer(player_id, news, Verdict(index % 3, 0, ""))
        db.session.commit()
        assert recording.fold() is not None
        for index, player_id in enumerate(players):
            recording.record_answer(player_id, news, Verdict(index % 2 + 1, 0, ""))
        db.session.commit()
        before = _pending()

    roles: dict[int, str] = {}
    a_took = threading.Event()
    others_done = threading.Event()
    results: dict[str, object] = {}

    def after(conn, cursor, statement, parameters, context, executemany):
        if (
            roles.get(threading.get_ident()) == "a"
            and "DELETE FROM board_count_deltas" in statement
        ):
            a_took.set()
            results["a waited"] = others_done.wait(WAIT)

    def fold(name: str) -> None:
        roles[threading.get_ident()] = name
        with app.app_context():
            if name != "a":
                assert a_took.wait(WAIT)
            results[name] = recording.fold()
            db.session.remove()

    def answer() -> None:
        with app.app_context():
            assert a_took.wait(WAIT)
            recording.record_answer(players[0], news, Verdict(5, 0, ""))
            db.session.commit()
            results["answered"] = True
            db.session.remove()

    with app.app_context():
        engine = db.engine
    event.listen(engine, "after_cursor_execute", after)
    try:
        folder_a = threading.Thread(target=fold, args=("a",))
        folder_a.start()
        others = [threading.Thread(target=fold, args=("b",)), threading.Thread(target=answer)]
        for thread in others:
            thread.start()
        for thread in others:
            thread.join(timeout=60)
        others_done.set()
        folder_a.join(timeout=60)
    finally:
        event.remove(engine, "after_cursor_execute", after)

    assert results == {"a": before, "b": 0, "answered": True, "a waited": True}
    with app.app_context():
        # The answer's deltas (6 values left, 6 entered) wait for the next fold.
        assert _pending() == 12
        assert stored_counts() == counts_from_totals()
        assert folded_counts() == counts_from_totals()


def test_folds_racing_answers_lose_and_double_no_delta(app):
    """Two threads fold in a loop while four answer in a loop (folding after every 7th delta
    too): every delta is folded once, so the counts plus what is left equal a recount."""
    app.config["BOARD_FOLD_EVERY"] = 7
    with app.app_context():
        _postgres_only()
        categories = [factories.category(slug).id for slug in ("news", "stories", "poems")]
        players = [factories.player(f"p{index}").id for index in range(8)]
        db.session.commit()
    stop = threading.Event()
    errors: list[str] = []
    folded: list[int | None] = []

    def folder() -> None:
        with app.app_context():
            while not stop.is_set():
                folded.append(recording.fold())
            db.session.remove()

    def answerer(index: int) -> None:
        with app.app_context():
            try:
                for turn in range(25):
                    player_id = players[(index + turn) % len(players)]
                    recording.record_answer(
                        player_id,
                        categories[turn % len(categories)],
                        Verdict((index * turn) % 6, 0, ""),
                        detection=((1, 5, 0, 0), (0, 0, 1, 1), (1, 0, 0, 0))[turn % 3],
                    )
                    db.session.commit()
                    recording.fold_if_due()
            except Exception as error:  # the test reports what failed
                errors.append(repr(error)[:300])
                db.session.rollback()
            finally:
                db.session.remove()

    folders = [threading.Thread(target=folder) for _ in range(2)]
    answerers = [threading.Thread(target=answerer, args=(index,)) for index in range(4)]
    for thread in folders + answerers:
        thread.start()
    for thread in answerers:
        thread.join(timeout=120)
    stop.set()
    for thread in folders:
        thread.join(timeout=60)

    assert errors == []
    assert None not in folded and sum(folded) > 0
    with app.app_context():
        assert stored_counts() == counts_from_totals()
        _check_every_standing()
        counts = folded_counts()
        assert counts == counts_from_totals()
        # 100 answers between 8 players: some rows have enough rounds for the skill board.
        assert Counter(key[2] for key in counts)[SKILL] > 0
