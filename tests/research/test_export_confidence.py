"""The confidence of each guess in the research export: every format gives back what the
database holds, empty (null) where the player did not say; the data dictionary and the dataset
card list it."""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest

from app.extensions import db
from app.game import answers, reveals
from app.models import Round
from app.research import export_options, exports
from tests import factories
from tests.research.helpers import consent


def _answer(player, guess: int, confidence: str | None) -> Round:
    round_ = factories.started(player, "random")
    while round_.revealed < guess + 1:
        round_ = reveals.reveal_next(player, round_.id, round_.revealed)
    answer = answers.parse_answer("machine", round_.revealed, ["grammar"], "", confidence)
    answers.submit_answer(player, round_.id, answer)
    return db.session.get(Round, round_.id)


@pytest.fixture
def sure(research_app):
    with research_app.app_context():
        for boundary in (3, 4, 5, 6):
            factories.example(boundary=boundary)
        player = consent(factories.player())
        played = {
            _answer(player, guess, confidence).id: confidence
            for guess, confidence in ((3, "90"), (5, None), (2, "50"), (7, "70"))
        }
        stored = dict(db.session.query(Round.id, Round.confidence).all())
    assert stored == {k: (int(v) if v else None) for k, v in played.items()}
    return research_app, stored


def _read(folder, fmt: str) -> pd.DataFrame:
    if fmt == "csv":
        return pd.read_csv(folder / "rounds.csv")
    if fmt == "parquet":
        return pd.read_parquet(folder / "rounds.parquet")
    with sqlite3.connect(folder / "roft-export.sqlite") as conn:
        return pd.read_sql("SELECT * FROM rounds", conn)


@pytest.mark.parametrize("fmt", ["csv", "parquet", "sqlite"])
def test_confidence_round_trips_and_is_null_when_not_given(sure, tmp_path, fmt):
    app, stored = sure
    with app.app_context():
        exports.export(export_options.ExportOptions(out=tmp_path / fmt, format=fmt))
    frame = _read(tmp_path / fmt, fmt)
    got = {
        int(round_id): (None if pd.isna(value) else int(value))
        for round_id, value in zip(frame["round_id"], frame["confidence"], strict=True)
    }
    assert got == stored
    assert sum(value is None for value in got.values()) == 1
    if fmt == "parquet":
        assert str(frame["confidence"].dtype) == "Int64"  # integers, not floats


def test_confidence_is_in_the_dictionary_and_the_card(sure, tmp_path):
    app, _ = sure
    with app.app_context():
        exports.export(export_options.ExportOptions(out=tmp_path / "x", format="csv"))
    schema = json.loads((tmp_path / "x" / "schema.json").read_text())
    column = next(c for c in schema["tables"]["rounds"] if c["name"] == "confidence")
    assert column["type"] == "integer" and column["unit"] == "percent"
    row = "| `confidence` | integer | percent |"
    assert row in (tmp_path / "x" / "README.md").read_text()
    assert row in (tmp_path / "x" / "schema.md").read_text()


@pytest.mark.parametrize("fmt", ["csv", "parquet", "sqlite"])
def test_typing_signals_round_trip_and_stay_empty_when_not_reported(sure, tmp_path, fmt):
    app, stored = sure
    first, second, *_ = sorted(stored)
    with app.app_context():
        for round_id, typing in ((first, (True, 4200, 17)), (second, (False, None, 0))):
            row = db.session.get(Round, round_id)
            row.explanation_pasted, row.typing_ms, row.typed_chars = typing
        db.session.commit()
        exports.export(export_options.ExportOptions(out=tmp_path / fmt, format=fmt))
    frame = _read(tmp_path / fmt, fmt).set_index("round_id")

    def value(round_id: int, column: str):
        got = frame.loc[round_id, column]
        return None if pd.isna(got) else got

    assert bool(value(first, "explanation_pasted")) is True
    assert (value(first, "typing_ms"), value(first, "typed_chars")) == (4200, 17)
    assert bool(value(second, "explanation_pasted")) is False
    assert (value(second, "typing_ms"), value(second, "typed_chars")) == (None, 0)
    for other in sorted(stored)[2:]:
        assert [value(other, c) for c in ("explanation_pasted", "typing_ms", "typed_chars")] == [
            None,
            None,
            None,
        ]
