"""The reveal says what happened in a player's words, for every kind of text: a model's
continuation, a splice of two human texts, an all-human text and a text that changed only at its
last sentence; and the spread's caption says what the chart shows."""

from __future__ import annotations

import re

import pytest

from app.extensions import db
from app.game import insights
from app.models import Example
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer_http, others_answer, reveal_http, start_http

N = 10
MODEL = insights.describe(4, N, {"strategy": "nucleus", "p": 0.5}, None)
SPLICE = insights.describe(4, N, None, None)
HUMAN = insights.describe(N, N, None, None)
LAST = insights.describe(N - 1, N, {"strategy": "nucleus", "p": 0.5}, None)
LAST_SPLICE = insights.describe(N - 1, N, None, None)


# -- the words (pure) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "boundary", "guess", "headline", "detail"),
    [
        (MODEL, 4, 4, "Exact!", "The machine took over at sentence 5 of 10, and you flagged that"),
        (MODEL, 4, 6, "2 sentences late.", "you flagged sentence 7. Right, only late"),
        (MODEL, 4, 2, "Too early, by 2 sentences.", "which was still written by a person"),
        (MODEL, 4, N, "Not all human: a machine wrote the last 6 sentences.", "would have been"),
        (SPLICE, 4, 4, "Exact!", "flagged that very sentence: flagging it was right."),
        (SPLICE, 4, 5, "1 sentence late.", "Flagging there was right, only late"),
        (SPLICE, 4, 1, "Too early, by 3 sentences.", "which was still part of the first text"),
        (SPLICE, 4, N, "Not one text: the last 6 sentences came from a different text.", "5 would"),
        (HUMAN, N, N, "Right: the whole text was human-written!", "and you said so."),
        (HUMAN, N, 3, "Too early: the whole text was human-written.", "You flagged sentence 4"),
        (LAST, N - 1, N, "Not all human: a machine wrote the last sentence.", "sentence 10 of 10"),
        (LAST, N - 1, N - 1, "Exact!", "The machine took over at sentence 10 of 10"),
        (LAST_SPLICE, N - 1, N, "Not one text: the last sentence came from", "begins at sentence"),
    ],
)
def test_every_kind_of_text_and_answer_has_its_own_words(kind, boundary, guess, headline, detail):
    said = insights.outcome(kind, N, boundary, guess)
    assert said.headline.startswith(headline)
    assert detail in said.detail
    # "all human" on a changed text is not a flag, however it scores.
    if guess == N:
        assert "late" not in said.headline and "you flagged" not in said.detail.lower()
    if kind.after_tag == "Other text" and guess >= boundary and guess < N:
        assert "right" in said.detail
    if kind.after_tag == "Other text":
        assert "machine" not in said.headline.lower()


def test_the_splice_says_no_machine_wrote_it():
    assert SPLICE.headline.startswith("No machine wrote this one")
    assert "different human-written text" in SPLICE.headline


# -- on the page ------------------------------------------------------------------------------


def _play(client, token: str, flag_at: int | None) -> tuple[int, str]:
    """Start the news text, read on, then flag sentence index `flag_at` (None: "all human")."""
    started = start_http(client, token)
    assert started.status_code == 302
    round_id = int(re.search(r"/play/round/(\d+)", started.headers["Location"]).group(1))
    last = N if flag_at is None else flag_at + 1
    for seen in range(1, last):
        reveal_http(client, token, round_id, seen)
    choice = {"choice": "human"} if flag_at is None else {"choice": "machine", "reasons": "hunch"}
    answered = answer_http(client, token, round_id, last, **choice)
    assert answered.status_code == 302, answered.get_data(as_text=True)[-600:]
    page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    return round_id, " ".join(page.split())


@pytest.mark.parametrize(
    ("boundary", "p", "flag_at", "words", "never"),
    [
        (4, 0.5, 4, ["Exact!", "The machine took over at sentence 5 of 10"], []),
        (
            4,
            None,
            4,
            ["Exact!", "No machine wrote this one", "flagging it was right"],
            ["machine took over"],
        ),
        (
            4,
            None,
            None,
            ["Not one text: the last 6 sentences came from a different text.", "5 would have"],
            ["sentences late"],
        ),
        (N, None, None, ["Right: the whole text was human-written!", "and you said so."], []),
        (
            N - 1,
            0.5,
            None,
            [
                "Not all human: a machine wrote the last sentence.",
                "you said the whole text was human-written",
            ],
            ["1 sentence late", "You flagged"],
        ),
    ],
)
def test_the_reveal_of_each_kind_says_what_happened(app, boundary, p, flag_at, words, never):
    with app.app_context():
        factories.example(boundary=boundary, p=p, passage="a", splice="b" if p is None else None)
    client = app.test_client()
    _round, page = _play(client, csrf_token(client), flag_at)
    for expected in words:
        assert expected in page
    for wrong in never:
        assert wrong not in page


def test_the_spread_caption_says_what_the_chart_shows(app):
    with app.app_context():
        example = factories.example(boundary=4, passage="c")
        others_answer(example, [6, 7])  # nobody flagged the right sentence: no dark bar
        example_id = example.id
    client = app.test_client()
    round_id, page = _play(client, csrf_token(client), 4)
    assert "highlighted bar" not in page
    assert "No other player flagged sentence 5, the right answer." in page
    with app.app_context():
        others_answer(db.session.get(Example, example_id), [4])
    page = " ".join(client.get(f"/play/round/{round_id}").get_data(as_text=True).split())
    assert "The dark bar is the right answer: sentence 5, where the machine took over." in page
    assert page.count('class="chart-bar-answer"') == 1
