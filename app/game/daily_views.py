"""The daily challenge's pages: today's challenge and its start, a day's results and its share
card; around it, the countdown to the next one, the archive of past challenges played again
for practice, and the opt-in reminder. Views on the game blueprint."""

from __future__ import annotations

from datetime import UTC, date, datetime

from flask import current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user

from app import paging
from app.errors import BadRequest
from app.extensions import db
from app.game import charts, countdown, daily, practice, round_views, sets
from app.game.guard_views import (
    challenge_day,
    guest_limits,
    player_for_play,
    player_required,
    require_player,
)
from app.game.routes import bp
from app.models.sets import PRACTICE_SET


@bp.get("/daily")
def daily_page():
    day = daily.today()
    mine = daily.own_set(current_user, day) if current_user.is_authenticated else None
    if mine is not None and mine.finished:
        return redirect(url_for("game.daily_results", day=day.isoformat()))
    return render_template(
        "game/daily.html",
        day=day,
        challenge=daily.challenge(day),
        size=current_app.config["DAILY_SIZE"],
        mine=mine,
        needs_consent=not current_user.is_authenticated or current_user.research_consent_at is None,
        streak=daily.streak(current_user) if current_user.is_authenticated else 0,
    )


@bp.post("/daily/start")
@guest_limits
def daily_start():
    if current_user.is_authenticated and current_user.kind == "crowd":
        return redirect(url_for("crowd.current"))
    if daily.challenge(daily.today()) is None:
        raise daily.NoChallenge("There is no daily challenge today. Please come back tomorrow.")
    player_for_play(None)
    try:
        round_ = daily.start(current_user)
    except daily.AlreadyPlayed:
        return redirect(url_for("game.daily_results", day=daily.today().isoformat()))
    except sets.FinishCurrentFirst as busy:
        return round_views.go_to_open_round(busy)
    return redirect(url_for("game.show", round_id=round_.id))


def _distribution_chart(results, mine: int | None):
    labels = [str(points) for points in range(results.max_points + 1)]
    return charts.bar_chart(
        labels,
        results.counts,
        title=f"Scores in the daily challenge of {results.day.isoformat()}",
        description=f"{results.players} players finished; total points from 0 to "
        f"{results.max_points}." + (f" You scored {mine}." if mine is not None else ""),
        marked=mine,
    )


@bp.get("/daily/<day>")
def daily_results(day: str):
    on = challenge_day(day)
    if on > daily.today():
        raise daily.NoChallenge(
            f"{on.isoformat()} has not come yet: its daily challenge, if any, opens that day."
        )
    results = daily.results(on)
    mine = daily.own_set(current_user, on) if current_user.is_authenticated else None
    finished = mine is not None and mine.finished
    points = daily.set_points(mine) if finished else None
    counted = finished and daily.counted(points)
    share = None
    if finished:
        token = daily.ensure_share_token(mine)
        card_url = url_for("game.daily_card", day=day, token=token, _external=True)
        share = daily.share_text(on, points, card_url)
    total = daily.total(points) if finished else None
    return render_template(
        "game/daily_results.html",
        day=on,
        results=results,
        # A replay is not among everyone's scores: no mark on the chart, no comparison.
        chart=_distribution_chart(results, total if counted else None),
        mine=mine if finished else None,
        points=points,
        total=total,
        counted=counted,
        squares=daily.squares(points) if points else "",
        below=results.share_below(total) if counted else None,
        share=share,
        is_today=on == daily.today(),
        streak=daily.streak(current_user) if current_user.is_authenticated else 0,
    )


def _card(day: str, token: str) -> tuple[date, list[int | None]]:
    on = challenge_day(day)
    return on, daily.set_points(daily.by_share_token(on, token))


@bp.get("/daily/<day>/card/<token>")
def daily_card(day: str, token: str):
    on, points = _card(day, token)
    return render_template(
        "game/daily_card.html",
        day=on,
        points=points,
        total=daily.total(points),
        counted=daily.counted(points),
        max_points=5 * len(points),
        squares=daily.squares(points),
        token=token,
        is_today=on == daily.today(),
    )


@bp.get("/daily/<day>/card/<token>.png")
def daily_card_image(day: str, token: str):
    from app.game import cards  # Pillow is loaded only when an image is asked for

    on, points = _card(day, token)
    response = current_app.response_class(cards.render_png(on, points), mimetype="image/png")
    response.headers["Cache-Control"] = "public, max-age=86400"
    return response


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
    except sets.FinishCurrentFirst as busy:
        return round_views.go_to_open_round(busy)
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
        game_set=daily.own_set(current_user, on, PRACTICE_SET),
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
