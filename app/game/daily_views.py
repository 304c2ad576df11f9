"""Around the daily challenge: the countdown to the next one, the archive of past challenges
played again for practice, and the opt-in reminder. Views on the game blueprint."""

from __future__ import annotations

from datetime import UTC, datetime

from flask import flash, redirect, render_template, request, url_for
from flask_login import current_user

from app import paging
from app.errors import BadRequest
from app.extensions import db
from app.game import countdown, daily, practice, round_views
from app.game.guard_views import (
    challenge_day,
    guest_limits,
    player_for_play,
    player_required,
    require_player,
)
from app.game.routes import bp


@bp.app_context_processor
def _daily_countdown() -> dict:
    """`daily_countdown()` in templates: the time left until the next challenge;
    `past_challenges()`: how many past days can be played for practice (the archive is linked
    only when there is one)."""
    return {
        "daily_countdown": lambda: countdown.countdown(datetime.now(UTC)),
        "past_challenges": practice.past_days,
    }


@bp.get("/daily/archive")
def daily_archive():
    days = practice.past_days()
    page = paging.page_number(request.args.get("page"), days, practice.PER_PAGE)
    player = current_user if current_user.is_authenticated else None
    return render_template(
        "game/daily_archive.html",
        days=practice.archive(player, page),
        page=page,
        pages=max(-(-days // practice.PER_PAGE), 1),
        today=daily.today(),
    )


@bp.post("/daily/<day>/practice")
@guest_limits
def practice_start(day: str):
    on = challenge_day(day)
    if current_user.is_authenticated and current_user.kind == "crowd":
        return redirect(url_for("crowd.current"))
    if on == daily.today():
        flash("Today's challenge is not practice: play it here, it counts.")
        return redirect(url_for("game.daily_page"))
    practice.check_day(on)  # refuse a day with no past challenge before making a guest
    player_for_play(None)
    try:
        game_set = practice.start(current_user, on)
        if game_set.finished:
            flash("You have practised this day already; here is how it went.")
            return redirect(url_for("game.practice_results", day=on.isoformat()))
        round_ = practice.next_round(current_user, game_set)
    except practice.PlayedOnTheDay as played:
        flash(played.message)
        return redirect(url_for("game.daily_results", day=on.isoformat()))
    except daily.FinishCurrentFirst as busy:
        flash(busy.message)
        return redirect(url_for("game.show", round_id=busy.round.id))
    return round_views.go_to_round(round_)


@bp.get("/daily/<day>/practice")
def practice_results(day: str):
    on = challenge_day(day)
    if on == daily.today():
        return redirect(url_for("game.daily_page"))
    if (redirect_home := require_player()) is not None:
        return redirect_home
    if daily.own_set(current_user, on) is not None:
        return redirect(url_for("game.daily_results", day=on.isoformat()))
    shown = practice.result(current_user, on)
    return render_template(
        "game/practice_results.html",
        practice=shown,
        everyone=daily.results(on),
        game_set=practice.own_set(current_user, on),
    )


@bp.post("/daily/reminder")
@player_required
def daily_reminder():
    """Turn the player's daily reminder on or off (a browser notification while a tab is open)."""
    wanted = request.form.get("remind")
    if wanted not in ("on", "off"):
        raise BadRequest("Say whether to turn the reminder on or off.")
    current_user.daily_reminder = wanted == "on"
    db.session.commit()
    flash(
        "Reminder on: while this site is open in a tab, your browser will tell you when the next "
        "challenge is out."
        if wanted == "on"
        else "Reminder off: no more notifications about the daily challenge."
    )
    if request.form.get("back") == "account":
        return redirect(url_for("accounts.account", _anchor="reminder"))
    return redirect(url_for("game.daily_results", day=daily.today().isoformat()))
