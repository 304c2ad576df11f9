"""`flask study …`: create, check, edit, report on, close, reopen and delete studies.

The `study` group is on the crowd blueprint's command line; app/crowd/plan_cli.py,
prolific_cli.py, verify_cli.py (verify, undo-verify, review) and fraud_cli.py add their commands
to the same group."""

from __future__ import annotations

import json
from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup

from app.cli import refusals
from app.crowd import admin, links, lookup, preregistration, reports
from app.crowd.config import StudyConfig, StudyConfigError
from app.crowd.platform_rules import PayRules, parse_rates, platform_findings
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.crowd.routes import bp
from app.crowd.study_file import load_study_file
from app.errors import ServiceError
from app.research.export_options import ExportError, ExportOptions
from app.research.exports import export


def study_named(slug: str):
    """The study called `slug`, or a command-line error naming it."""
    try:
        return lookup.get_study(slug)
    except ServiceError as missing:
        raise click.ClickException(f"no study called {slug!r}") from missing


def pay_rules() -> PayRules:
    try:
        return PayRules(
            parse_rates(current_app.config["STUDY_PAY_MINIMUM"], "STUDY_PAY_MINIMUM"),
            parse_rates(current_app.config["STUDY_PAY_RECOMMENDED"], "STUDY_PAY_RECOMMENDED"),
        )
    except ValueError as error:
        raise click.ClickException(str(error)) from None


def load_checked(file: Path) -> StudyConfig:
    """Read a study file and apply the platform's rules: errors stop, warnings are printed."""
    try:
        config = load_study_file(file)
    except StudyConfigError as error:
        raise click.ClickException(str(error)) from None
    findings = platform_findings(config, pay_rules())
    for warning in findings.warnings:
        click.echo(f"Warning: {file}: {warning}", err=True)
    if findings.errors:
        raise click.ClickException("\n".join(f"{file}: {e}" for e in findings.errors))
    return config


def print_link(study) -> None:
    link = links.entry_link(study)
    if link is None:
        click.echo(
            "Entry link: not known yet. Set PUBLIC_URL to the site's public address (e.g. "
            f"https://roft.example.org), then run `flask study link {study.slug}`."
        )
    else:
        click.echo(f"Entry link: {link}")


def _read_power(path: Path, config: StudyConfig) -> dict:
    """The power result for `study check --power`; errors name the file."""
    if config.preregistration is None:
        raise click.ClickException(f"{path}: --power needs a [preregistration] in the study file")
    try:
        power = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise click.ClickException(f"{path}: cannot read it as JSON ({error})") from None
    if not isinstance(power, dict) or not {"scenario", "smallest", "target"} <= power.keys():
        raise click.ClickException(
            f"{path}: not the JSON of `python -m analysis power --out` (it needs scenario, "
            "smallest and target)"
        )
    return power


@click.group("study", cls=AppGroup)
def study_group() -> None:
    """Run crowd studies: create, check, edit, report, verify, review, close, reopen,
    delete."""


bp.cli.add_command(study_group)


@study_group.command("check")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--power",
    "power_file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    help="The JSON of `python -m analysis power --out`: warn when the plan's workers and "
    "texts fall short of the smallest design reaching its target.",
)
def check(file: Path, power_file: Path | None) -> None:
    """Validate a study FILE against the file format and the platform's rules, creating
    nothing. Exits with an error if the study could not run as written."""
    config = load_checked(file)
    power = _read_power(power_file, config) if power_file else None
    with refusals(f"{file}: "):
        pool = admin.trial(config)
    human, inside = config.checks
    click.echo(
        f"{file}: valid for {config.platform}; each worker plays {config.rounds} rounds with "
        f"{human + inside} attention check(s) ({inside} inside a text, {human} all-human)."
    )
    if config.conditions:
        names = ", ".join(c["name"] for c in config.conditions)
        click.echo(f"Conditions, allocated in balanced blocks: {names}.")
    if (plan := config.preregistration) is not None:
        click.echo(
            f"Analysis plan: {plan['outcome']} by {plan['contrast']}, {plan['model']} model, "
            f"alpha {plan['alpha']:g}; frozen when the study is published."
        )
        if power is not None:
            for warning in preregistration.power_warnings(plan, power):
                click.echo(f"Warning: {warning}.", err=True)
    workers = config.places or admin.SIMULATED_WITHOUT_PLACES
    own = "".join(
        f", {len(texts['normal'])} for condition {name}"
        for name, texts in (pool.get("conditions") or {}).items()
    )
    click.echo(
        f"Pool: {len(pool['normal'])} texts{own}; the schedules of {workers} workers were "
        "built from it and none runs out."
    )


@study_group.command("create")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def create(file: Path) -> None:
    """Create a study from a TOML FILE (see docs/running-a-study.md) and print its link."""
    config = load_checked(file)
    with refusals(f"{file}: "):
        study = admin.create_study(config)
    human, inside = config.checks
    pool = study.pool
    click.echo(f"Created study {study.slug!r} ({study.platform}).")
    click.echo(
        f"Pool: {len(pool['normal'])} examples, {len(pool['tutorial'])} practice texts; "
        f"attention-check texts: {len(pool['inside_checks'])} with a check sentence inside, "
        f"{len(pool['checks'])} all-human."
    )
    click.echo(
        f"Each worker: {config.rounds} rounds, of which {human + inside} attention checks "
        f"({inside} inside a text, {human} all-human); failed_checks after "
        f"{config.fail_after_checks} failed."
    )
    if config.hourly_reward is not None and config.reward:
        click.echo(
            f"Pay: {config.reward:.2f} {config.currency} for about "
            f"{config.expected_minutes:g} minutes = {config.hourly_reward:.2f} "
            f"{config.currency}/hour."
        )
    print_link(study)


@study_group.command("link")
@click.argument("slug")
def link(slug: str) -> None:
    """Print the entry link of study SLUG for the platform (uses PUBLIC_URL)."""
    print_link(study_named(slug))


@study_group.command("edit")
@click.argument("slug")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
def edit(slug: str, file: Path) -> None:
    """Replace the settings of study SLUG with a new version of its FILE.

    Before anyone joined, anything may change. Once workers joined, wording, pay, codes, time
    limit, places, feedback and bonus may change; what decides the rounds and the checks
    may not.
    """
    study = study_named(slug)
    config = load_checked(file)
    with refusals(f"{file}: "):
        changed = admin.edit_study(study, config)
    if changed:
        click.echo(f"Study {slug!r} updated: {', '.join(changed)}.")
    else:
        click.echo(f"Study {slug!r}: nothing changed.")


@study_group.command("report")
@click.argument("slug")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--workers", is_flag=True, help="Also list every worker (CSV).")
def report(slug: str, as_json: bool, workers: bool) -> None:
    """Progress, time on task, pay, coverage, agreement and quality flags of study SLUG."""
    data = reports.study_report(study_named(slug))
    if as_json:
        click.echo(json.dumps(data.to_json(), indent=2, default=str))
        return
    for line in report_lines(data):
        click.echo(line)
    if workers:
        click.echo("")
        click.echo(reports.workers_csv(data).rstrip())


@study_group.command("close")
@click.argument("slug")
def close(slug: str) -> None:
    """Stop admitting new workers to study SLUG (those already in can finish)."""
    admin.set_open(study_named(slug), False)
    click.echo(f"Study {slug!r} is closed to new workers.")


@study_group.command("reopen")
@click.argument("slug")
def reopen(slug: str) -> None:
    """Admit new workers to study SLUG again."""
    admin.set_open(study_named(slug), True)
    click.echo(f"Study {slug!r} is open to new workers.")


@study_group.command("delete")
@click.argument("slug")
@click.option(
    "--force",
    is_flag=True,
    help="Delete a study that has participants, with their rounds (needs --export).",
)
@click.option(
    "--export",
    "export_to",
    type=click.Path(path_type=Path, file_okay=False),
    help="With --force: first export the study's rounds (private, with worker ids) here.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def delete(slug: str, force: bool, export_to: Path | None, yes: bool) -> None:
    """Delete study SLUG, its attention checks and, with --force, its workers' data.

    A study with participants is deleted only with --force and --export DIR: the export is
    written first, and nothing is deleted if it fails.
    """
    study = study_named(slug)
    count = lookup.participant_count(study)
    if count and not force:
        raise click.ClickException(
            f"study {slug!r} has {count} participant(s). To delete it with their rounds, "
            "pass --force --export DIR (the export is written first)."
        )
    if count and export_to is None:
        raise click.ClickException("--force needs --export DIR: the data is exported first")
    if not yes:
        click.confirm(
            f"Delete study {slug!r}" + (f" and its {count} participant(s)" if count else "") + "?",
            abort=True,
        )
    if count:
        try:
            result = export(
                ExportOptions(out=export_to, private=True, include_unconsented=True, study=slug)
            )
        except ExportError as error:
            raise click.ClickException(f"export failed, nothing deleted: {error}") from None
        # Not workers.csv: that is the export's own (pseudonymous, typed) workers table.
        (Path(export_to) / "study-workers.csv").write_text(
            reports.workers_csv(reports.study_report(study)), encoding="utf-8"
        )
        click.echo(f"Exported {result.counts['rounds']} rounds to {result.folder}.")
    deleted = admin.delete_study(study, force=force)
    click.echo(f"Deleted study {slug!r} ({deleted} participant(s)).")


def prolific_client() -> ProlificClient:
    try:
        return ProlificClient(
            current_app.config.get("PROLIFIC_API_TOKEN") or "",
            current_app.config["PROLIFIC_API_URL"],
            timeout=current_app.config.get("PROLIFIC_API_TIMEOUT") or 30,
        )
    except ProlificError as error:
        raise click.ClickException(str(error)) from None


def report_lines(r: reports.StudyReport) -> list[str]:
    def num(value, fmt="{:.1f}"):
        return "—" if value is None else fmt.format(value)

    status = ", ".join(f"{k} {v}" for k, v in r.by_status.items()) or "none yet"
    places = f"; places {r.places_taken} of {r.places}" if r.places else ""
    a = r.agreement
    lines = [
        f"Study {r.slug!r}: {r.title} ({r.platform}), {r.rounds_required} rounds per worker, "
        f"{'open' if r.is_open else 'closed'}",
        f"Participants: {r.participants} ({status}); finished {r.finished}, "
        f"completion rate {num(r.completion_rate, '{:.0%}')}{places}",
        f"Time: median {num(r.median_round_seconds)} s per round; median "
        f"{num(r.median_gap_seconds)} s between submissions; median "
        f"{num(r.median_total_minutes)} min in total",
        f"Pay: {r.reward:.2f} {r.currency} per worker; configured "
        f"{num(r.configured_hourly, '{:.2f}')} {r.currency}/h, effective "
        f"{num(r.effective_hourly, '{:.2f}')} {r.currency}/h (at the median total time)",
        f"Coverage: {r.pool_size} examples, {r.examples_at_target} at the target of "
        f"{r.target_per_example}; annotations per example min {r.annotations_min}, median "
        f"{r.annotations_median:g}, max {r.annotations_max}",
        f"Agreement: {a.texts} texts with 2+ answers, {a.pairs} pairs; exact "
        f"{num(a.exact_rate, '{:.0%}')}, within one {num(a.within_one_rate, '{:.0%}')}; "
        f"Krippendorff's alpha (interval) {num(a.alpha_interval, '{:.2f}')}",
        f"Flags: {r.flagged_too_fast} too fast (under "
        f"{num(r.speed_threshold_seconds)} s per round), {r.flagged_straight_lining} "
        "straight-lining",
    ]
    if r.decisions:
        lines.append("Decisions: " + ", ".join(f"{k} {v}" for k, v in r.decisions.items()))
    if r.conditions:
        lines.append(
            "Conditions (holding a place / entered): "
            + ", ".join(f"{k} {v['holding']}/{v['entered']}" for k, v in r.conditions.items())
        )
    return lines
