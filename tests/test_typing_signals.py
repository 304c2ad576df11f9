"""Paste and typing signals sent with an answer: cleaned on arrival (whole numbers, clamped, else
dropped), stored with the round, never a reason to refuse the answer; a hostile POST gets a
redirect or a 4xx, never a 500."""

from __future__ import annotations

import json

import pytest
from werkzeug.datastructures import MultiDict

from app.extensions import db
from app.game.typing_signals import MAX_TYPED_CHARS, MAX_TYPING_MS, Typing, parse
from app.models import Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer_http, reveal_http, round_id_of, start_http

WORDS = "The sentence names a city that the story placed elsewhere."


@pytest.mark.parametrize(
    ("form", "expected"),
    [
        ({"typing_pasted": "1", "typing_ms": "5200", "typing_chars": "58"}, Typing(True, 5200, 58)),
        ({"typing_pasted": "0", "typing_ms": " 12 ", "typing_chars": "0"}, Typing(False, 12, 0)),
        ({}, Typing()),
        # Absurd numbers are clamped, negatives become 0.
        (
            {"typing_ms": "9" * 400, "typing_chars": "1" + "0" * 30},
            Typing(None, MAX_TYPING_MS, MAX_TYPED_CHARS),
        ),
        ({"typing_ms": "-5", "typing_chars": "-99999999999999999999"}, Typing(None, 0, 0)),
        # Anything but plain whole numbers is dropped.
        (
            {"typing_pasted": "yes", "typing_ms": "1e9", "typing_chars": "NaN"},
            Typing(None, None, None),
        ),
        ({"typing_ms": "3.5", "typing_chars": "٣"}, Typing(None, None, None)),  # Arabic digit
        ({"typing_ms": "", "typing_chars": "--3"}, Typing()),
        ({"typing_ms": "Infinity", "typing_chars": "0x10"}, Typing()),
    ],
)
def test_parse_keeps_whole_numbers_clamped_and_drops_the_rest(form, expected):
    assert parse(MultiDict(form), WORDS) == expected


def test_no_explanation_keeps_nothing():
    assert parse(MultiDict({"typing_pasted": "1", "typing_ms": "40"}), "") == Typing()


@pytest.fixture
def read_to_4(app, client) -> tuple[str, int]:
    """A guest's token and round on a text turning at its 4th sentence, read to that one."""
    with app.app_context():
        factories.example(boundary=3)
    token = csrf_token(client)
    round_id = round_id_of(start_http(client, token))
    for seen in range(1, 4):
        reveal_http(client, token, round_id, seen)
    return token, round_id


def _stored(app, round_id: int) -> tuple:
    with app.app_context():
        row = db.session.get(Round, round_id)
        return row.guess, row.explanation_pasted, row.typing_ms, row.typed_chars


def test_signals_are_stored_with_the_answer_and_in_the_download(app, client, read_to_4):
    token, round_id = read_to_4
    signals = {"typing_pasted": "1", "typing_ms": "6100", "typing_chars": "12"}
    assert answer_http(client, token, round_id, 4, explanation=WORDS, **signals).status_code == 302
    assert _stored(app, round_id) == (3, True, 6100, 12)
    # Sent again (a replay with other numbers): the round keeps its first answer and signals.
    signals |= {"typing_pasted": "0", "typing_ms": "1"}
    again = answer_http(client, token, round_id, 4, explanation=WORDS, **signals)
    assert again.status_code == 409
    assert _stored(app, round_id) == (3, True, 6100, 12)
    (row,) = json.loads(client.get("/account/data.json").text)["rounds"]
    assert row["typing"] == {"pasted": True, "typing_ms": 6100, "typed_chars": 12}
    assert "typing" in json.loads(client.get("/account/data.json").text)["about"]


@pytest.mark.parametrize(
    ("hostile", "kept"),
    [
        (
            {"typing_pasted": "1" * 5000, "typing_ms": "9" * 5000, "typing_chars": "-" + "9" * 99},
            (None, MAX_TYPING_MS, 0),
        ),
        ({"typing_pasted": "\x00", "typing_ms": "\x00", "typing_chars": "1\x00"}, (None,) * 3),
        (
            {"typing_ms": ["1", "2", "3"], "typing_chars": "99999999999999999999999999"},
            (None, 1, MAX_TYPED_CHARS),
        ),
    ],
)
def test_a_hostile_post_is_stored_clamped_never_a_500(app, client, read_to_4, hostile, kept):
    token, round_id = read_to_4
    assert answer_http(client, token, round_id, 4, explanation=WORDS, **hostile).status_code == 302
    assert _stored(app, round_id) == (3, *kept)


def test_without_the_script_nothing_is_stored(app, client, read_to_4):
    token, round_id = read_to_4
    answer_http(client, token, round_id, 4, explanation=WORDS)
    assert _stored(app, round_id) == (3, None, None, None)
