"""The optional player survey: validation, storage, the page, and the research export."""

from __future__ import annotations

import pandas as pd
import pytest
from sqlalchemy import func, select

from app.accounts import service, survey
from app.errors import BadRequest
from app.extensions import db
from app.models import Player, PlayerSurvey
from app.research import export_options, exports, pseudonyms
from tests import factories
from tests.conftest import csrf_token
from tests.research.helpers import consent, play
from tests.test_accounts import signup
from tests.test_game_http import start

ALL = {
    "recipe_familiarity": "5",
    "news_familiarity": "1",
    "stories_familiarity": "3",
    "gen_familiarity": "4",
    "native_speaker": "0",
}


def surveys() -> int:
    return db.session.scalar(select(func.count()).select_from(PlayerSurvey))


# -- pure validation -------------------------------------------------------------------------


def test_parse_answers_gives_numbers_and_none_for_not_given():
    assert survey.parse_answers(ALL) == {name: int(value) for name, value in ALL.items()}
    assert survey.parse_answers({}) == dict.fromkeys(survey.NAMES)
    assert survey.parse_answers({"native_speaker": "1", "news_familiarity": ""}) == {
        **dict.fromkeys(survey.NAMES),
        "native_speaker": 1,
    }


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("news_familiarity", "0"),
        ("news_familiarity", "6"),
        ("gen_familiarity", "5"),
        ("native_speaker", "2"),
        ("native_speaker", "-1"),
        ("recipe_familiarity", "3.0"),
        ("recipe_familiarity", " 3"),
        ("recipe_familiarity", "three"),
        ("stories_familiarity", "3\x00"),
        ("stories_familiarity", "1" * 100_000),
    ],
)
def test_parse_answers_refuses_other_values(name, value):
    with pytest.raises(BadRequest, match="Please choose one of the answers offered"):
        survey.parse_answers({**ALL, name: value})


# -- the service, on the real database ------------------------------------------------------


def test_save_survey_stores_and_replaces_the_answers(ctx):
    player = factories.player()
    assert service.survey_of(player) is None
    service.save_survey(player, survey.parse_answers(ALL))
    first = service.survey_of(player)
    assert (first.recipe_familiarity, first.native_speaker) == (5, 0)
    assert first.answered_at is not None
    service.save_survey(player, survey.parse_answers({"gen_familiarity": "2"}))
    db.session.expire_all()
    row = service.survey_of(player)
    assert row.gen_familiarity == 2
    assert row.recipe_familiarity is None and row.native_speaker is None
    assert surveys() == 1


def test_deleting_a_player_deletes_their_survey(ctx):
    player = factories.player()
    service.save_survey(player, survey.parse_answers(ALL))
    db.session.execute(Player.__table__.delete().where(Player.id == player.id))
    db.session.commit()
    assert surveys() == 0


# -- the page --------------------------------------------------------------------------------


def test_anonymous_visitors_are_sent_home(client):
    response = client.get("/survey")
    assert response.status_code == 302
    assert response.headers["Location"].endswith("/")


def test_a_guest_answers_changes_and_keeps_the_answers_after_signing_up(app, client):
    with app.app_context():
        factories.example(boundary=3)
    start(client)
    page = client.get("/survey").get_data(as_text=True)
    assert page.count('type="radio"') == 5 + 5 + 5 + 4 + 2 + 5  # five "Prefer not to say"
    assert "Prefer not to say" in page and 'name="native_speaker" value="0"' in page
    token = csrf_token(client, "/survey")
    response = client.post("/survey", data={"csrf_token": token, **ALL})
    assert response.status_code == 302
    page = client.get("/survey").get_data(as_text=True)
    assert 'name="recipe_familiarity" value="5" checked' in page
    assert 'name="native_speaker" value="0" checked' in page
    changed = {**ALL, "native_speaker": "", "news_familiarity": "2"}
    assert client.post("/survey", data={"csrf_token": token, **changed}).status_code == 302
    assert signup(client, username="grace").status_code == 302
    with app.app_context():
        (row,) = db.session.scalars(select(PlayerSurvey)).all()
        player = db.session.scalar(select(Player).where(Player.username == "grace"))
        assert row.player_id == player.id
        assert (row.news_familiarity, row.native_speaker) == (2, None)
    assert "/survey" in client.get("/profile").get_data(as_text=True)


@pytest.mark.parametrize(
    "bad", [{"news_familiarity": "9"}, {"native_speaker": "\x00"}, {"gen_familiarity": "x" * 5000}]
)
def test_invalid_answers_get_a_400_and_store_nothing(app, client, bad):
    with app.app_context():
        factories.example(boundary=3)
    start(client)
    token = csrf_token(client, "/survey")
    response = client.post("/survey", data={"csrf_token": token, **ALL, **bad})
    assert response.status_code == 400
    assert "Please choose one of the answers offered" in response.get_data(as_text=True)
    with app.app_context():
        assert surveys() == 0


def test_a_post_without_csrf_token_is_refused(app, client):
    with app.app_context():
        factories.example(boundary=3)
    start(client)
    assert client.post("/survey", data=ALL).status_code == 400
    with app.app_context():
        assert surveys() == 0


# -- the research export ---------------------------------------------------------------------


def test_export_carries_the_answers_and_minus_one_when_not_given(app, tmp_path):
    with app.app_context():
        factories.example(boundary=3)
        answered = consent(factories.player())
        partial = consent(factories.player())
        silent = consent(factories.player())
        service.save_survey(answered, survey.parse_answers(ALL))
        service.save_survey(partial, survey.parse_answers({"native_speaker": "1"}))
        for player in (answered, partial, silent):
            play(player, 3)
        key = pseudonyms.pseudonym_key()
        names = [pseudonyms.pseudonym(p.id, key) for p in (answered, partial, silent)]
        exports.export(export_options.ExportOptions(out=tmp_path / "out", format="csv"))
    rounds = pd.read_csv(tmp_path / "out" / "rounds.csv").set_index("annotator")
    columns = [*survey.NAMES, "read_guide"]
    expected = [
        {**{name: int(value) for name, value in ALL.items()}, "read_guide": -1},
        {**dict.fromkeys(columns, -1), "native_speaker": 1},
        dict.fromkeys(columns, -1),
    ]
    for name, answers in zip(names, expected, strict=True):
        assert rounds.loc[name, columns].to_dict() == answers
