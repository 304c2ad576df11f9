"""Leaderboards, overall and per category."""

from __future__ import annotations

from flask import Blueprint, abort, render_template
from flask_login import current_user

from app.game.rounds import categories_with_examples, category_by_slug
from app.leaderboard import standings

bp = Blueprint("leaderboard", __name__)


@bp.get("/leaderboard", defaults={"slug": None})
@bp.get("/leaderboard/<slug>")
def board(slug: str | None):
    category = None
    if slug is not None:
        category = category_by_slug(slug)
        if category is None:
            abort(404)
    rows = standings.top(category)
    mine = standings.standing_of(current_user, category) if current_user.is_authenticated else None
    return render_template(
        "leaderboard/board.html",
        category=category,
        categories=categories_with_examples(),
        rows=rows,
        mine=mine,
        mine_listed=mine is not None and any(r.player_id == mine.player_id for r in rows),
    )
