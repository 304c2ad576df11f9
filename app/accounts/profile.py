"""Profile figures: the maintained totals, the player's rounds, and their progression."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from markupsafe import Markup
from sqlalchemy import case, func, or_, select

from app.extensions import db
from app.game import charts, insights, progression, tally
from app.game.scoring import points
from app.models import Category, CategoryTotal, Example, GameSet, Player, PlayerTotal, Round

HISTORY_LIMIT = 2000
ROUNDS_PER_PAGE = 25


@dataclass(frozen=True)
class Figures:
    label: str
    points: int
    rounds: int
    exact: int
    too_early: int
    distance_sum: int

    @property
    def mean_points(self) -> float | None:
        return self.points / self.rounds if self.rounds else None

    @property
    def mean_distance(self) -> float | None:
        """Mean signed distance from the boundary, in sentences (negative = early)."""
        return self.distance_sum / self.rounds if self.rounds else None

    @property
    def exact_rate(self) -> float | None:
        return self.exact / self.rounds if self.rounds else None


@dataclass(frozen=True)
class RecentRound:
    round_id: int
    order_index: int
    category: str
    # What the round earned: 0 when it did not count (app/game/tally.py).
    points: int
    message: str
    answered_at: object
    # Why it did not count (a key of integrity.REASONS, or "practice"), None when it counted.
    uncounted: str | None = None
    # The day of the daily challenge (or past challenge played for practice) it belongs to.
    daily_day: date | None = None


def _figures(label: str, row) -> Figures:
    if row is None:
        return Figures(label, 0, 0, 0, 0, 0)
    return Figures(
        label,
        row.points,
        row.rounds,
        row.exact,
        row.too_early,
        row.distance_sum,
    )


def overall(player: Player) -> Figures:
    return overall_of(db.session.get(PlayerTotal, player.id))


def overall_of(totals: PlayerTotal | None) -> Figures:
    """`overall` from the player's totals row, already read (None: no answer counted yet)."""
    return _figures("All categories", totals)


def per_category(player: Player) -> list[Figures]:
    rows = db.session.execute(
        select(Category.name, CategoryTotal)
        .join(Category, Category.id == CategoryTotal.category_id)
        .where(CategoryTotal.player_id == player.id)
        .order_by(Category.name)
    ).all()
    return [_figures(name, total) for name, total in rows]


def recent_rounds(
    player: Player, limit: int = 10, offset: int = 0, hide_daily_from: date | None = None
) -> list[RecentRound]:
    """The player's answered rounds, newest first; each opens again with its reveal.

    `hide_daily_from`: leave out the rounds of daily challenges of that day and later (another
    reader who has not played today's challenge must not see how its texts went).
    """
    query = (
        select(Round, Example, Category.name, GameSet.day)
        .join(Example, Example.id == Round.example_id)
        .join(Category, Category.id == Example.category_id)
        .outerjoin(GameSet, GameSet.id == Round.set_id)
        .where(Round.player_id == player.id, Round.guess.is_not(None))
    )
    if hide_daily_from is not None:
        todays = select(GameSet.id).where(
            GameSet.player_id == player.id, GameSet.day >= hide_daily_from
        )
        query = query.where(or_(Round.set_id.is_(None), Round.set_id.not_in(todays)))
    rows = db.session.execute(
        query.order_by(Round.answered_at.desc(), Round.id.desc()).offset(offset).limit(limit)
    ).all()
    return [
        RecentRound(
            round_.id,
            round_.order_index,
            category,
            tally.earned(round_),
            # The reveal's own headline (app/game/insights.outcome), so the two never differ.
            insights.outcome(
                insights.kind_of(example), example.n_sentences, example.boundary, round_.guess
            ).headline,
            round_.answered_at,
            None if tally.counts(round_) else (round_.uncounted or round_.kind),
            day,
        )
        for round_, example, category, day in rows
    ]


@dataclass(frozen=True)
class Calibration:
    """The player's counted rounds at one confidence level, and how many were exactly right."""

    confidence: int
    rounds: int
    exact: int

    @property
    def exact_share(self) -> float:
        return self.exact / self.rounds


def calibration(player: Player) -> list[Calibration]:
    """How often the player was exactly right at each confidence they gave (counted rounds)."""
    rows = db.session.execute(
        select(
            Round.confidence,
            func.count(Round.id),
            func.sum(case((Round.guess == Example.boundary, 1), else_=0)),
        )
        .join(Example, Example.id == Round.example_id)
        .where(
            Round.player_id == player.id,
            Round.guess.is_not(None),
            Round.confidence.is_not(None),
            tally.COUNTED,
        )
        .group_by(Round.confidence)
        .order_by(Round.confidence)
    ).all()
    return [Calibration(level, count, int(exact or 0)) for level, count, exact in rows]


def answered_rounds(player: Player) -> int:
    """How many rounds the player answered (the rows of their rounds list)."""
    return (
        db.session.scalar(
            select(func.count(Round.id)).where(
                Round.player_id == player.id, Round.guess.is_not(None)
            )
        )
        or 0
    )


def history(player: Player, limit: int = HISTORY_LIMIT) -> list[progression.Played]:
    """The player's last `limit` counted rounds in play order, with the always-human baseline:
    the rounds `overall` totals, so charts, mastery and badges agree with the figures."""
    rows = db.session.execute(
        select(Round.points, Round.guess, Example.boundary, Example.n_sentences, Category.name)
        .join(Example, Example.id == Round.example_id)
        .join(Category, Category.id == Example.category_id)
        .where(Round.player_id == player.id, Round.guess.is_not(None), tally.COUNTED)
        .order_by(Round.answered_at.desc(), Round.id.desc())
        .limit(limit)
    ).all()
    return [
        progression.Played(
            points=earned,
            exact=guess == boundary,
            baseline=points(n, boundary),
            category=category,
        )
        for earned, guess, boundary, n, category in reversed(rows)
    ]


def skill_chart(played: list[progression.Played], name: str | None = None) -> Markup | None:
    """Rolling mean points per round against the always-human baseline on the same texts;
    `name` is whose rounds they are (None: the reader's own, "you")."""
    if len(played) < 2:
        return None
    who, whose = ("you", "your") if name is None else (name, f"{name}’s")
    mine = progression.rolling_mean([p.points for p in played])
    baseline = progression.rolling_mean([p.baseline for p in played])
    return charts.line_chart(
        [
            charts.Series(who, mine, "you"),
            charts.Series("“all human” every time", baseline, "baseline"),
        ],
        y_max=5,
        title="Points per round over time",
        description=(
            f"Mean points over the last {progression.WINDOW} rounds at each of {whose} "
            f"{len(played)} rounds: now {mine[-1]:.2f}, against {baseline[-1]:.2f} for "
            "answering all human on the same texts."
        ),
        y_ticks=[(v, str(v)) for v in range(6)],
    )


def exact_chart(played: list[progression.Played]) -> Markup | None:
    """Rolling share of exact hits."""
    if len(played) < 2:
        return None
    rate = progression.rolling_mean([1.0 if p.exact else 0.0 for p in played])
    return charts.line_chart(
        [charts.Series("exact hits", rate, "exact")],
        y_max=1,
        title="Exact hits over time",
        description=(
            f"Share of exact hits over the last {progression.WINDOW} rounds: now "
            f"{100 * rate[-1]:.0f}%."
        ),
        y_ticks=[(v / 4, f"{25 * v}%") for v in range(5)],
        height=180,
    )


def sets_finished(player: Player) -> int:
    """Finished sets all of whose texts counted (a replayed daily is not a finished set)."""
    return (
        db.session.scalar(
            select(func.count(GameSet.id)).where(GameSet.player_id == player.id, tally.SET_COUNTED)
        )
        or 0
    )
