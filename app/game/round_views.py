"""The round's page as the game's views answer with it: the whole page, or (for the page's
script, `X-Requested-With: fetch`) the round's fragment; and a round just started, as a redirect
to its page or as the fragment with its address."""

from __future__ import annotations

from flask import current_app, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from flask_login import current_user
from markupsafe import Markup

from app.game import answers, charts, hooks, insights, reveals, rounds, sets
from app.game.reasons import MAX_EXPLANATION_CHARS, REASONS
from app.game.scoring import verdict

FRAGMENT_HEADER = "X-Requested-With"
# Where an app keeps the fragments `_fixed` rendered, by template.
_FIXED = "game.fixed_fragments"


def wants_fragment() -> bool:
    return request.headers.get(FRAGMENT_HEADER) == "fetch"


def _fixed(name: str, chosen, **constants) -> Markup:
    """The template `name` rendered with `constants` and what the player had `chosen` in it.

    With nothing chosen (every round page but a refused answer shown again) it is the same for
    every round and player: rendered once per app and kept, as a reveal's page shows it after
    every sentence. Templates that reload when changed (debug) are rendered every time.
    """
    app = current_app._get_current_object()
    kept = app.extensions.setdefault(_FIXED, {})
    if not chosen and name in kept:
        return kept[name]
    html = Markup(app.jinja_env.get_template(name).render(chosen=chosen, **constants))
    if not chosen and not app.jinja_env.auto_reload:
        kept[name] = html
    return html


def reason_chips(picked=()) -> Markup:
    """The reason chips of the "machine" answer, `picked` ticked (game/_reason_chips.html)."""
    return _fixed("game/_reason_chips.html", picked, reasons=REASONS)


def confidence_chips(sure: str | None = None) -> Markup:
    """How sure the player is, `sure` chosen (game/_confidence.html)."""
    return _fixed("game/_confidence.html", sure, confidence_levels=answers.CONFIDENCE_LEVELS)


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


def render_round(round_, status: int = 200, error: str | None = None, flag: bool = False):
    """A round loaded as ORM objects (`rounds.get_round`), drawn from its state."""
    return render_state(answers.view_of(round_), status, error, flag)


def render_state(
    state: reveals.RevealView, status: int = 200, error: str | None = None, flag: bool = False
):
    """The round's page (the fragment, for the page's script) drawn from its state: after an
    answer an `answers.AnswerView`, which has the truth. A study's round has parts of its own
    (the `round_page` hook, which reads its `Round`: found loaded when the caller holds it)."""
    n = state.n_sentences
    context = {
        "round": state,
        "category": {"name": state.category_name},
        # Only what the player has been shown; the whole text once the round is answered.
        "sentences": list(state.sentences if state.answered else state.sentences[: state.revealed]),
        "n": n,
        "remaining": n - state.revealed,
        "reasons": REASONS,
        "reason_chips": reason_chips,
        "confidence_chips": confidence_chips,
        "max_explanation": MAX_EXPLANATION_CHARS,
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
    if state.participant_id is not None:
        for extra in hooks.round_page.send(rounds.get_round(current_user, state.id)):
            # A study may show an answered round on its own page (app/crowd/serving.round_context).
            context.update(extra)
    template = context.pop("template", None) or (
        "game/_round.html" if wants_fragment() else "game/round.html"
    )
    return render_template(template, **context), status


def go_to_round(state: reveals.RevealView) -> ResponseReturnValue:
    """A round just started or resumed: a redirect to its page, or (for the page's script) the
    round itself with its address in X-Round-URL."""
    address = url_for("game.show", round_id=state.id)
    if not wants_fragment():
        return redirect(address)
    page, status = render_state(state)
    return page, status, {"X-Round-URL": address}


def go_to_open_round(busy: sets.FinishCurrentFirst) -> ResponseReturnValue:
    """Back to the text the player left open, saying why nothing new started."""
    flash(busy.message)
    return redirect(url_for("game.show", round_id=busy.round.id))


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
