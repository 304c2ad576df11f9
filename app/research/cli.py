"""`flask export`, on the research blueprint's command line (app/research/validation_cli.py adds
`flask validation`)."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import click
from tqdm import tqdm

from app.research.export_options import FORMATS, ExportError, ExportOptions
from app.research.exports import export
from app.research.routes import bp

STEPS = ("rounds", "reveals", "examples", "players", "tables", "files")


@bp.cli.command("export")
@click.argument("out", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="csv",
    show_default=True,
    help="csv and parquet write one file per table; sqlite writes one roft-export.sqlite.",
)
@click.option(
    "--private",
    is_flag=True,
    help="Add usernames and crowd workers' platform ids and statuses (the README, manifest "
    "and schema then say PRIVATE). "
    "Never share such an export.",
)
@click.option(
    "--include-unconsented",
    is_flag=True,
    help="Also export rounds of players who did not consent to research use.",
)
@click.option("--category", multiple=True, help="Only this category slug (repeatable).")
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S"]),
    help="Only rounds answered at or after this UTC date/time.",
)
@click.option(
    "--study",
    help="Only the rounds of this crowd study (its slug).",
)
@click.option(
    "--demographics",
    type=click.Path(path_type=Path, dir_okay=False),
    help="With --study: the platform's demographic export (e.g. Prolific's CSV) to join to "
    "the workers by worker id. Age is kept in bands; ids never leave the export.",
)
@click.option("--overwrite", is_flag=True, help="Replace an earlier export in OUT.")
def export_command(
    out: Path,
    fmt: str,
    private: bool,
    include_unconsented: bool,
    category: tuple[str, ...],
    since,
    study: str | None,
    demographics: Path | None,
    overwrite: bool,
) -> None:
    """Export answered rounds, examples and players for research into the folder OUT.

    Pseudonymous by default (players appear as keyed hashes; key EXPORT_PSEUDONYM_KEY, else
    SECRET_KEY) and only rounds of players who consented. All tables come from one consistent
    snapshot. OUT also gets schema.md/schema.json (the data dictionary), manifest.json and a
    README. Load it with `python -m analysis report OUT --out REPORT`.
    """
    options = ExportOptions(
        out=out,
        format=fmt,
        private=private,
        include_unconsented=include_unconsented,
        categories=list(category),
        since=since.replace(tzinfo=UTC) if since else None,
        study=study,
        overwrite=overwrite,
        demographics=demographics,
    )
    try:
        with tqdm(total=len(STEPS), desc="Exporting", unit="step") as bar:
            result = export(options, progress=lambda name: bar.update(1))
    except ExportError as error:
        raise click.ClickException(str(error)) from None
    counts = result.counts
    click.echo(
        f"Exported {counts['rounds']} rounds, {counts['examples']} examples and "
        f"{counts['players']} players to {result.folder} ({', '.join(result.files)})."
    )
    if private:
        click.echo("PRIVATE export: it contains usernames and worker ids. Do not share it.")
