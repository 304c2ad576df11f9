"""The crowd-study service: create studies, admit workers, hand out rounds, finish with a code.

Every public function owns its transaction, except `record_answer`, which the game service calls
inside the transaction that stores an answer, so a worker's progress and outcome change together
with the round.
"""

from __future__ import annotations

import random

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from app.crowd import codes, schedule
from app.crowd.config import SLUG_RE, StudyConfig
from app.crowd.platforms import Entry
from app.errors import BadRequest, Conflict, Forbidden, NotFound
from app.extensions import db
from app.game import rounds
from app.models import (
    Category,
    Example,
    Participant,
    ParticipantStatus,
    Player,
    Round,
    Study,
    System,
)
from app.models.base import utcnow

CHECK_SYSTEM = "attention-check"
CHECK_INSTRUCTION = (
    "This is an attention check, so please answer that every sentence of this text is "
    "human-written: choose “still human” at each step and “all human” at the end."
)
FINISHED = {
    ParticipantStatus.completed,
    ParticipantStatus.failed_checks,
    ParticipantStatus.screened_out,
    ParticipantStatus.approved,
    ParticipantStatus.rejected,
}


def config_of(study: Study) -> StudyConfig:
    return StudyConfig.from_json(study.config)


def get_study(slug: str) -> Study:
    # A slug no study can have (a NUL byte, 100k characters) is not looked up.
    study = (
        db.session.scalar(select(Study).where(Study.slug == slug))
        if SLUG_RE.fullmatch(slug)
        else None
    )
    if study is None:
        raise NotFound("There is no study at this address. Please check the link.")
    return study


# -- creating a study -----------------------------------------------------------------------


def _resolve_ids(external_ids: list[str], what: str) -> list[int]:
    found = dict(
        db.session.execute(
            select(Example.external_id, Example.id).where(Example.external_id.in_(external_ids))
        ).all()
    )
    missing = [e for e in external_ids if e not in found]
    if missing:
        raise BadRequest(f"{what}: unknown example id(s): {', '.join(missing[:5])}")
    return [found[e] for e in external_ids]


def _pool(config: StudyConfig) -> list[int]:
    if config.examples:
        return _resolve_ids(config.examples, "examples")
    query = select(Example.id).where(Example.kind == rounds.NORMAL)
    if config.categories:
        known = set(
            db.session.scalars(select(Category.slug).where(Category.slug.in_(config.categories)))
        )
        if missing := sorted(set(config.categories) - known):
            raise BadRequest(f"categories: unknown category: {', '.join(missing)}")
        query = query.join(Category).where(Category.slug.in_(config.categories))
    if config.systems:
        known = set(db.session.scalars(select(System.name).where(System.name.in_(config.systems))))
        if missing := sorted(set(config.systems) - known):
            raise BadRequest(f"systems: unknown system: {', '.join(missing)}")
        query = query.join(System).where(System.name.in_(config.systems))
    ids = list(db.session.scalars(query.order_by(Example.id)))
    if not ids:
        raise BadRequest("the study's categories and systems match no examples")
    return ids


def _system(name: str) -> System:
    found = db.session.scalar(select(System).where(System.name == name))
    if found is None:
        found = System(name=name)
        db.session.add(found)
        db.session.flush()
    return found


def _attention_checks(config: StudyConfig, pool: list[int], needed: int) -> list[int]:
    """All-human texts whose first sentence tells the worker what to answer."""
    if needed == 0:
        return []
    sources = list(
        db.session.scalars(
            select(Example)
            .where(Example.id.in_(pool), Example.boundary == Example.n_sentences)
            .order_by(Example.id)
        )
    )
    if len(sources) < needed:
        sources = list(
            db.session.scalars(
                select(Example)
                .where(Example.kind == rounds.NORMAL, Example.boundary == Example.n_sentences)
                .order_by(Example.id)
            )
        )
    if len(sources) < needed:
        raise BadRequest(
            f"attention checks: {needed} all-human texts are needed to build them, "
            f"found {len(sources)}; import more all-human examples"
        )
    system = _system(CHECK_SYSTEM)
    made = []
    for i, source in enumerate(random.Random(config.slug).sample(sources, needed)):
        sentences = [CHECK_INSTRUCTION, *source.sentences[1:]]
        check = Example(
            external_id=f"check-{config.slug}-{i + 1}",
            category_id=source.category_id,
            system_id=system.id,
            sentences=sentences,
            n_sentences=len(sentences),
            boundary=len(sentences),
            decoding=None,
            source={"attention_check_for": config.slug, "from_example": source.external_id},
            meta={},
            kind=rounds.CHECK,
            annotation_count=0,
        )
        db.session.add(check)
        db.session.flush()
        made.append(check.id)
    return made


def create_study(config: StudyConfig) -> Study:
    """Create a study from a validated file: fix its pool and build its attention checks."""
    if db.session.scalar(select(Study.id).where(Study.slug == config.slug)):
        raise Conflict(f"a study called {config.slug!r} already exists")
    try:
        pool = _pool(config)
        tutorial = _resolve_ids(config.tutorial, "tutorial") if config.tutorial else []
        pool = [i for i in pool if i not in set(tutorial)]
        needed = schedule.check_count(
            config.max_rounds or config.rounds, config.attention_check_rate
        )
        checks = _attention_checks(config, pool, needed)
        if len(pool) < config.rounds - needed:
            raise BadRequest(
                f"the pool has {len(pool)} examples, fewer than the {config.rounds - needed} "
                "normal rounds each worker plays"
            )
        study = Study(
            slug=config.slug,
            title=config.title,
            platform=config.platform,
            config=config.to_json(),
            pool={"normal": pool, "checks": checks, "tutorial": tutorial},
        )
        db.session.add(study)
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    return study


# -- admitting workers ----------------------------------------------------------------------


def find_participant(study: Study, worker_id: str) -> Participant | None:
    return db.session.scalar(
        select(Participant).where(
            Participant.study_id == study.id, Participant.worker_id == worker_id
        )
    )


def _may_resume(participant: Participant, entry: Entry, bound_id: int | None) -> bool:
    """A returning worker resumes when this browser is bound to them, or when the platform's
    per-session id matches (Prolific's SESSION_ID, MTurk's assignmentId); ids alone never do."""
    if bound_id == participant.id:
        return True
    return bool(
        entry.session
        and participant.platform_session
        and codes.codes_match(entry.session, participant.platform_session)
    )


def enter(
    study: Study, entry: Entry, bound_id: int | None, consent: bool, screening: str | None
) -> Participant:
    """Admit a worker who gave consent, or resume them; never a second session for one worker."""
    config = config_of(study)
    existing = find_participant(study, entry.worker_id)
    if existing is not None:
        if not _may_resume(existing, entry, bound_id):
            raise Forbidden(
                "You have already started this study in another browser or session. Please "
                "continue there; if you cannot, contact the researcher through the platform."
            )
        return existing
    if not study.is_open:
        raise Conflict("This study is closed and takes no new participants. Thank you!")
    if not consent:
        raise BadRequest("Please tick the consent box to take part, or close this page.")
    if config.screening is not None and screening not in config.screening.options:
        raise BadRequest("Please answer the question above.")
    player = Player(is_guest=True, kind="crowd", research_consent_at=utcnow())
    db.session.add(player)
    db.session.flush()
    total = config.max_rounds or config.rounds
    plan = schedule.attention_schedule(
        total, config.attention_check_rate, schedule.worker_seed(study.slug, entry.worker_id)
    )
    participant = Participant(
        study_id=study.id,
        player_id=player.id,
        worker_id=entry.worker_id,
        platform_session=entry.session,
        platform_study=entry.study,
        submit_to=entry.submit_to,
        schedule=plan,
        consent_at=utcnow(),
        status=ParticipantStatus.started,
        decision_note="",
    )
    db.session.add(participant)
    if config.screening is not None and screening not in config.screening.accept:
        _finish(participant, config, ParticipantStatus.screened_out)
    try:
        db.session.commit()
    except IntegrityError:
        # The same worker's other tab got in first: resume that participant instead.
        db.session.rollback()
        winner = find_participant(study, entry.worker_id)
        if winner is None or not _may_resume(winner, entry, bound_id):
            raise Forbidden("You have already started this study in another browser.") from None
        return winner
    return participant


def finish_instructions(participant: Participant) -> None:
    if participant.instructions_at is None:
        participant.instructions_at = utcnow()
        db.session.commit()


# -- rounds ---------------------------------------------------------------------------------


def open_round(participant: Participant) -> Round | None:
    return db.session.scalar(
        select(Round).where(Round.participant_id == participant.id, Round.guess.is_(None)).limit(1)
    )


def _played(participant: Participant) -> select:
    return select(Round.example_id).where(Round.player_id == participant.player_id)


def _pick_normal(study: Study, participant: Participant, k: int) -> Example | None:
    """The pool example with the fewest study rounds so far (answered or in play), under K first."""
    in_study = (
        select(Round.example_id, func.count(Round.id).label("n"))
        .join(Participant, Participant.id == Round.participant_id)
        .where(Participant.study_id == study.id, Round.kind == rounds.NORMAL)
        .group_by(Round.example_id)
        .subquery()
    )
    load = func.coalesce(in_study.c.n, 0)
    return db.session.scalar(
        select(Example)
        .outerjoin(in_study, in_study.c.example_id == Example.id)
        .where(Example.id.in_(study.pool["normal"]), Example.id.not_in(_played(participant)))
        .order_by((load >= k).asc(), load.asc(), func.random())
        .limit(1)
    )


def _pick_from(ids: list[int], participant: Participant, ordered: bool) -> Example | None:
    query = select(Example).where(Example.id.in_(ids), Example.id.not_in(_played(participant)))
    rows = list(db.session.scalars(query))
    if not rows:
        return None
    if ordered:
        return min(rows, key=lambda e: ids.index(e.id))
    return random.choice(rows)


def practice_pending(study: Study, participant: Participant) -> bool:
    return bool(study.pool["tutorial"]) and participant.practice_done_at is None


def extra_rounds_left(study: Study, participant: Participant) -> int:
    """Optional rounds a finished worker may still play, up to the study's max_rounds."""
    config = config_of(study)
    if participant.status not in (ParticipantStatus.completed, ParticipantStatus.approved):
        return 0
    return max((config.max_rounds or config.rounds) - participant.rounds_done, 0)


def next_round(study: Study, participant: Participant, extra: bool = False) -> Round | None:
    """The worker's open round, or a new one for their next slot; None when they are done.

    With `extra`, a worker who completed the study may play on up to max_rounds (optional).
    """
    current = open_round(participant)
    if current is not None:
        return current
    config = config_of(study)
    if participant.status != ParticipantStatus.started and not (
        extra and extra_rounds_left(study, participant)
    ):
        return None
    player = db.session.get(Player, participant.player_id)
    if practice_pending(study, participant):
        example = _pick_from(study.pool["tutorial"], participant, ordered=True)
        if example is not None:
            return rounds.create_round(player, example, study.slug, rounds.PRACTICE, participant.id)
        participant.practice_done_at = utcnow()
        db.session.commit()
    slot = participant.rounds_done
    if slot >= (config.max_rounds or config.rounds) or (slot >= config.rounds and not extra):
        return None
    if participant.schedule[slot] == schedule.CHECK:
        example = _pick_from(study.pool["checks"], participant, ordered=False)
        kind = rounds.CHECK
    else:
        example = _pick_normal(study, participant, config.target_per_example)
        kind = rounds.NORMAL
    if example is None:
        raise Conflict("We have run out of texts for this study. Please contact the researcher.")
    made = rounds.create_round(player, example, study.slug, kind, participant.id)
    return made or open_round(participant)


def record_answer(participant_id: int, kind: str, said_all_human: bool) -> None:
    """Called by the game service inside the answer's transaction."""
    if kind == rounds.PRACTICE:
        return
    values = {"rounds_done": Participant.rounds_done + 1}
    if kind == rounds.CHECK:
        if said_all_human:
            values["checks_passed"] = Participant.checks_passed + 1
        else:
            values["checks_failed"] = Participant.checks_failed + 1
    db.session.execute(update(Participant).where(Participant.id == participant_id).values(**values))
    participant = db.session.get(Participant, participant_id)
    db.session.refresh(participant)
    config = config_of(participant.study)
    if participant.status == ParticipantStatus.started and participant.rounds_done >= config.rounds:
        outcome = (
            ParticipantStatus.failed_checks
            if participant.checks_failed >= config.fail_after_checks
            else ParticipantStatus.completed
        )
        _finish(participant, config, outcome)


def _finish(participant: Participant, config: StudyConfig, outcome: ParticipantStatus) -> None:
    """Set the outcome and its completion code once (the status guard makes it single-shot)."""
    shared = config.completion_codes.get(outcome.value)
    participant.status = outcome
    participant.outcome = outcome.value
    participant.finished_at = utcnow()
    participant.completion_code = None if shared else codes.new_code()


def completion_code(participant: Participant) -> str | None:
    """The code to show: the study's code for this outcome if configured, else the worker's own."""
    if participant.status not in FINISHED:
        return None
    config = config_of(participant.study)
    return config.completion_codes.get(participant.outcome) or participant.completion_code


def completion_url(participant: Participant) -> str | None:
    config = config_of(participant.study)
    code = completion_code(participant)
    if code is None or not config.completion_url:
        return None
    return config.completion_url.replace("{code}", code)


def slot_progress(study: Study, participant: Participant) -> tuple[int, int]:
    """(the number of the worker's current or next round, rounds required)."""
    config = config_of(study)
    return min(participant.rounds_done + 1, config.rounds), config.rounds


def parse_ratings(config: StudyConfig, values) -> dict[str, int]:
    """1–5 for every configured criterion, or BadRequest naming the missing one."""
    ratings = {}
    for criterion in config.likert:
        raw = values.get(f"rating_{criterion.name}", "")
        if raw not in {"1", "2", "3", "4", "5"}:
            raise BadRequest(f"Please rate “{criterion.question}” from 1 to 5.")
        ratings[criterion.name] = int(raw)
    return ratings


def store_ratings(round_id: int, ratings: dict[str, int]) -> None:
    """Keep the first ratings given for a round; a replay changes nothing."""
    db.session.execute(
        update(Round).where(Round.id == round_id, Round.ratings.is_(None)).values(ratings=ratings)
    )
    db.session.commit()


def ratings_from(round_: Round, moment: str, values) -> dict[str, int] | None:
    """The ratings in `values` if this study round asks for them at `moment` ("before"/"after"
    the reveal) and has none yet; None when it does not ask. BadRequest if one is missing."""
    if round_.participant_id is None or round_.kind != rounds.NORMAL or round_.ratings is not None:
        return None
    config = config_of(round_.participant.study)
    if not config.likert or config.likert_when != moment:
        return None
    return parse_ratings(config, values)


def save_ratings(participant: Participant, round_: Round, values) -> None:
    """Ratings given after the reveal, sent with the worker's "Next"."""
    if round_.participant_id != participant.id or round_.guess is None:
        raise Conflict("Ratings can be given only after answering this round.")
    ratings = ratings_from(round_, "after", values)
    if ratings is not None:
        store_ratings(round_.id, ratings)


def round_context(round_: Round) -> dict:
    """What the round page shows for a study round: progress, the next step, ratings to give."""
    participant = db.session.get(Participant, round_.participant_id)
    study = participant.study
    config = config_of(study)
    number, total = slot_progress(study, participant)
    if round_.guess is not None and round_.kind != rounds.PRACTICE:
        number = participant.rounds_done  # this round is counted once answered
    extra = participant.finished_at is not None and round_.started_at > participant.finished_at
    return {
        "study": study,
        "study_extra": extra,
        "study_number": number,
        "study_total": total,
        "study_finished": participant.status in FINISHED,
        "likert": config.likert if round_.kind == rounds.NORMAL and round_.ratings is None else [],
        "likert_when": config.likert_when,
    }


def set_open(study: Study, is_open: bool) -> None:
    study.is_open = is_open
    db.session.commit()
