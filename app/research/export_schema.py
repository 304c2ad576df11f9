"""The research export's data dictionary: every table's columns with their type, unit and
description (declarative tables), and the functions that give every exported file those types.

`schema()` is the one source: schema.md, schema.json, the dataset card and the Croissant metadata
(app.research.card) are all made from it, and `typed` / `arrow_schema` give each table exactly
its columns and types in every format, also when it is empty.
"""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from app.research import card, demographics

SEP = "_SEP_"
NO_SURVEY = -1
SURVEY_NOTE = "the player's answer on the optional /survey page; -1 = not given"


CONDITION_NOTE = (
    "the study condition the worker was randomised to at entry ([[conditions]] in the study "
    "file); empty outside studies with conditions"
)


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
