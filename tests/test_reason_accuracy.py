"""Accuracy per reason: one function (app/game/reason_accuracy.py) read by the profile and the
data download; right = the flagged sentence came at or after the change; counted rounds only; a
share only from five calls."""

from __future__ import annotations

import json
import re

from app.extensions import db
from app.game.reason_accuracy import MIN_FOR_SHARE, flag_right, tally_reasons
from app.models import Round
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import play_over_http


def test_right_means_the_flagged_sentence_was_machine_written():
    assert flag_right(guess=3, boundary=3, n_sentences=10)  # the first machine sentence
    assert flag_right(guess=9, boundary=3, n_sentences=10)  # late, 0 points, still machine
    assert not flag_right(guess=2, boundary=3, n_sentences=10)  # a human sentence
    assert not flag_right(guess=4, boundary=10, n_sentences=10)  # all-human text


def test_tally_counts_each_reason_of_a_call_and_leaves_out_all_human_answers():
    calls = [
        (["grammar", "repetition"], 3, 3, 10),
        (["grammar"], 1, 3, 10),
        (["grammar", "grammar"], 5, 3, 10),  # a repeated key counts once
        (["grammar"], 10, 3, 10),  # "all human": no machine call, left out
        (["made_up"], 4, 3, 10),  # an unknown key is ignored
        (["hunch"], 2, 10, 10),
    ]
    result = {r.reason: (r.calls, r.right, r.share) for r in tally_reasons(calls)}
    assert result == {"grammar": (3, 2, None), "repetition": (1, 1, None), "hunch": (1, 0, None)}
    five = tally_reasons([(["generic"], g, 3, 10) for g in (3, 4, 5, 1, 2)])
    assert five[0].calls == MIN_FOR_SHARE and five[0].share == 3 / 5 and five[0].percent == 60
    # The game's order of reasons, whatever the order of the calls.
    order = [r.reason for r in tally_reasons([(["hunch"], 3, 3, 10), (["grammar"], 3, 3, 10)])]
    assert order == ["grammar", "hunch"]


def _flat(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_profile_and_download_agree_and_leave_out_uncounted_rounds(app):
    with app.app_context():
        for _ in range(9):
            factories.example(boundary=3)  # sentence index 3 is the first machine one
    client = app.test_client()
    token = csrf_token(client)
    # "grammar" 6 times: flagged at index 3, 4, 6, 8 (machine) and 1, 2 (human): 4 of 6 right.
    grammar = [play_over_http(client, token, flag_at, reasons="grammar") for flag_at in (3, 4, 1)]
    grammar += [play_over_http(client, token, flag_at, reasons="grammar") for flag_at in (6, 2, 8)]
    # "repetition" with "grammar" on one more round that is then taken off the totals.
    replay = play_over_http(client, token, 5, reasons=["grammar", "repetition"])
    # "repetition" twice more: 1 of 2 right (a count, not 50%).
    play_over_http(client, token, 5, reasons="repetition")
    play_over_http(client, token, 1, reasons="repetition")
    with app.app_context():
        db.session.get(Round, replay).uncounted = "truth_seen_device"
        db.session.commit()
        assert len(grammar) == 6

    page = _flat(client.get("/profile").get_data(as_text=True))
    assert "When you say “Grammar”, you are right 67% of the time (4 of 6 calls)." in page
    assert "When you say “Repetition”, you were right 1 of 2 times." in page
    assert "Right means the flagged sentence came at or after the point where the text changed" in (
        page
    )
    assert "or where a different human-written text was spliced in" in page
    assert "right 50%" not in page

    download = json.loads(client.get("/account/data.json").text)
    by_reason = {r["reason"]: r for r in download["reason_accuracy"]}
    assert by_reason == {
        "grammar": {
            "reason": "grammar",
            "label": "Grammar",
            "calls": 6,
            "right": 4,
            "right_percent": 67,
        },
        "repetition": {
            "reason": "repetition",
            "label": "Repetition",
            "calls": 2,
            "right": 1,
            "right_percent": None,
        },
    }
    # Every figure of the download is on the page, and the other way round.
    for r in download["reason_accuracy"]:
        figure = (
            f"{r['right_percent']}% of the time ({r['right']} of {r['calls']} calls)"
            if r["right_percent"] is not None
            else f"{r['right']} of {r['calls']} time"
        )
        assert f"“{r['label']}”" in page and figure in page
    assert page.count("When you say") == len(download["reason_accuracy"])
    assert "reason_accuracy" in download["about"]


def test_no_reasons_section_before_any_machine_call(app):
    with app.app_context():
        factories.example(boundary=3)
    client = app.test_client()
    csrf_token(client)
    assert "When you say" not in client.get("/profile").get_data(as_text=True)
