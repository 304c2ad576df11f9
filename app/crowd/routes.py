"""Study pages for crowd workers: landing and consent, instructions, rounds, completion.

Form fields are read from `request.form` as given and checked where they are used
(`parse_entry`, `admission`, `ratings.save_ratings`), whose rules depend on the study's own
settings; a fixed WTForms class could not state them.
"""

from __future__ import annotations

import hmac
import secrets
import sys
from urllib.parse import urlencode

from flask import Blueprint, flash, g, redirect, render_template, request, session, url_for
from flask_login import current_user
from sqlalchemy import select

from app.accounts.sessions import sign_in
from app.crowd import admission, conditions, lookup, ratings, serving, verdicts
from app.crowd.platforms import EntryError, parse_entry
from app.errors import BadRequest, Forbidden, ServiceError
from app.extensions import db, limiter
from app.game.rounds import MAX_ID
from app.models import Participant, Round, Study

bp = Blueprint("crowd", __name__, url_prefix="/study", cli_group=None)  # commands: *cli.py


_warned_about: set[str] = set()  # PUBLIC_URL values this process has warned about


@bp.record_once
def _warn_without_https(state) -> None:
    """At start-up: study links go to workers, and their cookies need https. Once a process
    (a command may build the app more than once), and not for a command's --help."""
    url = state.app.config.get("PUBLIC_URL")
    if url and not url.lower().startswith("https://"):
        if url in _warned_about or {"--help", "-h"} & set(sys.argv[1:]):
            return
        _warned_about.add(url)
        state.app.logger.warning(
            "PUBLIC_URL is %s, not an https address: study links and their cookies would travel "
            "unencrypted, and platforms expect https. Set PUBLIC_URL to the site's https address.",
            url,
        )


@bp.app_context_processor
def _study_layout() -> dict:
    """Every page a signed-in crowd worker sees, the game's round pages and error pages
    included, uses the study layout (crowd/_top.html, crowd/_footer.html): their study's name,
    the researcher's contact and no menu of the public game."""
    found: dict = {"study_config": lookup.config_of}
    # Outside a request (a template rendered by a command) there is no user at all.
    if getattr(current_user, "is_authenticated", False) and current_user.kind == "crowd":
        participant = db.session.scalar(
            select(Participant).where(Participant.player_id == current_user.id)
        )
        if participant is not None:
            found["worker_study"] = participant.study
    return found


BOUND = "participant_id"
# MTurk shows the task in a frame. Whether this browser keeps our cookie there is tested with one
# redirect: the landing page sets a session value and sends the browser back with PROBE=1.
PROBE = "cookie_check"
# A task opened in its own tab (because the frame could not keep a cookie) carries TAB=1.
TAB = "tab"


def bound_participant(study) -> Participant:
    """The participant this browser's signed session belongs to, for this study."""
    participant_id = session.get(BOUND)
    participant = db.session.get(Participant, participant_id) if participant_id else None
    if (
        participant is None
        or participant.study_id != study.id
        or not current_user.is_authenticated
        or current_user.id != participant.player_id
    ):
        raise Forbidden(
            "This browser has not joined this study. Please open the study from the link on "
            "your crowd-work platform."
        )
    return participant


def load_study(slug: str) -> Study:
    """The study of this page; MTurk shows it in a frame, so the headers allow MTurk's origins."""
    study = lookup.get_study(slug)
    g.allow_mturk_frame = study.platform == "mturk"
    return study


def render_landing(study, entry, params: dict, error: str | None = None):
    # The same page whether or not this worker id has joined: only the browser bound to the
    # participant learns that, by being sent on to its study (see `landing`).
    page = render_template(
        "crowd/landing.html",
        study=study,
        config=lookup.config_of(study),
        entry=entry,
        params=params,
        error=error,
    )
    return page, 400 if error else 200


@bp.get("/current")
def current():
    """Back to the study this browser joined."""
    participant_id = session.get(BOUND)
    participant = db.session.get(Participant, participant_id) if participant_id else None
    if participant is None:
        return redirect(url_for("game.home"))
    return redirect(url_for("crowd.resume", slug=participant.study.slug))


def _landing_with(slug: str, params: dict, flag: str) -> str:
    """The study's landing address with the link's own parameters and `flag`=1."""
    return url_for("crowd.landing", slug=slug) + "?" + urlencode({**params, flag: "1"})


@bp.get("/<slug>")
def landing(slug: str):
    study = load_study(slug)
    config = lookup.config_of(study)
    try:
        entry = parse_entry(study.platform, request.args, config.display_platform)
    except EntryError as error:
        return render_template("crowd/problem.html", study=study, message=str(error)), 400
    if entry.preview:
        return render_template("crowd/preview.html", study=study, config=config)
    params = {k: v for k, v in request.args.items() if v and k != PROBE}
    if study.platform == "mturk" and not session.get("cookies_kept"):
        if request.args.get(PROBE) != "1":
            session["cookies_kept"] = True
            return redirect(_landing_with(slug, params, PROBE))
        # The cookie set one request ago did not come back: this frame cannot keep it (Safari,
        # private windows, third-party cookies blocked). Run the task in a tab of its own.
        tab_link = _landing_with(slug, params, TAB)
        return render_template(
            "crowd/new_tab.html",
            study=study,
            config=config,
            tab_link=tab_link,
            submit_to=f"{entry.submit_to}/mturk/externalSubmit",
            assignment_id=entry.session,
        )
    existing = lookup.find_participant(study, entry.worker_id)
    if existing is not None and session.get(BOUND) == existing.id:
        return redirect(url_for("crowd.resume", slug=slug))
    if existing is None and not study.is_open:
        # No consent page for a study that would refuse the worker once they agreed.
        message = "This study is closed and takes no new participants. Thank you!"
        return render_template("crowd/problem.html", study=study, message=message), 409
    return render_landing(study, entry, params)


@bp.post("/<slug>/join")
@limiter.limit("30 per minute")
def join(slug: str):
    study = load_study(slug)
    try:
        entry = parse_entry(study.platform, request.form, lookup.config_of(study).display_platform)
    except EntryError as error:
        return render_template("crowd/problem.html", study=study, message=str(error)), 400
    try:
        participant = admission.enter(
            study,
            entry,
            session.get(BOUND),
            consent=request.form.get("consent") == "yes",
            screening=request.form.get("screening"),
        )
    except ServiceError as refused:
        if refused.status != 400:
            raise
        form_only = ("csrf_token", "consent", "screening")
        params = {k: v for k, v in request.form.items() if k not in form_only}
        return render_landing(study, entry, params, error=refused.message)
    sign_in(participant.player, remember=False)
    session[BOUND] = participant.id
    session["frame_mturk"] = study.platform == "mturk"
    session["in_tab"] = request.form.get(TAB) == "1"
    return redirect(url_for("crowd.resume", slug=slug))


def render_left(study, participant):
    """The page of a worker who returned the task or ran out of time: no code, no more rounds."""
    config = conditions.settings_for(lookup.config_of(study), participant.condition)
    return render_template(
        "crowd/left.html", study=study, config=config, participant=participant
    ), 410


def render_instructions(study, participant, error: str | None = None):
    # Each comprehension form carries a fresh token, kept in the signed session: only the form
    # shown last is graded (a double click's second send is not a second try).
    session[TRY_TOKEN] = secrets.token_urlsafe(16)
    return render_template(
        "crowd/instructions.html",
        study=study,
        config=conditions.settings_for(lookup.config_of(study), participant.condition),
        practice=bool(conditions.pool_ids(study, participant, "tutorial")),
        error=error,
        try_token=session[TRY_TOKEN],
        tries_left=admission.COMPREHENSION_TRIES - participant.comprehension_failures,
    ), 400 if error else 200


@bp.get("/<slug>/continue")
def resume(slug: str):
    study = load_study(slug)
    participant = bound_participant(study)
    admission.check_time(participant)
    if participant.status in lookup.LEFT:
        return render_left(study, participant)
    if (waiting := serving.pending_ratings(study, participant)) is not None:
        return redirect(url_for("game.show", round_id=waiting.id, _anchor="result"))
    if participant.status in lookup.FINISHED:
        return redirect(url_for("crowd.done", slug=slug))
    if participant.instructions_at is None:
        return render_instructions(study, participant)
    current = serving.open_round(participant)
    if current is not None:
        return redirect(url_for("game.show", round_id=current.id))
    number, total = serving.slot_progress(study, participant)
    return render_template("crowd/ready.html", study=study, number=number, total=total)


# The token of the comprehension form shown last (see render_instructions).
TRY_TOKEN = "crowd_comprehension_try"
# Comprehension answers sent again or not all right: what the instructions page says.
NOT_TAKEN = {
    "stale": "These answers came from a page that was already sent (a double click?). Please "
    "check your answers below and send them once more.",
    "retry": "Not all of your answers are right. Please read the instructions again and have "
    "one more try.",
}


@bp.post("/<slug>/comprehension")
@limiter.limit("30 per minute")
def comprehension(slug: str):
    study = load_study(slug)
    participant = bound_participant(study)
    expected, sent = session.pop(TRY_TOKEN, None), request.form.get("try", "")
    fresh = bool(expected) and hmac.compare_digest(expected, sent)
    outcome = admission.answer_comprehension(study, participant, request.form, graded=fresh)
    if outcome == "screened_out":
        return redirect(url_for("crowd.done", slug=slug))
    if outcome in NOT_TAKEN:
        return render_instructions(study, participant, error=NOT_TAKEN[outcome])
    return _start_next(study, participant)


def _start_next(study, participant, extra: bool = False):
    try:
        made = serving.next_round(study, participant, extra=extra)
    except serving.RatingsPending as waiting:
        flash(waiting.message)
        return redirect(url_for("game.show", round_id=waiting.round.id, _anchor="result"))
    # Only now: a refused request (another's round, missing ratings) must change nothing.
    admission.finish_instructions(participant)
    if made is None:
        return redirect(url_for("crowd.done", slug=study.slug))
    return redirect(url_for("game.show", round_id=made.id))


@bp.post("/<slug>/next")
def next_round(slug: str):
    study = load_study(slug)
    participant = bound_participant(study)
    previous_id = request.form.get("round_id", type=int)
    if previous_id:
        previous = db.session.get(Round, previous_id) if 0 < previous_id <= MAX_ID else None
        if previous is None or previous.participant_id != participant.id:
            raise Forbidden("That round is not part of your session.")
        try:
            ratings.save_ratings(participant, previous, request.form)
        except BadRequest as missing:
            return (
                render_template(
                    "errors/message.html",
                    title="One more thing",
                    message=missing.message,
                    back=url_for("game.show", round_id=previous.id),
                    back_label="Back to the ratings",
                ),
                400,
            )
    return _start_next(study, participant, extra=request.form.get("extra") == "1")


@bp.get("/<slug>/done")
def done(slug: str):
    study = load_study(slug)
    participant = bound_participant(study)
    if participant.status not in lookup.FINISHED or serving.pending_ratings(study, participant):
        # No code before the quota is met and the last round is rated.
        return redirect(url_for("crowd.resume", slug=slug))
    mturk = study.platform == "mturk" and participant.submit_to
    return render_template(
        "crowd/done.html",
        study=study,
        config=lookup.config_of(study),
        participant=participant,
        code=verdicts.completion_code(participant),
        failed_checks=verdicts.failed_checks_message(participant),
        extra_left=serving.extra_rounds_left(study, participant),
        redirect_url=verdicts.completion_url(participant),
        # In a tab of its own the task is submitted from MTurk's tab, where the worker pastes it.
        mturk_submit=f"{participant.submit_to}/mturk/externalSubmit" if mturk else None,
        in_tab=bool(session.get("in_tab")),
    )
