"""Leaderboards: by skill or by points ("most played"), this week, this month or all time,
overall and per category."""

from __future__ import annotations

from flask import Blueprint, abort, render_template, request
from flask_login import current_user

from app.game.rounds import categories_with_examples, category_by_slug
from app.leaderboard import skill, standings
from app.models.base import utcnow

bp = Blueprint("leaderboard", __name__, cli_group=None)  # commands: app/leaderboard/cli.py

PERIOD_NAMES = {"week": "This week", "month": "This month", "all": "All time"}
MEASURE_NAMES = {"skill": "Skill", "points": "Most played"}


@bp.get("/leaderboard", defaults={"slug": None})
@bp.get("/leaderboard/<slug>")
def board(slug: str | None):
    period = request.args.get("period", "all")
    measure = request.args.get("by", "skill")
    if period not in PERIOD_NAMES or measure not in MEASURE_NAMES:
        abort(404)
    category = None
    if slug is not None:
        category = category_by_slug(slug)
        if category is None:
            abort(404)
    rows = standings.top(category, measure=measure, period=period)
    mine = (
        standings.standing_of(current_user, category, measure, period)
        if current_user.is_authenticated
        else None
    )
    return render_template(
        "leaderboard/board.html",
        category=category,
        categories=categories_with_examples(),
        rows=rows,
        mine=mine,
        mine_listed=mine is not None and any(r.player_id == mine.player_id for r in rows),
        period=period,
        measure=measure,
        periods=PERIOD_NAMES,
        measures=MEASURE_NAMES,
        since=skill.period_start(skill.period_key(period, utcnow())),
        min_rounds=skill.MIN_ROUNDS,
        prior_rounds=skill.PRIOR_ROUNDS,
    )
