"""An optional confidence on each guess: stored with the answer, refused when odd, shown on the
profile as calibration and in the data download."""

from __future__ import annotations

import json

from app.extensions import db
from app.models import Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer_http, reveal_http, round_id_of, start_http


def start(client, token: str, category: str = "news") -> int:
    return round_id_of(start_http(client, token, category))


def read_to(client, token: str, round_id: int, shown: int) -> None:
    for seen in range(1, shown):
        reveal_http(client, token, round_id, seen)


def test_confidence_is_stored_refused_when_odd_and_shown_as_calibration(app):
    with app.app_context():
        factories.example(boundary=3)  # the 4th sentence is the first machine one
        factories.example(boundary=10, category_slug="stories")  # all human
    client = app.test_client()
    token = csrf_token(client)
    first = start(client, token)
    read_to(client, token, first, 4)
    page = client.get(f"/play/round/{first}").get_data(as_text=True)
    assert "How sure are you?" in page and 'name="confidence" value="90"' in page
    refused = answer_http(client, token, first, 4, reasons="hunch", confidence="85")
    assert refused.status_code == 400 and "50%, 70% or 90%" in refused.get_data(as_text=True)
    with app.app_context():
        assert db.session.get(Round, first).guess is None
    answer_http(client, token, first, 4, reasons="hunch", confidence="90")
    # An all-human text, answered at the last sentence, 70% sure.
    second = start(client, token, "stories")
    read_to(client, token, second, 10)
    assert answer_http(client, token, second, 10, "human", confidence="70").status_code == 302
    with app.app_context():
        assert db.session.get(Round, first).confidence == 90
        assert db.session.get(Round, second).confidence == 70
    profile = " ".join(client.get("/profile").get_data(as_text=True).split())
    assert (
        "When you said <strong>90%</strong> sure, you were exactly right <strong>100%</strong>"
        in profile
    )
    assert "said <strong>70%</strong> sure, you were exactly right <strong>100%</strong>" in profile
    download = json.loads(client.get("/account/data.json").text)
    assert [r["confidence"] for r in download["rounds"]] == [90, 70]


def test_a_guess_without_confidence_stays_without(app):
    with app.app_context():
        factories.example(boundary=3)
    client = app.test_client()
    token = csrf_token(client)
    round_id = start(client, token)
    read_to(client, token, round_id, 4)
    answer_http(client, token, round_id, 4, reasons="hunch")
    with app.app_context():
        assert db.session.get(Round, round_id).confidence is None
    assert "How sure you were" not in client.get("/profile").get_data(as_text=True)
    download = json.loads(client.get("/account/data.json").text)
    (row,) = download["rounds"]
    # null when not said; the flagged sentence counted from 1 as on the page (index 3 is the 4th).
    assert row["confidence"] is None and "confidence" in row
    assert row["guess"] == 3 and row["flagged_sentence"] == 4
    assert row["first_machine_sentence"] == 4
    assert "count from 1" in download["about"]["sentences"]
    assert "null" in download["about"]["confidence"]
