"""Game views: parse the request, call one service function, render.

Every action is a plain form post that answers with a redirect, so the game works without
JavaScript. The round page's script sends the same posts with `X-Requested-With: fetch` and gets
the updated round back as an HTML fragment instead (one request per sentence, no reload).

Form fields are read from `request.form` as given: an answer is parsed and checked by
`answers.parse_answer` alone (the page, the script and the tests share it), and these are the
round's hot requests, where a WTForms class would add its cost to every post.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from flask import (
    Blueprint,
    current_app,
    flash,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user
from sqlalchemy import exists, select

from app.accounts import profile as profiles
from app.errors import BadRequest, Conflict, NotFound, ServiceError
from app.extensions import db
from app.game import (
    answers,
    challenge,
    daily,
    hooks,
    insights,
    levels,
    next_text,
    reveals,
    round_views,
    rounds,
    sets,
    starts,
    tally,
    tutorial,
    typing_signals,
)
from app.game.guard_views import guest_limits, player_for_play, player_required
from app.game.home import home_state
from app.leaderboard import standings
from app.models import Round
from app.models.sets import PRACTICE_SET

bp = Blueprint("game", __name__, cli_group=None)  # its commands: app/game/cli.py
# What a round earned (0 when it does not count): the one figure every page shows for a round.
bp.add_app_template_filter(tally.earned, "earned")

TUTORED = "tutored"


def _needs_tutorial(played: bool = False) -> bool:
    """A first visit: no tutorial seen in this browser and no round played. `played`: the caller
    already knows of a round of the player's (an open one, or answers in their totals), so no
    query is needed."""
    if session.get(TUTORED):
        return False
    if not current_user.is_authenticated:
        return True
    if played:
        return False
    return not db.session.scalar(select(exists().where(Round.player_id == current_user.id)))


def _home_stats(totals: profiles.Figures | None = None) -> dict | None:
    """The progress strip: `totals`, the player's overall figures when already read."""
    if not current_user.is_authenticated or current_user.kind == "crowd":
        return None
    figures = totals if totals is not None else profiles.overall(current_user)
    # The all-time skill board: a rank once on it, else how many rounds are still needed.
    standing = standings.standing_of(current_user) if figures.rounds else None
    return {
        "points": figures.points,
        "rounds": figures.rounds,
        "rank": standing.rank if standing and standing.on_board else None,
        "to_board": standing.rounds_to_rank if standing else None,
        "streak": daily.streak(current_user),
    }


def _render_home(notice: str | None = None, status: int = 200, left: list | None = None):
    signed_in = current_user.is_authenticated
    day = daily.today()
    # The player's own sets, open round, last choice and totals in one statement.
    mine = home_state(current_user, day) if signed_in else None
    choice = mine.choice if mine is not None else starts.RANDOM
    stats = _home_stats(profiles.overall_of(mine.totals) if mine is not None else None)
    categories = rounds.categories_with_examples()
    open_round = mine.open_round if mine is not None else None
    page = render_template(
        "game/home.html",
        categories=categories,
        open_round=open_round,
        open_set=mine.open_set if mine is not None else None,
        needs_consent=not signed_in or current_user.research_consent_at is None,
        # A player with an open round or answers on record has played: no query for a round.
        first_visit=_needs_tutorial(open_round is not None or bool(stats and stats["rounds"])),
        stats=stats,
        today=day,
        today_set=mine.today_set if mine is not None else None,
        choice=choice,
        choice_name=_category_name(choice, categories),
        notice=notice,
        categories_left=left,
        # Easy, medium and hard sets, for players past their first text.
        level_offer=levels.offer(current_user, choice) if signed_in else None,
    )
    return page, status


def _category_name(slug: str, shown: list | None = None) -> str | None:
    """The name of a chosen category; None for "random" or one that no longer exists.
    `shown`: categories already read for the page, looked in first (no query when found)."""
    if slug == starts.RANDOM:
        return None
    for category in shown or ():
        if category.slug == slug:
            return category.name
    category = rounds.category_by_slug(slug)
    return category.name if category is not None else None


def _played_out(done: starts.NoExamplesLeft):
    """The home page saying a category is played out, with the categories still open."""
    left = rounds.categories_left_for(current_user) if current_user.is_authenticated else None
    return _render_home(done.message, 409, left)


@bp.get("/")
def home():
    return _render_home()


@bp.post("/play")
@guest_limits
def start():
    category = request.form.get("category", starts.RANDOM)
    if current_user.is_authenticated and current_user.kind == "crowd":
        # Crowd workers play their study's rounds, not the public game.
        return redirect(url_for("crowd.current"))
    if request.form.get("start") == "tutorial":
        session["tutorial_consent"] = request.form.get("consent") == "yes"
        return redirect(url_for("game.tutorial_page"))
    if request.form.get("tutorial") == "done":
        session[TUTORED] = True
    level = levels.parse(request.form.get("level"))
    try:
        player_for_play(category, level)
        round_ = sets.play(current_user, category, level)
    except starts.NoExamplesLeft as done:
        return _played_out(done)
    return round_views.go_to_round(round_)


def preloads(load: Callable[[int], object], argument: str):
    """Mark a view whose round or set is read together with the session's player, in one
    statement, before anything reads `current_user`: `load(view_args[argument])`.

    Flask-Login's user loader then finds the session's player loaded, when they own the round or
    set, instead of running a SELECT of its own, and checks the session's version against the row
    as always (app/accounts/service.py: load_player); anyone else's round or set is refused by the
    view as before. What was read is kept in `g` for the request (`_preloaded`): the session's
    identity map holds objects weakly.
    """

    def mark(view):
        view.preload = (load, argument)
        return view

    return mark


@bp.before_app_request
def _preload_for_view() -> None:
    """Run the view's `preloads`, if it has one. This is an app-wide hook, registered with the
    game's blueprint before the crowd's, so that it runs before any other hook reads
    `current_user` (the crowd's checks a worker's time on a reveal)."""
    view = current_app.view_functions.get(request.endpoint) if request.endpoint else None
    preload = getattr(view, "preload", None)
    if preload is None or "_user_id" not in session or "_login_user" in g:
        return
    load, argument = preload
    g.preloaded = load(request.view_args[argument])


@bp.get("/play/round/<int:round_id>")
@preloads(rounds.preload_round, "round_id")
@player_required
def show(round_id: int):
    round_ = rounds.get_round(current_user, round_id)
    return round_views.render_round(
        round_, flag=request.args.get("flag") == "1" and not round_.answered
    )


def _preloaded(kind: type):
    """What `preloads` read for this request, when it is a `kind` (None: nothing, or something
    else)."""
    preloaded = g.get("preloaded")
    if isinstance(preloaded, tuple) and len(preloaded) == 2 and isinstance(preloaded[1], kind):
        return preloaded[1]
    return None


def _posted_answer(round_) -> tuple[answers.Answer, list]:
    """The posted answer, parsed (raises BadRequest with a message for the player), and what a
    study asks to run once it is stored (`hooks.answer_form`)."""
    parsed = answers.parse_answer(
        request.form.get("choice", ""),
        request.form.get("seen"),
        request.form.getlist("reasons"),
        request.form.get("explanation", ""),
        request.form.get("confidence"),
    )
    # Pasted or typed, and how fast: signals only, stored with the answer, never a reason to
    # refuse it.
    typing = typing_signals.parse(request.form, parsed.explanation)
    parsed = dataclasses.replace(parsed, typing=typing)
    # A study may ask for ratings of the flagged sentence before the truth is shown.
    return parsed, hooks.answer_form.send(round_, request.form, parsed.choice == "machine")


def _refused(round_id: int, status: int, message: str, flag: bool = False):
    """The round's page again, saying why the request changed nothing."""
    return round_views.render_round(rounds.get_round(current_user, round_id), status, message, flag)


def _run_steps(after: list) -> None:
    for step in after:
        if step is not None:
            step()


@bp.post("/play/round/<int:round_id>/next")
@preloads(reveals.preload_reveal, "round_id")
@player_required
def reveal(round_id: int):
    for refused in hooks.reveal_asked.send(current_user):
        if refused is not None:
            return render_template(refused.pop("template"), **refused), 409
    try:
        seen = int(request.form.get("seen", ""))
    except ValueError:
        return _refused(round_id, 400, "The request was incomplete.")
    try:
        shown = reveals.reveal_next(current_user, round_id, seen, _preloaded(reveals.RevealView))
    except Conflict as conflict:
        return _refused(round_id, 409, conflict.message)
    if not round_views.wants_fragment():
        return redirect(url_for("game.show", round_id=round_id, _anchor="latest"))
    return round_views.render_state(shown)


@bp.post("/play/round/<int:round_id>/answer")
@preloads(answers.preload_answer, "round_id")
@player_required
def answer(round_id: int):
    view = answers.own_round(current_user, round_id, _preloaded(answers.AnswerView))
    # A study's round is the `Round` its hooks read.
    study_round = rounds.get_round(current_user, round_id) if view.participant_id else None
    choice = request.form.get("choice", "")
    try:
        parsed, after = _posted_answer(study_round or view)
        done = answers.submit_answer(current_user, round_id, parsed, view)
        _run_steps(after)
    except answers.AlreadyAnswered as already:
        return _refused(round_id, 409, already.message)
    except (BadRequest, Conflict) as refused:
        db.session.rollback()
        return _refused(round_id, refused.status, refused.message, flag=choice == "machine")
    if not round_views.wants_fragment():
        return redirect(url_for("game.show", round_id=round_id, _anchor="result"))
    return round_views.render_state(done)


@bp.get("/play/continue")
def resume():
    if current_user.is_authenticated and (open_round := reveals.open_round(current_user)):
        return redirect(url_for("game.show", round_id=open_round.id))
    return redirect(url_for("game.home"))


# --- Sets ------------------------------------------------------------------------------------


@bp.post("/sets/<int:set_id>/next")
@preloads(sets.preload_set, "set_id")
@player_required
def next_in_set(set_id: int):
    try:
        round_ = next_text.next_round(current_user, set_id)
    except sets.SetFinished as finished:
        if isinstance(finished, sets.DayOver):
            flash(finished.message)
        return redirect(_summary_url(finished.game_set))
    except starts.NoExamplesLeft as done:
        return _played_out(done)
    except sets.FinishCurrentFirst as busy:
        return round_views.go_to_open_round(busy)
    return round_views.go_to_round(round_)


def _summary_url(game_set) -> str:
    if game_set.kind == PRACTICE_SET:
        return url_for("game.practice_results", day=game_set.day.isoformat())
    if game_set.day is not None:
        return url_for("game.daily_results", day=game_set.day.isoformat())
    if game_set.challenge_of_id is not None:
        return _challenge_url(game_set)
    return url_for("game.set_summary", set_id=game_set.id)


def _challenge_url(run_or_source) -> str:
    """The challenge page of a challenger's set or of a friend's run of it."""
    source = (
        challenge.source_of(run_or_source)
        if run_or_source.challenge_of_id is not None
        else run_or_source
    )
    return url_for("game.challenge_page", token=source.challenge_token)


def _challenge_panel(game_set) -> dict | None:
    """What a finished normal set's summary shows about its challenge link."""
    if game_set.kind != "normal" or not game_set.finished:
        return None
    if game_set.challenge_token is None:
        return {"url": None}
    runs = challenge.friends_runs(game_set)
    return {
        "url": url_for("game.challenge_page", token=game_set.challenge_token, _external=True),
        "comparison": challenge.compare(game_set, runs, current_user) if runs else None,
        "friends": challenge.friends_count(game_set),
    }


@bp.get("/sets/<int:set_id>")
@preloads(sets.preload_set, "set_id")
@player_required
def set_summary(set_id: int):
    summary = sets.summary(current_user, set_id)
    if summary.game_set.day is not None or summary.game_set.challenge_of_id is not None:
        return redirect(_summary_url(summary.game_set))
    choice = sets.last_category(summary.game_set, summary.last_chosen)
    return render_template(
        "game/set_summary.html",
        summary=summary,
        choice=choice,
        choice_name=_category_name(choice),
        challenge=_challenge_panel(summary.game_set),
    )


# --- Tutorial and votes ----------------------------------------------------------------------


@bp.get("/tutorial")
def tutorial_page():
    try:
        number = int(request.args.get("step", "0"))
        flagged = request.args.get("flagged")
        guess = int(flagged) if flagged is not None else None
    except ValueError:
        number, guess = 0, None
    shown = tutorial.step(number)
    outcome = tutorial.answer(guess) if guess is not None else None
    if outcome is not None and outcome.finished:
        shown = tutorial.step(outcome.guess if outcome.guess < tutorial.N else tutorial.N - 1)
    return render_template(
        "game/tutorial.html",
        step=shown,
        outcome=outcome,
        boundary=tutorial.BOUNDARY,
        n=tutorial.N,
        all_sentences=tutorial.SENTENCES,
        consent=session.get("tutorial_consent", False),
        needs_consent=not current_user.is_authenticated or current_user.research_consent_at is None,
    )


@bp.post("/explanations/<int:round_id>/vote")
@player_required
def vote(round_id: int):
    try:
        voted = insights.vote(current_user, round_id)
    except ServiceError as refused:
        if round_views.wants_fragment():
            return jsonify(error=refused.message), refused.status
        raise
    if round_views.wants_fragment():
        return jsonify(round_id=voted.id, upvotes=voted.upvotes, voted=True)
    try:
        back = int(request.form.get("back", ""))
        rounds.get_round(current_user, back)
    except (ValueError, NotFound):
        return redirect(url_for("game.home"))
    return redirect(url_for("game.show", round_id=back, _anchor="explanations"))
