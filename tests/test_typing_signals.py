"""Paste and typing signals sent with an answer: cleaned on arrival (whole numbers, clamped, else
dropped), stored with the round, never a reason to refuse the answer; a hostile POST gets a
redirect or a 4xx, never a 500."""

from __future__ import annotations

import json
import re

import pytest
from werkzeug.datastructures import MultiDict

from app.extensions import db
from app.game.typing_signals import MAX_TYPED_CHARS, MAX_TYPING_MS, Typing, parse
from app.models import Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import reveal_http, start_http

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


def _round_at(client, token: str, shown: int = 4) -> int:
    started = start_http(client, token)
    round_id = int(re.search(r"/play/round/(\d+)", started.headers["Location"]).group(1))
    for seen in range(1, shown):
        reveal_http(client, token, round_id, seen)
    return round_id


def _stored(app, round_id: int) -> tuple:
    with app.app_context():
        row = db.session.get(Round, round_id)
        return row.guess, row.explanation_pasted, row.typing_ms, row.typed_chars


def test_signals_are_stored_with_the_answer_and_in_the_download(app):
    with app.app_context():
        factories.example(boundary=3)
    client = app.test_client()
    token = csrf_token(client)
    round_id = _round_at(client, token)
    answer = {
        "csrf_token": token,
        "seen": "4",
        "choice": "machine",
        "explanation": WORDS,
        "typing_pasted": "1",
        "typing_ms": "6100",
        "typing_chars": "12",
    }
    assert client.post(f"/play/round/{round_id}/answer", data=answer).status_code == 302
    assert _stored(app, round_id) == (3, True, 6100, 12)
    # Sent again (a replay with other numbers): the round keeps its first answer and signals.
    again = client.post(
        f"/play/round/{round_id}/answer", data={**answer, "typing_pasted": "0", "typing_ms": "1"}
    )
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
def test_a_hostile_post_is_stored_clamped_never_a_500(app, hostile, kept):
    with app.app_context():
        factories.example(boundary=3)
    client = app.test_client()
    token = csrf_token(client)
    round_id = _round_at(client, token)
    answered = client.post(
        f"/play/round/{round_id}/answer",
        data={"csrf_token": token, "seen": "4", "choice": "machine", "explanation": WORDS}
        | hostile,
    )
    assert answered.status_code == 302
    assert _stored(app, round_id) == (3, *kept)


def test_without_the_script_nothing_is_stored(app):
    with app.app_context():
        factories.example(boundary=3)
    client = app.test_client()
    token = csrf_token(client)
    round_id = _round_at(client, token)
    data = {"csrf_token": token, "seen": "4", "choice": "machine", "explanation": WORDS}
    client.post(f"/play/round/{round_id}/answer", data=data)
    assert _stored(app, round_id) == (3, None, None, None)
