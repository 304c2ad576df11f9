"""`flask study prolific …`: run a study on Prolific through its API (app/crowd/prolific.py).

The token comes from PROLIFIC_API_TOKEN in the environment, never from a file; PROLIFIC_API_URL
points the same code at another address (a test stand-in)."""

from __future__ import annotations

from pathlib import Path

import click

from app.cli import refusals
from app.crowd import lookup, prolific, prolific_pay
from app.crowd.cli import prolific_client, study_group, study_named
from app.crowd.ledger import money
from app.crowd.plan_cli import freeze_lines
from app.crowd.prolific_api import ProlificError


def _run(action, *args):
    try:
        with refusals():
            return action(*args)
    except ProlificError as error:
        raise click.ClickException(f"Prolific: {error}") from None


def _unconfirmed_lines(study) -> list[str]:
    currency = lookup.config_of(study).currency
    return [
        f"Payment {payment} ({money(amount)} {currency}) went out but Prolific's answer never "
        f"came: it is not paid again. Look it up on Prolific, then run `flask study prolific "
        f"resolve-payment {study.slug} {payment} --paid` (or --not-paid)."
        for payment, amount in prolific_pay.unconfirmed(study).items()
    ]


@study_group.group("prolific")
def prolific_group() -> None:
    """Run a study on Prolific through its API (needs PROLIFIC_API_TOKEN in the
    environment): create, publish, pause, start, sync, message, apply, resolve-payment."""


@prolific_group.command("create")
@click.argument("slug")
@click.option(
    "--places", type=click.IntRange(1), help="How many workers (default: the file's places)."
)
@click.option(
    "--use-existing",
    "existing",
    metavar="PROLIFIC_STUDY_ID",
    help="Make no draft: keep this Prolific study (its link must lead to this study).",
)
def create(slug: str, places: int | None, existing: str | None) -> None:
    """Create a draft of study SLUG on Prolific from its study file: name, description, the
    study link with Prolific's {{%PROLIFIC_PID%}}, {{%STUDY_ID%}} and {{%SESSION_ID%}},
    expected minutes, reward, places, and each completion code with "manually review".
    Nothing is published: check the draft on Prolific, then run `publish`."""
    study = study_named(slug)
    if existing:
        answer = _run(prolific.use_existing, prolific_client(), study, existing)
        click.echo(
            f"Study {slug!r} now uses the Prolific study {study.prolific_study_id} "
            f"({answer.get('status', '?')})."
        )
        return
    try:
        with refusals():
            answer = prolific.create_draft(prolific_client(), study, places)
    except ProlificError as error:
        hint = ""
        if error.uncertain:
            hint = (
                f" The draft may have been made all the same: look on Prolific for a draft "
                f"with the internal name roft:{slug}. If it is there, run `flask study "
                f"prolific create {slug} --use-existing ID`; if not, run create again."
            )
        raise click.ClickException(f"Prolific: {error}.{hint}") from None
    click.echo(
        f"Created the Prolific draft {answer['id']} for {slug!r} "
        f"({answer.get('total_available_places')} places, status "
        f"{answer.get('status', 'UNPUBLISHED')}). Check it on Prolific (filters, devices), "
        f"then run `flask study prolific publish {slug}`."
    )


def _transition(slug: str, action, done_word: str) -> None:
    study = study_named(slug)
    answer, changed = _run(action, prolific_client(), study)
    status = (answer or {}).get("status", "?")
    if changed:
        click.echo(f"{done_word} {study.prolific_study_id}: Prolific says {status}.")
    else:
        click.echo(f"Nothing to do: {study.prolific_study_id} is already {status}.")


@prolific_group.command("publish")
@click.argument("slug")
def publish(slug: str) -> None:
    """Publish the Prolific draft of study SLUG: workers can take it from now on, and
    Prolific holds the reward of every place from your balance. The study's analysis plan
    ([preregistration]) is frozen first."""
    for line in freeze_lines(study_named(slug)):
        click.echo(line)
    _transition(slug, prolific.publish, "Published")


@prolific_group.command("pause")
@click.argument("slug")
def pause(slug: str) -> None:
    """Pause study SLUG on Prolific: no new workers start; those working carry on."""
    _transition(slug, prolific.pause, "Paused")


@prolific_group.command("start")
@click.argument("slug")
def start(slug: str) -> None:
    """Start a paused study SLUG again on Prolific."""
    _transition(slug, prolific.start_again, "Started again")


@prolific_group.command("sync")
@click.argument("slug")
def sync(slug: str) -> None:
    """Read study SLUG's status, places and submissions on Prolific. Workers who returned
    their submission or ran out of time there, and are still playing here, are marked so
    here (their place is free again). Decisions already made here are never changed."""
    study = study_named(slug)
    result = _run(prolific.sync, prolific_client(), study)
    click.echo(
        f"Prolific study {study.prolific_study_id}: {result.study_status or '?'}, "
        f"{result.places_taken if result.places_taken is not None else '?'} of "
        f"{result.places if result.places is not None else '?'} places taken."
    )
    counts = ", ".join(f"{n} {s.lower()}" for s, n in sorted(result.by_status.items()))
    click.echo(f"Submissions: {counts or 'none yet'}.")
    if result.marked_left:
        click.echo(
            f"Marked returned or timed out here: {len(result.marked_left)} "
            f"({', '.join(result.marked_left)})."
        )
    if result.kept:
        click.echo(
            f"Left on Prolific but already decided or finished here (unchanged): "
            f"{', '.join(result.kept)}."
        )
    if result.decided_there:
        click.echo(
            f"Approved or rejected on Prolific, with no such decision here: "
            f"{', '.join(result.decided_there)} (Prolific's decision stands; `flask study "
            f"prolific apply {slug}` records this site's and pays what it owes)."
        )
    if result.unknown:
        click.echo(
            f"On Prolific but never seen on the site: {', '.join(result.unknown)} "
            "(they may not have opened the link yet)."
        )


@prolific_group.command("message")
@click.argument("slug")
@click.argument("worker")
@click.option("--text", help="The message.")
@click.option(
    "--file",
    "text_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Read the message from this file.",
)
def message(slug: str, worker: str, text: str | None, text_file: Path | None) -> None:
    """Send a message to WORKER of study SLUG through Prolific. The same text goes to the
    same worker once, however often this is run."""
    if (text is None) == (text_file is None):
        raise click.UsageError("give exactly one of --text and --file")
    if text_file is not None:
        try:
            text = text_file.read_text(encoding="utf-8")
        except OSError as error:
            raise click.ClickException(f"{text_file}: cannot read ({error.strerror})") from None
    study = study_named(slug)
    sent = _run(prolific.message, prolific_client(), study, worker, text)
    if sent == "sent":
        click.echo(f"Sent the message to {worker}.")
    elif sent == "already sent":
        click.echo(f"Not sent again: {worker} already has this message.")
    else:
        click.echo(
            f"Not sent again: an earlier try to send this message to {worker} got no answer. "
            "Look at the conversation on Prolific before sending it by hand."
        )


@prolific_group.command("apply")
@click.argument("slug")
@click.option(
    "--out",
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for the decision files (default as for `flask study verify`).",
)
@click.pass_context
def apply(ctx: click.Context, slug: str, out: Path | None) -> None:
    """Decide, record and act on study SLUG's Prolific submissions: `flask study verify`
    reading them through the API, with --apply and --send. Approves, rejects (with the
    category and message), and pays each bonus the ledger owes exactly once; submissions
    already approved or rejected on Prolific, and bonuses already paid, are skipped."""
    study = study_named(slug)
    if not study.prolific_study_id:
        raise click.ClickException(
            f"study {slug!r} has no Prolific study yet: run "
            f"`flask study prolific create {slug}` first"
        )
    verify_command = study_group.commands["verify"]
    try:
        ctx.invoke(
            verify_command,
            slug=slug,
            prolific_study=study.prolific_study_id,
            apply=True,
            send=True,
            out=out,
        )
    finally:
        for line in _unconfirmed_lines(study):
            click.echo(line)


@prolific_group.command("resolve-payment")
@click.argument("slug")
@click.argument("payment")
@click.option("--paid/--not-paid", required=True, help="What Prolific shows for PAYMENT.")
def resolve_payment(slug: str, payment: str, paid: bool) -> None:
    """Settle bulk bonus PAYMENT of study SLUG whose answer was lost, after checking it on
    Prolific: --paid records it as paid; --not-paid owes its bonuses again (the next
    `apply` sets them up anew and pays them)."""
    study = study_named(slug)
    done = _run(prolific_pay.resolve_payment, study, payment, paid)
    currency = lookup.config_of(study).currency
    if done.paid:
        click.echo(f"Recorded {done.rows} bonus(es), {money(done.minor)} {currency}, as paid.")
    else:
        click.echo(
            f"{done.rows} bonus(es), {money(done.minor)} {currency}, are owed again: "
            f"`flask study prolific apply {slug}` pays them."
        )
