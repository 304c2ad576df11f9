"""The reveal that teaches: plain words for the kind of text, other players' answers, their
explanations, up-votes (once, not one's own, only after answering) and hiding by researchers."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from app.accounts import lifecycle
from app.extensions import db
from app.game import insights
from app.models import Example, Player, Round
from app.research import export_options, exports
from tests import factories
from tests.conftest import csrf_token, sign_in
from tests.game_helpers import (
    answer,
    answer_http,
    others_answer,
    play_over_http,
    reveal_http,
    start_http,
    teaching,
)

# -- plain words (pure) -----------------------------------------------------------------------


def test_describe_never_names_an_internal_system():
    assert insights.describe(10, 10, None, None).headline.startswith("All human")
    assert insights.describe(10, 10, None, None).after_tag is None
    baseline = insights.describe(4, 10, None, None)
    assert "different human-written text" in baseline.headline
    assert baseline.after_tag == "Other text"
    model = insights.describe(4, 10, {"strategy": "nucleus", "p": 0.4}, None)
    assert model.headline == (
        "A language model continued the text, choosing among its likelier words."
    )
    assert model.after_tag == "Machine" and model.settings == "nucleus sampling, p = 0.4"
    named = insights.describe(4, 10, {"strategy": "nucleus", "p": 0}, "GPT-2 XL")
    assert named.headline == (
        "GPT-2 XL, a language model, continued the text, always choosing its most likely next word."
    )
    assert named.settings == "greedy decoding"
    assert insights.describe_decoding(
        {"strategy": "sampling", "temperature": 1.0, "repetition_penalty": 1.2, "top_k": 40}
    ) == ("sampling, temperature 1, top-k 40, repetition penalty 1.2")


# -- over HTTP --------------------------------------------------------------------------------


@pytest.fixture
def text(app):
    """The id of one news text (machine from index 4) with four other answers.

    Requests must not run inside an outer app context (they would share its `g`), so the
    fixture leaves none behind.
    """
    with app.app_context():
        example = factories.example(
            boundary=4, system_name="internal-sys-7", system_label=None, p=0.4, passage="t"
        )
        others_answer(example, [4, 4, 5, 2], "It repeats the same phrase")
        return example.id


def test_the_spread_is_shown_with_its_count(app, text):
    client = app.test_client()
    token = csrf_token(client)
    page_round = play_over_http(client, token, 4, reasons="repetition")
    page = client.get(f"/play/round/{page_round}").get_data(as_text=True)
    assert "internal-sys-7" not in page
    assert "A language model continued the text, choosing among its likelier words." in page
    assert "<summary>How it was generated</summary>" in page and "nucleus sampling, p = 0.4" in page
    # Exact (5 points) beats the one who was late and the one too early: 2 of 4.
    assert "You did better than 50% of the 4 other players on this text." in page
    with app.app_context():
        others_answer(db.session.get(Example, text), [6])
    page = client.get(f"/play/round/{page_round}").get_data(as_text=True)
    assert "Where other players flagged it" in page
    assert "You did better than 60% of the 5 other players on this text." in page
    assert page.count('class="chart-bar-answer"') == 1


def test_how_others_did_shows_from_the_first_other_reader(app):
    with app.app_context():
        example_id = factories.example(boundary=4, passage="lone").id
    client = app.test_client()
    token = csrf_token(client)
    first = play_over_http(client, token, 5)  # one late: 4 points
    page = client.get(f"/play/round/{first}").get_data(as_text=True)
    assert "No other player has answered this text yet: you are the first." in page
    assert "Where other players flagged it" not in page
    with app.app_context():
        others_answer(db.session.get(Example, example_id), [4])
    page = client.get(f"/play/round/{first}").get_data(as_text=True)
    assert (
        "1 other player answered this text: they flagged sentence 5, and did better than you."
        in page
    )
    assert "you are the first" not in page


def test_explanations_best_first_votes_once_not_own_only_after_answering(app, text):
    with app.app_context():
        explained = [r.id for r in db.session.scalars(db.select(Round).order_by(Round.id))]
    voter = app.test_client()
    token = csrf_token(voter)
    # Before answering the text, a vote is refused (the ids are not shown, but may be guessed).
    start_http(voter, token)
    early = voter.post(f"/explanations/{explained[0]}/vote", data={"csrf_token": token})
    assert early.status_code == 400 and "Answer this text yourself" in early.get_data(as_text=True)
    with app.app_context():
        open_id = db.session.scalar(db.select(Round.id).where(Round.guess.is_(None)))
    reveal_http(voter, token, open_id, 1)
    answer_http(voter, token, open_id, 2, reasons="hunch", explanation="My own reason")
    page = voter.get(f"/play/round/{open_id}").get_data(as_text=True)
    shown = re.findall(r"/explanations/(\d+)/vote", page)
    assert len(shown) == 3 and "My own reason" not in page.split('id="explanations"')[1]
    # Vote for the third: it moves to the top.
    third = int(shown[2])
    voted = voter.post(
        f"/explanations/{third}/vote", data={"csrf_token": token, "back": str(open_id)}
    )
    assert voted.status_code == 302 and voted.headers["Location"].endswith(
        f"/play/round/{open_id}#explanations"
    )
    page = voter.get(f"/play/round/{open_id}").get_data(as_text=True)
    assert int(re.findall(r"/explanations/(\d+)/vote", page)[0]) == third
    assert "Up-voted" in page
    again = voter.post(
        f"/explanations/{third}/vote",
        data={"csrf_token": token},
        headers={"X-Requested-With": "fetch"},
    )
    assert again.status_code == 409 and again.get_json()["error"].startswith("You have already")
    own = voter.post(f"/explanations/{open_id}/vote", data={"csrf_token": token})
    assert own.status_code == 400 and "your own explanation" in own.get_data(as_text=True)
    with app.app_context():
        assert db.session.get(Round, third).upvotes == 1
        assert insights.upvotes_received(db.session.get(Round, third).player) == 1


def test_a_hidden_explanation_is_never_shown_and_is_marked_in_exports(app, text, tmp_path):
    with app.app_context():
        target = db.session.scalars(db.select(Round).order_by(Round.id)).first()
        target_id, marker, author = target.id, target.explanation, target.player_id
    researcher = sign_in(app)
    listing = researcher.get("/research/explanations").get_data(as_text=True)
    assert marker in listing
    token = csrf_token(researcher, "/research/explanations")  # a login gives a new token
    hidden = researcher.post(
        f"/research/explanations/{target_id}/hide", data={"csrf_token": token, "hidden": "1"}
    )
    assert hidden.status_code == 302
    assert marker in researcher.get("/research/explanations?show=hidden").get_data(as_text=True)

    player = app.test_client()
    player_token = csrf_token(player)
    round_id = play_over_http(player, player_token, 4, explanation="mine")
    page = player.get(f"/play/round/{round_id}").get_data(as_text=True)
    assert marker not in page
    vote = player.post(f"/explanations/{target_id}/vote", data={"csrf_token": player_token})
    assert vote.status_code == 404
    # Only researchers may hide.
    assert (
        player.post(f"/research/explanations/{target_id}/hide", data={"csrf_token": player_token})
    ).status_code == 403

    with app.app_context():
        for row in db.session.scalars(db.select(Player)):
            row.research_consent_at = row.created_at
        db.session.commit()
        shown = db.session.scalars(
            db.select(Round).where(Round.id != target_id, Round.explanation != "")
        ).first()
        shown_id = shown.id
        insights.vote(db.session.get(Player, author), shown_id)
        exports.export(export_options.ExportOptions(out=tmp_path / "x"))
    rounds = pd.read_csv(tmp_path / "x" / "rounds.csv").set_index("round_id")
    assert bool(rounds.loc[target_id, "explanation_hidden"]) is True
    assert rounds["explanation_hidden"].sum() == 1
    assert rounds.loc[shown_id, "explanation_upvotes"] == 1
    votes = pd.read_csv(tmp_path / "x" / "votes.csv")
    assert list(votes["round_id"]) == [shown_id]
    assert votes["voter"].iloc[0] in set(rounds["annotator"])


def test_crowd_and_other_texts_explanations_stay_out(ctx):
    example = factories.example(boundary=4, passage="a")
    elsewhere = factories.example(boundary=4, passage="b")
    others_answer(elsewhere, [4], "About another text")
    mine = answer(factories.player(), example, 4, "Mine")
    assert teaching(mine)[1] == []


def test_votes_are_in_my_data_and_leave_with_a_deleted_account(ctx):
    example = factories.example(boundary=4, passage="v")
    writer = factories.player("writer", password="a long password")
    explained = answer(writer, example, 4, "Repeats the same phrase")
    voter = factories.player("voter", password="another long password")
    answer(voter, example, 4)
    insights.vote(voter, explained.id)
    assert lifecycle.my_data(voter)["votes"][0]["explanation"] == "Repeats the same phrase"
    assert lifecycle.my_data(writer)["explanations"][0]["upvotes"] == 1
    lifecycle.delete_account(voter, "another long password")
    db.session.expire_all()
    assert db.session.get(Round, explained.id).upvotes == 0
    assert insights.upvotes_received(db.session.get(Player, writer.id)) == 0
