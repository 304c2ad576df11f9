"""The researchers' pages."""

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
from app.crowd import fraud, links, lookup, reports
from app.game import insights
from app.leaderboard import integrity
from app.research import overview

bp = Blueprint("research", __name__, url_prefix="/research")


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
        fraud_flags=fraud.study_flags(found),
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
