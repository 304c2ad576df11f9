"""The researchers' pages.

Form fields are read from `request.form` as given: the review and validation services check
them and word the refusal (a WTForms class would be a second copy of those rules).
"""

from __future__ import annotations

from flask import (
    Blueprint,
    Response,
    abort,
    current_app,
    flash,
    jsonify,
    redirect,
    render_template,
    request,
    url_for,
)
from flask_login import current_user, login_required

from app import paging
from app.crowd import (
    fraud_report,
    ledger,
    links,
    lookup,
    reports,
    review,
    verify,
    verify_submissions,
)
from app.errors import ServiceError
from app.game import insights
from app.leaderboard import integrity
from app.research import overview

bp = Blueprint("research", __name__, url_prefix="/research", cli_group=None)  # commands: *cli.py


@bp.before_request
@login_required
def researchers_only():
    # login_required lets OPTIONS through, so the visitor may still be anonymous here.
    if not (current_user.is_authenticated and current_user.is_researcher):
        abort(403)


@bp.get("/")
def index():
    return render_template(
        "research/index.html",
        categories=overview.by_category(),
        systems=overview.by_system(),
        players=overview.player_counts(),
        studies=overview.studies(),
        unlisted=integrity.unlisted_players(),
    )


@bp.post("/players/<int:player_id>/restore")
def restore_player(player_id: int):
    """Put a player unlisted for an implausible record back on the boards."""
    player = integrity.restore(player_id)
    flash(f"{player.display_name} (player {player.id}) is back on the leaderboards.")
    return redirect(url_for("research.index"))


@bp.get("/studies/<slug>")
def study(slug: str):
    found = lookup.get_study(slug)
    return render_template(
        "research/study.html",
        study=found,
        report=reports.study_report(found),
        entry_link=links.entry_link(found),
        fraud_flags=fraud_report.study_flags(found),
        refresh_seconds=current_app.config["STUDY_DASHBOARD_REFRESH_SECONDS"],
    )


@bp.get("/studies/<slug>.json")
def study_json(slug: str):
    return jsonify(reports.study_report(lookup.get_study(slug)).to_json())


@bp.get("/studies/<slug>.csv")
def study_csv(slug: str):
    report = reports.study_report(lookup.get_study(slug))
    return Response(
        reports.workers_csv(report),
        mimetype="text/csv",
        headers={"Content-Disposition": f"attachment; filename={slug}-workers.csv"},
    )


# -- review: a person decides each worker, through the service `flask study review` uses -------


@bp.get("/studies/<slug>/review")
def review_list(slug: str):
    found = lookup.get_study(slug)
    show = request.args.get("show", "review")
    if show not in review.SHOW:
        show = "review"
    everyone = review.worker_list(found)
    workers = [w for w in everyone if show == "all" or w.state == show]
    counts = {key: sum(key == "all" or w.state == key for w in everyone) for key in review.SHOW}
    return render_template(
        "research/review.html", study=found, workers=workers, show=show, counts=counts
    )


def _worker_page(found, worker_id: str, status: int = 200, error: str | None = None):
    view = review.worker_view(found, worker_id)
    config = lookup.config_of(found)
    waiting = [item.worker.worker_id for item in review.waiting(found)]
    after = [other for other in waiting if other != worker_id]
    # After a refused form, its fields come back as typed, with the reason.
    form = request.form if request.method == "POST" else {}
    return (
        render_template(
            "research/review_worker.html",
            study=found,
            view=view,
            config=config,
            categories=review.CATEGORIES,
            min_message=verify.MIN_MESSAGE,
            bonus_limit=ledger.money(review.bonus_limit(config)),
            error=error,
            form=form,
            show=request.values.get("show", "review"),
            next_worker=after[0] if after else None,
        ),
        status,
    )


@bp.get("/studies/<slug>/review/<worker_id>")
def review_worker(slug: str, worker_id: str):
    return _worker_page(lookup.get_study(slug), worker_id)


def _decided(found, worker_id: str, action):
    """Run one decision; a refusal shows the worker's page again with the reason (4xx), a
    success goes back to it (so a reload does not send the form again)."""
    try:
        note = action()
    except ServiceError as refused:
        return _worker_page(found, worker_id, refused.status, refused.message)
    flash(note)
    return redirect(
        url_for(
            "research.review_worker",
            slug=found.slug,
            worker_id=worker_id,
            show=request.form.get("show", "review"),
        )
    )


@bp.post("/studies/<slug>/review/<worker_id>/approve")
def review_approve(slug: str, worker_id: str):
    found = lookup.get_study(slug)

    def act() -> str:
        run = review.decide(found, worker_id, verify_submissions.APPROVE)
        if run is None:
            return f"{worker_id} was already approved; nothing new was recorded."
        return (
            f"{worker_id} approved (run {run}). The next `flask study verify` puts them in "
            "approve.txt with the bonus they are owed."
        )

    return _decided(found, worker_id, act)


@bp.post("/studies/<slug>/review/<worker_id>/reject")
def review_reject(slug: str, worker_id: str):
    found = lookup.get_study(slug)

    def act() -> str:
        run = review.decide(
            found,
            worker_id,
            verify_submissions.REJECT,
            request.form.get("message", ""),
            request.form.get("category") or None,
        )
        if run is None:
            return f"{worker_id} was already rejected with this message; nothing new was recorded."
        return (
            f"{worker_id} rejected (run {run}). The next `flask study verify` puts them in "
            "reject.csv with your message."
        )

    return _decided(found, worker_id, act)


@bp.post("/studies/<slug>/review/<worker_id>/bonus")
def review_bonus(slug: str, worker_id: str):
    found = lookup.get_study(slug)

    def act() -> str:
        amount = review.parse_amount(request.form.get("amount", ""))
        row = review.give_bonus(found, worker_id, amount, request.form.get("reason", ""))
        money = ledger.money(row.amount_minor)
        return (
            f"Bonus of {money} {lookup.config_of(found).currency} for {worker_id} recorded "
            f"(run {row.run}). It is owed in the ledger: the next `flask study verify --apply` "
            "puts it in its bonus.csv (upload that once), or `flask study prolific apply` pays it."
        )

    return _decided(found, worker_id, act)


EXPLANATION_FILTERS = {"all": None, "shown": False, "hidden": True}


@bp.get("/explanations")
def explanations():
    """Players' explanations, newest first, with a button to hide one from other players."""
    show = request.args.get("show", "all")
    if show not in EXPLANATION_FILTERS:
        show = "all"
    before = paging.cursor(request.args.get("before"))
    rows = insights.recent_explanations(EXPLANATION_FILTERS[show], before=before)
    return render_template("research/explanations.html", rows=rows, show=show)


@bp.post("/explanations/<int:round_id>/hide")
def hide_explanation(round_id: int):
    hidden = request.form.get("hidden", "1") == "1"
    insights.set_hidden(round_id, hidden)
    flash(
        "The explanation is hidden from players." if hidden else "The explanation is shown again."
    )
    return redirect(url_for("research.explanations", show=request.form.get("show", "all")))


# -- validating the comment coder on the study's own comments (app/research/validation.py) -----


def _validation_error(refused: ServiceError, scope: str):
    return render_template("research/validation.html", scope=scope, error=refused.message), (
        refused.status
    )


@bp.get("/validation/<scope>")
def validation_page(scope: str):
    """Label the next comment of the sample (blind to the coder), or draw the sample first."""
    from app.research import validation

    try:
        progress = validation.next_item(scope, current_user)
    except ServiceError as refused:
        return _validation_error(refused, scope)
    return render_template(
        "research/validation.html",
        scope=scope,
        progress=progress,
        labels=validation.LABELS,
        default_size=validation.DEFAULT_SIZE,
    )


@bp.post("/validation/<scope>/draw")
def validation_draw(scope: str):
    from app.research import validation

    try:
        size = int(request.form.get("size", validation.DEFAULT_SIZE))
    except ValueError:
        size = -1
    try:
        items = validation.draw(scope, size)
    except ServiceError as refused:
        return _validation_error(refused, scope)
    flash(f"A sample of {len(items)} comments is ready to label.")
    return redirect(url_for("research.validation_page", scope=scope))


@bp.post("/validation/<scope>/label")
def validation_label(scope: str):
    from app.research import validation

    try:
        validation.record(
            scope,
            request.form.get("item", type=int) or 0,
            current_user,
            request.form.get("label", ""),
        )
    except ServiceError as refused:
        return _validation_error(refused, scope)
    return redirect(url_for("research.validation_page", scope=scope))


@bp.get("/validation/<scope>/report")
def validation_report(scope: str):
    from app.research import validation

    try:
        result = validation.results(scope, n_boot=current_app.config.get("VALIDATION_BOOT", 1000))
    except ServiceError as refused:
        return _validation_error(refused, scope)
    return render_template("research/validation_report.html", scope=scope, result=result)
