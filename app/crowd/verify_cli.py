"""`flask study verify`, `undo-verify` and `review`: decide each submission of a study (approve,
reject, review, bonus), write the platform's files, and revert a run.

The commands are in the `study` group of app/crowd/cli.py."""

from __future__ import annotations

from pathlib import Path

import click
from flask import current_app

from app.cli import refusals
from app.crowd import ledger, lookup, review, verify, verify_files, verify_runs, verify_submissions
from app.crowd.cli import prolific_client, study_group, study_named
from app.crowd.prolific_api import ProlificError
from app.crowd.prolific_pay import send_to_prolific
from app.research.pseudonyms import pseudonym, pseudonym_key


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
    click.echo(_applied_line(applied, slug))
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
    with refusals():
        undone = verify_runs.undo_last_run(study_named(slug), drop_bonuses)
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
    with refusals():
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


def _applied_line(applied: verify_runs.Applied | None, slug: str) -> str:
    """What `verify` recorded (None: run without --apply), in a sentence."""
    if applied is None:
        return "Nothing recorded: add --apply when you act on these files."
    if applied.run is None:
        return (
            f"Nothing new to record: all {applied.unchanged} decision(s) are as recorded "
            "before, and no bonus is owed."
        )
    return (
        f"Recorded run {applied.run}: {applied.changed} decision(s) new or changed, "
        f"{applied.unchanged} unchanged, {applied.marked_left} worker(s) marked returned "
        f"or timed out, {applied.bonuses} bonus(es) added to the ledger. "
        f"`flask study undo-verify {slug}` reverts it."
    )


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
