"""Fraud signals from the explanation box: a pasted explanation and typing faster than a person
types are flagged with their rounds (study page, `flask study flags`); honest typing is not; and
the rules alone."""

from __future__ import annotations

import json
import re

import pytest

from app.crowd import fraud, fraud_report, lookup
from app.extensions import db
from tests.conftest import csrf_token, sign_in
from tests.crowd.helpers import make_pool, make_study, study_numbers
from tests.crowd.test_crowd_http import join_http
from tests.factories import Clock
from tests.game_helpers import reveal_http

TEXT = "The third sentence moves the whole story to another country without any warning at all."
# Each worker writes their own (alike ones would be flagged as copied).
OWN = {
    "honest": TEXT,
    "paster": "A recipe that was about soup now lists tools for fixing a bicycle, which is odd.",
    "robot": "Numbers in this paragraph contradict the totals that were given two lines above it.",
    "noscript": "Grammar breaks down: verbs stop agreeing with subjects and commas land at random.",
}


def row(round_id: int, pid: int = 1, pasted=None, ms=None, typed=None, length=40):
    return fraud.TypingRow(pid, f"w{pid}", round_id, length, pasted, ms, typed)


def test_typing_rules():
    rows = [
        row(1, pasted=True, ms=900, typed=0),  # pasted
        row(2, ms=2000, typed=41),  # 20.5 characters a second over 41: too fast
        row(3, ms=3000, typed=40),  # 13.3 a second: a fast typist
        row(4, ms=100, typed=39),  # too few characters to judge
        row(5, ms=0, typed=50),  # no time at all
        row(6),  # nothing reported (no script)
        row(7, pasted=True, length=0),  # no explanation kept: nothing to flag
        row(8, pid=2, pasted=False, ms=60_000, typed=len(TEXT)),  # honest
    ]
    pasted, typing = fraud.typing_flags(rows)
    assert set(pasted) == {1} and set(typing) == {1}
    assert pasted[1].signal == fraud.PASTED_EXPLANATION and pasted[1].rounds == (1,)
    assert pasted[1].summary == "pasted into 1 explanation"
    assert typing[1].signal == fraud.IMPLAUSIBLE_TYPING and typing[1].rounds == (2, 5)
    assert typing[1].texts == (
        "round 2: 41 characters typed in 2.0 s (20/s)",
        "round 5: 50 characters typed instantly",
    )
    assert fraud.typing_problem(row(9, ms=2667, typed=40)) is None  # exactly 15 a second


def _play(app, client, clock: Clock, worker: str, typing: dict[str, str]) -> list[int]:
    join_http(client, f"/study/pilot?PROLIFIC_PID={worker}&STUDY_ID=st1&SESSION_ID=s-{worker}")
    token = csrf_token(client)
    played = []
    while True:
        step = client.post("/study/pilot/next", data={"csrf_token": token})
        found = re.search(r"/play/round/(\d+)", step.headers["Location"])
        if not found:
            return played
        round_id = int(found.group(1))
        for seen in (1, 2):
            clock.advance(8.0)  # read at a human pace: not faster than reading
            reveal_http(client, token, round_id, seen)
        clock.advance(25.0)
        answer = {"csrf_token": token, "seen": "3", "choice": "machine", "explanation": OWN[worker]}
        answered = client.post(f"/play/round/{round_id}/answer", data=answer | typing)
        assert answered.status_code == 302, answered.get_data(as_text=True)
        played.append(round_id)


@pytest.fixture
def typed_study(app, clock):
    with app.app_context():
        make_pool(normal=12, human=2)
        make_study(rounds=3, attention_check_rate=0)
    n = str(len(TEXT))  # every worker's text is as long
    played = {
        "honest": _play(
            app,
            app.test_client(),
            clock,
            "honest",
            {"typing_pasted": "0", "typing_ms": "21000", "typing_chars": n},
        ),
        "paster": _play(
            app,
            app.test_client(),
            clock,
            "paster",
            {"typing_pasted": "1", "typing_ms": "1500", "typing_chars": "0"},
        ),
        "robot": _play(
            app,
            app.test_client(),
            clock,
            "robot",
            {"typing_pasted": "0", "typing_ms": "1200", "typing_chars": n},
        ),
        # Without the script: no signals at all, so no flag.
        "noscript": _play(app, app.test_client(), clock, "noscript", {}),
    }
    assert all(len(ids) == 3 for ids in played.values())
    return played


def test_pasting_and_robot_typing_are_flagged_with_their_rounds(app, typed_study, runner):
    with app.app_context():
        flagged = {w.worker_id: w for w in fraud_report.study_flags(lookup.get_study("pilot"))}
        numbers = study_numbers()
    assert set(flagged) == {"paster", "robot"}
    (paste,) = flagged["paster"].flags
    assert paste.signal == fraud.PASTED_EXPLANATION
    assert set(paste.rounds) == {numbers[r] for r in typed_study["paster"]}
    (robot,) = flagged["robot"].flags
    assert robot.signal == fraud.IMPLAUSIBLE_TYPING
    assert set(robot.rounds) == {numbers[r] for r in typed_study["robot"]}
    assert all(f"{len(TEXT)} characters typed in 1.2 s" in t for t in robot.texts)

    result = runner.invoke(args=["study", "flags", "pilot"])
    assert result.exit_code == 0, result.output
    assert "2 worker(s) flagged" in result.output
    assert "text pasted into the explanation box: pasted into 3 explanations" in result.output
    assert "explanation typed faster than a person types" in result.output
    assert "honest" not in result.output and "noscript" not in result.output
    data = json.loads(runner.invoke(args=["study", "flags", "pilot", "--json"]).output)
    assert {w["worker_id"]: [f["signal"] for f in w["flags"]] for w in data} == {
        "paster": ["pasted_explanation"],
        "robot": ["implausible_typing"],
    }

    body = sign_in(app).get("/research/studies/pilot").get_data(as_text=True)
    section = body[body.index('id="fraud-signals"') :]
    assert 'data-signal="pasted_explanation"' in section
    assert 'data-signal="implausible_typing"' in section
    assert "<strong>honest</strong>" not in section
    # A flag is never a decision: every worker is still waiting for one.
    with app.app_context():
        from app.models import StudyDecision

        assert db.session.query(StudyDecision).count() == 0
