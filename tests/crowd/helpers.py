"""Shared builders for the crowd tests."""

from __future__ import annotations

from sqlalchemy import select

from app.crowd import admin, admission, lookup, ratings, serving
from app.crowd.platforms import Entry
from app.crowd.study_file import parse_study
from app.extensions import db
from app.game import answers, reveals
from app.models import Participant, Player, Round
from app.models.rounds import CHECK_ROUND
from tests import factories

BASE = {
    "slug": "pilot",
    "title": "Spot the machine",
    "platform": "prolific",
    "rounds": 10,
    "attention_check_rate": 0.2,
    "target_per_example": 2,
    "min_seconds_per_round": 0,
    "reward": 2.0,
    "currency": "GBP",
    "expected_minutes": 12,
    "consent": "You will read short texts. Your answers are stored without your name.",
    "instructions": "Say when a machine took over.",
    "categories": ["news"],
    "completion_codes": {"completed": "C1DONE01", "failed_checks": "C2FAIL02"},
    # These tests' workers play every round; test_outcomes.py tests the stop at once (default).
    "stop_after_failed_checks": False,
}


def study_round(study, participant: Participant, extra: bool = False) -> Round | None:
    """The worker's next round as the study link serves it (`serving.next_round`), loaded as the
    ORM object; None when they are done."""
    made = serving.next_round(study, participant, extra=extra)
    return None if made is None else db.session.get(Round, made.id)


def make_pool(normal: int = 12, human: int = 4) -> None:
    for _ in range(normal):
        factories.example(boundary=3, category_slug="news")
    for _ in range(human):
        factories.example(boundary=10, category_slug="news")


def make_study(**changes):
    config = parse_study({**BASE, **changes}, "test-study")
    return admin.create_study(config)


def join(study, worker: str = "w1", session: str = "s1", bound=None, consent=True, screening=None):
    entry = Entry(worker_id=worker, session=session, study="st")
    return admission.enter(study, entry, bound, consent=consent, screening=screening)


def answer(round_, guess: int, player=None):
    """Reveal up to sentence `guess` and flag it, or answer "all human" when guess == N."""
    player = player or db.session.get(Player, round_.player_id)
    n = round_.example.n_sentences
    target = min(guess, n - 1) + 1
    while round_.revealed < target:
        reveals.reveal_next(player, round_.id, round_.revealed)
    if guess >= n:
        parsed = answers.parse_answer("human", round_.revealed, [], "")
    else:
        parsed = answers.parse_answer("machine", round_.revealed, ["generic"], "")
    answers.submit_answer(player, round_.id, parsed)
    return db.session.get(Round, round_.id)


def play_slot(
    study,
    participant: Participant,
    pass_check: bool = True,
    flag_at: int | None = 3,
    rating: str | None = "3",
):
    """Play the worker's next round: checks answered right (or wrongly), others flagged at
    `flag_at` (None: the right answer, every time); then give every rating the study asks for
    after the reveal (`rating` None: give none)."""
    round_ = study_round(study, participant)
    example = round_.example
    if round_.kind == CHECK_ROUND:
        right = example.boundary
        guess = right if pass_check else (example.n_sentences if right < example.n_sentences else 1)
    else:
        guess = example.boundary if flag_at is None else flag_at
    done = answer(round_, guess)
    db.session.refresh(participant)
    if rating is not None:
        config = lookup.config_of(study)
        values = {f"rating_{c.name}": rating for c in config.likert}
        ratings.save_ratings(participant, done, values)
    return done


def play_lazy(study, participant: Participant, strategy: str):
    """Play every round as a lazy worker: "human" presses H to the end of every text, "first"
    says machine at the first chance (the second sentence; the first is always human)."""
    while (round_ := study_round(study, participant)) is not None:
        answer(round_, round_.example.n_sentences if strategy == "human" else 1)
        db.session.refresh(participant)


def study_numbers() -> dict[int, int]:
    """Round id -> the study's round number of every answered study round (1..N, practice
    apart): the numbering flags, review and verify use."""
    numbers = lookup.round_numbers()
    return dict(db.session.execute(select(numbers.c.id, numbers.c.number)).all())
