"""Reading a research export from the database: every table in one snapshot (`collect`).

Every query runs in one read transaction (REPEATABLE READ on PostgreSQL, one read transaction on
SQLite in WAL mode), so the tables agree with each other while the site keeps running.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
from sqlalchemy import func, select

from app.accounts import survey
from app.crowd.lookup import round_numbers
from app.crowd.pool import every_text
from app.extensions import db
from app.models import (
    Category,
    Example,
    ExplanationVote,
    GameSet,
    Participant,
    Player,
    PlayerSurvey,
    Reveal,
    Round,
    Study,
    StudyDecision,
    System,
)
from app.research.export_options import ExportError, ExportOptions


def _begin_snapshot(conn) -> None:
    """Start the one read transaction every table of the export is read in."""
    if conn.dialect.name == "sqlite":
        # pysqlite opens transactions only before writes; ask for one explicitly so that every
        # SELECT below reads the same WAL snapshot.
        conn.exec_driver_sql("BEGIN")


def _read(conn, statement) -> pd.DataFrame:
    result = conn.execute(statement)
    return pd.DataFrame(result.all(), columns=list(result.keys()))


def _latest_decision():
    """The id of the round's participant's current decision (their newest decision row)."""
    return (
        select(func.max(StudyDecision.id))
        .where(StudyDecision.participant_id == Participant.id)
        .correlate(Participant)
        .scalar_subquery()
    )


def _workers_query(options: ExportOptions):
    """Every participant of the exported studies, with or without rounds, and their current
    decision (the rounds' `_latest_decision`). The consent rule is the rounds': a participant's
    player records research consent when the worker ticks the study's consent box."""
    workers = (
        select(
            Participant.player_id,
            Study.slug.label("study"),
            Participant.status.label("participant_status"),
            StudyDecision.decision,
            StudyDecision.platform_status,
            Participant.rounds_done,
            Participant.checks_passed,
            Participant.checks_failed,
            Participant.checks_void,
            Participant.started_at,
            Participant.finished_at,
            Participant.left_at,
            Participant.worker_id,
            Participant.condition,
        )
        .join(Study, Study.id == Participant.study_id)
        .join(Player, Player.id == Participant.player_id)
        .outerjoin(StudyDecision, StudyDecision.id == _latest_decision())
        .order_by(Participant.id)
    )
    if options.study:
        workers = workers.where(Study.slug == options.study)
    if not options.include_unconsented:
        workers = workers.where(Player.research_consent_at.is_not(None))
    return workers


def _rounds_query(options: ExportOptions):
    _study_numbers = round_numbers()
    rounds = (
        select(
            Round.id.label("round_id"),
            Round.player_id,
            Round.order_index,
            _study_numbers.c.number.label("study_round"),
            Round.chosen_category,
            Round.guess,
            Round.points,
            Round.reasons,
            Round.explanation,
            Round.started_at,
            Round.answered_at,
            Round.example_id.label("example_pk"),
            Round.kind.label("round_kind"),
            Round.ratings,
            Round.upvotes,
            Round.explanation_hidden_at,
            Round.uncounted,
            Round.confidence,
            Round.explanation_pasted,
            Round.typing_ms,
            Round.typed_chars,
            Round.condition,
            Round.detector_hints,
            Player.kind.label("player_kind"),
            Study.slug.label("study"),
            GameSet.kind.label("set_kind"),
            Participant.worker_id,
            Participant.status.label("participant_status"),
            StudyDecision.decision,
            StudyDecision.platform_status,
        )
        .join(Player, Player.id == Round.player_id)
        .outerjoin(GameSet, GameSet.id == Round.set_id)
        .join(Example, Example.id == Round.example_id)
        .join(Category, Category.id == Example.category_id)
        .outerjoin(Participant, Participant.id == Round.participant_id)
        .outerjoin(Study, Study.id == Participant.study_id)
        .outerjoin(StudyDecision, StudyDecision.id == _latest_decision())
        .outerjoin(_study_numbers, _study_numbers.c.id == Round.id)
        # Practice rounds of a study's tutorial are not annotations.
        .where(Round.guess.is_not(None), Round.kind != "practice")
        .order_by(Round.id)
    )
    if options.study:
        rounds = rounds.where(Study.slug == options.study)
    if not options.include_unconsented:
        rounds = rounds.where(Player.research_consent_at.is_not(None))
    if options.categories:
        rounds = rounds.where(Category.slug.in_(options.categories))
    if options.since is not None:
        rounds = rounds.where(Round.answered_at >= options.since)
    return rounds


def _study_texts(slug: str) -> list[int]:
    return sorted(every_text(db.session.scalar(select(Study.pool).where(Study.slug == slug)) or {}))


def _reveals_query(ids):
    return (
        select(Reveal.round_id, Reveal.sentence_index, Reveal.revealed_at)
        .where(Reveal.round_id.in_(ids))
        .order_by(Reveal.round_id, Reveal.sentence_index)
    )


def _examples_query(options: ExportOptions):
    examples_q = (
        select(
            Example.id.label("example_pk"),
            Example.external_id.label("example_id"),
            Category.slug.label("category"),
            System.name.label("system"),
            Example.n_sentences,
            Example.boundary,
            Example.decoding,
            Example.decoding_p,
            Example.seed,
            Example.source,
            Example.meta,
            Example.sentences,
            Example.imported_at,
            Example.system_label,
            Example.provenance,
        )
        .join(Category, Category.id == Example.category_id)
        .join(System, System.id == Example.system_id)
        .order_by(Example.id)
    )
    if options.categories:
        examples_q = examples_q.where(Category.slug.in_(options.categories))
    if options.study:
        # Only the study's texts: its pool, practice texts and attention checks.
        examples_q = examples_q.where(Example.id.in_(_study_texts(options.study)))
    return examples_q


def _players_query(rounds_q):
    """The players of the exported rounds, with their survey answers."""
    return (
        select(
            Player.id.label("player_id"),
            Player.username,
            Player.is_guest,
            Player.research_consent_at,
            Player.created_at,
            Player.unlisted_at,
            Player.unlisted_reason,
            Player.restored_at,
            *(getattr(PlayerSurvey, name) for name in survey.NAMES),
        )
        .outerjoin(PlayerSurvey, PlayerSurvey.player_id == Player.id)
        .where(Player.id.in_(rounds_q.with_only_columns(Round.player_id).order_by(None).distinct()))
    )


def _votes_query(options: ExportOptions, ids):
    """Up-votes on the exported rounds' explanations (by consenting voters unless
    `include_unconsented`)."""
    votes_q = select(
        ExplanationVote.round_id, ExplanationVote.voter_id, ExplanationVote.voted_at
    ).where(ExplanationVote.round_id.in_(ids))
    if not options.include_unconsented:
        consented = select(Player.id).where(Player.research_consent_at.is_not(None))
        votes_q = votes_q.where(ExplanationVote.voter_id.in_(consented))
    return votes_q.order_by(ExplanationVote.round_id, ExplanationVote.voter_id)


def _table_queries(options: ExportOptions) -> dict:
    """Each table's query, by name, in the order `collect` reads them."""
    rounds_q = _rounds_query(options)
    ids = rounds_q.with_only_columns(Round.id).order_by(None).scalar_subquery()
    return {
        "rounds": rounds_q,
        "reveals": _reveals_query(ids),
        "examples": _examples_query(options),
        "players": _players_query(rounds_q),
        "votes": _votes_query(options, ids),
        "workers": _workers_query(options),
    }


def collect(options: ExportOptions, progress: Callable[[str], None] | None = None) -> dict:
    """Read everything the export needs in one snapshot: one DataFrame for each of rounds,
    reveals, examples, players, votes and workers, by name; `progress` hears each name once
    its table is read."""
    if options.study and not db.session.scalar(select(Study.id).where(Study.slug == options.study)):
        raise ExportError(f"--study: there is no study called {options.study!r}")
    step = progress or (lambda name: None)
    queries = _table_queries(options)
    frames: dict[str, pd.DataFrame] = {}
    with db.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
        _begin_snapshot(conn)
        try:
            for name, statement in queries.items():
                frames[name] = _read(conn, statement)
                step(name)
        finally:
            conn.rollback()
    return frames
