"""Leaderboards from maintained totals: order, ranks, gaps, periods, scopes, visibility, cache
invalidation, the `listed` and `ranked` flags, board counts and their migration."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from flask_migrate import downgrade, upgrade
from sqlalchemy import func, select, text, update

from app.accounts import service as accounts
from app.extensions import cache, db
from app.game import answers, reveals
from app.game.scoring import Verdict
from app.leaderboard import recording, skill, standings
from app.models import BoardCount, BoardCountDelta, BoardTotal, Category, Player
from app.models.standings import OVERALL_SCOPE
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import reveal_http
from tests.test_accounts import signup
from tests.test_game_http import client_answer, start
from tests.test_migrations import MIGRATIONS, backend_url

POINTS = {"measure": "points"}


def play(player, category: str, latest_index: int) -> int:
    """Play one round, flagging sentence `latest_index`; return the points."""
    round_ = factories.started(player, category)
    while round_.revealed < latest_index + 1:
        reveals.reveal_next(player, round_.id, round_.revealed)
    done = answers.submit_answer(
        player, round_.id, answers.parse_answer("machine", latest_index + 1, ["generic"], "")
    )
    return done.points


def add_total(
    player: Player,
    points: int,
    excess: int = 0,
    when=None,
    category=None,
    detection: skill.Detection = skill.NO_DETECTION,
) -> None:
    """Totals for one round through `record_answer`, with no round behind them (no commit)."""
    category = category or factories.category()
    recording.record_answer(
        player.id, category.id, Verdict(points, 0, ""), excess, when=when, detection=detection
    )


EXACT, LATE_1, LATE_4 = (1, 5, 0, 0), (1, 4, 0, 0), (1, 1, 0, 0)
MISSED, HUMAN_RIGHT = (1, 0, 0, 0), (0, 0, 1, 1)


def counts_from_totals() -> dict[tuple[str, int, str, int], int]:
    """What `board_counts` must hold: listed rows by points, ranked rows by skill, per board."""
    counts: Counter = Counter()
    for row in db.session.scalars(select(BoardTotal)):
        assert row.ranked == (row.listed and row.rounds >= skill.MIN_ROUNDS), row
        detection = (row.machine_rounds, row.machine_credit, row.human_rounds, row.human_right)
        assert row.skill == skill.detection_skill(*detection)
        if row.listed:
            counts[row.period, row.scope, "points", row.points] += 1
        if row.ranked:
            counts[row.period, row.scope, "skill", row.skill] += 1
    return dict(counts)


def stored_counts() -> dict[tuple[str, int, str, int], int]:
    """The counts as ranks read them: `board_counts` plus the deltas not folded into it yet (a
    key whose players add up to 0 is left out, as a count that reaches 0 is dropped)."""
    net: Counter = Counter()
    for model in (BoardCount, BoardCountDelta):
        for c in db.session.scalars(select(model)):
            net[c.period, c.scope, c.measure, c.value] += c.players
    return {key: players for key, players in net.items() if players}


def folded_counts() -> dict[tuple[str, int, str, int], int]:
    """Fold the deltas (committing), then `board_counts` as it is, rows at 0 included."""
    db.session.commit()
    assert recording.fold() is not None
    assert db.session.scalar(select(func.count()).select_from(BoardCountDelta)) == 0
    return {
        (c.period, c.scope, c.measure, c.value): c.players
        for c in db.session.scalars(select(BoardCount))
    }


def all_time_points() -> dict[tuple[int, int], int]:
    return {
        (scope, value): n
        for (period, scope, measure, value), n in stored_counts().items()
        if period == "all" and measure == "points"
    }


def test_order_ranks_ties_and_guests_on_points_boards(ctx):
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
    board = standings.top(**POINTS)
    assert [(s.name, s.points, s.rank) for s in board] == [
        ("ada", 9, 1),
        ("bob", 8, 2),
        ("cyd", 1, 3),
    ]
    news = db.session.scalar(select(Category).where(Category.slug == "news"))
    assert [(s.name, s.points, s.rank) for s in standings.top(news, **POINTS)] == [
        ("ada", 9, 1),
        ("bob", 5, 2),
        ("cyd", 1, 3),
    ]
    stories = db.session.scalar(select(Category).where(Category.slug == "stories"))
    assert [(s.name, s.points) for s in standings.top(stories, **POINTS)] == [("bob", 3)]
    mine = standings.standing_of(guest, **POINTS)
    assert (mine.rank, mine.on_board, mine.gap) == (3, False, 3)  # ranked against the listed
    assert standings.standing_of(cyd, stories, **POINTS) is None
    # Rank and gap to the next player above.
    assert [(s.rank, s.gap) for s in (standings.standing_of(p, **POINTS) for p in (ada, bob))] == [
        (1, None),
        (2, 1),
    ]


def test_ties_share_a_rank_and_fewer_rounds_come_first(ctx):
    for _ in range(2):
        factories.example(boundary=2)
    ada, bob = factories.player("ada"), factories.player("bob")
    play(ada, "news", 2)  # 5 in one round
    play(bob, "news", 4)  # 3
    play(bob, "news", 5)  # 2 -> 5 in two rounds
    board = standings.top(**POINTS)
    assert [(s.name, s.rank) for s in board] == [("ada", 1), ("bob", 1)]
    assert standings.standing_of(bob, **POINTS).rank == 1


def test_skill_board_ranks_by_shrunk_detection_from_the_minimum_rounds(ctx):
    ada, bob, cyd, dan = (factories.player(n) for n in ("ada", "bob", "cyd", "dan"))
    for i in range(skill.MIN_ROUNDS):
        # a careful reader: 6 machine texts exact, one a sentence late, 3 human texts right
        add_total(ada, points=5, detection=(EXACT, LATE_1)[i == 6] if i < 7 else HUMAN_RIGHT)
        # "all human" every time on the same texts
        add_total(bob, points=0 if i < 7 else 5, detection=MISSED if i < 7 else HUMAN_RIGHT)
    for i in range(40):
        add_total(cyd, points=1, detection=LATE_4 if i < 30 else HUMAN_RIGHT)  # a small edge
    for _ in range(skill.MIN_ROUNDS - 1):
        add_total(dan, points=5, detection=EXACT)  # brilliant, but one round short
    db.session.commit()
    board = standings.top()
    # ada: 100 * (34/35 + 3/3 - 1) * 10/20 = 48; cyd: 100 * (30/150 + 10/10 - 1) * 40/50 = 16;
    # bob ("all human"): 0.
    assert [(s.name, s.skill, s.rank) for s in board] == [
        ("ada", 48, 1),
        ("cyd", 16, 2),
        ("bob", 0, 3),
    ]
    assert [s.name for s in standings.top(**POINTS)] == ["ada", "dan", "cyd", "bob"]
    mine = standings.standing_of(dan)
    assert not mine.on_board and mine.rounds_to_rank == 1
    # 100 * 1 * 9/19 = 47: would be second
    assert (mine.skill, mine.rank) == (skill.detection_skill(9, 45, 0, 0), 2) == (47, 2)
    assert standings.standing_of(cyd).gap == 48 - 16
    assert stored_counts() == counts_from_totals()
    add_total(dan, points=5, detection=EXACT)  # the tenth round: now ranked
    db.session.commit()
    standings.invalidate("news")
    assert [s.name for s in standings.top()][:2] == ["dan", "ada"]
    assert stored_counts() == counts_from_totals()


def test_week_and_month_boards_start_empty_and_keep_their_own_totals(ctx):
    ada, bob = factories.player("ada"), factories.player("bob")
    now = datetime.now(UTC)
    last_month = now.replace(day=1) - timedelta(days=3)
    add_total(ada, points=5, when=last_month)
    add_total(ada, points=5, when=last_month)
    add_total(bob, points=3, when=now)
    db.session.commit()
    assert [(s.name, s.points) for s in standings.top(**POINTS)] == [("ada", 10), ("bob", 3)]
    assert [(s.name, s.points) for s in standings.top(period="month", **POINTS)] == [("bob", 3)]
    assert [(s.name, s.points) for s in standings.top(period="week", **POINTS)] == [("bob", 3)]
    assert standings.standing_of(ada, period="week", **POINTS) is None
    keys = {row.period for row in db.session.scalars(select(BoardTotal))}
    assert keys == {"all", *skill.period_keys(last_month), *skill.period_keys(now)}


def test_top_is_capped_at_50_and_cache_is_invalidated_by_answers(ctx):
    example = factories.example(boundary=1)
    players = [factories.player(f"p{i:02d}") for i in range(55)]
    for i, player in enumerate(players):
        add_total(player, points=i)
    db.session.commit()
    board = standings.top(**POINTS)
    assert len(board) == 50
    assert board[0].name == "p54" and board[-1].name == "p05"
    assert standings.standing_of(players[0], **POINTS).rank == 55
    # A new answer must show up at once, not after the cache expires.
    assert example.annotation_count == 0
    play(players[0], "news", 1)  # exact: 5 points
    refreshed = standings.top(**POINTS)
    assert any(s.name == "p00" and s.points == 5 for s in refreshed) is False  # 5 < rank 50 cut
    assert standings.standing_of(players[0], **POINTS).points == 5
    newcomer = factories.player("zed")
    factories.example(boundary=1)
    add_total(newcomer, points=100)
    db.session.commit()
    play(newcomer, "news", 1)
    assert standings.top(**POINTS)[0].name == "zed"


def test_leaderboard_pages(app, client):
    with app.app_context():
        factories.example(boundary=2)
        ada = factories.player("ada")
        play(ada, "news", 2)
    page = client.get("/leaderboard?by=points").get_data(as_text=True)
    assert "ada" in page and ">5<" in page
    skill_page = client.get("/leaderboard").get_data(as_text=True)
    assert "No one is on this board yet" in skill_page  # one round is not enough to be ranked
    for query in ("", "?period=week", "?period=month&by=points"):
        assert client.get(f"/leaderboard/news{query}").status_code == 200
    assert client.get("/leaderboard/poetry").status_code == 404
    assert client.get("/leaderboard?period=year").status_code == 404
    assert client.get("/leaderboard?by=luck").status_code == 404


def test_my_rank_and_gap_are_shown(app, client):
    with app.app_context():
        for _ in range(2):
            factories.example(boundary=2)
        ada = factories.player("ada")
        add_total(ada, points=12)
        db.session.commit()
    signup(client, username="bea")
    round_id = start(client)
    token = csrf_token(client)
    reveal_http(client, token, round_id, 1)
    reveal_http(client, token, round_id, 2)
    client_answer(client, round_id, token, seen=3)  # exact: 5 points
    page = client.get("/leaderboard?by=points").get_data(as_text=True)
    assert "You are number 2." in page and "7 more points would take you past" in page
    page = client.get("/leaderboard").get_data(as_text=True)
    assert f"Play {skill.MIN_ROUNDS - 1} more rounds here to be ranked" in page


def test_cache_invalidation_reaches_every_worker(make_app, db_uri, tmp_path):
    """Two apps on one file cache stand for two gunicorn workers of `make run` (no Redis)."""
    shared = {"CACHE_TYPE": "FileSystemCache", "CACHE_DIR": str(tmp_path / "cache")}
    worker_a, worker_b = make_app(**shared), make_app(**shared)
    with worker_a.app_context():
        db.drop_all()
        db.create_all()
        factories.example(boundary=2)
        ada_id = factories.player("ada").id
        assert standings.top(**POINTS) == []  # cached as empty by worker A
    with worker_b.app_context():
        play(db.session.get(Player, ada_id), "news", 2)
    with worker_a.app_context():
        assert [(s.name, s.points) for s in standings.top(**POINTS)] == [("ada", 5)]
        db.session.remove()
        db.drop_all()


def test_small_boards_are_served_from_the_cache_until_an_answer(ctx):
    factories.example(boundary=2)
    ada, bob = factories.player("ada"), factories.player("bob")
    play(ada, "news", 2)
    assert [s.name for s in standings.top(**POINTS)] == ["ada"]
    # A row written behind the service's back is not seen: the board came from the cache.
    add_total(bob, points=50)
    db.session.commit()
    assert [s.name for s in standings.top(**POINTS)] == ["ada"]
    standings.invalidate("news")
    assert [s.name for s in standings.top(**POINTS)] == ["bob", "ada"]


def test_a_guests_answer_keeps_the_cached_top_lists_and_a_listed_players_forgets_them(ctx):
    """A guest's rows are on no board, so their answer changes no top list and forgets none (the
    list read again is the one a recount gives); a listed player's answer forgets them."""
    for _ in range(3):
        factories.example(boundary=2, category_slug="news")
    ada, guest = factories.player("ada"), factories.player(None)
    play(ada, "news", 2)
    boards = [
        standings.Board(measure, period)
        for measure in ("points", "skill")
        for period in skill.PERIODS
    ]
    tops = [
        standings.top(board.category, measure=board.measure, period=board.period)
        for board in boards
    ]
    keys = [standings._cache_key(board, board.key()) for board in boards]
    assert all(cache.get(key) is not None for key in keys)
    assert play(guest, "news", 2) == 5
    assert all(cache.get(key) is not None for key in keys)
    # What the cache keeps is what the boards now give.
    cache.clear()
    assert [
        standings.top(board.category, measure=board.measure, period=board.period)
        for board in boards
    ] == tops
    play(ada, "news", 2)
    assert all(cache.get(key) is None for key in keys)
    # Only the transaction just committed speaks: a guest's answer rolled back, or followed by
    # another transaction, leaves `invalidate` forgetting the lists.
    for committed in (False, True):
        [standings.top(b.category, measure=b.measure, period=b.period) for b in boards]
        add_total(guest, points=3)
        if committed:
            db.session.commit()
            db.session.scalar(select(1))
        else:
            db.session.rollback()
        standings.invalidate("news")
        assert [cache.get(key) is None for key in keys] == [True] * len(keys), committed


def test_only_named_players_are_listed_and_a_guest_who_signs_up_is_listed_at_once(ctx):
    for _ in range(2):
        factories.example(boundary=2, category_slug="news")
    ada, guest = factories.player("ada"), factories.player(None)
    play(ada, "news", 3)  # 4
    play(guest, "news", 2)  # 5
    play(guest, "news", 2)  # 5 -> 10
    news = factories.category("news")
    listed = {
        (row.period, row.scope, row.player_id): row.listed
        for row in db.session.scalars(select(BoardTotal))
    }
    assert len(listed) == 12  # 3 periods x 2 scopes x 2 players
    assert all(flag == (pid == ada.id) for (_, _, pid), flag in listed.items())
    assert all_time_points() == {(OVERALL_SCOPE, 4): 1, (news.id, 4): 1}
    assert [s.name for s in standings.top(**POINTS)] == ["ada"]
    assert standings.standing_of(ada, **POINTS).rank == 1
    assert standings.standing_of(guest, news, **POINTS).rank == 1  # ranked against the listed

    accounts.sign_up("grace", "correct horse battery", consent=False, guest=guest)
    assert stored_counts() == counts_from_totals()
    assert all_time_points() == {
        (OVERALL_SCOPE, 4): 1,
        (OVERALL_SCOPE, 10): 1,
        (news.id, 4): 1,
        (news.id, 10): 1,
    }
    assert standings.standing_of(ada, **POINTS).rank == 2
    assert standings.standing_of(ada, news, **POINTS).rank == 2
    grace = standings.standing_of(guest, news, **POINTS)
    assert (grace.name, grace.rank, grace.points, grace.rounds) == ("grace", 1, 10, 2)
    # The cached top lists (filled above) are forgotten by the sign-up.
    assert [(s.name, s.rank) for s in standings.top(news, **POINTS)] == [("grace", 1), ("ada", 2)]
    assert [(s.name, s.rank) for s in standings.top(**POINTS)] == [("grace", 1), ("ada", 2)]
    for period in ("week", "month"):
        assert [s.name for s in standings.top(period=period, **POINTS)] == ["grace", "ada"]


def test_board_counts_follow_every_answer_and_drop_empty_values(ctx):
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
    # Folded, the counts alone are the same, with no count left at 0 (nobody at 5 in news).
    assert folded_counts() == counts_from_totals()
    news, stories = factories.category("news"), factories.category("stories")
    assert all_time_points() == {
        (OVERALL_SCOPE, 9): 1,
        (OVERALL_SCOPE, 13): 1,
        (news.id, 8): 1,
        (news.id, 9): 1,
        (stories.id, 0): 1,
        (stories.id, 5): 1,
    }
    assert [standings.standing_of(p, **POINTS).rank for p in (ada, bob, guest)] == [2, 1, 3]
    assert [standings.standing_of(p, stories, **POINTS).rank for p in (ada, bob)] == [2, 1]
    assert standings.standing_of(guest, stories, **POINTS) is None


def test_skill_in_sql_truncates_like_the_pure_rule(ctx):
    ada = factories.player("ada")
    rounds_played = [(1, 3, 0, 0), (0, 0, 1, 0), (1, 0, 0, 0), (0, 0, 1, 0), (0, 0, 1, 1)] * 3
    for detection in rounds_played[:12]:
        add_total(ada, points=0, detection=detection)
        db.session.commit()
        assert stored_counts() == counts_from_totals()  # checks skill == detection_skill(...)
    # 5 machine texts with credit 9, 7 human texts with 2 right: 100 * (9/25 + 2/7 - 1) * 12/22
    # = -19.35, truncated toward zero (floor would give -20).
    assert standings.standing_of(ada).skill == skill.detection_skill(5, 9, 7, 2) == -19


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
    assert stored_counts() == counts_from_totals()
    assert all_time_points() == {(OVERALL_SCOPE, 9): 1, (news.id, 9): 1}
    assert standings.standing_of(guest, **POINTS).rank == 1


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_migration_0006_fills_the_boards_from_the_rounds(make_app, tmp_path, backend):
    app = make_app(SQLALCHEMY_DATABASE_URI=backend_url(tmp_path, backend))
    now = datetime.now(UTC)
    long_ago = now - timedelta(days=70)
    with app.app_context():
        upgrade(directory=MIGRATIONS, revision="0004_player_survey")
        with db.engine.begin() as conn:
            conn.execute(text("INSERT INTO categories VALUES (1, 'news', 'News', '')"))
            conn.execute(text("INSERT INTO systems VALUES (1, 'gpt2')"))
            for eid, boundary in enumerate((2, 10, 9, 3) * 3, start=1):
                conn.execute(
                    text(
                        "INSERT INTO examples (id, external_id, category_id, system_id, "
                        "sentences, n_sentences, boundary, source, meta, kind, "
                        "annotation_count, imported_at) VALUES (:id, :ext, 1, 1, '[]', 10, :b, "
                        "'{}', '{}', 'normal', 0, :t)"
                    ),
                    {"id": eid, "ext": f"e{eid}", "b": boundary, "t": now},
                )
            for pid, name in ((1, "ada"), (2, None)):
                conn.execute(
                    text(
                        "INSERT INTO players (id, username, is_guest, is_researcher, kind, "
                        "profile_public, created_at, session_version) "
                        "VALUES (:id, :name, :guest, false, 'public', false, :t, 1)"
                    ),
                    {"id": pid, "name": name, "guest": name is None, "t": now},
                )
            # ada: 12 rounds, guessing 2 each time; the first 4 long ago. The guest: one round.
            rows = [(1, eid, 2, long_ago if eid <= 4 else now) for eid in range(1, 13)]
            rows.append((2, 2, 10, now))
            for i, (pid, eid, guess, when) in enumerate(rows, start=1):
                boundary = (2, 10, 9, 3)[(eid - 1) % 4]
                points = 0 if guess < boundary else max(5 - (guess - boundary), 0)
                conn.execute(
                    text(
                        "INSERT INTO rounds (id, player_id, example_id, order_index, kind, "
                        "chosen_category, revealed, guess, points, reasons, explanation, "
                        "started_at, answered_at) VALUES (:i, :p, :e, :i, 'normal', 'news', "
                        ":g, :g, :pts, '[]', '', :t, :t)"
                    ),
                    {"i": i, "p": pid, "e": eid, "g": guess, "pts": points, "t": when},
                )
        # 0006 fills the boards; 0011 adds the detection counts and ranks by them.
        upgrade(directory=MIGRATIONS, revision="head")
        totals = {
            (t.period, t.scope, t.player_id): (t.points, t.rounds, t.exact, t.excess, t.skill)
            for t in db.session.scalars(select(BoardTotal))
        }
        # ada per 4 texts (boundaries 2, 10, 9, 3) guessing 2: 5, 0, 0, 0 points; all human
        # would have scored 0, 5, 4, 0: excess 5, -5, -4, 0 = -4 per 4 rounds. Detection: 3
        # machine texts, one exact (credit 5), one human text called machine.
        assert totals[("all", 0, 1)] == (15, 12, 3, -12, skill.detection_skill(9, 15, 3, 0))
        ada_all = db.session.get(BoardTotal, ("all", 0, 1))
        assert (ada_all.machine_rounds, ada_all.machine_credit) == (9, 15)
        assert (ada_all.human_rounds, ada_all.human_right) == (3, 0)
        assert totals[("all", 1, 1)] == totals[("all", 0, 1)]
        assert totals[(skill.period_key("month", now), 0, 1)][1] == 8
        assert totals[(skill.period_key("week", now), 0, 2)] == (5, 1, 1, 0, 0)
        assert stored_counts() == counts_from_totals()
        assert standings.standing_of(db.session.get(Player, 1)).on_board  # 12 rounds: ranked
        db.session.remove()
        downgrade(directory=MIGRATIONS, revision="0004_player_survey")
        listed = db.session.execute(text("SELECT player_id, listed FROM player_totals")).all()
        assert listed == []  # 0004 had totals only through the app; none were inserted here
        db.session.remove()
        downgrade(directory=MIGRATIONS, revision="base")
        db.engine.dispose()


def test_an_answers_writes_are_one_statement_that_psycopg_keeps_parsed():
    """On PostgreSQL the statistics, the six board rows of an answer (periods and scopes as
    arrays) and the counts' deltas go in one statement. psycopg keeps the parsed form of a
    statement only up to a length and a number of parameters; the boards as rows of VALUES were
    over both and were parsed on every answer."""
    from psycopg import _queries
    from sqlalchemy.dialects import postgresql

    compiled = recording._answer_statement().compile(dialect=postgresql.dialect())
    assert "unnest" in str(compiled)
    assert len(str(compiled).encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH
    assert len(compiled.params) <= _queries.MAX_CACHED_STATEMENT_PARAMS
