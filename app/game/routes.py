"""Game views: parse the request, call one service function, render.

Every action is a plain form post that answers with a redirect, so the game works without
JavaScript. The round page's script sends the same posts with `X-Requested-With: fetch` and gets
the updated round back as an HTML fragment instead (one request per sentence, no reload).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import date

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
from flask_login import current_user, login_user
from sqlalchemy import exists, select

from app.accounts import profile as profiles
from app.accounts import service as accounts
from app.errors import BadRequest, Conflict, NotFound, ServiceError
from app.extensions import db, limiter
from app.game import (
    answers,
    charts,
    daily,
    hooks,
    insights,
    levels,
    reveals,
    rounds,
    sets,
    tally,
    tutorial,
    typing_signals,
)
from app.game.home import home_state
from app.game.reasons import MAX_EXPLANATION_CHARS, REASONS
from app.game.scoring import verdict
from app.leaderboard import standings
from app.models import Round
from app.models.sets import PRACTICE_SET

bp = Blueprint("game", __name__)
# What a round earned (0 when it does not count): the one figure every page shows for a round.
bp.add_app_template_filter(tally.earned, "earned")

FRAGMENT_HEADER = "X-Requested-With"
TUTORED = "tutored"


def _guest_limit() -> str:
    return current_app.config["GUEST_RATE_LIMIT"]


def _has_session() -> bool:
    return current_user.is_authenticated


def _guest_limits(view):
    """The per-address limit and the site-wide cap on new guests (signed-in players are exempt).

    Flask-Limiter checks limits of equal window in the order they are listed here from the
    bottom and stops at the first breach, so a request refused by its address's per-minute limit
    uses up none of the site-wide cap.
    """
    view = limiter.limit(_guest_limit, exempt_when=_has_session, methods=["POST"])(view)
    return limiter.limit(
        lambda: current_app.config["GUEST_GLOBAL_RATE_LIMIT"],
        key_func=lambda: "all-guests",
        exempt_when=_has_session,
        methods=["POST"],
    )(view)


def _wants_fragment() -> bool:
    return request.headers.get(FRAGMENT_HEADER) == "fetch"


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
    standing = standings.rank_of(current_user) if figures.rounds else None
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
    choice = mine.choice if mine is not None else rounds.RANDOM
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
    if slug == rounds.RANDOM:
        return None
    for category in shown or ():
        if category.slug == slug:
            return category.name
    category = rounds.category_by_slug(slug)
    return category.name if category is not None else None


def _played_out(done: rounds.NoExamplesLeft):
    """The home page saying a category is played out, with the categories still open."""
    left = rounds.categories_left_for(current_user) if current_user.is_authenticated else None
    return _render_home(done.message, 409, left)


@bp.get("/")
def home():
    return _render_home()


def _player_for_play(category: str | None, level: str | None = None) -> None:
    """Sign in a new guest (or record the signed-in player's consent) before play starts.

    `category` is checked first, when given, so that a refused start stores nothing.
    """
    consent = request.form.get("consent") == "yes"
    signed_in = current_user.is_authenticated
    if category is not None and (
        not signed_in or (consent and current_user.research_consent_at is None)
    ):
        rounds.check_start(
            current_user if signed_in else None, category, None if level == levels.ANY else level
        )
    if not signed_in:
        # A new guest holds nothing yet, so its CSRF secret need not change (pages in other
        # tabs keep working); logins, sign-ups and study joins rotate it.
        login_user(accounts.create_guest(consent), remember=True)
    elif consent and current_user.research_consent_at is None:
        accounts.set_consent(current_user, True)


@bp.post("/play")
@_guest_limits
def start():
    category = request.form.get("category", rounds.RANDOM)
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
        _player_for_play(category, level)
        round_ = sets.play(current_user, category, level)
    except rounds.NoExamplesLeft as done:
        return _played_out(done)
    return _go_to_round(round_)


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


def _require_player():
    if not current_user.is_authenticated:
        return redirect(url_for("game.home"))
    return None


def _teaching(state: answers.AnswerView) -> dict:
    """What the reveal of an answered round shows besides the truth: the kind of text, and for
    a public round the spread and the explanations (one statement)."""
    n, boundary, guess = state.n_sentences, state.boundary, state.guess
    kind = insights.describe(boundary, n, state.decoding, state.system_label)
    context: dict = {"kind": kind, "outcome": insights.outcome(kind, n, boundary, guess)}
    if state.participant_id is not None:
        return context
    spread, explanations = insights.teaching(state.example_id, state.player_id, n, boundary, guess)
    # Below SPREAD_MIN_OTHERS (1 by default) no spread is shown; at 1, none means no one else.
    context["first_reader"] = spread is None and current_app.config["SPREAD_MIN_OTHERS"] <= 1
    if spread is not None:
        labels = [str(i + 1) for i in range(n)] + ["all human"]
        context["spread"] = spread
        context["spread_chart"] = charts.bar_chart(
            # "human": said all human (short enough to sit under its bar on a phone)
            [*labels[1:-1], "human"],
            spread.counts[1:],
            title="Where other players flagged this text",
            description=(
                f"{spread.others} other answers; the first machine sentence is "
                + (f"sentence {spread.boundary + 1}" if spread.boundary < n else "none")
                + f"; you answered {labels[spread.guess]}."
            ),
            highlight=spread.boundary - 1,
            marked=spread.guess - 1,
        )
    context["explanations"] = explanations
    return context


def _render_round(round_, status: int = 200, error: str | None = None, flag: bool = False):
    """A round loaded as ORM objects (`rounds.get_round`), drawn from its state."""
    study_round = round_ if round_.participant_id is not None else None
    return _render_state(answers.view_of(round_), status, error, flag, study_round)


def _render_state(
    state: reveals.RevealView,
    status: int = 200,
    error: str | None = None,
    flag: bool = False,
    study_round: Round | None = None,
):
    """The round's page (the fragment, for the page's script) drawn from its state: after an
    answer an `answers.AnswerView`, which has the truth. `study_round`: a study's round, whose
    page has parts of its own (the `round_page` hook)."""
    n = state.n_sentences
    context = {
        "round": state,
        "category": {"name": state.category_name},
        # Only what the player has been shown; the whole text once the round is answered.
        "sentences": list(state.sentences if state.answered else state.sentences[: state.revealed]),
        "n": n,
        "remaining": n - state.revealed,
        "reasons": REASONS,
        "max_explanation": MAX_EXPLANATION_CHARS,
        "confidence_levels": answers.CONFIDENCE_LEVELS,
        "flag": flag,
        "error": error,
        "form": request.form if error else {},
        "position": _position_of(state),
    }
    if state.answered:
        context.update(
            result=verdict(state.guess, state.boundary, n),
            boundary=state.boundary,
            **_teaching(state),
        )
    if study_round is not None:
        for extra in hooks.round_page.send(study_round):
            # A study may show an answered round on its own page (app/crowd/serving.round_context).
            context.update(extra)
    template = context.pop("template", None) or (
        "game/_round.html" if _wants_fragment() else "game/round.html"
    )
    return render_template(template, **context), status


def _go_to_round(round_):
    """A round just started: a redirect to its page, or (for the page's script) the round itself
    with its address in X-Round-URL."""
    if _wants_fragment():
        if isinstance(round_, reveals.RevealView):
            # Started in one statement (`rounds.start_at_once`): drawn from its row.
            page, status = _render_state(round_)
        else:
            page, status = _render_round(round_)
        return page, status, {"X-Round-URL": url_for("game.show", round_id=round_.id)}
    return redirect(url_for("game.show", round_id=round_.id))


@bp.get("/play/round/<int:round_id>")
@preloads(rounds.preload_round, "round_id")
def show(round_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    round_ = rounds.get_round(current_user, round_id)
    return _render_round(round_, flag=request.args.get("flag") == "1" and not round_.answered)


def _position_of(state: reveals.RevealView) -> sets.Position | None:
    """Where the round stands in its set, for the header (None: in no set)."""
    if state.set_id is None:
        return None
    return sets.Position(
        state.set_id,
        state.set_kind,
        state.set_number,
        state.set_size,
        state.set_points,
        state.set_answered,
        state.set_finished,
        state.set_day,
        state.set_level,
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


def _run_steps(after: list) -> None:
    for step in after:
        if step is not None:
            step()


@bp.post("/play/round/<int:round_id>/next")
@preloads(reveals.preload_reveal, "round_id")
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
        shown = reveals.reveal_next(current_user, round_id, seen, _preloaded(reveals.RevealView))
    except Conflict as conflict:
        return _render_round(rounds.get_round(current_user, round_id), 409, conflict.message)
    if not _wants_fragment():
        return redirect(url_for("game.show", round_id=round_id, _anchor="latest"))
    if shown.participant_id is not None:
        # A study's round page has parts of its own (the `round_page` hook).
        return _render_round(rounds.get_round(current_user, round_id))
    return _render_state(shown)


@bp.post("/play/round/<int:round_id>/answer")
@preloads(answers.preload_answer, "round_id")
def answer(round_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    view = answers.own_round(current_user, round_id, _preloaded(answers.AnswerView))
    # A study's round is the `Round` its hooks read.
    study_round = rounds.get_round(current_user, round_id) if view.participant_id else None
    choice = request.form.get("choice", "")
    try:
        parsed, after = _posted_answer(study_round or view)
        done = answers.submit_answer(current_user, round_id, parsed, view)
        _run_steps(after)
    except answers.AlreadyAnswered as already:
        return _render_round(rounds.get_round(current_user, round_id), 409, already.message)
    except (BadRequest, Conflict) as refused:
        db.session.rollback()
        return _render_round(
            rounds.get_round(current_user, round_id),
            refused.status,
            refused.message,
            flag=choice == "machine",
        )
    if not _wants_fragment():
        return redirect(url_for("game.show", round_id=round_id, _anchor="result"))
    if done.participant_id is not None:
        # A study's round page has parts of its own (the `round_page` hook).
        return _render_round(rounds.get_round(current_user, round_id))
    return _render_state(done)


@bp.get("/play/continue")
def resume():
    if current_user.is_authenticated and (open_round := rounds.open_round(current_user)):
        return redirect(url_for("game.show", round_id=open_round.id))
    return redirect(url_for("game.home"))


# --- Sets ------------------------------------------------------------------------------------


@bp.post("/sets/<int:set_id>/next")
@preloads(sets.preload_set, "set_id")
def next_in_set(set_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    try:
        round_ = sets.next_round(current_user, set_id)
    except sets.SetFinished as finished:
        if isinstance(finished, sets.DayOver):
            flash(finished.message)
        return redirect(_summary_url(finished.game_set))
    except rounds.NoExamplesLeft as done:
        return _played_out(done)
    except daily.FinishCurrentFirst as busy:
        flash(busy.message)
        return redirect(url_for("game.show", round_id=busy.round.id))
    return _go_to_round(round_)


def _summary_url(game_set) -> str:
    if game_set.kind == PRACTICE_SET:
        return url_for("game.practice_results", day=game_set.day.isoformat())
    if game_set.day is not None:
        return url_for("game.daily_results", day=game_set.day.isoformat())
    if game_set.challenge_of_id is not None:
        from app.game import challenge_views

        return challenge_views.page_url(game_set)
    return url_for("game.set_summary", set_id=game_set.id)


@bp.get("/sets/<int:set_id>")
@preloads(sets.preload_set, "set_id")
def set_summary(set_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    summary = sets.summary(current_user, set_id)
    if summary.game_set.day is not None or summary.game_set.challenge_of_id is not None:
        return redirect(_summary_url(summary.game_set))
    choice = sets.last_category(summary.game_set, summary.last_chosen)
    from app.game import challenge_views

    return render_template(
        "game/set_summary.html",
        summary=summary,
        choice=choice,
        choice_name=_category_name(choice),
        challenge=challenge_views.panel(summary.game_set),
    )


# --- The daily challenge ---------------------------------------------------------------------


def _day(value: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise NotFound("There is no challenge on that day.") from None


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
@_guest_limits
def daily_start():
    if current_user.is_authenticated and current_user.kind == "crowd":
        return redirect(url_for("crowd.current"))
    if daily.challenge(daily.today()) is None:
        raise daily.NoChallenge("There is no daily challenge today. Please come back tomorrow.")
    _player_for_play(None)
    try:
        round_ = daily.start(current_user)
    except daily.AlreadyPlayed:
        return redirect(url_for("game.daily_results", day=daily.today().isoformat()))
    except daily.FinishCurrentFirst as busy:
        flash(busy.message)
        return redirect(url_for("game.show", round_id=busy.round.id))
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
    on = _day(day)
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
    on = _day(day)
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
def vote(round_id: int):
    if (redirect_home := _require_player()) is not None:
        return redirect_home
    try:
        voted = insights.vote(current_user, round_id)
    except ServiceError as refused:
        if _wants_fragment():
            return jsonify(error=refused.message), refused.status
        raise
    if _wants_fragment():
        return jsonify(round_id=voted.id, upvotes=voted.upvotes, voted=True)
    try:
        back = int(request.form.get("back", ""))
        rounds.get_round(current_user, back)
    except (ValueError, NotFound):
        return redirect(url_for("game.home"))
    return redirect(url_for("game.show", round_id=back, _anchor="explanations"))


# The daily archive, practice and the reminder live in their own module, on this blueprint.
from app.game import daily_views  # noqa: E402, F401
