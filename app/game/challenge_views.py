"""Views of "challenge a friend" (app/game/challenge.py), on the game blueprint."""

from __future__ import annotations

from flask import redirect, render_template, url_for
from flask_login import current_user

from app.game import challenge, round_views, sets
from app.game.guard_views import guest_limits, player_for_play, player_required
from app.game.routes import bp
from app.leaderboard import integrity


@bp.post("/sets/<int:set_id>/challenge")
@player_required
def challenge_link(set_id: int):
    challenge.link(current_user, set_id)
    return redirect(url_for("game.set_summary", set_id=set_id, _anchor="challenge"))


def _render(source, notice: str | None = None, status: int = 200):
    viewer = current_user if current_user.is_authenticated else None
    is_challenger = viewer is not None and viewer.id == source.player_id
    run = None if viewer is None or is_challenger else challenge.own_run(viewer, source)
    # The challenger sees their friends' results; a friend sees their own run.
    runs = challenge.friends_runs(source) if is_challenger else [r for r in (run,) if r]
    comparison = challenge.compare(source, runs, viewer) if (is_challenger or run) else None
    page = render_template(
        "game/challenge.html",
        source=source,
        token=source.challenge_token,
        url=url_for("game.challenge_page", token=source.challenge_token, _external=True),
        is_challenger=is_challenger,
        challenger=challenge.challenger_name(source),
        run=run,
        comparison=comparison,
        size=len(challenge.texts(source)),
        # This browser (or address) showed the challenger a truth: answers here would not count.
        same_browser=not is_challenger and integrity.same_client(source.player_id),
        needs_consent=viewer is None or viewer.research_consent_at is None,
        notice=notice,
    )
    return page, status


@bp.get("/challenge/<token>")
def challenge_page(token: str):
    return _render(challenge.by_token(token))


@bp.post("/challenge/<token>/play")
@guest_limits
def challenge_play(token: str):
    source = challenge.by_token(token)
    if current_user.is_authenticated and current_user.kind == "crowd":
        return redirect(url_for("crowd.current"))
    try:
        # A refused start stores nothing: no new guest, no consent.
        challenge.check_start(current_user if current_user.is_authenticated else None, token)
        player_for_play(None)
        round_ = challenge.start(current_user, token)
    except challenge.AlreadyPlayed:
        return redirect(url_for("game.challenge_page", token=token))
    except sets.FinishCurrentFirst as busy:
        return round_views.go_to_open_round(busy)
    except challenge.Conflict as refused:
        return _render(source, refused.message, refused.status)
    return round_views.go_to_round(round_)
