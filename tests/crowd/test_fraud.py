"""Fraud signals: a scripted study over HTTP with honest workers and three kinds of fraud, each
flagged with its evidence and no honest worker flagged; and the pure functions alone."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select

from app.crowd import fraud, fraud_report, lookup
from app.extensions import db
from app.models import Participant, Round, StudyDecision
from app.models.rounds import CHECK_ROUND
from tests.conftest import csrf_token, sign_in
from tests.crowd.helpers import make_pool, make_study, study_numbers
from tests.crowd.test_crowd_http import join_http
from tests.factories import Clock
from tests.game_helpers import answer_http, reveal_http

# -- the scripted study ------------------------------------------------------------------------


def link(worker: str, session: str) -> str:
    return f"/study/pilot?PROLIFIC_PID={worker}&STUDY_ID=st1&SESSION_ID={session}"


def play_all(
    app,
    client,
    clock: Clock,
    seconds_per_sentence: float,
    texts: list[str],
    slug="pilot",
    most=99,
    first_wait: float | None = None,
) -> list[int]:
    """Play the study's rounds in this browser (at most `most`), reading each sentence for
    `seconds_per_sentence` (the first for `first_wait`, if given): flag an attention check's
    instruction sentence, and flag the third sentence of other texts with the next explanation
    of `texts` (cycled). Returns the answered round ids."""
    token = csrf_token(client)
    played: list[int] = []
    while len(played) < most:
        response = client.post(f"/study/{slug}/next", data={"csrf_token": token})
        if "/done" in response.headers["Location"]:
            break
        round_id = int(re.search(r"/play/round/(\d+)", response.headers["Location"]).group(1))
        with app.app_context():
            check = db.session.get(Round, round_id).kind == CHECK_ROUND
        seen = 1
        while True:
            clock.advance(first_wait if seen == 1 and first_wait else seconds_per_sentence)
            page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
            latest = re.findall(r'<li class="sentence[^"]*"[^>]*>([^<]*)</li>', page)[-1]
            if check and "say that a machine wrote this sentence" in latest:
                data = {"choice": "machine", "explanation": "the sentence said so"}
                break
            if not check and seen == 3:
                data = {"choice": "machine", "explanation": texts[len(played) % len(texts)]}
                break
            reveal_http(client, token, round_id, seen)
            seen += 1
        answered = answer_http(client, token, round_id, seen, **data)
        assert answered.status_code == 302, answered.get_data(as_text=True)
        played.append(round_id)
    return played


HONEST = {
    "honest-a": [
        "The recipe suddenly switches from baking bread to grilling fish without any reason.",
        "repetition",
        "Sentence three names a city that the earlier sentences placed on another continent.",
        "It repeats itself.",
        "The speaker's age changes from twelve to forty within two lines of the story.",
    ],
    "honest-b": [
        "repetition",
        "The quote is attributed to a senator who was introduced as a football coach before.",
        "the sentence does not make sense",
        "Grammar falls apart here and the verbs stop agreeing with any of their subjects.",
    ],
    "honest-c": [
        "It repeats itself!",
        "The weather report mentions snow in July for a town described as tropical earlier.",
        "REPETITION.",
        "Off topic",
    ],
}
RING = [
    "The third sentence contradicts the first one: the recipe says bake, then it is fried.",
    "This line invents a <b>second</b> main character that never appears in the text again.",
    "Numbers do not add up, the total given is smaller than the parts listed right before.",
]
# The second ring member pastes the first one's explanations with small edits.
RING_PASTED = [
    "the third sentence contradicts the first one - the recipe says bake, then its fried",
    "This line invents a second main character that never appears in the text again!!",
    "Numbers don't add up; the total given is smaller than the parts listed right before",
]


def scripted_study(app, clock) -> dict[str, list[int]]:
    """Honest workers, two ids from one browser, a pair pasting explanations, a speed-clicker."""
    with app.app_context():
        make_pool(normal=40, human=4)
        make_study(rounds=6, attention_check_rate=0.2, target_per_example=3)
    played = {}
    for worker, texts in HONEST.items():
        browser = app.test_client()
        join_http(browser, link(worker, f"s-{worker}"))
        played[worker] = play_all(app, browser, clock, 4.0, texts)
    shared = app.test_client()
    join_http(shared, link("dup-one", "s-dup1"))
    played["dup-one"] = play_all(app, shared, clock, 3.0, [HONEST["honest-a"][1]])
    join_http(shared, link("dup-two", "s-dup2"))
    played["dup-two"] = play_all(app, shared, clock, 3.0, ["It repeats itself."])
    for worker, texts in (("ring-one", RING), ("ring-two", RING_PASTED)):
        browser = app.test_client()
        join_http(browser, link(worker, f"s-{worker}"))
        played[worker] = play_all(app, browser, clock, 5.0, texts)
    clicker = app.test_client()
    join_http(clicker, link("clicker", "s-clicker"))
    played["clicker"] = play_all(app, clicker, clock, 0.2, ["bad"])
    # Waits half a minute on each text's first sentence, then clicks through the rest: the whole
    # round takes long enough to read, the sentences after the first do not.
    waiter = app.test_client()
    join_http(waiter, link("waiter", "s-waiter"))
    played["waiter"] = play_all(app, waiter, clock, 0.1, ["odd"], first_wait=30.0)
    return played


def test_each_fraud_is_flagged_with_its_evidence_and_no_honest_worker(app, clock):
    played = scripted_study(app, clock)
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(Participant)) == 9
        flagged = {w.worker_id: w for w in fraud_report.study_flags(lookup.get_study("pilot"))}
        by_id = fraud_report.flags_by_participant(lookup.get_study("pilot"))
        assert {w.worker_id for w in by_id.values()} == set(flagged)
        assert all(
            db.session.get(Participant, k).worker_id == w.worker_id for k, w in by_id.items()
        )
        texts = dict(db.session.execute(select(Round.id, Round.explanation)).all())
        numbers = study_numbers()
        assert db.session.scalar(select(func.count()).select_from(StudyDecision)) == 0
    assert set(flagged) == {"dup-one", "dup-two", "ring-one", "ring-two", "clicker", "waiter"}

    def only(worker: str) -> fraud.Flag:
        (flag,) = flagged[worker].flags
        return flag

    # Two participant ids from one browser: each names the other and its own rounds.
    for me, other in (("dup-one", "dup-two"), ("dup-two", "dup-one")):
        flag = only(me)
        assert flag.signal == fraud.SHARED_DEVICE
        assert flag.other_workers == (other,)
        # The study's round numbers, 1 to 6, never the site's round ids.
        assert set(flag.rounds) == {numbers[r] for r in played[me]} == set(range(1, 7))
    # The pasted explanations: all three of each ring member's, matched to the other's.
    for me, other, own, theirs in (
        ("ring-one", "ring-two", RING, RING_PASTED),
        ("ring-two", "ring-one", RING_PASTED, RING),
    ):
        flag = only(me)
        assert flag.signal == fraud.COPIED_EXPLANATION
        assert flag.other_workers == (other,)
        # Every round in which the worker wrote one of them, and nothing else.
        assert set(flag.rounds) == {numbers[r] for r in played[me] if texts[r] in own}
        assert {texts[r] for r in played[me] if numbers[r] in flag.rounds} == set(own)
        for mine, copied in zip(own, theirs, strict=True):
            assert any(repr(mine) in t and repr(copied) in t for t in flag.texts)
    # The speed-clicker: every round faster than reading, each with its numbers.
    flag = only("clicker")
    assert flag.signal == fraud.FASTER_THAN_READING
    assert set(flag.rounds) == {numbers[r] for r in played["clicker"]}
    assert flag.summary.startswith("6 of 6 rounds")
    assert all("s (reading takes at least" in t for t in flag.texts)
    flag = only("waiter")
    assert flag.signal == fraud.FASTER_THAN_READING
    assert set(flag.rounds) == {numbers[r] for r in played["waiter"]}
    assert all("(sentence 2 on)" in t for t in flag.texts)


def test_flags_show_on_the_study_page_and_in_the_cli(app, clock, runner):
    scripted_study(app, clock)
    page = sign_in(app).get("/research/studies/pilot")
    assert page.status_code == 200
    body = page.get_data(as_text=True)
    section = body[body.index('id="fraud-signals"') :]
    for worker in ("dup-one", "dup-two", "ring-one", "ring-two", "clicker", "waiter"):
        assert f"<strong>{worker}</strong>" in section
    for worker in HONEST:
        assert f"<strong>{worker}</strong>" not in section
    assert 'data-signal="shared_browser"' in section
    assert "never a reason to reject" in section
    # A worker's text is shown as text, never as markup.
    assert "&lt;b&gt;second&lt;/b&gt;" in section and "<b>second" not in section

    result = runner.invoke(args=["study", "flags", "pilot"])
    assert result.exit_code == 0, result.output
    assert "6 worker(s) flagged" in result.output
    assert "same browser as another participant id" in result.output
    assert "honest-a" not in result.output
    as_json = runner.invoke(args=["study", "flags", "pilot", "--json"])
    data = json.loads(as_json.output)
    flagged = sorted(w["worker_id"] for w in data)
    assert flagged == ["clicker", "dup-one", "dup-two", "ring-one", "ring-two", "waiter"]
    missing = runner.invoke(args=["study", "flags", "nope"])
    assert missing.exit_code != 0 and "no study called 'nope'" in missing.output


def test_one_browser_under_another_id_in_another_study_is_flagged(app, clock):
    with app.app_context():
        make_pool(normal=40, human=4)
        make_study(rounds=6, attention_check_rate=0.2)
        make_study(slug="second", rounds=6, attention_check_rate=0.2)
    browser = app.test_client()
    join_http(browser, link("alice", "s1"))
    play_all(app, browser, clock, 4.0, ["x"])
    # The same worker id in another study, in the same browser: not a flag.
    join_http(browser, "/study/second?PROLIFIC_PID=alice&STUDY_ID=st2&SESSION_ID=s2")
    play_all(app, browser, clock, 4.0, ["x"], slug="second", most=1)
    bob = app.test_client()
    join_http(bob, "/study/second?PROLIFIC_PID=bob&STUDY_ID=st2&SESSION_ID=s3")
    play_all(app, bob, clock, 4.0, ["x"], slug="second", most=1)
    with app.app_context():
        assert fraud_report.study_flags(lookup.get_study("second")) == []
        assert fraud_report.study_flags(lookup.get_study("pilot")) == []
    # Then a second id joins the second study from alice's browser and answers.
    join_http(browser, "/study/second?PROLIFIC_PID=carol&STUDY_ID=st2&SESSION_ID=s4")
    (carols,) = play_all(app, browser, clock, 4.0, ["x"], slug="second", most=1)
    with app.app_context():
        second = {w.worker_id: w for w in fraud_report.study_flags(lookup.get_study("second"))}
        first = fraud_report.study_flags(lookup.get_study("pilot"))
    assert set(second) == {"alice", "carol"}
    assert second["carol"].flags[0].other_workers == ("alice", "alice (study pilot)")
    with app.app_context():
        assert second["carol"].flags[0].rounds == (study_numbers()[carols],) == (1,)
    assert second["alice"].flags[0].other_workers == ("carol",)
    assert [w.worker_id for w in first] == ["alice"]
    assert first[0].flags[0].other_workers == ("carol (study second)",)


# -- the pure functions ------------------------------------------------------------------------


def row(pid: int, text: str, round_id: int | None = None) -> fraud.ExplanationRow:
    return fraud.ExplanationRow(pid, f"w{pid}", round_id or pid * 100, text)


LONG = "The third sentence contradicts the first one: the recipe says bake, then it is fried."


@pytest.mark.parametrize(
    "variant",
    [
        LONG,
        LONG.upper(),
        "the third sentence contradicts the first one  the recipe says bake then it is fried",
        "The third sentence contradicts the first one; the recipe says bake, then it's fried!",
        "The 3rd sentence contradicts the first one: the recipe says to bake, then it is fried.",
    ],
)
def test_pasted_variants_are_alike(variant):
    pairs = fraud.copied_pairs([row(1, LONG), row(2, variant)])
    assert len(pairs) == 1 and pairs[0].ratio >= fraud.SIMILAR_RATIO


@pytest.mark.parametrize(
    "common",
    ["repetition", "Repetition!", "It repeats itself.", "the sentence does not make sense",
     "Off topic, off topic, off topic, off topic, off topic",
     "bad bad bad bad bad bad bad bad bad bad bad bad"],
)  # fmt: skip
def test_short_or_uninformative_explanations_are_never_flagged(common):
    assert not fraud.informative(fraud.normalise(common))
    assert fraud.explanation_flags([row(i, common) for i in range(1, 30)]) == {}


FORMULAIC = [
    (
        "The sentence repeats the same phrase that was used in the previous sentence.",
        "This sentence repeats the same words that were used in the previous sentence.",
    ),
    (
        "It does not make sense in the context of the rest of the text.",
        "It doesn't make any sense in context with the rest of the text.",
    ),
    (
        "The story suddenly changes topic and talks about something unrelated.",
        "The story suddenly changes the topic and talks about something completely unrelated.",
    ),
    (
        "This sentence contradicts what was said in the previous sentence.",
        "This sentence contradicts what was said in the sentence before.",
    ),
]


def test_two_readers_putting_a_common_complaint_alike_once_are_not_flagged():
    for mine, theirs in FORMULAIC:
        pairs = fraud.copied_pairs([row(1, mine), row(2, theirs)])
        assert len(pairs) == 1 and pairs[0].ratio < fraud.STRONG_RATIO  # alike, but not copied
        others = [row(1, "Grammar falls apart here and no verb agrees with its subject at all.")]
        assert fraud.explanation_flags([row(1, mine), row(2, theirs), *others]) == {}


def test_the_same_two_workers_alike_again_and_again_are_flagged():
    (a1, b1), (a2, b2) = FORMULAIC[0], FORMULAIC[3]
    rows = [row(1, a1, 11), row(1, a2, 12), row(2, b1, 21), row(2, b2, 22)]
    flags = fraud.explanation_flags(rows)
    assert set(flags) == {1, 2}
    assert flags[1].rounds == (11, 12) and flags[2].rounds == (21, 22)
    assert flags[1].other_workers == ("w2",)
    # One text written twice by a worker, alike one of the other's: one coincidence, not two.
    rows = [row(1, a1, 11), row(1, a1, 12), row(2, b1, 21)]
    assert fraud.explanation_flags(rows) == {}


def test_different_explanations_and_a_workers_own_repeats_are_not_flagged():
    other = "Grammar falls apart here and the verbs stop agreeing with any of their subjects."
    assert fraud.copied_pairs([row(1, LONG), row(2, other)]) == []
    # One worker writing the same long explanation twice copies no one.
    assert fraud.copied_pairs([row(1, LONG, 1), row(1, LONG, 2)]) == []


def test_identical_explanations_in_a_crowd_flag_every_copier_with_evidence():
    rows = [row(i, LONG) for i in range(1, 61)] + [row(99, "repetition")]
    flags = fraud.explanation_flags(rows)
    assert set(flags) == set(range(1, 61))
    assert flags[1].rounds == (100,) and len(flags[1].other_workers) == 59
    assert flags[1].summary == "1 explanation(s) match those of " + ", ".join(
        sorted(f"w{i}" for i in range(2, 61))
    )


START = datetime(2026, 1, 1, tzinfo=UTC)


def timing(pid: int, round_id: int, seconds: float, words: int = 30) -> fraud.TimingRow:
    """A round whose `words` were all shown at once and answered `seconds` later."""
    return fraud.TimingRow(
        pid, f"w{pid}", round_id, round_id, ((START, words),), START + timedelta(seconds=seconds)
    )


def stepped(gaps: list[float], words: int = 10, then: float = 0.0) -> fraud.TimingRow:
    """A round whose sentences of `words` words appeared `gaps` seconds apart, answered `then`
    seconds after the last."""
    moments, now = [], START
    for gap in gaps:
        now += timedelta(seconds=gap)
        moments.append((now, words))
    return fraud.TimingRow(1, "w1", 7, 7, tuple(moments), now + timedelta(seconds=then))


def test_every_sentence_needs_its_reading_time_after_it_appears():
    # 10 words take 1 s at 600 words a minute.
    careful = stepped([0, 1.2, 1.1, 1.0, 1.5], then=1.0)
    assert fraud.shortfall(careful) is None
    # A slow start hides nothing: waiting a minute on the first sentence, then clicking through
    # four more in a second, is not reading them.
    waited = stepped([0, 60, 0.2, 0.2, 0.2], then=0.4)
    found = fraud.shortfall(waited)
    assert found is not None and found.first == 2 and found.words == 40
    assert found.seconds == pytest.approx(1.0) and found.floor == pytest.approx(4.0)
    # Reading ahead is impossible, but reading slowly and then answering at once is fine: the
    # last sentence had its second before the answer.
    assert fraud.shortfall(stepped([0, 3, 3, 3], then=1.0)) is None
    assert fraud.shortfall(stepped([0, 3, 3, 3], then=0.5)).first == 4


def test_reading_floor_and_speed_rule():
    assert fraud.reading_floor(600) == pytest.approx(60.0)
    assert fraud.reading_floor(30) == pytest.approx(3.0)
    # Two fast rounds of five: a quick reader, not flagged.
    quick = [timing(1, i, 2.0 if i < 2 else 20.0) for i in range(5)]
    # Three fast rounds of six: flagged, with exactly the fast rounds.
    clicker = [timing(2, 10 + i, 1.0 if i % 2 else 2.9) for i in range(6)]
    # Three fast rounds of ten: under half, not flagged.
    mixed = [timing(3, 20 + i, 1.0 if i < 3 else 9.0) for i in range(10)]
    # Exactly at the floor counts as reading.
    exact = [timing(4, 40 + i, 3.0) for i in range(5)]
    flags = fraud.speed_flags(quick + clicker + mixed + exact)
    assert list(flags) == [2]
    assert flags[2].rounds == tuple(range(10, 16))
    assert flags[2].texts[0] == "round 10: 30 words in 2.9 s (reading takes at least 3.0 s)"


def test_device_rule_within_and_across_studies():
    rows = [
        fraud.DeviceRow(1, "a", "s1", 11, "dev1"),
        fraud.DeviceRow(2, "b", "s1", 21, "dev1"),
        fraud.DeviceRow(3, "c", "s1", 31, "dev2"),
        fraud.DeviceRow(4, "c", "s2", 41, "dev2"),  # the same worker in another study
        fraud.DeviceRow(5, "d", "s1", 51, "dev3"),
        fraud.DeviceRow(6, "e", "s2", 61, "dev3"),  # another id in another study
    ]
    flags = fraud.device_flags(rows, "s1")
    assert set(flags) == {1, 2, 5}
    assert flags[1].other_workers == ("b",) and flags[1].rounds == (11,)
    assert flags[5].other_workers == ("e (study s2)",)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.frozensets(st.sampled_from("abcdefghijkl"), min_size=1, max_size=10), max_size=12),
    st.sampled_from([0.2, 0.35, 0.5, 0.8, 1.0]),
)
def test_prefix_filter_finds_exactly_the_pairs_over_the_threshold(sets, threshold):
    brute = {
        (i, j)
        for i in range(len(sets))
        for j in range(i + 1, len(sets))
        if len(sets[i] & sets[j]) >= threshold * len(sets[i] | sets[j])
    }
    assert fraud._candidates(sets, threshold) == brute
