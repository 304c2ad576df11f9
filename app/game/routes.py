"""Game views: parse the request, call one service function, render."""

from __future__ import annotations

from flask import Blueprint, current_app, redirect, render_template, request, url_for
from flask_login import current_user, login_user

from app.accounts import service as accounts
from app.crowd import studies
from app.extensions import db, limiter
from app.game import rounds
from app.game.reasons import MAX_EXPLANATION_CHARS, REASONS

bp = Blueprint("game", __name__)


def _guest_limit() -> str:
    return current_app.config["GUEST_RATE_LIMIT"]


def _has_session() -> bool:
    return current_user.is_authenticated


def _render_home(notice: str | None = None, status: int = 200):
    signed_in = current_user.is_authenticated
    page = render_template(
        "game/home.html",
        categories=rounds.categories_with_examples(),
        open_round=rounds.open_round(current_user) if signed_in else None,
        needs_consent=not signed_in or current_user.research_consent_at is None,
        notice=notice,
    )
    return page, status


@bp.get("/")
def home():
    return _render_home()


@bp.post("/play")
# A site-wide cap on new guests: one key for every address. Flask-Limiter checks limits of equal
# window in the order they are listed here from the bottom and stops at the first breach, so a
# request refused by its address's per-minute limit uses up none of the per-minute cap.
@limiter.limit(
    lambda: current_app.config["GUEST_GLOBAL_RATE_LIMIT"],
    key_func=lambda: "all-guests",
    exempt_when=_has_session,
    methods=["POST"],
)
@limiter.limit(_guest_limit, exempt_when=_has_session, methods=["POST"])
def start():
    category = request.form.get("category", rounds.RANDOM)
    consent = request.form.get("consent") == "yes"
    if current_user.is_authenticated and current_user.kind == "crowd":
        # Crowd workers play their study's rounds, not the public game.
        return redirect(url_for("crowd.current"))
    signed_in = current_user.is_authenticated
    try:
        if not signed_in or (consent and current_user.research_consent_at is None):
            # Refuse an unknown or played-out category before a guest or a consent is stored.
            rounds.check_start(current_user if signed_in else None, category)
    except rounds.NoExamplesLeft as done:
        return _render_home(done.message, 409)
    if not current_user.is_authenticated:
        guest = accounts.create_guest(consent)
        login_user(guest, remember=True)
        player = guest
    else:
        player = current_user
        if consent and player.research_consent_at is None:
            accounts.set_consent(player, True)
    try:
        round_ = rounds.start_round(player, category)
    except rounds.NoExamplesLeft as done:
        return _render_home(done.message, 409)
    return redirect(url_for("game.show", round_id=round_.id))


def _require_player():
    if not current_user.is_authenticated:
        return redirect(url_for("game.home"))
    return None


def _render_round(round_, status: int = 200, error: str | None = None, flag: bool = False):
    example = round_.example
    context = {
        "round": round_,
        "category": example.category,
        "sentences": rounds.visible_sentences(round_),
        "n": example.n_sentences,
        "remaining": example.n_sentences - round_.revealed,
        "reasons": REASONS,
        "max_explanation": MAX_EXPLANATION_CHARS,
        "flag": flag,
        "error": error,
        "form": request.form if error else {},
    }
    if round_.answered:
        context.update(
            result=rounds.result_of(round_),
            boundary=example.boundary,
            system=example.system.name,
        )
    if round_.participant_id is not None:
        context.update(studies.round_context(round_))
    # A study may show an answered round on its own page (app/crowd: round_context).
    return render_template(context.pop("template", "game/round.html"), **context), status


@bp.get("/play/round/<int:round_id>")
def show(round_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    round_ = rounds.get_round(current_user, round_id)
    return _render_round(round_, flag=request.args.get("flag") == "1" and not round_.answered)


@bp.post("/play/round/<int:round_id>/next")
def reveal(round_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    try:
        seen = int(request.form.get("seen", ""))
    except ValueError:
        return _render_round(
            rounds.get_round(current_user, round_id), 400, "The request was incomplete."
        )
    try:
        rounds.reveal_next(current_user, round_id, seen)
    except rounds.Conflict as conflict:
        return _render_round(rounds.get_round(current_user, round_id), 409, conflict.message)
    return redirect(url_for("game.show", round_id=round_id, _anchor="latest"))


@bp.post("/play/round/<int:round_id>/answer")
def answer(round_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    round_ = rounds.get_round(current_user, round_id)
    choice = request.form.get("choice", "")
    try:
        parsed = rounds.parse_answer(
            choice,
            request.form.get("seen"),
            request.form.getlist("reasons"),
            request.form.get("explanation", ""),
        )
        # A study may ask for ratings of the flagged sentence before the truth is shown.
        ratings = (
            studies.ratings_from(round_, "before", request.form) if choice == "machine" else None
        )
        rounds.submit_answer(current_user, round_id, parsed)
        if ratings is not None:
            studies.store_ratings(round_id, ratings)
    except rounds.AlreadyAnswered as already:
        return _render_round(already.round, 409, already.message)
    except (rounds.BadRequest, rounds.Conflict) as refused:
        db.session.rollback()
        return _render_round(round_, refused.status, refused.message, flag=choice == "machine")
    return redirect(url_for("game.show", round_id=round_id, _anchor="result"))


@bp.get("/play/continue")
def resume():
    if current_user.is_authenticated and (open_round := rounds.open_round(current_user)):
        return redirect(url_for("game.show", round_id=open_round.id))
    return redirect(url_for("game.home"))
