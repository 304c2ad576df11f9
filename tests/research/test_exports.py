"""Exports: round trip through every format, privacy, consent, filters and the snapshot."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pandas as pd
import pytest
from sqlalchemy import select

from analysis.load import ROFT_COLUMNS, load
from analysis.report import headline
from app.extensions import db
from app.models import Example, Player, Round
from app.research import export_options, export_schema, exports
from tests import factories
from tests.research.helpers import consent, play


@pytest.fixture
def played(research_app):
    """Four texts, two consenting players, one who did not consent, one unanswered round."""
    with research_app.app_context():
        factories.example(boundary=3, category_slug="news")
        factories.example(boundary=5, category_slug="news", p=None)
        factories.example(boundary=10, category_slug="stories")
        factories.example(boundary=6, category_slug="stories", p=0.9)
        guest = consent(factories.player())
        named = consent(factories.player("zelda_secret_name", password="hunter2-Secret!"))
        refuser = factories.player("no_consent_user")
        waiting = consent(factories.player())
        for guess in (3, 7, 10, 2):
            play(guest, guess, explanation="the topic changes abruptly")
        for guess in (1, 5, 8):
            play(named, guess, reasons=("grammar", "repetition"))
        for guess in (4, 4):
            play(refuser, guess)

        factories.started(waiting, "random")  # never answered: not an annotation
    return research_app


def db_numbers() -> dict:
    rows = db.session.execute(
        select(Round.player_id, Round.example_id, Round.guess, Round.points, Example.boundary)
        .join(Example, Example.id == Round.example_id)
        .join(Player, Player.id == Round.player_id)
        .where(Round.guess.is_not(None), Player.research_consent_at.is_not(None))
    ).all()
    frame = pd.DataFrame(rows, columns=["player", "example", "guess", "points", "boundary"])
    return {
        "n_annotations": len(frame),
        "n_annotators": frame["player"].nunique(),
        "n_examples": frame["example"].nunique(),
        "exact_rate": float((frame.guess == frame.boundary).mean()),
        "mean_points": float(frame.points.mean()),
        "mean_signed_distance": float((frame.guess - frame.boundary).mean()),
        "points_mismatch_rows": 0,
        "duplicate_pairs": 0,
    }


@pytest.mark.parametrize("fmt", ["csv", "parquet", "sqlite"])
def test_round_trip_gives_the_database_numbers(played, tmp_path, fmt):
    with played.app_context():
        result = exports.export(export_options.ExportOptions(out=tmp_path / fmt, format=fmt))
        expected = db_numbers()
    assert result.counts["rounds"] == 7
    frame = load(tmp_path / fmt)
    assert headline(frame) == pytest.approx(expected)
    assert set(frame["source"]) == {"dump"}
    assert frame["seconds"].notna().all() and (frame["seconds"] >= 0).all()
    assert sorted(frame["order"].astype(int)) == [1, 1, 2, 2, 3, 3, 4]
    assert (
        frame.loc[frame.reasons != "", "reasons"].isin(["irrelevant", "grammar;repetition"]).all()
    )
    assert (frame["native_speaker"] == -1).all()


def test_rounds_table_starts_with_the_roft_columns(played, tmp_path):
    with played.app_context():
        exports.export(export_options.ExportOptions(out=tmp_path / "x", format="csv"))
    rounds = pd.read_csv(tmp_path / "x" / "rounds.csv")
    assert tuple(rounds.columns[:20]) == ROFT_COLUMNS
    assert (rounds["true_boundary_index"] == rounds["boundary"] - 1).all()
    assert (rounds["predicted_boundary_index"] == rounds["guess"] - 1).all()
    human = rounds[rounds["boundary"] == rounds["n_sentences"]]
    assert len(human) and (human["true_boundary_index"] == 9).all()
    assert human["gen_body"].isna().all()  # empty when all human
    first = rounds.iloc[0]
    assert len(str(first["prompt_body"]).split("_SEP_")) == first["boundary"]
    assert json.loads(first["reveal_seconds"])[0] == 0.0
    schema = json.loads((tmp_path / "x" / "schema.json").read_text())
    assert [c["name"] for c in schema["tables"]["rounds"]] == list(rounds.columns)
    assert (tmp_path / "x" / "schema.md").read_text().count("| `") >= len(rounds.columns)


def test_default_export_has_no_names_or_password_material(played, tmp_path):
    with played.app_context():
        hashes = [h for h in db.session.scalars(select(Player.password_hash)) if h]
        ids = list(db.session.scalars(select(Player.id)))
        for fmt in export_options.FORMATS:
            exports.export(export_options.ExportOptions(out=tmp_path / "out" / fmt, format=fmt))
    assert hashes
    blobs = [p.read_bytes() for p in (tmp_path / "out").rglob("*") if p.is_file()]
    # 5 common files each (schema.json, schema.md, manifest.json, README.md, croissant.json);
    # 5 tables in CSV and Parquet, one SQLite file.
    assert len(blobs) == 3 * 5 + 2 * 5 + 1
    for blob in blobs:
        for secret in ("zelda_secret_name", "no_consent_user", "hunter2", "scrypt", "pbkdf2"):
            assert secret.encode() not in blob
        for digest in hashes:
            assert digest.split("$")[-1].encode() not in blob
    players = pd.read_csv(tmp_path / "out" / "csv" / "players.csv")
    assert set(players.columns) == set(export_schema.PLAYER_COLUMNS)
    assert players["annotator"].str.match(r"^p_[0-9a-f]{20}$").all()
    assert not set(map(str, ids)) & set(players["annotator"])
    assert "pseudonymised" in (tmp_path / "out" / "csv" / "README.md").read_text()


def test_pseudonyms_are_stable_and_keyed(played, tmp_path, make_app):
    with played.app_context():
        exports.export(export_options.ExportOptions(out=tmp_path / "a"))
        exports.export(export_options.ExportOptions(out=tmp_path / "b"))
        played.config["EXPORT_PSEUDONYM_KEY"] = "another key"
        exports.export(export_options.ExportOptions(out=tmp_path / "c"))
    a, b, c = (pd.read_csv(tmp_path / x / "players.csv")["annotator"] for x in "abc")
    assert list(a) == list(b)
    assert not set(a) & set(c)


def test_private_export_names_players_and_says_so(played, tmp_path):
    with played.app_context():
        exports.export(export_options.ExportOptions(out=tmp_path / "p", private=True))
    rounds = pd.read_csv(tmp_path / "p" / "rounds.csv")
    assert "zelda_secret_name" in set(rounds["username"])
    card_body = (tmp_path / "p" / "README.md").read_text().split("\n---\n", 1)[1]
    assert card_body.lstrip().startswith("# PRIVATE")
    assert json.loads((tmp_path / "p" / "manifest.json").read_text())["private"] is True
    assert "hunter2" not in (tmp_path / "p" / "players.csv").read_text()


def test_consent_and_filters(played, tmp_path):
    with played.app_context():
        all_players = exports.export(
            export_options.ExportOptions(out=tmp_path / "all", include_unconsented=True)
        )
        news = exports.export(
            export_options.ExportOptions(out=tmp_path / "news", categories=["news"])
        )
        future = exports.export(
            export_options.ExportOptions(
                out=tmp_path / "f", since=datetime.now(UTC) + timedelta(days=1)
            )
        )
        with pytest.raises(export_options.ExportError, match="no study called 'pilot'"):
            exports.export(export_options.ExportOptions(out=tmp_path / "s", study="pilot"))
    assert all_players.counts["rounds"] == 9
    rounds = pd.read_csv(tmp_path / "news" / "rounds.csv")
    assert set(rounds["dataset"]) == {"news"} and news.counts["rounds"] == len(rounds)
    assert future.counts["rounds"] == 0


def test_export_reads_one_snapshot(played, tmp_path):
    """An example added while the export runs is not in it (the rounds were read before)."""
    with played.app_context():
        before = db.session.query(Example).count()

        def progress(step: str) -> None:
            if step == "rounds":
                factories.example(boundary=2, external_id="added-during-export")

        result = exports.export(export_options.ExportOptions(out=tmp_path / "s"), progress=progress)
        assert db.session.query(Example).count() == before + 1
    assert result.counts["examples"] == before
    examples = pd.read_csv(tmp_path / "s" / "examples.csv")
    assert "added-during-export" not in set(examples["example_id"])


def test_refuses_a_non_empty_folder(played, tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "keep.txt").write_text("mine")
    with played.app_context(), pytest.raises(export_options.ExportError, match="not empty"):
        exports.export(export_options.ExportOptions(out=tmp_path / "x"))


def test_flask_export_command(played, research_runner, tmp_path):
    out = tmp_path / "cli"
    result = research_runner.invoke(args=["export", str(out), "--format", "parquet"])
    assert result.exit_code == 0, result.output
    assert "Exported 7 rounds" in result.output
    assert (out / "rounds.parquet").exists()
    refused = research_runner.invoke(args=["export", str(tmp_path / "s"), "--study", "x"])
    assert refused.exit_code != 0 and "no study called 'x'" in refused.output
