"""The pure parts of bench/roft_side_by_side.py: reading RoFT's annotate page, its points rule,
the bench player's choices and the body of its save request. None of this needs RoFT's code."""

from __future__ import annotations

import json
import math
import random

import pytest

from bench.protocol import ProtocolError
from bench.roft_side_by_side import (
    LOGIN_TOKEN,
    RoftGuess,
    RoftPage,
    RoftRequest,
    decide,
    django_project,
    ratio,
    read_annotate_page,
    roft_points,
    save_fields,
)
from roftcore.reasons import REASON_NAMES

SENTENCES = ["First one.", 'He said "no"; then left.', "Third.", "Fourth."]


def page_html(sentences=SENTENCES, boundary=2, text_id=417, name="bench007") -> str:
    """A page shaped like RoFT's annotate page: the values its script is given, in a script."""
    return (
        "<html><head><script>\n"
        f"      const all_sentences = {json.dumps(sentences)};\n"
        f"      const boundary = {boundary};\n"
        f"      const max_sentences = {len(sentences)};\n"
        f'      const text_id = "{text_id}";\n'
        "      const attention_check = 0;\n"
        f'      const name = "{name}";\n'
        "      let current_sentence = 1;\n"
        "</script></head><body></body></html>"
    )


def test_reads_the_values_rofts_page_gives_its_script():
    page = read_annotate_page(page_html())
    assert page == RoftPage(417, SENTENCES, 2, 4, 0, "bench007")


def test_a_page_without_the_round_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="text_id"):
        read_annotate_page(page_html().replace("const text_id", "const other"))
    with pytest.raises(ProtocolError):
        read_annotate_page("<html><body>Server Error (500)</body></html>")


@pytest.mark.parametrize(
    ("index", "boundary", "points"),
    [(3, 3, 5), (4, 3, 4), (7, 3, 1), (8, 3, 0), (12, 3, 0), (2, 3, 0), (0, 3, 0), (9, 9, 5)],
)
def test_points_as_rofts_page_computes_them(index, boundary, points):
    assert roft_points(index, boundary) == points


def test_the_bench_player_flags_a_shown_sentence_or_says_all_human_at_the_end():
    page = read_annotate_page(page_html())
    rng = random.Random(3)
    guesses = [decide(page, rng) for _ in range(2000)]
    for guess in guesses:
        assert 1 <= guess.shown <= page.max_sentences
        if guess.index == page.max_sentences:  # "the entire thing was human-written"
            assert guess.shown == page.max_sentences and guess.reasons == ()
        else:
            assert guess.index == guess.shown - 1
            assert len(set(guess.reasons)) == 2 and set(guess.reasons) <= set(REASON_NAMES)
    # Reads on at 70%: a third of the players stop at the first sentence, and some read to the
    # end and say human.
    first = sum(g.shown == 1 for g in guesses) / len(guesses)
    assert 0.25 < first < 0.35
    assert any(g.index == page.max_sentences for g in guesses)


def test_the_save_body_holds_the_fields_rofts_save_view_reads():
    page = read_annotate_page(page_html())
    guess = RoftGuess(index=3, shown=4, reasons=("grammar", "generic"))
    fields = save_fields(page, guess, started_ms=1_000, now_ms=9_000)
    body = dict(fields)
    assert len(body) == len(fields)  # each once
    assert [name for name, _ in fields[:7]] == [
        *("text", "name", "playlist_id", "boundary", "points", "attention_check", "timestamps"),
    ]
    assert body["text"] == "417" and body["name"] == "bench007" and body["playlist_id"] == "-1"
    assert body["boundary"] == "3" and body["points"] == str(roft_points(3, 2)) == "4"
    # The start, each sentence read on, the answer: ascending, in milliseconds.
    stamps = [int(ms) for ms in body["timestamps"].split(",")]
    assert len(stamps) == guess.shown + 1 and stamps == sorted(stamps)
    assert stamps[0] == 1_000 and stamps[-1] == 9_000
    assert {name: body[name] for name in REASON_NAMES} == {
        name: "true" if name in ("grammar", "generic") else "false" for name in REASON_NAMES
    }
    assert body["other_reason"] == ""


def test_an_all_human_answer_sends_no_reason():
    page = read_annotate_page(page_html())
    body = dict(save_fields(page, RoftGuess(4, 4, ()), 0, 4_000))
    # Past the boundary (2) by two: RoFT gives 3 points for saying "all human" here.
    assert body["boundary"] == "4" and body["points"] == "3"
    assert all(body[name] == "false" for name in REASON_NAMES)


def test_rofts_request_carries_the_headers_its_jquery_adds_and_no_fetch_header():
    request = RoftRequest("POST", "/save/", (("text", "1"),), "x", extra=(("X-CSRFToken", "t"),))
    assert request.headers == {"X-CSRFToken": "t"}
    assert request.shape()[0:2] == ("POST", "/save/")


def test_the_login_token_is_read_from_djangos_hidden_field():
    form = '<form><input type="hidden" name="csrfmiddlewaretoken" value="AbC123xyz"></form>'
    assert LOGIN_TOKEN.search(form).group(1) == "AbC123xyz"


def test_ratios_are_ours_over_rofts_and_nan_without_a_figure_of_rofts():
    assert ratio(30.0, 12.0) == 2.5
    assert math.isnan(ratio(3.0, 0.0)) and math.isnan(ratio(3.0, math.nan))


def test_a_folder_that_is_not_a_roft_checkout_is_refused(tmp_path):
    with pytest.raises(SystemExit, match="not a checkout of RoFT"):
        django_project(tmp_path)
    (tmp_path / "annotation" / "trick").mkdir(parents=True)
    (tmp_path / "annotation" / "core").mkdir()
    (tmp_path / "annotation" / "trick" / "settings.py").write_text("")
    assert django_project(tmp_path) == tmp_path / "annotation"
