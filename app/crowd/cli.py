"""`flask study …`: create a study from a file, report on it, verify submissions for payment."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import click
from flask import Flask, url_for

from app.crowd import reports, studies
from app.crowd.config import StudyConfigError, load_study_file
from app.errors import ServiceError
from app.spreadsheet import neutralise_row


def _study(slug: str):
    try:
        return studies.get_study(slug)
    except ServiceError as missing:
        raise click.ClickException(f"no study called {slug!r}") from missing


def _entry_link(study) -> str:
    params = {
        "prolific": "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}"
        "&SESSION_ID={{%SESSION_ID%}}",
        "mturk": "(MTurk adds workerId, assignmentId, hitId and turkSubmitTo itself)",
        "generic": "pid=WORKER_ID",
    }[study.platform]
    base = url_for("crowd.landing", slug=study.slug, _external=True)
    return base if study.platform == "mturk" else f"{base}?{params}"


def register_study_cli(app: Flask) -> None:
    @app.cli.group("study")
    def study_group() -> None:
        """Run crowd studies: create, report, verify, close."""

    @study_group.command("create")
    @click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
    def create(file: Path) -> None:
        """Create a study from a TOML FILE (see docs/running-a-study.md)."""
        try:
            config = load_study_file(file)
            study = studies.create_study(config)
        except StudyConfigError as error:
            raise click.ClickException(str(error)) from None
        except ServiceError as refused:
            raise click.ClickException(f"{file}: {refused.message}") from None
        click.echo(f"Created study {study.slug!r} ({study.platform}).")
        click.echo(
            f"Pool: {len(study.pool['normal'])} examples, {len(study.pool['checks'])} attention "
            f"checks, {len(study.pool['tutorial'])} practice texts."
        )
        if config.hourly_reward is not None and config.reward:
            click.echo(
                f"Pay: {config.reward:.2f} {config.currency} for about "
                f"{config.expected_minutes:g} minutes = {config.hourly_reward:.2f} "
                f"{config.currency}/hour (check it against the platform's minimum)."
            )
        with app.test_request_context():
            click.echo(f"Entry link: {_entry_link(study)}")

    @study_group.command("report")
    @click.argument("slug")
    @click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
    @click.option("--workers", is_flag=True, help="Also list every worker.")
    def report(slug: str, as_json: bool, workers: bool) -> None:
        """Progress, time on task, effective pay, coverage and quality flags of study SLUG."""
        data = reports.study_report(_study(slug))
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
        "--out",
        type=click.Path(path_type=Path, file_okay=False),
        default=Path("."),
        show_default=True,
        help="Folder for the decision files.",
    )
    @click.option(
        "--apply", is_flag=True, help="Also mark approved/rejected workers in the database."
    )
    def verify(slug: str, prolific_export, mturk_batch, ids, out: Path, apply: bool) -> None:
        """Decide approve / reject / review for each submission of study SLUG, with reasons.

        Writes decisions.csv, plus approve.txt / reject.txt / review.txt (Prolific: paste the ids
        into bulk approve/reject) or mturk-decisions.csv (upload to MTurk's batch review).
        """  # fmt: skip
        chosen = [p for p in (prolific_export, mturk_batch, ids) if p is not None]
        if len(chosen) != 1:
            raise click.UsageError("give exactly one of --prolific-export, --mturk-batch, --ids")
        source = chosen[0]
        try:
            text = source.read_text(encoding="utf-8-sig")
        except OSError as error:
            raise click.ClickException(f"{source}: cannot read file ({error.strerror})") from None
        try:
            if prolific_export:
                submissions = reports.read_prolific_export(text)
            elif mturk_batch:
                submissions = reports.read_mturk_batch(text)
            else:
                submissions = reports.read_id_list(text)
        except ValueError as error:
            raise click.ClickException(f"{source}: {error}") from None
        study = _study(slug)
        decisions = reports.decide(study, submissions)
        out.mkdir(parents=True, exist_ok=True)
        write_decisions(out, decisions, mturk_batch is not None, submissions)
        counts = {
            k: sum(d.decision == k for d in decisions) for k in ("approve", "reject", "review")
        }
        click.echo(
            f"{len(decisions)} submission(s): {counts['approve']} approve, {counts['reject']} "
            f"reject, {counts['review']} review. Files in {out}/"
        )
        if apply:
            changed = reports.apply_decisions(study, decisions)
            click.echo(f"Recorded {changed} decision(s) in the database.")

    @study_group.command("close")
    @click.argument("slug")
    def close(slug: str) -> None:
        """Stop admitting new workers to study SLUG (those already in can finish)."""
        studies.set_open(_study(slug), False)
        click.echo(f"Study {slug!r} is closed to new workers.")


def write_decisions(out: Path, decisions, mturk: bool, submissions) -> None:
    with open(out / "decisions.csv", "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["worker_id", "decision", "reasons"])
        for d in decisions:
            writer.writerow(neutralise_row([d.worker_id, d.decision, "; ".join(d.reasons)]))
    if mturk:
        fieldnames = list(submissions[0].row) if submissions and submissions[0].row else []
        (out / "mturk-decisions.csv").write_text(
            reports.mturk_batch_with_decisions(decisions, fieldnames), encoding="utf-8"
        )
    else:
        for kind in ("approve", "reject", "review"):
            ids = [d.worker_id for d in decisions if d.decision == kind]
            (out / f"{kind}.txt").write_text("".join(f"{i}\n" for i in ids), encoding="utf-8")


def report_lines(r: reports.StudyReport) -> list[str]:
    def num(value, fmt="{:.1f}"):
        return "—" if value is None else fmt.format(value)

    status = ", ".join(f"{k} {v}" for k, v in r.by_status.items()) or "none yet"
    return [
        f"Study {r.slug!r}: {r.title} ({r.platform}), {r.rounds_required} rounds per worker",
        f"Participants: {r.participants} ({status}); finished {r.finished}, "
        f"completion rate {num(r.completion_rate, '{:.0%}')}",
        f"Time: median {num(r.median_round_seconds)} s per round; median "
        f"{num(r.median_gap_seconds)} s between submissions; median "
        f"{num(r.median_total_minutes)} min in total",
        f"Pay: {r.reward:.2f} {r.currency} per worker; configured "
        f"{num(r.configured_hourly, '{:.2f}')} {r.currency}/h, effective "
        f"{num(r.effective_hourly, '{:.2f}')} {r.currency}/h (at the median total time)",
        f"Coverage: {r.pool_size} examples, {r.examples_at_target} at the target of "
        f"{r.target_per_example}; annotations per example min {r.annotations_min}, median "
        f"{r.annotations_median:g}, max {r.annotations_max}",
        f"Flags: {r.flagged_too_fast} too fast, {r.flagged_straight_lining} straight-lining",
    ]
