"""`flask study publish`, `plan` and `hints`: freeze a study's analysis plan ([preregistration])
and open it, list the plan's versions, store the detector's scores for a hint condition."""

from __future__ import annotations

from pathlib import Path

import click

from app.cli import refusals
from app.crowd import admin, conditions, hints, lookup, preregistration
from app.crowd.cli import load_checked, print_link, study_group, study_named


def freeze_lines(study) -> list[str]:
    """Freeze the study's plan as it stands (for every publish path); lines to print."""
    with refusals():
        return [_frozen_line(preregistration.publish(study))]


def _frozen_line(frozen) -> str:
    if frozen is None:
        return "No analysis plan: the study file has no [preregistration] table."
    return (
        f"Analysis plan frozen: version {frozen.version}, SHA-256 {frozen.sha256} "
        f"({frozen.frozen_at.isoformat()})."
    )


@study_group.command("publish")
@click.argument("slug")
@click.argument("file", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--reason", help="Why the plan changes (needed for a new version).")
@click.option(
    "--new-version",
    is_flag=True,
    help="Record a changed plan after workers entered: a deviation the report lists.",
)
def publish(slug: str, file: Path | None, reason: str | None, new_version: bool) -> None:
    """Freeze the analysis plan of study SLUG and open it to workers.

    The plan is stored with its SHA-256 and the time, and never changes after the first
    worker enters. With FILE (the study file, its [preregistration] changed), record a new
    version of the plan with --reason; after workers entered, also --new-version.
    """
    study = study_named(slug)
    new = load_checked(file) if file is not None else None
    with refusals(f"{file}: " if file is not None else ""):
        frozen = preregistration.publish(study, new, reason, new_version)
        admin.set_open(study, True)
    click.echo(_frozen_line(frozen))
    config = lookup.config_of(study)
    if config.conditions:
        click.echo(f"Conditions: {', '.join(conditions.names(config))} (balanced blocks).")
    click.echo(f"Study {slug!r} is open to new workers.")
    print_link(study)


@study_group.command("plan")
@click.argument("slug")
def plan(slug: str) -> None:
    """List the frozen versions of the analysis plan of study SLUG."""
    study = study_named(slug)
    found = preregistration.versions(study)
    if not found:
        click.echo(f"Study {slug!r} has no frozen analysis plan.")
    for v in found:
        why = f": {v.reason}" if v.reason else ""
        click.echo(
            f"Version {v.version}, frozen {v.frozen_at.isoformat()}, SHA-256 {v.sha256}, "
            f"{v.participants_then} worker(s) had entered{why}"
        )


@study_group.command("hints")
@click.argument("slug")
@click.argument("detections", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--scorer", help="Which scorer of DETECTIONS to use (default: the first).")
def hints_command(slug: str, detections: Path | None, scorer: str | None) -> None:
    """Store the detector's per-sentence scores for the texts of study SLUG, for conditions
    with detector_hint = true: from DETECTIONS (detections.csv of `python -m analysis
    detect`), or the scores the texts were imported with."""
    study = study_named(slug)
    with refusals():
        done = hints.store(study, detections, scorer)
    low, high = done["cuts"]
    click.echo(
        f"Detector hints ({done['scorer']}) stored for {done['texts']} text(s); "
        f"{done['missing']} without scores show no hint. A sentence reads as low up to "
        f"{low:.3g}, high above {high:.3g}, unsure between."
    )
