"""Building a research export's tables (rounds, examples, players, votes, workers) from what
app.research.export_read read, with players as keyed pseudonyms (app.research.pseudonyms)."""

from __future__ import annotations

import json

import pandas as pd

from app.accounts import survey
from app.game.reasons import REASONS
from app.research import demographics
from app.research.export_options import ExportOptions
from app.research.export_schema import (
    NO_SURVEY,
    PROVENANCE_COLUMNS,
    ROFT_ROUND_COLUMNS,
    SEP,
    VOTE_COLUMNS,
    WORKER_COLUMNS,
)
from app.research.pseudonyms import pseudonym


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
    rounds, players = raw["rounds"], raw["players"]
    examples = _prepared_examples(raw["examples"])
    names = {pid: pseudonym(int(pid), key) for pid in players["player_id"]}
    return {
        "rounds": _rounds_table(rounds, raw["reveals"], examples, players, names, options),
        "examples": _examples_table(examples, rounds),
        "players": _players_table(players, rounds, names, options),
        "votes": _votes_table(raw["votes"], key),
        "workers": _workers_table(raw["workers"], options, key, raw.get("demographics")),
    }


def _prepared_examples(examples: pd.DataFrame) -> pd.DataFrame:
    """The examples as read, with the columns the rounds and examples tables share: decoding
    strategy, splitter, prompt and generation bodies and the flattened provenance."""
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
    return examples


def _reveal_lists(rounds: pd.DataFrame, reveals: pd.DataFrame) -> pd.Series:
    """Round id -> JSON list of the seconds after the round's start at which each sentence was
    shown."""
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
    return lists


def _rounds_table(
    rounds: pd.DataFrame,
    reveals: pd.DataFrame,
    examples: pd.DataFrame,
    players: pd.DataFrame,
    names: dict,
    options: ExportOptions,
) -> pd.DataFrame:
    """One row per answered round, its columns in the schema's order. One function: its body is
    a declarative table, one line per exported column."""
    by_example = examples.set_index("example_pk")
    answers = players.set_index("player_id")
    r = rounds.join(by_example, on="example_pk")
    started = pd.to_datetime(r["started_at"], utc=True)
    answered = pd.to_datetime(r["answered_at"], utc=True)
    lists = _reveal_lists(rounds, reveals)
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

    return out.reset_index(drop=True)


def _examples_table(examples: pd.DataFrame, rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per exported example, with how many exported rounds answered it."""
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
    return ex


def _players_table(
    players: pd.DataFrame, rounds: pd.DataFrame, names: dict, options: ExportOptions
) -> pd.DataFrame:
    """One row per player of the exported rounds, sorted by pseudonym."""
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
    return pl


def _votes_table(votes: pd.DataFrame, key: bytes) -> pd.DataFrame:
    """One row per up-vote, the voter as a pseudonym."""
    vt = pd.DataFrame(
        {
            "round_id": votes["round_id"].astype("int64"),
            "voter": votes["voter_id"].map(lambda pid: pseudonym(int(pid), key)),
            "voted_on": pd.to_datetime(votes["voted_at"], utc=True).dt.strftime("%Y-%m-%d"),
        },
        columns=list(VOTE_COLUMNS),
    )
    return vt


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
