"""Sign-up, login, logout and profiles.

Form fields are read from `request.form` as given: the service each goes to (`service.sign_up`,
`authenticate`, `change_password`, `lifecycle.delete_account`, `survey.parse_answers`) checks it
and words the refusal, so a WTForms class would be a second copy of those rules.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    json,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required, logout_user

from app import paging
from app.accounts import lifecycle, passwords, service, survey
from app.accounts import profile as profiles
from app.accounts.sessions import rotate_csrf, sign_in, sign_out
from app.errors import ServiceError
from app.extensions import db, limiter, login_manager
from app.game import daily, insights, progression, reason_accuracy
from app.game.guard_views import player_required
from app.leaderboard import standings
from app.models import Player

bp = Blueprint("accounts", __name__, cli_group=None)  # its commands: app/accounts/cli.py

login_manager.login_view = "accounts.login"
login_manager.login_message = "Please log in to see that page."


@login_manager.user_loader
def _load(session_id: str) -> Player | None:
    return service.load_player(session_id)


def _safe_next(target: str | None) -> str:
    """Only follow a `next` that stays on this site."""
    # Browsers read "\" as "/" and drop tabs and newlines: "/\evil" or "/\t/evil" leave the site.
    unsafe = any(char == "\\" or char < " " for char in target or "")
    if target and target.startswith("/") and not target.startswith("//") and not unsafe:
        parts = urlsplit(target)
        if not parts.scheme and not parts.netloc:
            return target
    return url_for("game.home")


@bp.route("/signup", methods=["GET", "POST"])
@limiter.limit(lambda: current_app.config["SIGNUP_RATE_LIMIT"], methods=["POST"])
def signup():
    guest = (
        current_user._get_current_object()
        if current_user.is_authenticated and current_user.is_guest
        else None
    )
    if current_user.is_authenticated and not current_user.is_guest:
        return redirect(url_for("accounts.profile"))
    error = None
    if request.method == "POST":
        try:
            player = service.sign_up(
                request.form.get("username", ""),
                request.form.get("password", ""),
                consent=request.form.get("consent") == "yes",
                guest=guest,
            )
        except ServiceError as refused:
            error = refused
        else:
            sign_in(player)
            flash(f"Welcome, {player.username}! Your rounds and points are saved.")
            return redirect(_safe_next(request.args.get("next")))
    kept = profiles.overall(guest) if guest is not None else None
    return (
        render_template(
            "accounts/signup.html",
            error=error.message if error else None,
            kept=kept,
            username=request.form.get("username", ""),
            consent_given=guest is not None and guest.research_consent_at is not None,
        ),
        error.status if error else 200,
    )


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"], methods=["POST"])
def login():
    error = None
    status = 200
    headers = {}
    if request.method == "POST":
        try:
            player = service.authenticate(
                request.form.get("username", ""), request.form.get("password", "")
            )
        except service.AccountLocked as locked:
            error, status = locked.message, locked.status
            headers["Retry-After"] = str(locked.retry_after)
        else:
            if player is None:
                error, status = "That username and password do not match an account.", 401
            else:
                sign_in(player)
                return redirect(_safe_next(request.args.get("next")))
    guest_rounds = (
        profiles.overall(current_user).rounds
        if current_user.is_authenticated and current_user.is_guest
        else 0
    )
    return (
        render_template(
            "accounts/login.html",
            error=error,
            username=request.form.get("username", ""),
            guest_rounds=guest_rounds,
        ),
        status,
        headers,
    )


@bp.post("/logout")
def logout():
    if current_user.is_authenticated:
        # Ends the session on the server: copies of this browser's cookies stop working too.
        sign_out(current_user._get_current_object())
    flash("You are logged out.")
    return redirect(url_for("game.home"))


def _render_account(error: str | None = None, status: int = 200):
    return (
        render_template(
            "accounts/account.html",
            player=current_user,
            error=error,
            min_length=passwords.MIN_LENGTH,
        ),
        status,
    )


@bp.get("/account")
@login_required
def account():
    """Account settings: change password, download my data, delete my account."""
    return _render_account()


@bp.post("/account/password")
@login_required
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"])
def change_password():
    player = current_user._get_current_object()
    new = request.form.get("new_password", "")
    if new != request.form.get("confirm_password", ""):
        return _render_account("The two new passwords differ; nothing was changed.", 400)
    try:
        service.change_password(player, request.form.get("current_password", ""), new)
    except ServiceError as refused:
        return _render_account(refused.message, refused.status)
    sign_in(player)  # this browser stays signed in, with the new session version
    flash("Your password is changed. Every other session has been signed out.")
    return redirect(url_for("accounts.account"))


@bp.get("/account/data.json")
@login_required
def download_data():
    body = json.dumps(lifecycle.my_data(current_user), indent=2, ensure_ascii=False)
    return Response(
        body,
        mimetype="application/json",
        headers={
            "Content-Disposition": "attachment; filename=roft-my-data.json",
            "Cache-Control": "no-store",
        },
    )


@bp.post("/account/delete")
@login_required
@limiter.limit(lambda: current_app.config["LOGIN_RATE_LIMIT"])
def delete_account():
    player = current_user._get_current_object()
    try:
        kept = lifecycle.delete_account(
            player,
            password=request.form.get("password", ""),
            confirmed=request.form.get("confirm") == "yes",
        )
    except ServiceError as refused:
        return _render_account(refused.message, refused.status)
    logout_user()
    rotate_csrf()
    flash(
        "Your account is deleted. "
        + (
            "Your rounds stay in the research data without your name or explanations, as you "
            "had agreed."
            if kept
            else "Your rounds are deleted too."
        )
    )
    return redirect(url_for("game.home"))


@bp.get("/profile")
@login_required
def profile():
    if current_user.kind == "crowd":
        # A study worker's rounds may be scored without feedback: their study is their page.
        return redirect(url_for("crowd.current"))
    return _render_profile(current_user, own=True)


def _hidden_daily_day(own: bool):
    """Today, when a reader other than the player has not finished today's challenge: its rounds
    stay off the profile for them."""
    if own:
        return None
    day = daily.today()
    if current_user.is_authenticated:
        mine = daily.own_set(current_user, day)
        if mine is not None and mine.finished:
            return None
    return day


def _render_profile(player: Player, own: bool):
    played = profiles.history(player)
    upvotes = insights.upvotes_received(player)
    return render_template(
        "accounts/profile.html",
        player=player,
        own=own,
        overall=profiles.overall(player),
        categories=profiles.per_category(player),
        recent=profiles.recent_rounds(player, hide_daily_from=_hidden_daily_day(own)),
        standing=standings.standing_of(player),
        skill_chart=profiles.skill_chart(played, None if own else player.display_name),
        exact_chart=profiles.exact_chart(played),
        baseline_mean=(sum(p.baseline for p in played) / len(played)) if played else None,
        masteries=progression.masteries(played),
        levels=progression.LEVELS,
        level_rule=progression.level_rule,
        badges=progression.badges(
            played, daily.best_streak(player), upvotes, profiles.sets_finished(player)
        ),
        upvotes=upvotes,
        streak=daily.streak(player),
        calibration=profiles.calibration(player),
        reason_accuracy=reason_accuracy.for_player(player.id),
        right_means=reason_accuracy.RIGHT_MEANS,
        min_for_share=reason_accuracy.MIN_FOR_SHARE,
    )


@bp.get("/profile/rounds")
@login_required
def past_rounds():
    """Every answered round of the player, newest first, each opening again with its reveal."""
    per_page = profiles.ROUNDS_PER_PAGE
    from app.crowd.serving import truth_hidden  # issue 21: crowd workers in a blind study

    if truth_hidden(current_user.id):
        abort(404)
    page = paging.page_number(
        request.args.get("page"), profiles.answered_rounds(current_user), per_page
    )
    rows = profiles.recent_rounds(current_user, per_page + 1, (page - 1) * per_page)
    return render_template(
        "accounts/rounds.html", rows=rows[:per_page], page=page, more=len(rows) > per_page
    )


@bp.post("/profile/settings")
@login_required
def settings():
    service.set_profile_public(current_user, request.form.get("profile_public") == "yes")
    service.set_consent(current_user, request.form.get("consent") == "yes")
    flash("Your settings are saved.")
    return redirect(url_for("accounts.profile"))


@bp.route("/survey", methods=["GET", "POST"])
@player_required
def survey_page():
    """The optional survey, for any player with a session (guests too)."""
    error = None
    if request.method == "POST":
        try:
            answers = survey.parse_answers(request.form)
        except ServiceError as refused:
            error = refused
        else:
            service.save_survey(current_user, answers)
            flash("Thank you! Your answers are saved; you can change them here at any time.")
            return redirect(url_for("accounts.survey_page"))
    stored = service.survey_of(current_user)
    return (
        render_template(
            "accounts/survey.html",
            questions=survey.QUESTIONS,
            answers={name: getattr(stored, name) for name in survey.NAMES} if stored else {},
            error=error.message if error else None,
        ),
        error.status if error else 200,
    )


@bp.get("/players/<username>")
def public_profile(username: str):
    player = (
        db.session.query(Player).filter(Player.username == username).first()
        if service.USERNAME_RE.fullmatch(username)
        else None
    )
    own = player is not None and current_user.is_authenticated and current_user.id == player.id
    if player is None or not (player.profile_public or own):
        # A private profile answers as a missing one: the page does not tell who has an account.
        abort(404)
    return _render_profile(player, own)
