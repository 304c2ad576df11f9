"""A whole study, scripted end to end through the pages a worker uses and the researcher's
commands: honest workers, one who honestly flags before an attention check's sentence appears,
a lazy "all human" worker, one who comes back in another browser, one who runs out of time, two
participant ids from one browser, and two workers who paste the same explanations.

It ends with: no honest worker rejected; a check counted only where its evidence was shown (void
otherwise, with a spare in its place); no worker shown one source passage twice, and every worker
served exactly the schedule stored when they entered; every fraud case flagged and no one else;
each bonus payable exactly once after verify, undo-verify, verify (and undo --drop-bonuses,
verify). On SQLite, and on PostgreSQL with TEST_DATABASE_URL (tests/conftest.py).
"""

from __future__ import annotations

import csv
import io
import re
from collections import Counter
from decimal import Decimal

from sqlalchemy import select

from app.crowd import fraud, fraud_report, ledger, lookup, slots, verdicts, verify
from app.crowd.reports import worker_stats
from app.extensions import db
from app.models import ExamplePassage, Participant, ParticipantStatus, Round
from app.models.rounds import CHECK_ROUND
from tests import factories
from tests.conftest import csrf_token
from tests.crowd.test_crowd_http import join_http
from tests.crowd.test_study_cli import STUDY_TOML, create
from tests.game_helpers import answer_http, reveal_http

TOML = (
    STUDY_TOML.replace("target_per_example = 2", "target_per_example = 3\ntime_limit_minutes = 30")
    + "\n[bonus]\nper_exact = 0.05\ncap = 0.40\n"
)
SENTENCE = re.compile(r'<li class="sentence[^"]*"[^>]*>([^<]*)</li>')
INSIDE = "say that a machine wrote this sentence"
ALL_HUMAN = "attention check, so please answer"

HONEST = ("honest-a", "honest-b", "early", "returning")
EXPLANATIONS = {
    "honest-a": ["The recipe switches from baking bread to grilling fish for no reason at all."],
    "honest-b": ["A senator quoted here was introduced as a football coach two lines earlier."],
    "early": ["repetition"],
    "returning": ["The weather report puts snow in July in a town it called tropical before."],
    "dup-one": ["It repeats itself."],
    "dup-two": ["the grammar breaks"],
}
PASTED = [
    "This line invents a second main character who never appears anywhere else in the text.",
    "The numbers do not add up: the total given is smaller than the parts listed right before.",
]


def link(worker: str) -> str:
    return f"/study/pilot?PROLIFIC_PID={worker}&STUDY_ID=st1&SESSION_ID=s-{worker}"


def play(app, client, clock, style: str, texts: list[str], most: int = 99) -> list[int]:
    """Play the worker's rounds in this browser (at most `most`), 4 seconds a sentence.

    "careful": follows every check (flags an inside check's sentence; "all human" on a text
    whose first sentence asks for it) and flags the fourth sentence of other texts; "early":
    the same, but flags the second sentence of their first inside check, before its check
    sentence shows; "human": the lazy way, "still human" to the end of every text.
    Returns the answered round ids."""
    token = csrf_token(client)
    played: list[int] = []
    early = 1 if style == "early" else 0
    while len(played) < most:
        response = client.post("/study/pilot/next", data={"csrf_token": token})
        if "/done" in response.headers["Location"]:
            break
        round_id = int(re.search(r"/play/round/(\d+)", response.headers["Location"]).group(1))
        with app.app_context():
            round_ = db.session.get(Round, round_id)
            n = round_.example.n_sentences
            check = (
                (round_.example.source or {}).get("check") if round_.kind == CHECK_ROUND else None
            )
        seen = 1
        while True:
            clock.advance(4.0)
            page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
            shown = SENTENCE.findall(page)
            assert len(shown) == seen
            if style == "human" or ALL_HUMAN in shown[0]:
                data = {"choice": "human"} if seen == n else None
            elif check == "inside" and early and seen == 2:
                early -= 1
                data = {"choice": "machine", "explanation": "I thought the machine began here."}
            elif INSIDE in shown[-1]:
                data = {"choice": "machine", "explanation": "the sentence said so"}
            elif check is None and seen == 4:
                data = {"choice": "machine", "explanation": texts[len(played) % len(texts)]}
            else:
                data = None
            if data is not None:
                break
            reveal_http(client, token, round_id, seen)
            seen += 1
        answered = answer_http(client, token, round_id, seen, **data)
        assert answered.status_code == 302, answered.get_data(as_text=True)
        played.append(round_id)
    return played


def run_study(app, runner, clock, tmp_path) -> dict:
    with app.app_context():
        # Sixteen passages in three versions each, and six all-human passages in two: a worker
        # given one version of a passage must never get another.
        for i in range(16):
            for _version in range(3):
                factories.example(boundary=3, category_slug="news", passage=f"doc-{i}")
        for i in range(6):
            for _version in range(2):
                factories.example(boundary=10, category_slug="news", passage=f"human-{i}")
        made = create(runner, tmp_path, TOML)
        assert made.exit_code == 0, made.output
    played: dict[str, list[int]] = {}
    for worker in ("honest-a", "honest-b", "early"):
        browser = app.test_client()
        join_http(browser, link(worker))
        style = "early" if worker == "early" else "careful"
        played[worker] = play(app, browser, clock, style, EXPLANATIONS[worker])
    lazy = app.test_client()
    join_http(lazy, link("lazy"))
    played["lazy"] = play(app, lazy, clock, "human", [])

    # Comes back in another browser through the platform's link, mid-round.
    first = app.test_client()
    join_http(first, link("returning"))
    played["returning"] = play(app, first, clock, "careful", EXPLANATIONS["returning"], most=2)
    token = csrf_token(first)
    left_open = first.post("/study/pilot/next", data={"csrf_token": token}).headers["Location"]
    again = app.test_client()
    assert join_http(again, link("returning")).status_code == 302
    resumed = again.post("/study/pilot/next", data={"csrf_token": csrf_token(again)})
    assert resumed.headers["Location"] == left_open  # the same round, not a new text
    played["returning"] += play(app, again, clock, "careful", EXPLANATIONS["returning"])

    # Runs out of time with a round open: no more sentences, no answer counted.
    slow = app.test_client()
    join_http(slow, link("timed-out"))
    played["timed-out"] = play(app, slow, clock, "careful", ["slow"], most=1)
    token = csrf_token(slow)
    open_at = slow.post("/study/pilot/next", data={"csrf_token": token}).headers["Location"]
    round_id = int(re.search(r"/play/round/(\d+)", open_at).group(1))
    reveal_http(slow, token, round_id, 1)
    clock.advance(31 * 60)
    refused = reveal_http(slow, token, round_id, 2)
    assert refused.status_code == 409
    assert "The time for this study (30 minutes) has run out" in refused.text  # not a bare refusal
    late = answer_http(slow, token, round_id, 2, explanation="late")
    assert late.status_code == 409

    # Two participant ids from one browser.
    shared = app.test_client()
    for worker in ("dup-one", "dup-two"):
        join_http(shared, link(worker))
        played[worker] = play(app, shared, clock, "careful", EXPLANATIONS[worker])
    # Two workers who paste the same explanations.
    for worker in ("paste-one", "paste-two"):
        browser = app.test_client()
        join_http(browser, link(worker))
        played[worker] = play(app, browser, clock, "careful", PASTED)
    return played


def passages_of(example_ids: list[int]) -> Counter:
    found: Counter = Counter()
    for example_id in example_ids:
        passages = db.session.scalars(
            select(ExamplePassage.passage_id).where(ExamplePassage.example_id == example_id)
        ).all()
        assert passages
        found.update(passages)
    return found


def export(tmp_path, participants: dict[str, Participant]):
    lines = ["Submission id,Participant id,Status,Completion code"]
    for n, (worker, p) in enumerate(participants.items()):
        if p.status == ParticipantStatus.timed_out:
            lines.append(f"sub{n},{worker},TIMED-OUT,")
        else:
            lines.append(f"sub{n},{worker},AWAITING REVIEW,{verdicts.completion_code(p)}")
    path = tmp_path / "prolific.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def verify_run(runner, path, out, *extra):
    result = runner.invoke(
        args=["study", "verify", "pilot", "--prolific-export", str(path), "--out", str(out), *extra]
    )
    assert result.exit_code == 0, result.output
    decisions = {
        r["worker_id"]: r for r in csv.DictReader(io.StringIO((out / "decisions.csv").read_text()))
    }
    bonus = [line.split(",") for line in (out / "bonus.csv").read_text().splitlines()]
    return decisions, {w: int(Decimal(a) * 100) for w, a in bonus}


def test_a_scripted_study_ends_fairly_and_pays_once(app, runner, clock, tmp_path):
    played = run_study(app, runner, clock, tmp_path)
    with app.app_context():
        study = lookup.get_study("pilot")
        participants = {
            p.worker_id: p for p in db.session.scalars(select(Participant).order_by(Participant.id))
        }
        assert set(participants) == {*played, "timed-out"}

        # The outcomes the pages gave.
        for worker in (*HONEST, "dup-one", "dup-two", "paste-one", "paste-two"):
            assert participants[worker].status == ParticipantStatus.completed, worker
        assert participants["lazy"].status == ParticipantStatus.failed_checks
        assert participants["timed-out"].status == ParticipantStatus.timed_out
        assert participants["timed-out"].rounds_done == 1

        # A check counts only where its sentence was shown before the answer.
        for worker, p in participants.items():
            answered = db.session.scalars(
                select(Round).where(Round.participant_id == p.id, Round.guess.is_not(None))
            ).all()
            early = [
                r
                for r in answered
                if r.kind == CHECK_ROUND
                and r.example.source.get("check") == "inside"
                and r.guess < r.example.boundary
            ]
            assert p.checks_void == len(early), worker
        early = participants["early"]
        assert (early.checks_void, early.checks_failed, early.checks_passed) == (1, 0, 2)
        assert {"spare_check", "spare_check_added"} & set(early.schedule)  # a spare came in
        assert participants["lazy"].checks_void == 0 and participants["lazy"].checks_failed == 2

        # No passage twice for anyone, and each worker was served the stored schedule.
        for worker, p in participants.items():
            ids = [db.session.get(Round, r).example_id for r in played.get(worker, [])]
            every = db.session.scalars(
                select(Round.example_id).where(Round.participant_id == p.id)
            ).all()
            assert max(passages_of(list(every)).values()) == 1, worker
            schedule_ids = [s.example_id for s in slots.stored(p)]
            assert ids == schedule_ids[: len(ids)], worker
            stored = passages_of([e for e in schedule_ids if e is not None])
            assert max(stored.values()) == 1, worker

        # Every fraud case is flagged, with its kind, and no one else.
        flagged = {w.worker_id: w for w in fraud_report.study_flags(study)}
        assert set(flagged) == {"dup-one", "dup-two", "paste-one", "paste-two"}
        for me, other in (("dup-one", "dup-two"), ("dup-two", "dup-one")):
            (flag,) = flagged[me].flags
            assert flag.signal == fraud.SHARED_DEVICE and flag.other_workers == (other,)
        for me, other in (("paste-one", "paste-two"), ("paste-two", "paste-one")):
            (flag,) = flagged[me].flags
            assert flag.signal == fraud.COPIED_EXPLANATION and flag.other_workers == (other,)

        config = lookup.config_of(study)
        owed = {w.worker_id: verify.owed_minor(config, w) for w in worker_stats(study)}
        path = export(tmp_path, participants)

    # verify -> the researcher uploads bonus.csv -> undo-verify -> verify: paid once.
    decisions, first = verify_run(runner, path, tmp_path / "one", "--apply")
    for worker in (*HONEST, "dup-one", "dup-two", "paste-one", "paste-two"):
        assert decisions[worker]["decision"] == "approve", (worker, decisions[worker])
    assert decisions["lazy"]["decision"] == "reject"
    assert decisions["timed-out"]["decision"] == "returned"
    assert all(owed[w] > 0 for w in HONEST)  # the honest workers earned a bonus
    assert first == {w: owed[w] for w, d in decisions.items() if d["decision"] == "approve"}
    undone = runner.invoke(args=["study", "undo-verify", "pilot"])
    assert undone.exit_code == 0, undone.output
    decisions, second = verify_run(runner, path, tmp_path / "two", "--apply")
    assert second == {}
    assert not any(d["decision"] == "reject" for w, d in decisions.items() if w in HONEST)
    # The docs' --drop-bonuses, used on a run whose bonus.csv was empty: still paid once.
    dropped = runner.invoke(args=["study", "undo-verify", "pilot", "--drop-bonuses"])
    assert dropped.exit_code == 0, dropped.output
    _decisions, third = verify_run(runner, path, tmp_path / "three", "--apply")
    assert third == {}
    with app.app_context():
        given = ledger.given_bonuses(lookup.get_study("pilot"))
        by_worker = {
            p.worker_id: given.get(p.id, 0) for p in db.session.scalars(select(Participant))
        }
    paid = Counter(first) + Counter(second) + Counter(third)
    for worker, amount in owed.items():
        expected = amount if worker in first else 0
        assert paid[worker] == expected == by_worker[worker], worker
