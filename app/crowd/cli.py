"""`flask study …`: create, check, edit, report on, verify, close, reopen and delete studies.

The `study` group is on the crowd blueprint's command line; app/crowd/plan_cli.py,
prolific_cli.py and fraud_cli.py add their commands to the same group."""

from __future__ import annotations

import json
from pathlib import Path

import click
from flask import current_app
from flask.cli import AppGroup

from app.crowd import (
    admin,
    ledger,
    links,
    lookup,
    preregistration,
    reports,
    review,
    schedule,
    verify,
    verify_files,
    verify_runs,
    verify_submissions,
)
from app.crowd.config import (
    PayRules,
    StudyConfig,
    StudyConfigError,
    parse_rates,
    platform_findings,
)
from app.crowd.prolific import send_to_prolific
from app.crowd.prolific_api import ProlificClient, ProlificError
from app.crowd.routes import bp
from app.crowd.study_file import load_study_file
from app.errors import ServiceError
from app.research.export_options import ExportError, ExportOptions
from app.research.exports import export
from app.research.pseudonyms import pseudonym, pseudonym_key


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
    try:
        pool = admin.trial(config)
    except ServiceError as refused:
        raise click.ClickException(f"{file}: {refused.message}") from None
    human, inside = schedule.check_mix(
        config.rounds, config.attention_check_rate, config.all_human_checks
    )
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
    try:
        study = admin.create_study(config)
    except ServiceError as refused:
        raise click.ClickException(f"{file}: {refused.message}") from None
    human, inside = schedule.check_mix(
        config.rounds, config.attention_check_rate, config.all_human_checks
    )
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
    try:
        changed = admin.edit_study(study, config)
    except ServiceError as refused:
        raise click.ClickException(f"{file}: {refused.message}") from None
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


@study_group.command("verify")
@click.argument("slug")
@click.option(
    "--prolific-export",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Prolific's submissions export (CSV).",
)
@click.option(
    "--mturk-batch",
    type=click.Path(path_type=Path, dir_okay=False),
    help="MTurk's batch results (CSV).",
)
@click.option(
    "--ids",
    type=click.Path(path_type=Path, dir_okay=False),
    help="A plain list of worker ids, one per line.",
)
@click.option(
    "--prolific-api",
    "prolific_study",
    metavar="STUDY_ID",
    help="Read the submissions of this Prolific study through Prolific's API "
    "(needs PROLIFIC_API_TOKEN) instead of an export.",
)
@click.option(
    "--send",
    is_flag=True,
    help="With --prolific-api and --apply: also approve, reject and pay the bonuses "
    "through the API.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the decision files (they name workers: keep them private). Default: "
    "studies/SLUG/decisions in the instance folder, outside version control.",
)
@click.option(
    "--apply",
    is_flag=True,
    help="Record the decisions (apart from the evidence), mark returned workers and add "
    "bonus.csv to the bonus ledger. Use it when you act on the files; undo-verify reverts.",
)
def verify_command(
    slug: str, prolific_export, mturk_batch, ids, prolific_study, send, out: Path, apply: bool
):
    """Decide approve / reject / review for each submission of study SLUG, with reasons.

    Writes decisions.csv, approve.txt, reject.csv (Prolific's category and a message),
    review.csv, bonus.csv (Prolific's bulk bonus format), README.md, and for MTurk
    mturk-decisions.csv. Returned and timed-out submissions are neither approved nor
    rejected; a missing code alone never rejects a worker the site saw finish.
    """
    chosen = [p for p in (prolific_export, mturk_batch, ids, prolific_study) if p]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --prolific-export, --mturk-batch, --ids, --prolific-api"
        )
    if send and not (prolific_study and apply):
        raise click.UsageError("--send needs --prolific-api and --apply")
    study = study_named(slug)
    if out is None:
        out = Path(current_app.instance_path) / "studies" / slug / "decisions"
    client = prolific_client() if prolific_study else None
    if client is not None:
        source_name = f"Prolific study {prolific_study}"
        try:
            rows = verify_submissions.from_prolific_api(client.submissions(prolific_study))
        except ProlificError as error:
            raise click.ClickException(str(error)) from None
    else:
        source = chosen[0]
        source_name = source.name
        rows = _read_rows(source, prolific_export, mturk_batch)
    submissions, duplicates = verify_submissions.one_per_worker(rows)
    decisions = verify.decide(study, submissions)
    click.echo(
        f"{source_name}: {len(rows)} row(s), {len(submissions)} worker(s)"
        + (f" ({duplicates} duplicate row(s) counted once)." if duplicates else ".")
    )
    for line in decision_lines(decisions, lookup.config_of(study).currency):
        click.echo(line)
    applied = verify_runs.apply_decisions(study, decisions, via_api=send) if apply else None
    fieldnames = (list(rows[0].row or {}) if rows else []) if mturk_batch else None
    key = pseudonym_key()
    files = verify_files.write_files(
        out,
        study,
        decisions,
        source_name,
        applied,
        fieldnames,
        pseudonym=lambda player_id: pseudonym(player_id, key),
        via_api=send,
    )
    click.echo(f"Files in {out}/: {', '.join(files)}")
    if applied is None:
        click.echo("Nothing recorded: add --apply when you act on these files.")
    elif applied.run is None:
        click.echo(
            f"Nothing new to record: all {applied.unchanged} decision(s) are as recorded "
            "before, and no bonus is owed."
        )
    else:
        click.echo(
            f"Recorded run {applied.run}: {applied.changed} decision(s) new or changed, "
            f"{applied.unchanged} unchanged, {applied.marked_left} worker(s) marked returned "
            f"or timed out, {applied.bonuses} bonus(es) added to the ledger. "
            f"`flask study undo-verify {slug}` reverts it."
        )
    if send:
        try:
            sent = send_to_prolific(client, study, prolific_study, decisions)
        except ProlificError as error:
            raise click.ClickException(
                f"Prolific refused: {error}. The decisions are recorded; the bonus ledger "
                "says which bonuses were sent (never sent twice) and which failed (owed again "
                f"at the next verify). Do not upload {out}/bonus.csv: run verify with --send "
                "again, or check the payments on Prolific."
            ) from None
        click.echo(
            f"Sent to Prolific: {sent.approved} approved, {sent.rejected} rejected, "
            f"{sent.bonuses} bonus(es) paid."
        )


@study_group.command("undo-verify")
@click.argument("slug")
@click.option(
    "--drop-bonuses",
    is_flag=True,
    help="Also cancel that run's bonus.csv bonuses in the ledger (only if that bonus.csv "
    "was never uploaded: otherwise they were paid, and the next run would pay them again). "
    "Bonuses sent through Prolific's API are never cancelled.",
)
def undo_verify(slug: str, drop_bonuses: bool) -> None:
    """Revert the latest `flask study verify --apply` of study SLUG.

    Its decisions are removed and the statuses it changed put back; its run number is never
    used again. Bonuses are never deleted: one requested from Prolific's API but not sent is
    cancelled by a reversing row, one sent or paid stays as paid.
    """
    try:
        undone = verify_runs.undo_last_run(study_named(slug), drop_bonuses)
    except ServiceError as refused:
        raise click.ClickException(refused.message) from None
    click.echo(
        f"Reverted run {undone.run}: {undone.decisions} decision(s) removed, "
        f"{undone.restored} status(es) put back."
    )
    if undone.bonuses_kept:
        click.echo(
            f"Kept its {undone.bonuses_kept} bonus(es) from bonus.csv in the ledger, as paid; "
            "pass --drop-bonuses if that bonus.csv was never uploaded."
        )
    if undone.bonuses_paid:
        click.echo(
            f"Kept its {undone.bonuses_paid} bonus(es) sent through Prolific's API: they are "
            "paid and stay in the ledger."
        )
    if undone.bonuses_dropped:
        click.echo(f"Cancelled {undone.bonuses_dropped} unpaid bonus(es) in the ledger.")
    if undone.bonuses_owed_again:
        click.echo(
            f"{undone.bonuses_owed_again} bonus(es) given in review, written into that "
            "bonus.csv, are owed again: the next `verify --apply` writes them into its "
            "bonus.csv (or `prolific apply` pays them)."
        )


@study_group.command("review")
@click.argument("slug")
@click.option("--approve", "approve_id", metavar="WORKER", help="Approve this worker.")
@click.option("--reject", "reject_id", metavar="WORKER", help="Reject this worker.")
@click.option(
    "--message",
    default="",
    help=f"With --reject: the message for the worker (at least {verify.MIN_MESSAGE} "
    "characters, as Prolific requires).",
)
@click.option(
    "--category",
    type=click.Choice(review.CATEGORIES),
    default="OTHER",
    show_default=True,
    help="With --reject: Prolific's rejection category.",
)
@click.option("--bonus", "bonus_id", metavar="WORKER", help="Give this worker a bonus.")
@click.option("--amount", type=float, help="With --bonus: the amount, in the study currency.")
@click.option("--reason", default="", help="With --bonus: why (each reason is paid once).")
def review_command(slug, approve_id, reject_id, message, category, bonus_id, amount, reason):
    """List the workers of study SLUG waiting for review, or decide one of them.

    Without an option: each worker whose decision is "review", with the site's evidence
    (rounds, checks passed / failed / void, time, flags) and verify's reasons. With
    --approve, --reject or --bonus: record a person's decision in the same store as
    verify's. The next `flask study verify` keeps it and writes it into the platform files;
    `flask study undo-verify` reverts it like a verify run.
    """
    study = study_named(slug)
    actions = [a for a in (approve_id, reject_id, bonus_id) if a]
    if len(actions) > 1:
        raise click.UsageError("give one of --approve, --reject, --bonus at a time")
    config = lookup.config_of(study)
    try:
        if approve_id or reject_id:
            decision = verify_submissions.APPROVE if approve_id else verify_submissions.REJECT
            run = review.decide(study, actions[0], decision, message, category)
            if run is None:
                click.echo(f"{actions[0]}: already decided {decision}; nothing recorded.")
            else:
                click.echo(
                    f"Recorded run {run}: {actions[0]} {decision}d in review. The next "
                    f"`flask study verify {slug}` writes it into the platform files."
                )
            return
        if bonus_id:
            if amount is None:
                raise click.UsageError("--bonus needs --amount")
            row = review.give_bonus(study, bonus_id, amount, reason)
            click.echo(
                f"Recorded run {row.run}: a bonus of {ledger.money(row.amount_minor)} "
                f"{config.currency} for {bonus_id} ({row.reason}). It is owed in the "
                f"ledger: the next `flask study verify {slug} ... --apply` writes it into "
                f"its bonus.csv (upload that file once), or `flask study prolific apply "
                f"{slug}` pays it."
            )
            return
    except ServiceError as refused:
        raise click.ClickException(refused.message) from None
    found = review.waiting(study)
    if not found:
        click.echo(f"Study {slug!r}: nobody is waiting for review.")
        return
    click.echo(f"Study {slug!r}: {len(found)} worker(s) waiting for review.")
    for item in found:
        w = item.worker
        time = "-" if w.median_round_seconds is None else f"{w.median_round_seconds:.1f} s"
        void = f" (rounds {', '.join(map(str, w.void_check_rounds))})" if w.checks_void else ""
        click.echo(
            f"- {w.worker_id}: {w.status}, {w.rounds_done} of {w.required_rounds} rounds; "
            f"checks {w.checks_passed} passed, {w.checks_failed} failed, {w.checks_void} "
            f"void{void}; median {time} a round; flags: {', '.join(w.flags) or 'none'}"
        )
        click.echo(f"  why: {'; '.join(item.reasons)}")
    click.echo(
        f"Decide with `flask study review {slug} --approve WORKER`, `--reject WORKER "
        "--message TEXT` or `--bonus WORKER --amount X --reason TEXT`."
    )


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


def _read_rows(source: Path, prolific: bool, mturk: bool) -> list[verify_submissions.Submission]:
    try:
        text = source.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise click.ClickException(f"{source}: cannot read file ({error.strerror})") from None
    try:
        if prolific:
            return verify_submissions.read_prolific_export(text)
        if mturk:
            return verify_submissions.read_mturk_batch(text)
        return verify_submissions.read_id_list(text)
    except ValueError as error:
        raise click.ClickException(f"{source}: {error}") from None


def decision_lines(decisions: list[verify_submissions.Decision], currency: str) -> list[str]:
    """A table of the decisions for the terminal, then the counts."""
    width = max([len(d.worker_id) for d in decisions] + [6])
    lines = [f"{'worker':<{width}}  {'decision':<8}  {'platform':<15}  reasons"]
    for d in decisions:
        reasons = "; ".join(d.reasons)
        if d.bonus_minor:
            reasons = f"bonus {d.bonus_minor / 100:.2f} {currency}" + (
                f"; {reasons}" if reasons else ""
            )
        if not d.actionable:
            reasons = f"already {d.platform_status.lower()} there" + (
                f"; {reasons}" if reasons else ""
            )
        lines.append(
            f"{d.worker_id:<{width}}  {d.decision:<8}  {d.platform_status or '-':<15}  {reasons}"
        )
    counts = {k: sum(d.decision == k for d in decisions) for k in verify_submissions.DECISIONS}
    lines.append(
        f"{len(decisions)} submission(s): {counts['approve']} approve, {counts['reject']} reject, "
        f"{counts['review']} review, {counts['returned']} returned or timed out and "
        f"{counts['pending']} still active (no action)."
    )
    return lines


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
