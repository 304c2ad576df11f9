"""`flask study flags SLUG`: the study's fraud signals with their evidence (app/crowd/fraud.py)."""

from __future__ import annotations

import json

import click

from app.crowd import fraud_report
from app.crowd.cli import study_group, study_named


@study_group.command("flags")
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help="Print the flags as JSON.")
def flags(slug: str, as_json: bool) -> None:
    """Show the workers of study SLUG who share a browser with another participant id, whose
    explanations copy another worker's, who pasted into the explanation box or typed it
    faster than a person types, or who answer faster than the text can be read, with
    the rounds and texts behind each flag. Flags are for a person to look into; they never
    reject anyone (see docs/running-a-study.md, "Fraud signals")."""
    flagged = fraud_report.study_flags(study_named(slug))
    if as_json:
        click.echo(json.dumps([w.to_json() for w in flagged], indent=2))
        return
    for line in fraud_report.flag_lines(flagged):
        click.echo(line)
