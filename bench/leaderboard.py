"""Benchmark: leaderboards from maintained totals against aggregating every round.

    .venv/bin/python bench/leaderboard.py                        # a SQLite file in a temp folder
    .venv/bin/python bench/leaderboard.py --database postgresql  # roft_bench on 127.0.0.1

Builds a fresh database with the migrations (`flask db upgrade`) and fills it with bulk inserts
(executemany on SQLite, COPY on PostgreSQL): 3 categories, --examples texts of 10 sentences,
--players named players plus --guests guests, and --rounds answered rounds (heavy-tailed rounds per
player, a skill per player, about 20% exact guesses, one every 30 s up to BENCH_NOW). The
statistics and the boards (`board_totals`, `board_counts`) are then filled from the rounds with
INSERT ... SELECT ... GROUP BY, as migration 0006 fills them: what `recording.record_answer` would
have kept. Filling is not timed. The site's clock is set to BENCH_NOW (2026-11-20), so "this week"
and "this month" are the boards of that day.

Then, in the real app with Flask-Caching's NullCache (so every `top` call runs its query), it times
for each of the 24 boards (skill and points; all time, this month, this week; overall and each
category) `standings.top` (--repeat calls) and `standings.standing_of` (--sample random players
with rounds there, plus the first and the last listed one, --passes times), and, for the all-time
boards, the naive way without totals: the same top 50 and rank from SUM(...) GROUP BY player over
`rounds` (--naive-repeat calls, the first --naive-sample players). Every answer, maintained and
naive, is checked against one full aggregate of the rounds, or the run stops. Also timed:
`record_answer` (each call rolled back), a cached `top`, and `SELECT 1` as the floor. Prints median
and p99 milliseconds and naive / maintained of the medians as a Markdown table.

The counts start folded (no `board_count_deltas`). --pending-deltas N appends N changes a fold has
not taken yet before the reads are timed, as answers leave them between folds: pairs of +1 and -1
at counts drawn in proportion to their players (where answers move players from and to), so every
count, rank and gap stays the same and the checks still hold, while each rank reads them.
--folds K times K folds at the end, each of the deltas that --fold-answers committed answers
(`record_answer` for random named players) appended.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np
from sqlalchemy import DateTime, bindparam, case, create_engine, func, select, text
from sqlalchemy.engine import make_url
from tqdm import tqdm

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from flask_migrate import upgrade  # noqa: E402

from app import create_app  # noqa: E402
from app.extensions import db  # noqa: E402
from app.game.scoring import MAX_POINTS, Verdict  # noqa: E402
from app.leaderboard import recording, skill, standings  # noqa: E402
from app.leaderboard.standings import TOP_N, Standing  # noqa: E402
from app.models import Category, Example, Player, Round  # noqa: E402

CATEGORIES = ("news", "stories", "recipes")
SYSTEMS = ("human", "gpt2-xl", "grover-mega", "ctrl")
N_SENTENCES = 10
PG_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/roft_bench"
CHUNK = 100_000
# The site's "now" during the run: this week's and this month's boards are those of this day.
BENCH_NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
# Signed distance guess - boundary when the guess is not exact: late more often than early, with a
# long linear tail (RoFT's published histogram); exact guesses come from each player's skill.
MISS_OFFSETS = np.array([-4, -3, -2, -1, 1, 2, 3, 4, 5, 6, 7, 8, 9])
MISS_WEIGHTS = np.array([1, 2, 4, 8, 14, 12, 10, 8, 7, 6, 4, 2, 2], dtype=float)


@dataclass
class Synthetic:
    """Everything inserted, as column arrays."""

    example_category: np.ndarray  # category index per example
    example_boundary: np.ndarray
    usernames: list[str | None]  # per player, player id = index + 1
    round_player: np.ndarray  # player index per round
    round_order: np.ndarray
    round_example: np.ndarray  # example index per round
    round_guess: np.ndarray
    round_points: np.ndarray


def synthesize(n_rounds: int, n_named: int, n_guests: int, n_examples: int, seed: int) -> Synthetic:
    """Players, examples and answered rounds with realistic shapes (deterministic for a seed)."""
    rng = np.random.default_rng(seed)
    n_players = n_named + n_guests
    if n_rounds < n_players:
        raise SystemExit("--rounds must be at least the number of players (one round each)")
    if n_rounds > n_players * n_examples:
        raise SystemExit("too few --examples: a player reads each example at most once")
    example_category = rng.integers(0, len(CATEGORIES), n_examples)
    example_boundary = rng.integers(1, N_SENTENCES + 1, n_examples)  # N = all human
    is_guest = np.zeros(n_players, dtype=bool)
    is_guest[rng.choice(n_players, n_guests, replace=False)] = True
    usernames: list[str | None] = []
    named = 0
    for guest in is_guest:
        usernames.append(None if guest else f"player{named:05d}")
        named += not guest

    # Rounds per player: heavy-tailed (Pareto), at least one, at most one per example, summing up.
    weights = rng.pareto(1.2, n_players) + 1.0
    sizes = np.minimum(
        np.maximum(1, np.floor(weights / weights.sum() * n_rounds)), n_examples
    ).astype(np.int64)
    while (missing := n_rounds - int(sizes.sum())) != 0:
        room = np.flatnonzero(sizes < n_examples if missing > 0 else sizes > 1)
        picked = rng.choice(room, min(abs(missing), len(room)), replace=False)
        sizes[picked] += 1 if missing > 0 else -1
    round_player = np.repeat(np.arange(n_players), sizes)
    starts = np.repeat(np.cumsum(sizes) - sizes, sizes)
    round_order = np.arange(n_rounds) - starts + 1
    # Each player reads a run of distinct examples from a random starting point.
    offset = rng.integers(0, n_examples, n_players)
    round_example = (offset[round_player] + round_order - 1) % n_examples

    skill = rng.beta(2.0, 3.0, n_players)  # mean 0.4: P(exact) = skill / 3, ~20% with clipping
    boundary = example_boundary[round_example]
    exact = rng.random(n_rounds) < skill[round_player] / 3
    miss = rng.choice(MISS_OFFSETS, n_rounds, p=MISS_WEIGHTS / MISS_WEIGHTS.sum())
    guess = np.clip(boundary + np.where(exact, 0, miss), 1, N_SENTENCES)
    points = np.where(guess < boundary, 0, np.maximum(MAX_POINTS - (guess - boundary), 0))
    return Synthetic(
        example_category=example_category,
        example_boundary=example_boundary,
        usernames=usernames,
        round_player=round_player,
        round_order=round_order,
        round_example=round_example,
        round_guess=guess,
        round_points=points,
    )


ROUND_SECONDS = 30


def origin(data: Synthetic) -> np.datetime64:
    """The first round's start: one round every ROUND_SECONDS, the last just before BENCH_NOW."""
    now = np.datetime64(BENCH_NOW.replace(tzinfo=None), "s")
    return now - (len(data.round_player) + 1) * ROUND_SECONDS


def timestamps(
    origin_: np.datetime64, count: int, start: int, step_s: int, postgres: bool, shift_s: int = 0
) -> np.ndarray:
    stamps = origin_ + (start + np.arange(count)) * step_s
    stamps += shift_s
    text_ = np.char.replace(np.datetime_as_string(stamps, unit="us"), "T", " ")
    return np.char.add(text_, "+00") if postgres else text_


def example_rows(data: Synthetic, postgres: bool) -> Iterator[tuple]:
    stamp = timestamps(origin(data), 1, 0, 1, postgres)[0]
    for i, (category, boundary) in enumerate(
        zip(data.example_category.tolist(), data.example_boundary.tolist(), strict=True)
    ):
        sentences = [f"Sentence {j} of text {i}." for j in range(N_SENTENCES)]
        human = boundary == N_SENTENCES
        yield (
            i + 1,
            f"bench-{i:06d}",
            category + 1,
            1 if human else 2 + i % (len(SYSTEMS) - 1),
            json.dumps(sentences),
            N_SENTENCES,
            boundary,
            None if human else json.dumps({"strategy": "nucleus", "p": 0.9}),
            None if human else 0.9,
            i,
            "{}",
            "{}",
            "normal",
            0,
            stamp,
        )


EXAMPLE_COLUMNS = (
    "id, external_id, category_id, system_id, sentences, n_sentences, boundary, decoding, "
    "decoding_p, seed, source, meta, kind, annotation_count, imported_at"
)
PLAYER_COLUMNS = (
    "id, username, password_hash, is_guest, is_researcher, kind, profile_public, created_at, "
    "session_version"
)
ROUND_COLUMNS = (
    "id, player_id, example_id, order_index, kind, chosen_category, revealed, guess, points, "
    "reasons, explanation, started_at, answered_at"
)


def player_rows(data: Synthetic, postgres: bool) -> Iterator[tuple]:
    stamp = timestamps(origin(data), 1, 0, 1, postgres)[0]
    for i, name in enumerate(data.usernames):
        yield (i + 1, name, None, name is None, False, "public", False, stamp, 1)


def round_rows(data: Synthetic, start: int, stop: int, postgres: bool) -> Iterator[tuple]:
    """Rounds [start, stop) as table rows; every one answered, of kind "normal"."""
    example = data.round_example[start:stop]
    guess = data.round_guess[start:stop]
    category = np.array(CATEGORIES)[data.example_category[example]]
    chosen = np.where(np.arange(start, stop) % 3 == 0, "random", category)
    reasons = np.where(guess == N_SENTENCES, "[]", '["generic"]')
    first = origin(data)
    started = timestamps(first, stop - start, start, ROUND_SECONDS, postgres)
    answered = timestamps(first, stop - start, start, ROUND_SECONDS, postgres, shift_s=20)
    revealed = np.minimum(guess + 1, N_SENTENCES)
    columns = (
        range(start + 1, stop + 1),
        (data.round_player[start:stop] + 1).tolist(),
        (example + 1).tolist(),
        data.round_order[start:stop].tolist(),
        chosen.tolist(),
        revealed.tolist(),
        guess.tolist(),
        data.round_points[start:stop].tolist(),
        reasons.tolist(),
        started.tolist(),
        answered.tolist(),
    )
    for rid, pid, eid, order, chose, rev, g, pts, why, st, an in zip(*columns, strict=True):
        yield (rid, pid, eid, order, "normal", chose, rev, g, pts, why, "", st, an)


def fresh_database(kind: str, pg_url: str, folder: Path) -> str:
    if kind == "sqlite":
        path = folder / "leaderboard.sqlite3"
        for leftover in (path, *(path.with_name(path.name + end) for end in ("-wal", "-shm"))):
            leftover.unlink(missing_ok=True)
        return f"sqlite:///{path}"
    url = make_url(pg_url)
    admin = create_engine(url.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{url.database}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{url.database}"'))
    admin.dispose()
    return url.render_as_string(hide_password=False)


def bulk_insert(table: str, columns: str, rows: Iterator[tuple], postgres: bool) -> None:
    """executemany on SQLite, COPY on PostgreSQL, on the app's engine (inside a transaction)."""
    raw = db.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if postgres:
            with cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" * len(columns.split(",")))
            cursor.executemany(f"INSERT INTO {table} ({columns}) VALUES ({marks})", rows)
        raw.commit()
    finally:
        raw.close()


# The rounds a board counts: all of them for all time, or those answered in its week or month.
EXCESS_SQL = (
    "(r.points - CASE WHEN 5 - (e.n_sentences - e.boundary) > 0 "
    "THEN 5 - (e.n_sentences - e.boundary) ELSE 0 END)"
)
TOTALS_SELECT = """
    SUM(r.points), COUNT(*),
    SUM(CASE WHEN r.guess = e.boundary THEN 1 ELSE 0 END),
    SUM(CASE WHEN r.guess < e.boundary THEN 1 ELSE 0 END),
    SUM(r.guess - e.boundary), SUM(ABS(r.guess - e.boundary))
    FROM rounds r JOIN examples e ON e.id = r.example_id
    WHERE r.kind = 'normal' AND r.guess IS NOT NULL
"""
TOTALS_COLUMNS = "points, rounds, exact, too_early, distance_sum, abs_distance_sum"


@dataclass(frozen=True)
class Period:
    name: str  # "all", "month", "week"
    key: str
    start: datetime | None
    end: datetime | None


def periods() -> list[Period]:
    """The three boards' periods at BENCH_NOW."""
    week = skill.week_start(BENCH_NOW.date())
    week_start = datetime(week.year, week.month, week.day, tzinfo=UTC)
    month_start = BENCH_NOW.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    next_month = (month_start + timedelta(days=32)).replace(day=1)
    return [
        Period("all", skill.ALL_TIME, None, None),
        Period("month", skill.period_key("month", BENCH_NOW), month_start, next_month),
        Period("week", skill.period_key("week", BENCH_NOW), week_start, week_start + timedelta(7)),
    ]


def _in_period(period: Period) -> str:
    return "" if period.start is None else " AND r.answered_at >= :start AND r.answered_at < :end"


def _period_params(period: Period) -> list:
    if period.start is None:
        return []
    return [
        bindparam("start", period.start, type_=DateTime(timezone=True)),
        bindparam("end", period.end, type_=DateTime(timezone=True)),
    ]


def fill(data: Synthetic, postgres: bool) -> dict[str, float]:
    """Insert the synthetic data, the statistics and the boards; returns seconds per step."""
    seconds: dict[str, float] = {}
    started = time.perf_counter()
    with db.engine.begin() as conn:
        for i, slug in enumerate(CATEGORIES):
            conn.execute(
                text(
                    "INSERT INTO categories (id, slug, name, description) VALUES (:i, :s, :n, '')"
                ),
                {"i": i + 1, "s": slug, "n": slug.title()},
            )
        for i, name in enumerate(SYSTEMS):
            conn.execute(
                text("INSERT INTO systems (id, name) VALUES (:i, :n)"), {"i": i + 1, "n": name}
            )
    bulk_insert("examples", EXAMPLE_COLUMNS, example_rows(data, postgres), postgres)
    bulk_insert("players", PLAYER_COLUMNS, player_rows(data, postgres), postgres)
    seconds["examples_players"] = time.perf_counter() - started

    started = time.perf_counter()
    n = len(data.round_player)
    with tqdm(total=n, desc="rounds", unit="row", unit_scale=True) as bar:
        for start in range(0, n, CHUNK):
            stop = min(start + CHUNK, n)
            bulk_insert("rounds", ROUND_COLUMNS, round_rows(data, start, stop, postgres), postgres)
            bar.update(stop - start)
    seconds["rounds"] = time.perf_counter() - started

    started = time.perf_counter()
    with db.engine.begin() as conn:
        conn.execute(
            text(
                f"INSERT INTO player_totals (player_id, {TOTALS_COLUMNS}) "
                f"SELECT r.player_id, {TOTALS_SELECT} GROUP BY r.player_id"
            )
        )
        conn.execute(
            text(
                f"INSERT INTO category_totals (player_id, category_id, {TOTALS_COLUMNS}) "
                f"SELECT r.player_id, e.category_id, {TOTALS_SELECT} "
                "GROUP BY r.player_id, e.category_id"
            )
        )
        # The boards as migration 0006 fills them from the rounds.
        for period in periods():
            for scope, group in (("0", ""), ("e.category_id", ", e.category_id")):
                conn.execute(
                    text(
                        "INSERT INTO board_totals (period, scope, player_id, points, rounds, "
                        "exact, excess, skill, listed, ranked) "
                        f"SELECT :period, {scope}, r.player_id, SUM(r.points), COUNT(*), "
                        "SUM(CASE WHEN r.guess = e.boundary THEN 1 ELSE 0 END), "
                        f"SUM({EXCESS_SQL}), "
                        f"(100 * SUM({EXCESS_SQL})) / (COUNT(*) + {skill.PRIOR_ROUNDS}), "
                        "p.username IS NOT NULL, "
                        f"p.username IS NOT NULL AND COUNT(*) >= {skill.MIN_ROUNDS} "
                        "FROM rounds r JOIN examples e ON e.id = r.example_id "
                        "JOIN players p ON p.id = r.player_id "
                        "WHERE r.kind = 'normal' AND r.guess IS NOT NULL"
                        f"{_in_period(period)} GROUP BY r.player_id, p.username{group}"
                    ).bindparams(bindparam("period", period.key), *_period_params(period))
                )
        conn.execute(
            text(
                "INSERT INTO board_counts (period, scope, measure, value, players) "
                "SELECT period, scope, 'points', points, COUNT(*) FROM board_totals "
                "WHERE listed GROUP BY period, scope, points UNION ALL "
                "SELECT period, scope, 'skill', skill, COUNT(*) FROM board_totals "
                "WHERE ranked GROUP BY period, scope, skill"
            )
        )
        conn.execute(
            text(
                "UPDATE examples SET annotation_count = "
                "(SELECT COUNT(*) FROM rounds r WHERE r.example_id = examples.id)"
            )
        )
        if postgres:
            for table in ("players", "examples", "rounds"):
                conn.execute(
                    text(f"SELECT setval('{table}_id_seq', (SELECT MAX(id) FROM {table}))")
                )
    seconds["totals"] = time.perf_counter() - started

    # PostgreSQL's autovacuum would analyse and vacuum these tables soon after such a load; do it
    # now. SQLite is left as the app leaves it (it never runs ANALYZE).
    started = time.perf_counter()
    if postgres:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE"))
    seconds["analyze"] = time.perf_counter() - started
    return seconds


# The naive leaderboard: no totals, aggregate the rounds on every request.

_EXCESS = Round.points - case(
    (
        5 - (Example.n_sentences - Example.boundary) > 0,
        5 - (Example.n_sentences - Example.boundary),
    ),
    else_=0,
)


@dataclass(frozen=True)
class BenchBoard:
    measure: str
    period: Period
    category: Category | None

    @property
    def label(self) -> tuple[str, str, str]:
        scope = self.category.slug if self.category else "overall"
        return (self.measure, self.period.name, scope)


def _scored_rounds(board: BenchBoard, *columns):
    stmt = (
        select(*columns)
        .join(Example, Example.id == Round.example_id)
        .where(Round.kind == "normal", Round.guess.is_not(None))
    )
    if board.category is not None:
        stmt = stmt.where(Example.category_id == board.category.id)
    if board.period.start is not None:
        stmt = stmt.where(
            Round.answered_at >= board.period.start, Round.answered_at < board.period.end
        )
    return stmt


def _sums():
    # An exact guess is the only way to earn MAX_POINTS, so points tell the exact ones.
    rounds = func.count()
    excess = func.sum(_EXCESS)
    return (
        func.sum(Round.points).label("points"),
        rounds.label("rounds"),
        func.sum(case((Round.points == MAX_POINTS, 1), else_=0)).label("exact"),
        ((skill.SCALE * excess) // (rounds + skill.PRIOR_ROUNDS)).label("skill"),
    )


def _naive_order(board: BenchBoard):
    sums = _sums()
    if board.measure == "points":
        return (sums[0].desc(), sums[1].asc(), Player.id.asc())
    return (sums[3].desc(), sums[1].desc(), Player.id.asc())


def _ranked_rows(board: BenchBoard, rows) -> list[Standing]:
    value = (lambda r: r.points) if board.measure == "points" else (lambda r: r.skill)
    out: list[Standing] = []
    for position, row in enumerate(rows):
        rank = out[-1].rank if out and value(out[-1]) == value(row) else position + 1
        out.append(
            Standing(rank, row.id, row.username, row.points, row.rounds, row.exact, row.skill)
        )
    return out


def naive_top(board: BenchBoard) -> list[Standing]:
    """The top 50 from SUM(...) GROUP BY player over every scored round of the board."""
    stmt = (
        _scored_rounds(board, Player.id, Player.username, *_sums())
        .join(Player, Player.id == Round.player_id)
        .where(Player.username.is_not(None))
        .group_by(Player.id, Player.username)
        .order_by(*_naive_order(board))
        .limit(TOP_N)
    )
    if board.measure == "skill":
        stmt = stmt.having(func.count() >= skill.MIN_ROUNDS)
    return _ranked_rows(board, db.session.execute(stmt).all())


def naive_standing(player: Player, board: BenchBoard) -> Standing | None:
    """The player's sums, and 1 + how many named players' sums exceed theirs."""
    mine = db.session.execute(
        _scored_rounds(board, *_sums()).where(Round.player_id == player.id)
    ).one()
    if not mine.rounds:
        return None
    sums = _sums()
    above = sums[0] > mine.points if board.measure == "points" else sums[3] > mine.skill
    having = [above] + ([func.count() >= skill.MIN_ROUNDS] if board.measure == "skill" else [])
    better = db.session.scalar(
        select(func.count()).select_from(
            _scored_rounds(board, Round.player_id)
            .join(Player, Player.id == Round.player_id)
            .where(Player.username.is_not(None))
            .group_by(Round.player_id)
            .having(*having)
            .subquery()
        )
    )
    return Standing(
        better + 1, player.id, player.display_name, mine.points, mine.rounds, mine.exact, mine.skill
    )


def expected_standings(board: BenchBoard) -> dict[int, Standing]:
    """Every player's standing on the board from one full aggregate, ranked here (the reference)."""
    rows = db.session.execute(
        _scored_rounds(board, Round.player_id, Player.username, *_sums(), func.sum(_EXCESS))
        .join(Player, Player.id == Round.player_id)
        .group_by(Round.player_id, Player.username)
    ).all()
    expected = {}
    for r in rows:
        assert r.skill == skill.shrunk(r[-1], r.rounds), "SQL and the skill rule disagree"
    if board.measure == "points":
        on = [r for r in rows if r.username is not None]
        key = "points"
    else:
        on = [r for r in rows if r.username is not None and r.rounds >= skill.MIN_ROUNDS]
        key = "skill"
    values = np.sort(np.array([getattr(r, key) for r in on]))
    on_ids = {r.player_id for r in on}
    for r in rows:
        better = int(len(values) - np.searchsorted(values, getattr(r, key), side="right"))
        expected[r.player_id] = Standing(
            better + 1,
            r.player_id,
            r.username or "Guest",
            r.points,
            r.rounds,
            r.exact,
            r.skill,
            on_board=r.player_id in on_ids,
        )
    return expected


def reference_top(board: BenchBoard, expected: dict[int, Standing]) -> list[Standing]:
    on = [s for s in expected.values() if s.on_board]
    if board.measure == "points":
        on.sort(key=lambda s: (-s.points, s.rounds, s.player_id))
    else:
        on.sort(key=lambda s: (-s.skill, -s.rounds, s.player_id))
    return on[:TOP_N]


def timed_ms(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.perf_counter_ns()
    result = fn()
    return (time.perf_counter_ns() - started) / 1e6, result


@dataclass
class Row:
    query: str
    scope: tuple[str, ...]
    maintained: list[float]
    naive: list[float]


def summary(samples: list[float]) -> tuple[float, float]:
    return statistics.median(samples), float(np.percentile(samples, 99))


def sample_players(expected: dict[int, Standing], size: int, rng: np.random.Generator) -> list[int]:
    """`size` random players with rounds on this board, plus the first and the last listed one."""
    ids = np.array(sorted(expected))
    listed = [s for s in expected.values() if s.on_board] or list(expected.values())
    best = min(listed, key=lambda s: (s.rank, s.player_id)).player_id
    worst = max(listed, key=lambda s: (s.rank, s.player_id)).player_id
    picked = rng.choice(ids, min(size, len(ids)), replace=False).tolist()
    return [best, worst, *(p for p in picked if p not in (best, worst))]


def boards() -> list[BenchBoard]:
    scopes: list[Category | None] = [None]
    scopes += db.session.scalars(select(Category).order_by(Category.id)).all()
    return [
        BenchBoard(measure, period, category)
        for measure in ("skill", "points")
        for period in periods()
        for category in scopes
    ]


def measure(args: argparse.Namespace, rng: np.random.Generator) -> list[Row]:
    rows: list[Row] = []
    for board in boards():
        rows += measure_board(board, args, rng)
        db.session.rollback()  # end the read transaction between boards
    return rows


def measure_board(
    board: BenchBoard, args: argparse.Namespace, rng: np.random.Generator
) -> list[Row]:
    """Time and check the top 50 and sampled ranks of one board, maintained and (for all-time
    boards) naive."""
    expected = expected_standings(board)
    if not expected:
        return []
    sample = sample_players(expected, args.sample, rng)
    players = {p.id: p for p in db.session.scalars(select(Player).where(Player.id.in_(sample)))}
    reference = reference_top(board, expected)
    label = "/".join(board.label)

    def top():
        return standings.top(board.category, measure=board.measure, period=board.period.name)

    def rank(player):
        return standings.standing_of(player, board.category, board.measure, board.period.name)

    for _ in range(args.warmup):
        top()
    top_ms: list[float] = []
    for _ in tqdm(range(args.repeat), desc=f"top {label}", leave=False, disable=None):
        ms, got = timed_ms(top)
        top_ms.append(ms)
    check_board(board, got, reference, f"maintained top ({label})")

    for pid in sample[: args.warmup]:
        rank(players[pid])
    rank_ms: list[float] = []
    for _ in range(args.passes):
        for pid in tqdm(sample, desc=f"rank {label}", leave=False, disable=None):
            ms, mine = timed_ms(lambda p=players[pid]: rank(p))
            check_standing(mine, expected[pid], f"maintained rank ({label})")
            rank_ms.append(ms)

    naive_top_ms: list[float] = []
    naive_rank_ms: list[float] = []
    if board.period.start is None:
        for _ in tqdm(
            range(args.naive_repeat), desc=f"naive top {label}", leave=False, disable=None
        ):
            ms, got = timed_ms(lambda: naive_top(board))
            naive_top_ms.append(ms)
        check_board(board, got, reference, f"naive top ({label})")
        for pid in tqdm(
            sample[: args.naive_sample], desc=f"naive rank {label}", leave=False, disable=None
        ):
            ms, mine = timed_ms(lambda p=players[pid]: naive_standing(p, board))
            check_standing(mine, expected[pid], f"naive rank ({label})", on_board=False)
            naive_rank_ms.append(ms)
    return [
        Row(f"top {TOP_N}", board.label, top_ms, naive_top_ms),
        Row("rank of one player", board.label, rank_ms, naive_rank_ms),
    ]


def check_board(
    board: BenchBoard, got: list[Standing], reference: list[Standing], what: str
) -> None:
    """Same players, values and counts in the same order, with the same ranks."""
    fields = ("player_id", "name", "points", "rounds", "exact", "skill")
    if [tuple(getattr(s, f) for f in fields) for s in got] != [
        tuple(getattr(s, f) for f in fields) for s in reference
    ]:
        raise SystemExit(f"{what} differs from the full aggregate: the benchmark is void")
    if [s.rank for s in got] != [s.rank for s in reference]:
        raise SystemExit(f"{what}: ranks differ from the full aggregate: the benchmark is void")


def check_standing(mine: Standing | None, expected: Standing, what: str, on_board=True) -> None:
    fields = ("rank", "player_id", "name", "points", "rounds", "exact", "skill")
    fields += ("on_board",) if on_board else ()
    if mine is None or any(getattr(mine, f) != getattr(expected, f) for f in fields):
        raise SystemExit(f"{what} of player {expected.player_id}: {mine} != {expected}; void")


def cached_top_ms(url: str, repeat: int) -> list[float]:
    """`top()` as the site serves it between answers: from a warm in-process cache."""
    app = create_app(bench_config(url, "SimpleCache"))
    with app.app_context():
        standings.top()
        samples = [timed_ms(standings.top)[0] for _ in range(repeat)]
        db.session.remove()
        db.engine.dispose()
    return samples


def write_and_floor_ms(args: argparse.Namespace, rng: np.random.Generator) -> list[Row]:
    """What keeping the totals costs an answer, and one trivial query for scale.

    `record_answer` (3 points, 2 sentences late, excess 1) for random listed players, each call
    in its own transaction, rolled back untimed; the transaction is begun before the timer starts.
    """
    ids = db.session.scalars(select(Player.id).where(Player.username.is_not(None))).all()
    categories = db.session.scalars(select(Category.id)).all()
    verdict = Verdict(points=3, distance=2, message="")
    written: list[float] = []
    for i in tqdm(
        range(args.warmup + args.repeat), desc="record_answer", leave=False, disable=None
    ):
        answer = partial(
            recording.record_answer,
            int(rng.choice(ids)),
            int(rng.choice(categories)),
            verdict,
            1,
            when=BENCH_NOW,
        )
        db.session.execute(text("SELECT 1"))
        ms, _ = timed_ms(answer)
        db.session.rollback()
        if i >= args.warmup:
            written.append(ms)
    floor = [timed_ms(lambda: db.session.execute(text("SELECT 1")).all())[0] for _ in range(500)]
    return [
        Row("record_answer (write, six boards)", ("one answer",), written, []),
        Row("SELECT 1 through the session (floor)", ("",), floor, []),
    ]


def pend(n: int, rng: np.random.Generator, postgres: bool) -> None:
    """Append n unfolded count changes that add up to nothing: n/2 pairs of +1 and -1, each at a
    count drawn in proportion to its players."""
    counts = db.session.execute(
        text("SELECT period, scope, measure, value, players FROM board_counts")
    ).all()
    weights = np.array([row.players for row in counts], dtype=float)
    picked = rng.choice(len(counts), size=n // 2, p=weights / weights.sum())
    rows = [
        {"period": c.period, "scope": c.scope, "measure": c.measure, "value": c.value, "d": d}
        for c in (counts[i] for i in picked)
        for d in (1, -1)
    ]
    db.session.execute(
        text(
            "INSERT INTO board_count_deltas (period, scope, measure, value, players) "
            "VALUES (:period, :scope, :measure, :value, :d)"
        ),
        rows,
    )
    db.session.commit()
    if postgres:
        with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(text("VACUUM ANALYZE board_count_deltas"))


def fold_ms(args: argparse.Namespace, rng: np.random.Generator) -> Row:
    """A fold of what --fold-answers committed answers appended, --folds times (after the reads:
    the answers change the boards)."""
    from app.models.standings import fold_counts

    ids = db.session.scalars(select(Player.id).where(Player.username.is_not(None))).all()
    categories = db.session.scalars(select(Category.id)).all()
    verdicts = [Verdict(points=p, distance=0, message="") for p in range(6)]
    recording.fold()  # the pending deltas of --pending-deltas
    folded: list[float] = []
    for _ in tqdm(range(args.folds), desc="fold", leave=False, disable=None):
        for _ in range(args.fold_answers):
            recording.record_answer(
                int(rng.choice(ids)),
                int(rng.choice(categories)),
                verdicts[int(rng.integers(6))],
                when=BENCH_NOW,
                detection=(1, int(rng.integers(6)), 0, 0),
            )
            db.session.commit()

        def fold() -> int:
            with db.engine.begin() as connection:
                return fold_counts(connection)

        ms, _ = timed_ms(fold)
        folded.append(ms)
    return Row(f"fold ({args.fold_answers} answers' deltas)", ("",), folded, [])


def bench_config(url: str, cache_type: str) -> dict:
    warnings.filterwarnings("ignore", message="Flask-Caching: CACHE_TYPE is set to NullCache")
    return {
        "SQLALCHEMY_DATABASE_URI": url,
        "SECRET_KEY": "bench",
        "CACHE_TYPE": cache_type,
        "RATELIMIT_STORAGE_URI": "memory://",
    }


def print_table(rows: list[Row]) -> None:
    header = (
        "| query | board | maintained median ms | p99 ms | naive median ms | p99 ms "
        "| naive / maintained |"
    )
    print(header)
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        med, p99 = summary(row.maintained)
        naive = ["", "", ""]
        if row.naive:
            naive_med, naive_p99 = summary(row.naive)
            naive = [f"{naive_med:.1f}", f"{naive_p99:.1f}", f"{naive_med / med:,.0f}×"]
        scope = " ".join(row.scope)
        print(f"| {row.query} | {scope} | {med:.3f} | {p99:.3f} | {' | '.join(naive)} |")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 2)[2],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--database",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="a SQLite file in a temp folder (default), or PostgreSQL at --pg-url",
    )
    parser.add_argument(
        "--pg-url", default=PG_URL, help=f"PostgreSQL database, dropped and recreated ({PG_URL})"
    )
    parser.add_argument("--rounds", type=int, default=1_000_000, help="answered rounds (10^6)")
    parser.add_argument("--players", type=int, default=10_000, help="named players (10^4)")
    parser.add_argument("--guests", type=int, default=2_500, help="guests who play too (2500)")
    parser.add_argument("--examples", type=int, default=20_000, help="texts (20000)")
    parser.add_argument("--sample", type=int, default=200, help="players ranked per board (200)")
    parser.add_argument("--passes", type=int, default=3, help="timed passes over them (3)")
    parser.add_argument(
        "--repeat", type=int, default=500, help="timed top-50 calls per board (500)"
    )
    parser.add_argument(
        "--warmup", type=int, default=20, help="untimed calls before each timed series (20)"
    )
    parser.add_argument(
        "--naive-repeat", type=int, default=5, help="timed naive top-50 calls per board (5)"
    )
    parser.add_argument(
        "--naive-sample", type=int, default=20, help="players ranked the naive way per board (20)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed of the data and samples")
    parser.add_argument(
        "--pending-deltas",
        type=int,
        default=0,
        help="unfolded count changes (net zero) the ranks read (0)",
    )
    parser.add_argument("--folds", type=int, default=0, help="timed folds at the end (0)")
    parser.add_argument(
        "--fold-answers", type=int, default=50, help="committed answers before each fold (50)"
    )
    parser.add_argument(
        "--keep", type=Path, help="SQLite: make the database file in this folder and keep it"
    )
    args = parser.parse_args()

    folder = args.keep or Path(tempfile.mkdtemp(prefix="roft-leaderboard-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        run(args, folder)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)


def run(args: argparse.Namespace, folder: Path) -> None:
    postgres = args.database == "postgresql"
    url = fresh_database(args.database, args.pg_url, folder)
    load_before = os.getloadavg()[0]
    started = time.perf_counter()
    data = synthesize(args.rounds, args.players, args.guests, args.examples, args.seed)
    built = time.perf_counter() - started

    # The boards of BENCH_NOW's week and month, read and written.
    standings.utcnow = recording.utcnow = lambda: BENCH_NOW
    app = create_app(bench_config(url, "NullCache"))
    with app.app_context():
        upgrade(directory=str(ROOT / "migrations"), revision="head")
        seconds = fill(data, postgres)
        seconds["synthesize"] = built
        if args.pending_deltas:
            pend(args.pending_deltas, np.random.default_rng(args.seed + 1), postgres)
        exact = float(np.mean(data.round_points == MAX_POINTS))
        rng = np.random.default_rng(args.seed)
        rows = measure(args, rng)
        rows += write_and_floor_ms(args, rng)
        if args.folds:
            rows.append(fold_ms(args, rng))
        db.session.remove()
        db.engine.dispose()
    cached = cached_top_ms(url, 500)
    rows.append(Row(f"top {TOP_N}, cached (SimpleCache)", ("skill", "all", "overall"), cached, []))
    print(
        json.dumps(
            {
                "database": args.database,
                "url": url,
                "rounds": args.rounds,
                "named_players": args.players,
                "guests": args.guests,
                "examples": args.examples,
                "exact_share": round(exact, 3),
                "fill_seconds": {k: round(v, 1) for k, v in seconds.items()},
                # Other work on the machine shows up in the timings, the p99s first.
                "load_average_1m": [round(load_before, 1), round(os.getloadavg()[0], 1)],
            }
        )
    )
    print_table(rows)


if __name__ == "__main__":
    main()
