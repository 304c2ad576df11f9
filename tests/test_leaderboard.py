"""Leaderboards from maintained totals: order, ranks, scopes, visibility, cache invalidation,
the `listed` flag, points counts and their migration."""

from __future__ import annotations

from collections import Counter

import pytest
from flask_migrate import downgrade, upgrade
from sqlalchemy import select, text, update

from app.accounts import service as accounts
from app.extensions import db
from app.game import rounds
from app.game.scoring import Verdict
from app.leaderboard import standings
from app.models import Category, CategoryTotal, Player, PlayerTotal
from app.models.standings import OVERALL_BOARD, PointsCount
from tests import factories
from tests.test_migrations import MIGRATIONS, backend_url


def play(player, category: str, latest_index: int) -> int:
    """Play one round, flagging sentence `latest_index`; return the points."""
    round_ = rounds.start_round(player, category)
    while round_.revealed < latest_index + 1:
        rounds.reveal_next(player, round_.id, round_.revealed)
    done = rounds.submit_answer(
        player, round_.id, rounds.parse_answer("machine", latest_index + 1, ["generic"], "")
    )
    return done.points


def add_total(player: Player, points: int) -> None:
    """Totals for one round through `record_answer`, with no round behind them (no commit)."""
    standings.record_answer(player.id, factories.category().id, Verdict(points, 0, ""))


def counts_from_totals() -> dict[tuple[int, int], int]:
    """What `points_counts` must hold: listed totals rows per board and number of points."""
    counts: Counter[tuple[int, int]] = Counter()
    for row in db.session.scalars(select(PlayerTotal).where(PlayerTotal.listed)):
        counts[OVERALL_BOARD, row.points] += 1
    for row in db.session.scalars(select(CategoryTotal).where(CategoryTotal.listed)):
        counts[row.category_id, row.points] += 1
    return dict(counts)


def stored_counts() -> dict[tuple[int, int], int]:
    return {(c.board, c.points): c.players for c in db.session.scalars(select(PointsCount))}


def test_order_ranks_ties_and_guests(ctx):
    for _ in range(3):
        factories.example(boundary=2, category_slug="news")
    factories.example(boundary=2, category_slug="stories")
    ada, bob, cyd, guest = (factories.player(n) for n in ("ada", "bob", "cyd", None))
    play(ada, "news", 2)  # 5
    play(ada, "news", 3)  # 4
    play(bob, "news", 2)  # 5
    play(bob, "stories", 4)  # 3
    play(cyd, "news", 6)  # 1
    play(guest, "news", 2)  # 5, but guests are not listed
    board = standings.top()
    assert [(s.name, s.points, s.rank) for s in board] == [
        ("ada", 9, 1),
        ("bob", 8, 2),
        ("cyd", 1, 3),
    ]
    news = db.session.scalar(select(Category).where(Category.slug == "news"))
    by_news = standings.top(news)
    assert [(s.name, s.points, s.rank) for s in by_news] == [
        ("ada", 9, 1),
        ("bob", 5, 2),
        ("cyd", 1, 3),
    ]
    stories = db.session.scalar(select(Category).where(Category.slug == "stories"))
    assert [(s.name, s.points) for s in standings.top(stories)] == [("bob", 3)]
    assert standings.standing_of(guest).rank == 3  # unlisted, but ranked against the listed
    assert standings.standing_of(cyd, stories) is None


def test_ties_share_a_rank_and_fewer_rounds_come_first(ctx):
    for _ in range(2):
        factories.example(boundary=2)
    ada, bob = factories.player("ada"), factories.player("bob")
    play(ada, "news", 2)  # 5 in one round
    play(bob, "news", 4)  # 3
    play(bob, "news", 5)  # 2 -> 5 in two rounds
    board = standings.top()
    assert [(s.name, s.rank) for s in board] == [("ada", 1), ("bob", 1)]
    assert standings.standing_of(bob).rank == 1


def test_top_is_capped_at_50_and_cache_is_invalidated_by_answers(ctx):
    example = factories.example(boundary=1)
    players = [factories.player(f"p{i:02d}") for i in range(55)]
    for i, player in enumerate(players):
        add_total(player, points=i)
    db.session.commit()
    board = standings.top()
    assert len(board) == 50
    assert board[0].name == "p54" and board[-1].name == "p05"
    assert standings.standing_of(players[0]).rank == 55
    # A new answer must show up at once, not after the cache expires.
    assert example.annotation_count == 0
    play(players[0], "news", 1)  # exact: 5 points
    refreshed = standings.top()
    assert any(s.name == "p00" and s.points == 5 for s in refreshed) is False  # 5 < rank 50 cut
    assert standings.standing_of(players[0]).points == 5
    newcomer = factories.player("zed")
    factories.example(boundary=1)
    add_total(newcomer, points=100)
    db.session.commit()
    play(newcomer, "news", 1)
    assert standings.top()[0].name == "zed"


def test_leaderboard_pages(app, client):
    with app.app_context():
        factories.example(boundary=2)
        ada = factories.player("ada")
        play(ada, "news", 2)
    page = client.get("/leaderboard").get_data(as_text=True)
    assert "ada" in page and ">5<" in page
    assert client.get("/leaderboard/news").status_code == 200
    assert client.get("/leaderboard/poetry").status_code == 404


def test_cache_invalidation_reaches_every_worker(make_app, db_uri, tmp_path):
    """Two apps on one file cache stand for two gunicorn workers of `make run` (no Redis)."""
    shared = {"CACHE_TYPE": "FileSystemCache", "CACHE_DIR": str(tmp_path / "cache")}
    worker_a, worker_b = make_app(**shared), make_app(**shared)
    with worker_a.app_context():
        db.drop_all()
        db.create_all()
        factories.example(boundary=2)
        ada_id = factories.player("ada").id
        assert standings.top() == []  # cached as empty by worker A
    with worker_b.app_context():
        play(db.session.get(Player, ada_id), "news", 2)
    with worker_a.app_context():
        assert [(s.name, s.points) for s in standings.top()] == [("ada", 5)]
        db.session.remove()
        db.drop_all()


def test_small_boards_are_served_from_the_cache_until_an_answer(ctx):
    factories.example(boundary=2)
    ada, bob = factories.player("ada"), factories.player("bob")
    play(ada, "news", 2)
    assert [s.name for s in standings.top()] == ["ada"]
    # A row written behind the service's back is not seen: the board came from the cache.
    add_total(bob, points=50)
    db.session.commit()
    assert [s.name for s in standings.top()] == ["ada"]
    standings.invalidate("news")
    assert [s.name for s in standings.top()] == ["bob", "ada"]


def test_only_named_players_are_listed_and_a_guest_who_signs_up_is_listed_at_once(ctx):
    for _ in range(2):
        factories.example(boundary=2, category_slug="news")
    ada, guest = factories.player("ada"), factories.player(None)
    play(ada, "news", 3)  # 4
    play(guest, "news", 2)  # 5
    play(guest, "news", 2)  # 5 -> 10
    news = db.session.scalar(select(Category).where(Category.slug == "news"))
    listed = {
        (model.__tablename__, row.player_id): row.listed
        for model in (PlayerTotal, CategoryTotal)
        for row in db.session.scalars(select(model))
    }
    assert listed == {
        ("player_totals", ada.id): True,
        ("player_totals", guest.id): False,
        ("category_totals", ada.id): True,
        ("category_totals", guest.id): False,
    }
    assert stored_counts() == {(OVERALL_BOARD, 4): 1, (news.id, 4): 1}
    assert [s.name for s in standings.top()] == ["ada"]
    assert standings.standing_of(ada).rank == 1
    assert standings.standing_of(guest, news).rank == 1  # ranked against the listed only

    accounts.sign_up("grace", "correct horse battery", consent=False, guest=guest)
    assert (
        stored_counts()
        == counts_from_totals()
        == {
            (OVERALL_BOARD, 4): 1,
            (OVERALL_BOARD, 10): 1,
            (news.id, 4): 1,
            (news.id, 10): 1,
        }
    )
    assert standings.standing_of(ada).rank == 2
    assert standings.standing_of(ada, news).rank == 2
    grace = standings.standing_of(guest, news)
    assert (grace.name, grace.rank, grace.points, grace.rounds) == ("grace", 1, 10, 2)
    # The cached top lists (filled above) are forgotten by the sign-up.
    assert [(s.name, s.rank) for s in standings.top(news)] == [("grace", 1), ("ada", 2)]
    assert [(s.name, s.rank) for s in standings.top()] == [("grace", 1), ("ada", 2)]


def test_points_counts_follow_every_answer_and_drop_empty_points(ctx):
    for slug in ("news", "stories"):
        for _ in range(4):
            factories.example(boundary=2, category_slug=slug)
    ada, bob, guest = factories.player("ada"), factories.player("bob"), factories.player(None)
    for player, slug, latest in [
        (ada, "news", 2),  # 5
        (bob, "news", 2),  # 5: ada and bob share 5 overall and in news
        (ada, "stories", 1),  # 0 in a new category: stories gets a count at 0
        (guest, "news", 2),  # guests are not counted
        (bob, "news", 4),  # 3: bob moves from 5 to 8
        (ada, "news", 3),  # 4: ada moves from 5 to 9; nobody is left at 5
        (ada, "stories", 9),  # 0 more: nothing moves
        (bob, "stories", 2),  # 5
    ]:
        play(player, slug, latest)
        assert stored_counts() == counts_from_totals()
    news, stories = (
        db.session.scalar(select(Category).where(Category.slug == slug))
        for slug in ("news", "stories")
    )
    assert stored_counts() == {
        (OVERALL_BOARD, 9): 1,
        (OVERALL_BOARD, 13): 1,
        (news.id, 8): 1,
        (news.id, 9): 1,
        (stories.id, 0): 1,
        (stories.id, 5): 1,
    }
    assert [standings.standing_of(p).rank for p in (ada, bob, guest)] == [2, 1, 3]
    assert [standings.standing_of(p, stories).rank for p in (ada, bob)] == [2, 1]
    assert standings.standing_of(guest, stories) is None


def test_an_answer_puts_right_a_username_set_behind_the_orms_back(ctx):
    for _ in range(2):
        factories.example(boundary=2)
    guest = factories.player(None)
    play(guest, "news", 2)  # 5, unlisted
    # A bulk UPDATE does not run the ORM event that lists a guest who signs up.
    db.session.execute(update(Player).where(Player.id == guest.id).values(username="gus"))
    db.session.commit()
    assert stored_counts() == {}
    play(guest, "news", 3)  # 4 more
    news = factories.category("news")
    assert stored_counts() == counts_from_totals() == {(OVERALL_BOARD, 9): 1, (news.id, 9): 1}
    assert standings.standing_of(guest).rank == 1


def test_a_deleted_player_leaves_the_counts(ctx):
    factories.example(boundary=2)
    ada, bob = factories.player("ada"), factories.player("bob")
    play(ada, "news", 2)  # 5
    play(bob, "news", 2)  # 5
    db.session.delete(ada)
    db.session.commit()
    news = factories.category("news")
    assert stored_counts() == counts_from_totals() == {(OVERALL_BOARD, 5): 1, (news.id, 5): 1}


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0003_lists_and_counts_the_totals_of_named_players(make_app, tmp_path, backend):
    app = make_app(SQLALCHEMY_DATABASE_URI=backend_url(tmp_path, backend))
    with app.app_context():
        upgrade(directory=MIGRATIONS, revision="0002_crowd_studies")
        with db.engine.begin() as conn:
            conn.execute(text("INSERT INTO categories VALUES (1, 'news', 'News', '')"))
            for pid, name, points in ((1, "ada", 5), (2, None, 5), (3, "bob", 5), (4, "cyd", 2)):
                conn.execute(
                    text(
                        "INSERT INTO players (id, username, is_guest, is_researcher, "
                        "profile_public, created_at, session_version) "
                        "VALUES (:id, :name, :guest, false, false, '2026-11-01', 1)"
                    ),
                    {"id": pid, "name": name, "guest": name is None},
                )
                values = f"{points}, 1, 0, 0, 0, 0"
                conn.execute(text(f"INSERT INTO player_totals VALUES ({pid}, {values})"))
                conn.execute(text(f"INSERT INTO category_totals VALUES ({pid}, 1, {values})"))
        upgrade(directory=MIGRATIONS, revision="0003_leaderboard_at_scale")
        assert {t.player_id: t.listed for t in db.session.scalars(select(PlayerTotal))} == {
            1: True,
            2: False,
            3: True,
            4: True,
        }
        assert (
            stored_counts()
            == counts_from_totals()
            == {
                (OVERALL_BOARD, 5): 2,
                (OVERALL_BOARD, 2): 1,
                (1, 5): 2,
                (1, 2): 1,
            }
        )
        db.session.remove()
        downgrade(directory=MIGRATIONS, revision="base")
        db.engine.dispose()
