"""Research exports: pseudonymised rounds, examples, players, votes and crowd workers as CSV,
Parquet or SQLite.

One export is one folder: the tables, `schema.md` and `schema.json` (every column, its type and
unit), `manifest.json` (what was exported, how, and with which filters), `README.md` (a Hugging
Face dataset card) and `croissant.json` (Croissant 1.1 metadata); see app.research.card. Every
column has the type the schema gives it in every format, also in an empty table.

- The rounds table starts with the twenty columns of the public RoFT dataset (`roft.csv`), in its
  order and meaning (positions converted at this edge: true_boundary_index = boundary - 1,
  predicted_boundary_index = guess - 1), followed by our richer columns.
- The workers table has one row per crowd-study participant of the exported studies, also those
  with no rounds (screened out, returned before answering), with their status and current
  decision; its `annotator` is the rounds table's pseudonym, so the two join.
- Only answered rounds are annotations; only rounds of players who consented to research use are
  exported unless `include_unconsented` is set.
- Players appear as pseudonyms: an HMAC-SHA256 of the player id keyed with EXPORT_PSEUDONYM_KEY
  (or SECRET_KEY), stable across exports made with the same key. No username, password material or
  session data is exported unless `private` is set, and a private export says so in its README,
  manifest, schema and (SQLite) `export_info` table.
- Every table is read in one transaction (REPEATABLE READ on PostgreSQL, one read transaction on
  SQLite in WAL mode), so the files agree with each other while the site keeps running.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from flask import current_app
from sqlalchemy import func, select

from app.accounts import survey
from app.crowd import preregistration
from app.crowd.lookup import round_numbers
from app.crowd.pool import every_text
from app.extensions import db
from app.game.reasons import REASONS
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
from app.models.base import utcnow
from app.research import card, demographics, study_facts
from roftcore.spreadsheet import neutralise_frame

FORMATS = ("csv", "parquet", "sqlite")
# The study's frozen analysis plan, every version (app/crowd/preregistration.py).
PLAN_NAME = "preregistration.json"
SQLITE_NAME = "roft-export.sqlite"
SEP = "_SEP_"
NO_SURVEY = -1
SURVEY_NOTE = "the player's answer on the optional /survey page; -1 = not given"
KNOWN_FILES = (
    *(
        f"{t}.{ext}"
        for t in ("rounds", "examples", "players", "votes", "workers")
        for ext in ("csv", "parquet")
    ),
    "schema.json",
    "schema.md",
    "manifest.json",
    "README.md",
    card.CROISSANT_NAME,
    PLAN_NAME,
)
TASK_INSTRUCTION = (
    "Sentences of a text are revealed one at a time; the first is always written by a person. "
    "When you think the latest sentence was written by a machine, say so and tell us why; if you "
    "reach the end and think the whole text is human-written, say that."
)


CONDITION_NOTE = (
    "the study condition the worker was randomised to at entry ([[conditions]] in the study "
    "file); empty outside studies with conditions"
)


CSV_CELLS = (
    "CSV only: a text cell that begins with =, +, -, @, a tab or a carriage return (or an "
    "apostrophe) is written with one more apostrophe in front, so that spreadsheets do not run it "
    "as a formula; analysis.load removes it"
)


class ExportError(ValueError):
    """The export cannot be made as asked; the message says why."""


# How each example was made, in the rounds and the examples tables alike.
PROVENANCE_COLUMNS: dict[str, tuple[str, str, str]] = {
    "system_label": ("string", "", "display name of the system shown to players; empty if unset"),
    "provenance_model": ("string", "", "the model (hub id or path) that wrote the text"),
    "weights_sha256": ("string", "hex", "SHA-256 of the model's weight files; empty if unknown"),
    "code_version": ("string", "", "version and git commit of the generation code"),
    "provenance": (
        "string",
        "JSON",
        "how the text was made: model, weights_sha256, hub_commit, code_version, generation",
    ),
}
# name -> (type, unit, description). The order of ROUND_COLUMNS is the order of the table.
ROFT_ROUND_COLUMNS: dict[str, tuple[str, str, str]] = {
    "date": ("timestamp", "UTC, ISO 8601", "when the round was answered"),
    "model": ("string", "", "the generating system ('human' for all-human texts)"),
    "dataset": ("string", "", "the category slug of the text (news, stories, recipes, …)"),
    "annotator": ("string", "", "pseudonym of the player (keyed HMAC; see manifest.json)"),
    "group": ("string", "", "participant group: 'public' for players of the site"),
    "dec_strat_value": ("float", "probability", "nucleus sampling p; empty when not decoded"),
    "predicted_boundary_index": (
        "integer",
        "sentence index",
        "guess - 1: index of the last sentence the player took as human (N-1 = 'all human')",
    ),
    "true_boundary_index": (
        "integer",
        "sentence index",
        "boundary - 1: index of the last human-written sentence (N-1 = all human)",
    ),
    "points": ("integer", "points 0-5", "points stored with the round (RoFT's rule)"),
    "reason": (
        "string",
        "JSON list",
        'reason names the player chose, e.g. ["grammar"]; RoFT\'s eight, or "hunch" (just a hunch)',
    ),
    "prompt": ("string", "", "identifier of the prompt: the example id"),
    "prompt_body": ("string", "_SEP_-joined", "the human-written sentences s[0..boundary-1]"),
    "generation": ("string", "", "identifier of the generation: the example id"),
    "gen_body": (
        "string",
        "_SEP_-joined",
        "the machine-written sentences s[boundary..N-1]; empty when all human",
    ),
    "recipe_familiarity": ("integer", "1-5", f"familiarity with recipes; {SURVEY_NOTE}"),
    "news_familiarity": ("integer", "1-5", f"familiarity with news articles; {SURVEY_NOTE}"),
    "stories_familiarity": ("integer", "1-5", f"familiarity with short stories; {SURVEY_NOTE}"),
    "gen_familiarity": ("integer", "1-4", f"familiarity with AI text generators; {SURVEY_NOTE}"),
    "native_speaker": ("integer", "1/0", f"native English speaker; {SURVEY_NOTE}"),
    "read_guide": ("integer", "1/0", "the player read the guide; -1 = unknown (not recorded)"),
}
RICH_ROUND_COLUMNS: dict[str, tuple[str, str, str]] = {
    "explanation": ("string", "", "the player's free-text explanation; empty for none"),
    "example_id": ("string", "", "the example's id (its `id` in the example file)"),
    "category": ("string", "", "category slug (same as dataset)"),
    "system": ("string", "", "generating system (same as model)"),
    "n_sentences": ("integer", "sentences", "N, the number of sentences of the text"),
    "boundary": ("integer", "sentence index", "index of the first machine sentence; N = all human"),
    "guess": ("integer", "sentence index", "the flagged sentence's index; N = 'all human'"),
    "decoding_p": ("float", "probability", "nucleus p (same as dec_strat_value)"),
    "decoding_strategy": ("string", "", "decoding strategy; empty when not decoded"),
    "seed": ("integer", "", "generation seed; empty when unknown"),
    "splitter": ("string", "", "sentence splitter used by generation"),
    "order_index": ("integer", "rounds", "the player's n-th round, from 1 (practice included)"),
    "study_round": (
        "integer",
        "rounds",
        "a crowd worker's round number in their study, 1..N as the worker and the review page "
        "count them (practice apart); empty for public play",
    ),
    "chosen_category": (
        "string",
        "",
        "what the player asked for: a category or 'random' ('challenge' for a text of a "
        "friend's challenge)",
    ),
    "started_at": ("timestamp", "UTC, ISO 8601", "when the first sentence was shown"),
    "reveal_seconds": (
        "string",
        "JSON list of seconds",
        "for sentence i, seconds after started_at at which it was shown",
    ),
    "seconds": ("float", "seconds", "answered_at - started_at"),
    "attention_check": ("boolean", "", "the round was a crowd study's attention check"),
    "attention_passed": (
        "boolean",
        "",
        "for attention checks: the worker gave the answer the check asked for (its check "
        "sentence, or 'all human'); empty otherwise",
    ),
    "participant_kind": ("string", "", "'public' (site player) or 'crowd' (paid worker)"),
    "study": ("string", "", "crowd study slug; empty for public players"),
    "likert_fluency": ("integer", "1-5", "Likert rating named 'fluency'; empty if not asked"),
    "likert_commonsense": (
        "integer",
        "1-5",
        "Likert rating named 'commonsense'; empty if not asked",
    ),
    "ratings": ("string", "JSON object", "every Likert rating of the round, by criterion name"),
    "round_id": ("integer", "", "the round's id on the site (votes.round_id refers to it)"),
    "set_kind": (
        "string",
        "",
        "'normal' (a set of texts), 'daily' (the daily challenge), 'challenge' (a friend's run "
        "of another player's set) or empty (no set)",
    ),
    "explanation_upvotes": ("integer", "votes", "up-votes other players gave the explanation"),
    "explanation_hidden": (
        "boolean",
        "",
        "a researcher hid the explanation from players (it is still exported)",
    ),
    "participant_status": (
        "string",
        "",
        "crowd worker's outcome on the site: completed, failed_checks, started, returned or "
        "timed_out (screened-out workers answer no round: see the workers table); empty for "
        "public players",
    ),
    "decision": (
        "string",
        "",
        "the worker's current decision, the newest one recorded, whether by `flask study "
        "verify --apply` or by a person in review (the review page or `flask study review`): "
        "approve, reject, review, returned or pending; empty when none",
    ),
    "uncounted": (
        "string",
        "",
        "why the round counts on no total or leaderboard: truth_seen_device / truth_seen_address "
        "(its answer had been shown to another player in the same browser / from the same "
        "address), passage_read_before (a challenge's text whose passage the player had read "
        "in another text); empty when it counts",
    ),
    "confidence": (
        "integer",
        "percent",
        "how sure the player said they were of the guess: 50, 70 or 90; empty when not said",
    ),
    "explanation_pasted": (
        "boolean",
        "",
        "text was pasted or dropped into the explanation box, as the page's script reported; "
        "empty when not reported (no script, or no explanation)",
    ),
    "typing_ms": (
        "integer",
        "milliseconds",
        "from the first keystroke in the explanation box to the answer, as reported (clamped); "
        "empty when not reported or nothing was typed",
    ),
    "typed_chars": (
        "integer",
        "characters",
        "characters typed into the explanation box, pasted ones not counted, as reported "
        "(clamped); empty when not reported",
    ),
    "condition": ("string", "", CONDITION_NOTE),
    "detector_hints": (
        "string",
        "JSON list",
        "the detector hint's level (low, unsure, high) for each sentence of the text, in a "
        "condition that shows one (each revealed sentence but the first showed its level); "
        "empty otherwise",
    ),
    **PROVENANCE_COLUMNS,
}
EXAMPLE_COLUMNS: dict[str, tuple[str, str, str]] = {
    "example_id": ("string", "", "the example's id"),
    "category": ("string", "", "category slug"),
    "system": ("string", "", "generating system; 'human' for all-human texts"),
    "n_sentences": ("integer", "sentences", "N"),
    "boundary": ("integer", "sentence index", "index of the first machine sentence; N = all human"),
    "true_boundary_index": ("integer", "sentence index", "boundary - 1 (RoFT's convention)"),
    "all_human": ("boolean", "", "boundary == N"),
    "decoding_strategy": ("string", "", "e.g. nucleus; empty when not decoded"),
    "decoding_p": ("float", "probability", "nucleus p; empty when unknown or not decoded"),
    "decoding": ("string", "JSON", "the full decoding settings"),
    "seed": ("integer", "", "generation seed"),
    "splitter": ("string", "", "sentence splitter"),
    "source": ("string", "JSON", "where the human text came from"),
    "meta": ("string", "JSON", "other generation settings"),
    "text": ("string", "_SEP_-joined", "all N sentences"),
    "sentences": ("string", "JSON list", "all N sentences"),
    "answered_rounds": ("integer", "rounds", "answered rounds in this export"),
    "imported_at": ("timestamp", "UTC, ISO 8601", "when the example was imported"),
    **PROVENANCE_COLUMNS,
}
PLAYER_COLUMNS: dict[str, tuple[str, str, str]] = {
    "annotator": ("string", "", "pseudonym (matches rounds.annotator)"),
    "registered": ("boolean", "", "has an account (not a guest)"),
    "consented": ("boolean", "", "consented to research use"),
    "joined_on": ("date", "UTC", "the day the player first came (day only)"),
    "rounds": ("integer", "rounds", "answered rounds in this export"),
    "points": ("integer", "points", "sum of points over those rounds"),
    "unlisted_reason": (
        "string",
        "",
        "why the player is off the leaderboards for a record implausible for a human (e.g. "
        "exact hits or speed); empty when listed",
    ),
    "restored": ("boolean", "", "a researcher restored the player after an automatic unlisting"),
}
VOTE_COLUMNS: dict[str, tuple[str, str, str]] = {
    "round_id": ("integer", "", "the round whose explanation was up-voted (rounds.round_id)"),
    "voter": ("string", "", "pseudonym of the player who voted (same keyed HMAC as annotator)"),
    "voted_on": ("date", "UTC", "the day of the vote (day only)"),
}
WORKER_COLUMNS: dict[str, tuple[str, str, str]] = {
    "annotator": (
        "string",
        "",
        "pseudonym of the worker's player (matches rounds.annotator; same keyed HMAC)",
    ),
    "study": ("string", "", "crowd study slug"),
    "participant_status": (
        "string",
        "",
        "the worker's outcome on the site: started, completed, failed_checks, screened_out, "
        "returned or timed_out",
    ),
    "decision": (
        "string",
        "",
        "the worker's current decision, the newest one recorded (the same as rounds.decision): "
        "approve, reject, review, returned or pending; empty when none",
    ),
    "rounds_done": (
        "integer",
        "rounds",
        "study rounds the worker answered, attention checks included, practice not",
    ),
    "checks_passed": ("integer", "checks", "attention checks answered as the check asked"),
    "checks_failed": ("integer", "checks", "attention checks answered otherwise"),
    "checks_void": (
        "integer",
        "checks",
        "attention checks answered before their evidence was shown: neither passed nor failed",
    ),
    "started_at": ("timestamp", "UTC, ISO 8601", "when the worker consented and entered the study"),
    "finished_at": (
        "timestamp",
        "UTC, ISO 8601",
        "when the worker reached an outcome (completed, failed_checks, screened_out); empty if not",
    ),
    "left_at": (
        "timestamp",
        "UTC, ISO 8601",
        "when the worker returned the task or ran out of time; empty if not",
    ),
    "condition": ("string", "", CONDITION_NOTE),
    **demographics.COLUMNS,
}
PRIVATE_COLUMNS = {"username": ("string", "", "PRIVATE: the player's username")}
PRIVATE_STUDY_COLUMNS = {
    "worker_id": ("string", "", "PRIVATE: the crowd platform's worker id (e.g. PROLIFIC_PID)"),
    "platform_status": (
        "string",
        "",
        "PRIVATE: the platform's status for the submission as read by the run that recorded the "
        "current decision; empty when a person decided in review",
    ),
}


@dataclass
class ExportOptions:
    out: Path
    format: str = "csv"
    private: bool = False
    include_unconsented: bool = False
    categories: list[str] = field(default_factory=list)
    since: datetime | None = None
    study: str | None = None
    overwrite: bool = False
    # The platform's demographic export (CSV) to join to the study's workers; --study only.
    demographics: Path | None = None


@dataclass
class ExportResult:
    folder: Path
    files: list[str]
    counts: dict[str, int]


def pseudonym_key() -> bytes:
    key = current_app.config.get("EXPORT_PSEUDONYM_KEY") or current_app.config["SECRET_KEY"]
    return str(key).encode("utf-8")


def pseudonym(player_id: int, key: bytes) -> str:
    """A stable, keyed pseudonym: without the key it cannot be linked back to the player id."""
    digest = hmac.new(key, f"roft-player:{player_id}".encode(), hashlib.sha256).hexdigest()
    return "p_" + digest[:20]


def _iso(values: pd.Series) -> pd.Series:
    converted = pd.to_datetime(values, utc=True)
    return converted.dt.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00").where(converted.notna(), None)


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


def _queries(options: ExportOptions):
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


def collect(options: ExportOptions, progress: Callable[[str], None] | None = None) -> dict:
    """Read everything the export needs in one snapshot; returns the three DataFrames."""
    if options.study and not db.session.scalar(select(Study.id).where(Study.slug == options.study)):
        raise ExportError(f"--study: there is no study called {options.study!r}")
    step = progress or (lambda name: None)
    rounds_q = _queries(options)
    ids = rounds_q.with_only_columns(Round.id).order_by(None).scalar_subquery()
    with db.engine.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn = conn.execution_options(
                isolation_level="REPEATABLE READ", postgresql_readonly=True
            )
        _begin_snapshot(conn)
        try:
            rounds = _read(conn, rounds_q)
            step("rounds")
            reveals = _read(
                conn,
                select(Reveal.round_id, Reveal.sentence_index, Reveal.revealed_at)
                .where(Reveal.round_id.in_(ids))
                .order_by(Reveal.round_id, Reveal.sentence_index),
            )
            step("reveals")
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
            examples = _read(conn, examples_q)
            step("examples")
            players = _read(
                conn,
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
                .where(
                    Player.id.in_(
                        rounds_q.with_only_columns(Round.player_id).order_by(None).distinct()
                    )
                ),
            )
            step("players")
            votes_q = select(
                ExplanationVote.round_id, ExplanationVote.voter_id, ExplanationVote.voted_at
            ).where(ExplanationVote.round_id.in_(ids))
            if not options.include_unconsented:
                consented = select(Player.id).where(Player.research_consent_at.is_not(None))
                votes_q = votes_q.where(ExplanationVote.voter_id.in_(consented))
            votes = _read(
                conn, votes_q.order_by(ExplanationVote.round_id, ExplanationVote.voter_id)
            )
            step("votes")
            workers = _read(conn, _workers_query(options))
            step("workers")
        finally:
            conn.rollback()
    return {
        "rounds": rounds,
        "reveals": reveals,
        "examples": examples,
        "players": players,
        "votes": votes,
        "workers": workers,
    }


def _rating(ratings: pd.Series, name: str) -> pd.Series:
    return ratings.map(lambda v: (v or {}).get(name)).astype("Int64")


def _text_value(value) -> str:
    """An enum member or None as plain text ('' for None)."""
    return "" if value is None or value is pd.NA else str(getattr(value, "value", value))


def _json(value) -> str:
    return json.dumps(value if value is not None else None, ensure_ascii=False, sort_keys=True)


PROVENANCE_EXPORT = tuple(PROVENANCE_COLUMNS)


def _provenance_columns(examples: pd.DataFrame) -> pd.DataFrame:
    """The provenance the example file carried (flask import keeps it), flattened for export."""
    prov = examples["provenance"].map(lambda v: v or {})
    return pd.DataFrame(
        {
            "system_label": examples["system_label"].fillna(""),
            "provenance_model": prov.map(lambda v: v.get("model") or ""),
            "weights_sha256": prov.map(lambda v: v.get("weights_sha256") or ""),
            "code_version": prov.map(lambda v: v.get("code_version") or ""),
            "provenance": examples["provenance"].map(lambda v: _json(v) if v else ""),
        },
        index=examples.index,
    )


def build_tables(raw: dict, options: ExportOptions, key: bytes) -> dict[str, pd.DataFrame]:
    """The exported tables from what `collect` read."""
    rounds, reveals, examples, players = (
        raw["rounds"],
        raw["reveals"],
        raw["examples"],
        raw["players"],
    )
    examples = examples.copy()
    examples["decoding_strategy"] = examples["decoding"].map(
        lambda d: (d or {}).get("strategy") or ""
    )
    examples["splitter"] = examples["source"].map(lambda s: (s or {}).get("splitter") or "")
    examples["prompt_body"] = [
        SEP.join(s[:b]) for s, b in zip(examples["sentences"], examples["boundary"], strict=True)
    ]
    examples["gen_body"] = [
        SEP.join(s[b:]) for s, b in zip(examples["sentences"], examples["boundary"], strict=True)
    ]
    flat = _provenance_columns(examples)
    examples = examples.drop(columns=["system_label", "provenance"]).join(flat)
    by_example = examples.set_index("example_pk")

    names = {pid: pseudonym(int(pid), key) for pid in players["player_id"]}
    answers = players.set_index("player_id")
    r = rounds.join(by_example, on="example_pk")
    started = pd.to_datetime(r["started_at"], utc=True)
    answered = pd.to_datetime(r["answered_at"], utc=True)
    if len(reveals):
        rv = reveals.join(rounds.set_index("round_id")["started_at"], on="round_id")
        offsets = (
            (
                pd.to_datetime(rv["revealed_at"], utc=True)
                - pd.to_datetime(rv["started_at"], utc=True)
            )
            .dt.total_seconds()
            .round(3)
        )
        lists = offsets.groupby(rv["round_id"]).agg(list).map(json.dumps)
    else:
        lists = pd.Series(dtype="object")
    is_check = r["round_kind"] == "attention_check"
    out = pd.DataFrame(
        {
            "date": answered,
            "model": r["system"],
            "dataset": r["category"],
            "annotator": r["player_id"].map(names),
            "group": r["player_kind"].fillna("public"),
            "dec_strat_value": r["decoding_p"].astype("float64"),
            "predicted_boundary_index": r["guess"].astype("int64") - 1,
            "true_boundary_index": r["boundary"].astype("int64") - 1,
            "points": r["points"].astype("int64"),
            "reason": r["reasons"].map(
                lambda v: json.dumps([x for x in (v or []) if x in REASONS])
            ),
            "prompt": r["example_id"],
            "prompt_body": r["prompt_body"],
            "generation": r["example_id"],
            "gen_body": r["gen_body"],
            # The survey's answers (read_guide is not recorded): -1 where not given.
            **{
                name: r["player_id"].map(answers[name].dropna()).fillna(NO_SURVEY).astype("int64")
                if name in survey.NAMES
                else NO_SURVEY
                for name in list(ROFT_ROUND_COLUMNS)[14:]
            },
            "explanation": r["explanation"].fillna(""),
            "example_id": r["example_id"],
            "category": r["category"],
            "system": r["system"],
            "n_sentences": r["n_sentences"].astype("int64"),
            "boundary": r["boundary"].astype("int64"),
            "guess": r["guess"].astype("int64"),
            "decoding_p": r["decoding_p"].astype("float64"),
            "decoding_strategy": r["decoding_strategy"],
            "seed": r["seed"].astype("Int64"),
            "splitter": r["splitter"],
            "order_index": r["order_index"].astype("int64"),
            "study_round": r["study_round"].astype("Int64"),
            "chosen_category": r["chosen_category"],
            "started_at": started,
            "reveal_seconds": r["round_id"].map(lists).fillna("[]"),
            "seconds": (answered - started).dt.total_seconds().round(3),
            "attention_check": is_check,
            "attention_passed": (r["guess"] == r["boundary"])
            .astype("boolean")
            .where(is_check, pd.NA),
            "participant_kind": r["player_kind"].fillna("public"),
            "study": r["study"].fillna(""),
            "likert_fluency": _rating(r["ratings"], "fluency"),
            "likert_commonsense": _rating(r["ratings"], "commonsense"),
            "ratings": r["ratings"].map(lambda v: _json(v) if v else ""),
            "round_id": r["round_id"].astype("int64"),
            "set_kind": r["set_kind"].fillna(""),
            "explanation_upvotes": r["upvotes"].fillna(0).astype("int64"),
            "explanation_hidden": r["explanation_hidden_at"].notna(),
            "participant_status": r["participant_status"].map(_text_value),
            "decision": r["decision"].fillna(""),
            "uncounted": r["uncounted"].fillna(""),
            "confidence": r["confidence"].astype("Int64"),
            "explanation_pasted": r["explanation_pasted"].astype("boolean"),
            "typing_ms": r["typing_ms"].astype("Int64"),
            "typed_chars": r["typed_chars"].astype("Int64"),
            "condition": r["condition"],
            "detector_hints": r["detector_hints"].map(lambda v: _json(v) if v else None),
            **{name: r[name] for name in PROVENANCE_EXPORT},
        },
        index=r.index,
    )
    if options.private:
        usernames = players.set_index("player_id")["username"]
        out["username"] = r["player_id"].map(usernames).fillna("")
        out["worker_id"] = r["worker_id"].fillna("")
        out["platform_status"] = r["platform_status"].fillna("")

    answered_counts = rounds.groupby("example_pk").size()
    ex = pd.DataFrame(
        {
            "example_id": examples["example_id"],
            "category": examples["category"],
            "system": examples["system"],
            "n_sentences": examples["n_sentences"].astype("int64"),
            "boundary": examples["boundary"].astype("int64"),
            "true_boundary_index": examples["boundary"].astype("int64") - 1,
            "all_human": examples["boundary"] == examples["n_sentences"],
            "decoding_strategy": examples["decoding_strategy"],
            "decoding_p": examples["decoding_p"].astype("float64"),
            "decoding": examples["decoding"].map(_json),
            "seed": examples["seed"].astype("Int64"),
            "splitter": examples["splitter"],
            "source": examples["source"].map(_json),
            "meta": examples["meta"].map(_json),
            "text": examples["sentences"].map(SEP.join),
            "sentences": examples["sentences"].map(_json),
            "answered_rounds": examples["example_pk"]
            .map(answered_counts)
            .fillna(0)
            .astype("int64"),
            "imported_at": pd.to_datetime(examples["imported_at"], utc=True),
            **{name: examples[name] for name in PROVENANCE_EXPORT},
        }
    )

    per_player = rounds.groupby("player_id").agg(
        rounds=("round_id", "size"), points=("points", "sum")
    )
    pl = pd.DataFrame(
        {
            "annotator": players["player_id"].map(names),
            "registered": ~players["is_guest"].astype(bool),
            "consented": players["research_consent_at"].notna(),
            "joined_on": pd.to_datetime(players["created_at"], utc=True).dt.strftime("%Y-%m-%d"),
            "rounds": players["player_id"].map(per_player["rounds"]).fillna(0).astype("int64"),
            "points": players["player_id"].map(per_player["points"]).fillna(0).astype("int64"),
            "unlisted_reason": players["unlisted_reason"]
            .where(players["unlisted_at"].notna(), "")
            .fillna(""),
            "restored": players["restored_at"].notna(),
        }
    )
    if options.private:
        pl["username"] = players["username"].fillna("")
    pl = pl.sort_values("annotator").reset_index(drop=True)
    votes = raw["votes"]
    vt = pd.DataFrame(
        {
            "round_id": votes["round_id"].astype("int64"),
            "voter": votes["voter_id"].map(lambda pid: pseudonym(int(pid), key)),
            "voted_on": pd.to_datetime(votes["voted_at"], utc=True).dt.strftime("%Y-%m-%d"),
        },
        columns=list(VOTE_COLUMNS),
    )
    return {
        "rounds": out.reset_index(drop=True),
        "examples": ex,
        "players": pl,
        "votes": vt,
        "workers": _workers_table(raw["workers"], options, key, raw.get("demographics")),
    }


def _workers_table(
    workers: pd.DataFrame, options: ExportOptions, key: bytes, answers: dict | None = None
) -> pd.DataFrame:
    """One row per study participant, sorted by study and pseudonym (not by arrival), with
    `answers` (worker id: demographic columns, from the platform's export) where given."""
    answers = answers or {}
    wk = pd.DataFrame(
        {
            "annotator": workers["player_id"].map(lambda pid: pseudonym(int(pid), key)),
            "study": workers["study"],
            "participant_status": workers["participant_status"].map(_text_value),
            "decision": workers["decision"].fillna(""),
            **{
                name: workers[name].fillna(0).astype("int64")
                for name in ("rounds_done", "checks_passed", "checks_failed", "checks_void")
            },
            **{
                name: pd.to_datetime(workers[name], utc=True)
                for name in ("started_at", "finished_at", "left_at")
            },
            "condition": workers["condition"],
            **{
                name: workers["worker_id"].map(lambda w, n=name: answers.get(w, {}).get(n, ""))
                for name in demographics.COLUMNS
            },
        },
        columns=list(WORKER_COLUMNS),
    )
    if options.private:
        wk["worker_id"] = workers["worker_id"].fillna("")
        wk["platform_status"] = workers["platform_status"].fillna("")
    return wk.sort_values(["study", "annotator"]).reset_index(drop=True)


def schema(private: bool = False) -> dict:
    """Every table's columns: name, type, unit, description (the data dictionary)."""
    extra = PRIVATE_COLUMNS if private else {}
    study_extra = PRIVATE_STUDY_COLUMNS if private else {}
    tables = {
        "rounds": {**ROFT_ROUND_COLUMNS, **RICH_ROUND_COLUMNS, **extra, **study_extra},
        "examples": EXAMPLE_COLUMNS,
        "players": {**PLAYER_COLUMNS, **extra},
        "votes": VOTE_COLUMNS,
        "workers": {**WORKER_COLUMNS, **study_extra},
    }
    return {
        "private": private,
        "tables": {
            name: [
                {"name": col, "type": t, "unit": unit, "description": desc}
                for col, (t, unit, desc) in columns.items()
            ]
            for name, columns in tables.items()
        },
    }


def schema_markdown(private: bool = False) -> str:
    doc = schema(private)
    lines = ["# Data dictionary", ""]
    if private:
        lines += [
            "**PRIVATE EXPORT: the rounds and players tables contain usernames, and rounds and "
            "workers the crowd workers' platform ids.**",
            "",
        ]
    lines += [
        "Positions: `boundary` is the index of the first machine-written sentence (N = all human) "
        "and `guess` the flagged sentence (N = 'all human'); RoFT's `true_boundary_index` and "
        "`predicted_boundary_index` are both one less. The first 20 columns of `rounds` are those "
        "of the public RoFT dataset, in its order.",
        "",
    ]
    lines += card.field_tables(doc, "##")
    return "\n".join(lines)


def typed(frame: pd.DataFrame, columns: list[dict]) -> pd.DataFrame:
    """The table with exactly the schema's columns, in order, each of its schema type
    (card.TYPES): integers stay int64 (Int64 where a value is missing), booleans bool (boolean),
    strings str, timestamps UTC; an empty table keeps these types too."""
    out = {}
    for column in columns:
        name, kind = column["name"], card.TYPES[column["type"]]
        values = frame[name] if name in frame else pd.Series([None] * len(frame), dtype=object)
        values = values.reset_index(drop=True)
        if column["type"] == "timestamp":
            out[name] = pd.to_datetime(values, utc=True).astype(kind.pandas)
        elif column["type"] in ("string", "date"):
            out[name] = values.astype(object).where(values.notna(), None).astype(kind.pandas)
        else:
            dtype = kind.nullable_pandas if values.isna().any() else kind.pandas
            out[name] = values.astype(dtype)
    return pd.DataFrame(out, columns=[c["name"] for c in columns])


def arrow_schema(columns: list[dict]) -> pa.Schema:
    return pa.schema([pa.field(c["name"], card.TYPES[c["type"]].arrow) for c in columns])


def _write_parquet(frame: pd.DataFrame, columns: list[dict], path: Path) -> None:
    """Parquet with the schema's Arrow types (a 0-row table keeps them; no null-typed columns).
    An empty table is written with no row group at all: readers such as `datasets` take the
    batch size from the first row group, and a row group of 0 rows stops them."""
    table = pa.Table.from_pandas(frame, schema=arrow_schema(columns), preserve_index=False)
    if table.num_rows == 0:
        with pq.ParquetWriter(path, table.schema):
            pass
        return
    pq.write_table(table, path)


def _readme(manifest: dict) -> list[str]:
    lines = []
    if manifest["private"]:
        lines += [
            "# PRIVATE RoFT export: contains usernames and worker ids",
            "",
            "This export was made with --private: the `username` and `worker_id` columns "
            "identify players and crowd workers. Do not share it outside the research team.",
        ]
    else:
        lines += [
            "# RoFT research export (pseudonymised)",
            "",
            "Players appear only as keyed pseudonyms; no usernames, emails, passwords or sessions.",
        ]
    lines += [
        "",
        f"Made {manifest['created_at']} as {manifest['format']}: "
        f"{manifest['counts']['rounds']} rounds, {manifest['counts']['examples']} examples, "
        f"{manifest['counts']['players']} players, "
        f"{manifest['counts'].get('workers', 0)} crowd workers.",
        "Rounds: "
        + (
            "ALL players, including those who did not consent to research use."
            if manifest["include_unconsented"]
            else "only players who consented to research use."
        ),
        f"Filters: {json.dumps(manifest['filters'])}.",
        "",
        "Columns: see schema.md (schema.json for programs) or the Fields section below; "
        "croissant.json describes the same in Croissant 1.1. Load in pandas with "
        "`analysis.load.load(folder)` or read rounds.* directly; run "
        "`python -m analysis report FOLDER --out REPORT` for the standard report.",
        "",
    ]
    if plan := manifest.get("preregistration"):
        lines += [
            f"Analysis plan: `{plan['file']}` holds the preregistration of study "
            f"`{plan['study']}` as frozen before its data ({plan['versions']} version(s); the "
            f"latest's SHA-256 of its canonical JSON is `{plan['sha256']}`). Workers' and "
            "rounds' `condition` is the condition each worker was randomised to.",
            "",
        ]
    return lines


def _for_text(frame: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """Timestamps as ISO 8601 text (CSV and SQLite have no time zone-aware type)."""
    frame = frame.copy()
    for name, (kind, _unit, _desc) in columns.items():
        if kind == "timestamp" and name in frame:
            frame[name] = _iso(frame[name])
    return frame


def write(tables: dict[str, pd.DataFrame], options: ExportOptions, manifest: dict) -> list[str]:
    folder = Path(options.out)
    doc = schema(options.private)
    specs = {
        name: {c["name"]: (c["type"], c["unit"], c["description"]) for c in cols}
        for name, cols in doc["tables"].items()
    }
    files = []
    tables = {name: typed(frame, doc["tables"][name]) for name, frame in tables.items()}
    if options.format == "csv":
        for name, frame in tables.items():
            neutralise_frame(_for_text(frame, specs[name])).to_csv(
                folder / f"{name}.csv", index=False
            )
            files.append(f"{name}.csv")
    elif options.format == "parquet":
        for name, frame in tables.items():
            _write_parquet(frame, doc["tables"][name], folder / f"{name}.parquet")
            files.append(f"{name}.parquet")
    else:
        path = folder / SQLITE_NAME
        with sqlite3.connect(path) as conn:
            for name, frame in tables.items():
                text = _for_text(frame, specs[name])
                for column in text.columns:
                    if str(text[column].dtype) in ("boolean", "bool"):
                        text[column] = text[column].astype("Int64")
                text.to_sql(name, conn, index=False)
            pd.DataFrame([{"key": k, "value": json.dumps(v)} for k, v in manifest.items()]).to_sql(
                "export_info", conn, index=False
            )
        conn.close()
        files.append(SQLITE_NAME)
    (folder / "schema.json").write_text(json.dumps(doc, indent=2))
    (folder / "schema.md").write_text(schema_markdown(options.private))
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2))
    license = card.license_id(current_app.config.get("EXPORT_LICENSE"))
    sizes = {name: (folder / name).stat().st_size for name in files}
    (folder / card.CARD_NAME).write_text(
        card.card(doc, manifest, sizes, license, _readme(manifest)), encoding="utf-8"
    )
    digests = {name: card.sha256_of(folder / name) for name in files}
    # The project's own address from configuration; none rather than a made-up one.
    url = current_app.config.get("EXPORT_DATASET_URL") or current_app.config.get("PUBLIC_URL")
    metadata = card.croissant(doc, manifest, digests, license, url)
    (folder / card.CROISSANT_NAME).write_text(
        json.dumps(metadata, indent=2, ensure_ascii=False), encoding="utf-8"
    )
    return [*files, "schema.json", "schema.md", "manifest.json", "README.md", card.CROISSANT_NAME]


def _plan_document(options: ExportOptions, workers: pd.DataFrame) -> dict | None:
    """The frozen analysis plan of the exported study: the one asked for with --study, or the
    only study the export's workers took part in."""
    slugs = [options.study] if options.study else sorted(set(workers["study"]))
    if len(slugs) != 1:
        return None
    study = db.session.scalar(select(Study).where(Study.slug == slugs[0]))
    return preregistration.export_document(study) if study is not None else None


def export(options: ExportOptions, progress: Callable[[str], None] | None = None) -> ExportResult:
    """Make one export folder (see the module docstring)."""
    if options.format not in FORMATS:
        raise ExportError(f"format must be one of {', '.join(FORMATS)}")
    folder = Path(options.out)
    if folder.exists() and any(folder.iterdir()) and not options.overwrite:
        raise ExportError(f"{folder} is not empty; choose a new folder or pass --overwrite")
    answers = None
    if options.demographics is not None:
        if not options.study:
            raise ExportError("--demographics needs --study: the file is one study's export")
        try:
            answers = demographics.read(Path(options.demographics))
        except demographics.DemographicsError as error:
            raise ExportError(str(error)) from None
    raw = collect(options, progress)
    raw["demographics"] = answers
    if options.overwrite and folder.exists():
        for name in (*KNOWN_FILES, SQLITE_NAME):
            (folder / name).unlink(missing_ok=True)
    tables = build_tables(raw, options, pseudonym_key())
    if progress:
        progress("tables")
    counts = {name: len(frame) for name, frame in tables.items()}
    manifest = {
        "source": "roft-site",
        "created_at": utcnow().isoformat(),
        "format": options.format,
        "private": options.private,
        "include_unconsented": options.include_unconsented,
        "filters": {
            "category": list(options.categories),
            "since": options.since.isoformat() if options.since else None,
            "study": options.study,
        },
        "counts": counts,
        "pseudonyms": "p_ + first 20 hex digits of HMAC-SHA256(key, 'roft-player:<id>'); key = "
        "EXPORT_PSEUDONYM_KEY or else SECRET_KEY (not stored here)",
        "positions": "true_boundary_index = boundary - 1; predicted_boundary_index = guess - 1",
        "survey": "recipe_familiarity, news_familiarity, stories_familiarity, gen_familiarity and "
        "native_speaker are the player's answers on the optional /survey page (-1 = not given); "
        "read_guide is not recorded (-1)",
        "task_instruction": TASK_INSTRUCTION,
        "csv_cells": CSV_CELLS,
    }
    plan = _plan_document(options, tables["workers"])
    if plan is not None:
        latest = plan["versions"][-1]
        manifest["preregistration"] = {
            "file": PLAN_NAME,
            "study": plan["study"],
            "versions": len(plan["versions"]),
            "sha256": latest["sha256"],
        }
    if options.study:
        # The study's own facts (pay, limits, checks, exclusions, its words as shown).
        joined = None
        if answers is not None:
            ids = raw["workers"]["worker_id"]
            joined = {
                "file": Path(options.demographics).name,
                "columns": list(demographics.COLUMNS),
                "workers_matched": int(ids.isin(answers).sum()),
                "workers": len(ids),
                "rows_of_other_workers": len(set(answers) - set(ids)),
            }
        manifest["study"] = study_facts.study_facts(options.study, joined)
        manifest["task_instruction"] = study_facts.instruction_text(manifest["study"])
    folder.mkdir(parents=True, exist_ok=True)
    if plan is not None:
        (folder / PLAN_NAME).write_text(json.dumps(plan, indent=2), encoding="utf-8")
    files = write(tables, options, manifest)
    if plan is not None:
        files.append(PLAN_NAME)
    if progress:
        progress("files")
    return ExportResult(folder=folder, files=files, counts=counts)
