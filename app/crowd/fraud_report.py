"""A study's fraud flags (app/crowd/fraud.py) worked out from its rows: the rows loaded, the
flags computed (`compute_flags`), kept until the study's rows change (`study_flags`), and as
text for `flask study flags` (`flag_lines`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from flask import current_app
from sqlalchemy import func, select

from app.crowd.fraud import (
    DeviceRow,
    ExplanationRow,
    TimingRow,
    TypingRow,
    WorkerFlags,
    combine,
    device_flags,
    explanation_flags,
    speed_flags,
    typing_flags,
)
from app.crowd.lookup import round_numbers
from app.extensions import db
from app.models import Example, Participant, Reveal, Round, Study, TruthView
from app.models.rounds import PRACTICE_ROUND

# The rows' round_id is the study's round number (lookup.round_numbers), the one the worker and
# the review page use; practice rounds are left out.


def _in_study(study: Study) -> select:
    return select(Participant.id).where(Participant.study_id == study.id)


def _explained(study: Study, *columns) -> list[tuple]:
    """Each answered round of the study with an explanation: participant, worker, study round
    number, then `columns`."""
    numbers = round_numbers(_in_study(study))
    return db.session.execute(
        select(Round.participant_id, Participant.worker_id, numbers.c.number, *columns)
        .join(Participant, Participant.id == Round.participant_id)
        .join(numbers, numbers.c.id == Round.id)
        .where(Participant.study_id == study.id, Round.guess.is_not(None), Round.explanation != "")
    ).all()


def _explanations(study: Study) -> list[ExplanationRow]:
    return [ExplanationRow(*row) for row in _explained(study, Round.explanation)]


def _timings(study: Study) -> list[TimingRow]:
    numbers = round_numbers(_in_study(study))
    rounds = db.session.execute(
        select(
            Round.participant_id,
            Participant.worker_id,
            Round.id,
            numbers.c.number,
            Round.answered_at,
            Round.revealed,
            Example.sentences,
        )
        .join(Participant, Participant.id == Round.participant_id)
        .join(Example, Example.id == Round.example_id)
        .join(numbers, numbers.c.id == Round.id)
        .where(
            Participant.study_id == study.id,
            Round.answered_at.is_not(None),
            Round.kind != PRACTICE_ROUND,
        )
    ).all()
    reveals: dict[int, dict[int, datetime]] = defaultdict(dict)
    for round_id, index, revealed_at in db.session.execute(
        select(Reveal.round_id, Reveal.sentence_index, Reveal.revealed_at)
        .join(Round, Round.id == Reveal.round_id)
        .join(Participant, Participant.id == Round.participant_id)
        .where(Participant.study_id == study.id, Round.answered_at.is_not(None))
    ):
        reveals[round_id][index] = revealed_at
    rows = []
    for pid, worker, round_id, number, answered, revealed, sentences in rounds:
        times = reveals[round_id]
        shown = tuple((times[i], len(sentences[i].split())) for i in range(revealed) if i in times)
        if shown:
            rows.append(TimingRow(pid, worker, number, number, shown, answered))
    return rows


def _typing(study: Study) -> list[TypingRow]:
    rows = _explained(
        study,
        func.length(Round.explanation),
        Round.explanation_pasted,
        Round.typing_ms,
        Round.typed_chars,
    )
    return [TypingRow(*row) for row in rows]


def _devices(study: Study) -> list[DeviceRow]:
    """Every answered round's browser in this study, and the rounds of other studies' workers
    answered in those browsers."""
    views = TruthView.__table__.c
    here = (
        select(views.device)
        .join(Participant, Participant.player_id == views.player_id)
        .where(Participant.study_id == study.id, views.device.is_not(None))
        .distinct()
    )
    sharing = (
        select(Participant.id)
        .join(TruthView, TruthView.player_id == Participant.player_id)
        .where(views.device.in_(here))
    )
    numbers = round_numbers(sharing)
    rows = db.session.execute(
        select(Participant.id, Participant.worker_id, Study.slug, numbers.c.number, views.device)
        .select_from(TruthView)
        .join(Participant, Participant.player_id == views.player_id)
        .join(Study, Study.id == Participant.study_id)
        .outerjoin(
            Round,
            (Round.player_id == views.player_id) & (Round.example_id == views.example_id),
        )
        .outerjoin(numbers, numbers.c.id == Round.id)
        .where(views.device.in_(here))
    )
    return [DeviceRow(*row) for row in rows]


def compute_flags(study: Study) -> list[WorkerFlags]:
    """The study's flagged workers with their evidence, in the order they joined, worked out
    from its rows (the cost grows with the study: see study_flags for the cached figure)."""
    workers = list(
        db.session.execute(
            select(Participant.id, Participant.worker_id)
            .where(Participant.study_id == study.id)
            .order_by(Participant.id)
        )
    )
    return combine(
        [(pid, worker) for pid, worker in workers],
        device_flags(_devices(study), study.slug),
        explanation_flags(_explanations(study)),
        speed_flags(_timings(study)),
        *typing_flags(_typing(study)),
    )


def inputs_stamp(study: Study) -> tuple:
    """What the flags are computed from, summed up in two queries: the study's participants
    (how many, the newest), its answered rounds (how many, the newest, the latest answer; an
    answer also brings its explanation, typing signals and reveals), and the newest browser
    record of any crowd worker (a round answered in another study's browser can flag a worker
    here). Any new answer or participant changes it."""
    answered = db.session.execute(
        select(
            func.count(Participant.id.distinct()),
            func.max(Participant.id),
            func.count(Round.id),
            func.max(Round.id),
            func.max(Round.answered_at),
        )
        .select_from(Participant)
        .outerjoin(
            Round,
            (Round.participant_id == Participant.id) & Round.answered_at.is_not(None),
        )
        .where(Participant.study_id == study.id)
    ).one()
    views = db.session.scalar(
        select(func.max(TruthView.id)).join(
            Participant, Participant.player_id == TruthView.player_id
        )
    )
    return (study.id, study.slug, *answered, views)


def study_flags(study: Study) -> list[WorkerFlags]:
    """The study's flagged workers with their evidence, in the order they joined: the figure the
    study page, the review page and `flask study flags` show. Cached per study in this process,
    keyed by inputs_stamp, so a page load costs two small queries until an answer or a worker
    arrives, and the next load after that computes them again. FRAUD_FLAGS_CACHE = False in the
    app's config turns the cache off."""
    if not current_app.config.get("FRAUD_FLAGS_CACHE", True):
        return compute_flags(study)
    cache = current_app.extensions.setdefault("roft_fraud_flags", {})
    stamp = inputs_stamp(study)
    found = cache.get(study.id)
    if found is None or found[0] != stamp:
        found = (stamp, compute_flags(study))
        cache[study.id] = found
    return list(found[1])


def flags_by_participant(study: Study) -> dict[int, WorkerFlags]:
    """`study_flags` keyed by participant id, for pages that show one worker at a time."""
    return {worker.participant_id: worker for worker in study_flags(study)}


def flag_lines(flagged: Sequence[WorkerFlags]) -> list[str]:
    """The flags as text, for `flask study flags`."""
    if not flagged:
        return ["No worker is flagged."]
    lines = [
        f"{len(flagged)} worker(s) flagged. Flags are signals to look into, never a reason to "
        "reject on their own."
    ]
    for worker in flagged:
        lines.append(f"{worker.worker_id} (participant {worker.participant_id}):")
        for flag in worker.flags:
            lines.append(f"  - {flag.title}: {flag.summary}")
            if flag.rounds:
                lines.append(f"    rounds: {', '.join(str(r) for r in flag.rounds)}")
            for text in flag.texts:
                lines.append(f"    {text}")
    return lines
