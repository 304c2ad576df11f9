"""`flask validation draw | label | report | export`: the coder's validation from a terminal, the
same service as /research/validation/<scope> (app/research/validation.py)."""

from __future__ import annotations

import csv
from pathlib import Path

import click
from flask.cli import AppGroup

from app.accounts import service as accounts
from app.cli import refusals
from app.research import validation
from app.research.routes import bp
from roftcore.spreadsheet import neutralise_row

group = AppGroup(
    "validation",
    help="Check the comment coder on your own data: draw a sample of a scope's comments (a "
    "study's slug, or 'site'), label it blind, report the coder's agreement and corrected "
    "reason shares.",
)
bp.cli.add_command(group)


def _researcher(username: str):
    player = accounts.find_by_username(username)
    if player is None or not player.is_researcher:
        raise click.ClickException(f"{username!r} is no researcher (flask create-researcher)")
    return player


@group.command("draw")
@click.argument("scope")
@click.option("--size", type=int, default=validation.DEFAULT_SIZE, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def draw_command(scope: str, size: int, seed: int) -> None:
    """Draw the scope's sample (stratified by category; kept once drawn)."""
    with refusals():
        items = validation.draw(scope, size, seed)
    click.echo(f"{scope}: a sample of {len(items)} comments to label.")


@group.command("label")
@click.argument("scope")
@click.option("--as", "username", required=True, help="your researcher account")
def label_command(scope: str, username: str) -> None:
    """Label the sample in the terminal: a number per comment, q to stop (resumes later)."""
    researcher = _researcher(username)
    keys = {str(i % 10): name for i, (name, _) in enumerate(validation.LABELS, start=1)}
    while True:
        with refusals():
            progress = validation.next_item(scope, researcher)
        if progress.item is None:
            click.echo(f"All {progress.total} comments are labelled.")
            return
        click.echo(f"\n[{progress.done + 1}/{progress.total}] {progress.item.text}")
        for key, (_, description) in zip(keys, validation.LABELS, strict=True):
            click.echo(f"  {key}  {description}")
        answer = click.prompt("label (q to stop)", default="q", show_default=False).strip()
        if answer == "q":
            return
        if answer not in keys:
            click.echo("Type a number from the list.")
            continue
        validation.record(scope, progress.item.id, researcher, keys[answer])


@group.command("report")
@click.argument("scope")
@click.option("--bootstrap", type=int, default=1000, show_default=True)
def report_command(scope: str, bootstrap: int) -> None:
    """κ with its CI, per-class precision and recall, the researchers' agreement and the
    corrected reason shares, as Markdown."""
    from analysis import validation as analysed

    with refusals():
        result = validation.results(scope, bootstrap)
    click.echo("\n".join(analysed.markdown(result)))


@group.command("export")
@click.argument("scope")
@click.argument("out", type=click.Path(path_type=Path, dir_okay=False))
def export_command(scope: str, out: Path) -> None:
    """The first label of each labelled comment as explanation,label (for `python -m analysis
    report --coder-labels`)."""
    seen: dict[int, tuple[str, str]] = {}
    for item_id, text, _, label in validation.labels_table(scope):
        seen.setdefault(item_id, (text, label))
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["explanation", "label"])
        # Players' words: a cell that would start a spreadsheet formula is neutralised (the
        # analysis's read_labels restores it).
        writer.writerows(neutralise_row(row) for row in seen.values())
    click.echo(f"{len(seen)} labelled comments written to {out}.")
