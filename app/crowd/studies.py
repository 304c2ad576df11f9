"""The crowd-study service: create studies, admit workers, hand out rounds, finish with a code.

Every public function owns its transaction, except `record_answer`, which the game service calls
inside the transaction that stores an answer, so a worker's progress and outcome change together
with the round.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from urllib.parse import quote

from sqlalchemy import and_, delete, exists, func, or_, select, update
from sqlalchemy.exc import IntegrityError

from app.crowd import codes, schedule
from app.crowd.config import SLUG_RE, StudyConfig
from app.crowd.platforms import Entry
from app.errors import BadRequest, Conflict, Forbidden, NotFound
from app.extensions import db
from app.game import rounds
from app.leaderboard import standings
from app.models import (
    Category,
    Example,
    ExamplePassage,
    Participant,
    ParticipantStatus,
    PassageRead,
    Player,
    Round,
    Study,
    StudyBonus,
    StudyDecision,
    System,
)
from app.models.base import utcnow
from app.models.studies import StudyRun

CHECK_SYSTEM = "attention-check"
CHECK_INSTRUCTION = (
    "This is an attention check, so please answer that every sentence of this text is "
    "human-written: choose “still human” at each step and “all human” at the end."
)
INSIDE_INSTRUCTION = (
    "This sentence is an attention check: please say that a machine wrote this sentence."
)
FINISHED = {
    ParticipantStatus.completed,
    ParticipantStatus.failed_checks,
    ParticipantStatus.screened_out,
    ParticipantStatus.approved,
    ParticipantStatus.rejected,
}
# Workers who returned the task or ran out of time: their place is free again.
LEFT = {ParticipantStatus.returned, ParticipantStatus.timed_out}


class RatingsPending(Conflict):
    """The worker's last round still needs its ratings before anything else."""

    def __init__(self, round_: Round):
        super().__init__("Please give your ratings for this text before you go on.")
        self.round = round_


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


def _unread(participant: Participant):
    """Examples built from no passage this worker has read, in any version (checks included:
    a check shows its source's passage)."""
    return ~exists().where(
        ExamplePassage.example_id == Example.id,
        PassageRead.passage_id == ExamplePassage.passage_id,
        PassageRead.player_id == participant.player_id,
    )


def _passages_in(ids: list[int]) -> int:
    """Distinct source passages among these examples (an example without one counts alone)."""
    linked = db.session.execute(
        select(ExamplePassage.example_id, ExamplePassage.passage_id).where(
            ExamplePassage.example_id.in_(ids)
        )
    ).all()
    with_passage = {e for e, _p in linked}
    return len({p for _e, p in linked}) + len(set(ids) - with_passage)


def _system(name: str) -> System:
    found = db.session.scalar(select(System).where(System.name == name))
    if found is None:
        found = System(name=name)
        db.session.add(found)
        db.session.flush()
    return found


def _check_sources(pool: list[int], needed: int, all_human: bool) -> list[Example]:
    """Texts to build checks from, from the pool if it has enough, else from every normal text:
    all-human ones (whose other sentences are then human too), then, unless `all_human`, others.
    """
    human = Example.boundary == Example.n_sentences
    found: list[Example] = []
    for where in (Example.id.in_(pool), Example.kind == rounds.NORMAL):
        query = select(Example).where(where, Example.n_sentences >= 2).order_by(Example.id)
        found = list(db.session.scalars(query.where(human)))
        if not all_human:
            found += db.session.scalars(query.where(~human))
        if len(found) >= needed:
            return found
    kind = "all-human texts" if all_human else "texts of two or more sentences"
    raise BadRequest(
        f"attention checks: {needed} {kind} are needed to build them, found {len(found)}; "
        "import more examples"
    )


def _make_check(config: StudyConfig, source: Example, name: str, sentences, boundary, kind) -> int:
    check = Example(
        external_id=f"check-{config.slug}-{name}",
        category_id=source.category_id,
        system_id=_system(CHECK_SYSTEM).id,
        sentences=sentences,
        n_sentences=len(sentences),
        boundary=boundary,
        decoding=None,
        source={
            "attention_check_for": config.slug,
            "check": kind,
            "from_example": source.external_id,
        },
        meta={},
        kind=rounds.CHECK,
        annotation_count=0,
    )
    db.session.add(check)
    db.session.flush()
    # The check shows its source's passage: a worker who read one does not get the other.
    for passage_id in db.session.scalars(
        select(ExamplePassage.passage_id).where(ExamplePassage.example_id == source.id)
    ):
        db.session.add(ExamplePassage(example_id=check.id, passage_id=passage_id))
    db.session.flush()
    return check.id


def _attention_checks(
    config: StudyConfig, pool: list[int]
) -> tuple[list[int], list[int], list[int]]:
    """Build the study's checks: (all-human texts, texts with a check sentence inside).

    An all-human check's first sentence asks for "all human" at the end. An inside check has one
    sentence, at a random position from the third on, that asks to be marked machine-written; it
    is the text's boundary, so the right answer is exactly that sentence. Each worker needs as
    many of each kind as their schedule holds; inside checks are made three times over (as texts
    allow) so that workers do not all meet the check at the same sentence of the same text.

    Spare checks (all-human instructed texts) replace an inside check a worker answered before
    its sentence was shown: enough that a worker finds one on a passage they have not read, as
    texts allow.
    """
    human_needed, inside_needed = schedule.check_mix(
        config.rounds, config.attention_check_rate, config.all_human_checks
    )
    inside_needed += schedule.check_count(
        config.total_rounds - config.rounds, config.attention_check_rate
    )
    rng = random.Random(config.slug)
    human = []
    if human_needed:
        sources = _check_sources(pool, human_needed, all_human=True)
        for i, source in enumerate(rng.sample(sources, human_needed)):
            sentences = [CHECK_INSTRUCTION, *source.sentences[1:]]
            human.append(
                _make_check(config, source, str(i + 1), sentences, len(sentences), "all_human")
            )
    inside = []
    if inside_needed:
        sources = _check_sources(pool, inside_needed, all_human=False)
        # All-human texts first: the sentences around the check are then all human too.
        wanted = min(len(sources), 3 * inside_needed)
        humans = [e for e in sources if e.boundary == e.n_sentences]
        chosen = rng.sample(humans, min(len(humans), wanted))
        others = [e for e in sources if e.boundary != e.n_sentences]
        chosen += rng.sample(others, wanted - len(chosen))
        for i, source in enumerate(chosen):
            sentences = list(source.sentences)
            position = schedule.check_position(len(sentences), rng)
            sentences[position] = INSIDE_INSTRUCTION
            inside.append(_make_check(config, source, f"in-{i + 1}", sentences, position, "inside"))
    spare = []
    if inside_needed:
        try:
            sources = _check_sources(pool, inside_needed, all_human=False)
        except BadRequest:
            sources = []  # no spare then: a worker who voids checks goes to review
        # Other texts than the inside checks', where there are enough, and as many as a worker
        # could need after reading a passage in every other round: no worker reads a passage
        # twice, so a worker must find the spares they need among passages they have not read.
        used = {e.id for e in chosen}
        sources = [e for e in sources if e.id not in used] + [e for e in sources if e.id in used]
        wanted = inside_needed + config.total_rounds
        for i, source in enumerate(sources[:wanted]):
            sentences = [CHECK_INSTRUCTION, *source.sentences[1:]]
            spare.append(
                _make_check(
                    config, source, f"spare-{i + 1}", sentences, len(sentences), "all_human"
                )
            )
    return human, inside, spare


def _build_pool(config: StudyConfig) -> dict:
    pool = _pool(config)
    tutorial = _resolve_ids(config.tutorial, "tutorial") if config.tutorial else []
    pool = [i for i in pool if i not in set(tutorial)]
    human, inside, spare = _attention_checks(config, pool)
    normal_needed = config.rounds - sum(schedule.check_mix(
        config.rounds, config.attention_check_rate, config.all_human_checks
    ))  # fmt: skip
    if len(pool) < normal_needed:
        raise BadRequest(
            f"the pool has {len(pool)} examples, fewer than the {normal_needed} "
            "normal rounds each worker plays"
        )
    if (passages := _passages_in(pool)) < normal_needed:
        raise BadRequest(
            f"the pool's examples come from {passages} source passages, fewer than the "
            f"{normal_needed} normal rounds each worker plays (no worker reads a passage twice)"
        )
    return {
        "normal": pool,
        "checks": human,
        "inside_checks": inside,
        "spare_checks": spare,
        "tutorial": tutorial,
    }


def create_study(config: StudyConfig) -> Study:
    """Create a study from a validated file: fix its pool and build its attention checks."""
    if db.session.scalar(select(Study.id).where(Study.slug == config.slug)):
        raise Conflict(f"a study called {config.slug!r} already exists")
    try:
        study = Study(
            slug=config.slug,
            title=config.title,
            platform=config.platform,
            config=config.to_json(),
            pool=_build_pool(config),
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


def _cutoff(config: StudyConfig, now: datetime) -> datetime | None:
    """Workers who started before this are out of time (None: the study has no time limit)."""
    if config.time_limit_minutes is None:
        return None
    return now - timedelta(minutes=config.time_limit_minutes)


def _holding_place(config: StudyConfig, now: datetime):
    """Participants who hold a place: anyone finished, or started and still within the time."""
    started = Participant.status == ParticipantStatus.started
    cutoff = _cutoff(config, now)
    in_time = started if cutoff is None else and_(started, Participant.started_at >= cutoff)
    return or_(Participant.status.not_in(LEFT | {ParticipantStatus.started}), in_time)


def places_taken(study: Study) -> int:
    config = config_of(study)
    return db.session.scalar(
        select(func.count(Participant.id)).where(
            Participant.study_id == study.id, _holding_place(config, utcnow())
        )
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
    expire_overdue(study)
    if config.places is not None:
        # One admission at a time per study where the database can lock (PostgreSQL).
        db.session.execute(select(Study.id).where(Study.id == study.id).with_for_update())
        if places_taken(study) >= config.places:
            db.session.rollback()
            raise Conflict(
                "This study is full at the moment. Places may free up when others return the "
                f"task, so you could try again later from {config.display_platform}."
            )
    player = Player(is_guest=True, kind="crowd", research_consent_at=utcnow())
    db.session.add(player)
    db.session.flush()
    plan = schedule.attention_schedule(
        config.rounds,
        config.attention_check_rate,
        schedule.worker_seed(study.slug, entry.worker_id),
        all_human=config.all_human_checks,
        extra=config.total_rounds - config.rounds,
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


# -- time limits and returns ----------------------------------------------------------------


def deadline(participant: Participant) -> datetime | None:
    config = config_of(participant.study)
    if config.time_limit_minutes is None:
        return None
    return participant.started_at + timedelta(minutes=config.time_limit_minutes)


def _out_of_time(participant: Participant, now: datetime) -> bool:
    end = deadline(participant)
    return participant.status == ParticipantStatus.started and end is not None and now > end


def check_time(participant: Participant) -> None:
    """Mark this worker timed out once past the study's time limit (their place is freed)."""
    now = utcnow()
    if _out_of_time(participant, now):
        mark_left(participant, ParticipantStatus.timed_out, now)
        db.session.commit()


def expire_overdue(study: Study) -> int:
    """Mark every started worker past the time limit as timed out; returns how many."""
    cutoff = _cutoff(config_of(study), utcnow())
    if cutoff is None:
        return 0
    result = db.session.execute(
        update(Participant)
        .where(
            Participant.study_id == study.id,
            Participant.status == ParticipantStatus.started,
            Participant.started_at < cutoff,
        )
        .values(status=ParticipantStatus.timed_out, left_at=utcnow())
    )
    db.session.commit()
    return result.rowcount


def mark_left(participant: Participant, status: ParticipantStatus, now: datetime | None = None):
    """A started worker returned the task or ran out of time (the caller commits)."""
    if participant.status == ParticipantStatus.started:
        participant.status = status
        participant.left_at = now or utcnow()


# -- instructions and comprehension ---------------------------------------------------------


def finish_instructions(participant: Participant) -> None:
    if participant.instructions_at is None:
        participant.instructions_at = utcnow()
        db.session.commit()


def comprehension_pending(study: Study, participant: Participant) -> bool:
    return bool(config_of(study).comprehension) and participant.instructions_at is None


COMPREHENSION_TRIES = 2


def answer_comprehension(
    study: Study, participant: Participant, values: Mapping, graded: bool = True
) -> str:
    """Check the answers to the questions after the instructions: "passed", "retry" (one more
    try), "screened_out" after the second wrong try (Prolific allows two), or "stale".

    The server counts the tries: every graded wrong answer counts, whatever the form says.
    `graded` is False for a form that is not the one shown last (the second send of a double
    click, or a replay): it is not graded at all, so it can neither pass nor spend a try, and
    the worker sees where they stand.
    """
    config = config_of(study)
    if participant.status == ParticipantStatus.screened_out:
        return "screened_out"
    if participant.status != ParticipantStatus.started:
        raise Conflict("These questions are already answered.")
    if not comprehension_pending(study, participant):
        return "passed"
    if not graded:
        return "stale"
    given = [values.get(f"comprehension_{i}") for i in range(len(config.comprehension))]
    if any(answer is None for answer in given):
        raise BadRequest("Please answer every question.")
    if all(a == q.answer for a, q in zip(given, config.comprehension, strict=True)):
        participant.instructions_at = utcnow()
        db.session.commit()
        return "passed"
    db.session.execute(
        update(Participant)
        .where(Participant.id == participant.id)
        .values(comprehension_failures=Participant.comprehension_failures + 1)
    )
    db.session.refresh(participant)
    if participant.comprehension_failures >= COMPREHENSION_TRIES:
        _finish(participant, config, ParticipantStatus.screened_out)
    db.session.commit()
    return "screened_out" if participant.status == ParticipantStatus.screened_out else "retry"


# -- rounds ---------------------------------------------------------------------------------


def open_round(participant: Participant) -> Round | None:
    return db.session.scalar(
        select(Round).where(Round.participant_id == participant.id, Round.guess.is_(None)).limit(1)
    )


def _played(participant: Participant) -> select:
    return select(Round.example_id).where(Round.player_id == participant.player_id)


def _pick_normal(study: Study, participant: Participant, config: StudyConfig) -> Example | None:
    """The pool example with the fewest study rounds so far, under K first.

    A round counts once answered, or while its worker still holds a place: the open rounds of
    workers who returned or ran out of time no longer keep texts from others.
    """
    counted = or_(Round.guess.is_not(None), _holding_place(config, utcnow()))
    in_study = (
        select(Round.example_id, func.count(Round.id).label("n"))
        .join(Participant, Participant.id == Round.participant_id)
        .where(Participant.study_id == study.id, Round.kind == rounds.NORMAL, counted)
        .group_by(Round.example_id)
        .subquery()
    )
    load = func.coalesce(in_study.c.n, 0)
    return db.session.scalar(
        select(Example)
        .outerjoin(in_study, in_study.c.example_id == Example.id)
        .where(
            Example.id.in_(study.pool["normal"]),
            Example.id.not_in(_played(participant)),
            _unread(participant),
        )
        .order_by((load >= config.target_per_example).asc(), load.asc(), func.random())
        .limit(1)
    )


def _pick_from(
    ids: list[int], participant: Participant, ordered: bool, unread: bool = True
) -> Example | None:
    """One of these examples the worker has not played, built from no passage they read
    (`unread`; practice texts may come from anywhere)."""
    query = select(Example).where(Example.id.in_(ids), Example.id.not_in(_played(participant)))
    if unread:
        query = query.where(_unread(participant))
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
    added = participant.schedule.count(schedule.SPARE_ADDED)
    return max(config.total_rounds + added - participant.rounds_done, 0)


def pending_ratings(study: Study, participant: Participant) -> Round | None:
    """The worker's last answered round, when the study rates after the reveal and it has no
    ratings yet: nothing else (a new round, the code) comes before them."""
    config = config_of(study)
    if not config.likert or config.likert_when != "after":
        return None
    last = db.session.scalar(
        select(Round)
        .where(
            Round.participant_id == participant.id,
            Round.guess.is_not(None),
            Round.kind != rounds.PRACTICE,
        )
        .order_by(Round.answered_at.desc(), Round.id.desc())
        .limit(1)
    )
    return (
        last if last is not None and last.kind == rounds.NORMAL and last.ratings is None else None
    )


SLOT_POOLS = {
    schedule.CHECK: ("checks",),
    schedule.INSIDE: ("inside_checks",),
    # Studies made before spare checks existed use their all-human checks.
    schedule.SPARE: ("spare_checks", "checks"),
    schedule.SPARE_ADDED: ("spare_checks", "checks"),
}


def required_rounds(config: StudyConfig, participant: Participant) -> int:
    """Rounds this worker must play: the study's, plus any spare check added for a void one."""
    return config.rounds + participant.schedule.count(schedule.SPARE_ADDED)


def _spare_ids(study: Study) -> list[int]:
    for name in SLOT_POOLS[schedule.SPARE]:
        if ids := study.pool.get(name):
            return ids
    return []


def next_round(study: Study, participant: Participant, extra: bool = False) -> Round | None:
    """The worker's open round, or a new one for their next slot; None when they are done.

    With `extra`, a worker who completed the study may play on up to max_rounds (optional).
    Raises RatingsPending while the last round lacks its ratings, and Conflict before the
    comprehension questions are passed.
    """
    check_time(participant)
    current = open_round(participant)
    if current is not None:
        return current
    if (waiting := pending_ratings(study, participant)) is not None:
        raise RatingsPending(waiting)
    config = config_of(study)
    if participant.status != ParticipantStatus.started and not (
        extra and extra_rounds_left(study, participant)
    ):
        return None
    if comprehension_pending(study, participant):
        raise Conflict("Please answer the questions after the instructions first.")
    player = db.session.get(Player, participant.player_id)
    if practice_pending(study, participant):
        example = _pick_from(study.pool["tutorial"], participant, ordered=True, unread=False)
        if example is not None:
            return rounds.create_round(player, example, study.slug, rounds.PRACTICE, participant.id)
        participant.practice_done_at = utcnow()
        db.session.commit()
    slot = participant.rounds_done
    required = required_rounds(config, participant)
    if slot >= len(participant.schedule) or (slot >= required and not extra):
        return None
    kind = participant.schedule[slot]
    if kind in SLOT_POOLS:
        ids = _spare_ids(study) if kind in (schedule.SPARE, schedule.SPARE_ADDED) else None
        ids = ids if ids is not None else study.pool.get(SLOT_POOLS[kind][0], [])
        example = _pick_from(ids, participant, ordered=False)
        if example is None:
            # Every check left shows a passage this worker read: a repeat beats a dead end,
            # and a check's answer is its instruction, not the passage.
            example = _pick_from(ids, participant, ordered=False, unread=False)
        round_kind = rounds.CHECK
    else:
        example = _pick_normal(study, participant, config)
        round_kind = rounds.NORMAL
    if example is None:
        raise Conflict("We have run out of texts for this study. Please contact the researcher.")
    made = rounds.create_round(player, example, study.slug, round_kind, participant.id)
    return made or open_round(participant)


def record_answer(participant_id: int, kind: str, passed: bool) -> None:
    """Called by the game service inside the answer's transaction; `passed` says whether the
    guess is the text's boundary (the right answer of an attention check).

    Raises Conflict, which undoes the answer, when the worker is past the time limit or has
    left: their open round no longer counts and another worker may have its text.
    """
    participant = db.session.get(Participant, participant_id)
    now = utcnow()
    if participant.status in LEFT or _out_of_time(participant, now):
        raise Conflict(
            "Your time for this study has run out, so this answer cannot be counted. "
            "Thank you for your work so far."
        )
    if kind == rounds.PRACTICE:
        return
    values = {"rounds_done": Participant.rounds_done + 1}
    verdict = _check_verdict(participant_id, passed) if kind == rounds.CHECK else None
    if verdict == schedule.PASS:
        values["checks_passed"] = Participant.checks_passed + 1
    elif verdict == schedule.FAIL:
        values["checks_failed"] = Participant.checks_failed + 1
    elif verdict == schedule.VOID:
        values["checks_void"] = Participant.checks_void + 1
    db.session.execute(update(Participant).where(Participant.id == participant_id).values(**values))
    db.session.refresh(participant)
    config = config_of(participant.study)
    if verdict == schedule.VOID:
        _schedule_spare(participant, config)
    required = required_rounds(config, participant)
    if participant.status == ParticipantStatus.started and participant.rounds_done >= required:
        outcome = (
            ParticipantStatus.failed_checks
            if participant.checks_failed >= config.fail_after_checks
            else ParticipantStatus.completed
        )
        _finish(participant, config, outcome)


def _check_verdict(participant_id: int, passed: bool) -> str:
    """PASS / FAIL / VOID for the check this worker has just answered (its answer is stored in
    the same transaction): void when they answered before the check's evidence was shown."""
    row = db.session.execute(
        select(Round.guess, Example.boundary, Example.source)
        .join(Example, Example.id == Round.example_id)
        .where(
            Round.participant_id == participant_id,
            Round.kind == rounds.CHECK,
            Round.guess.is_not(None),
        )
        .order_by(Round.answered_at.desc(), Round.id.desc())
        .limit(1)
    ).first()
    if row is None:
        return schedule.PASS if passed else schedule.FAIL
    check = (row.source or {}).get("check", "all_human")
    return schedule.check_verdict(check, row.guess, row.boundary)


def _schedule_spare(participant: Participant, config: StudyConfig) -> None:
    """After a void check: if the checks still to come cannot make up the study's number, put
    a spare check in the worker's plan, at the soonest round (see schedule.spare_slot), when the
    study has a spare text this worker has not read. Otherwise nothing: verify sends a worker
    with void checks to review."""
    plan = participant.schedule
    required = required_rounds(config, participant)
    wanted = sum(
        schedule.check_mix(config.rounds, config.attention_check_rate, config.all_human_checks)
    )
    counted = participant.checks_passed + participant.checks_failed
    done = participant.rounds_done
    if counted + schedule.checks_left(plan, done, required) >= wanted:
        return
    if _pick_from(_spare_ids(participant.study), participant, ordered=False) is None:
        return
    new = schedule.spare_slot(plan, done, required)
    if new is not None:
        participant.schedule = new


def _finish(participant: Participant, config: StudyConfig, outcome: ParticipantStatus) -> None:
    """Set the outcome and its completion code once (the status guard makes it single-shot)."""
    shared = config.completion_codes.get(outcome.value)
    participant.status = outcome
    participant.outcome = outcome.value
    participant.finished_at = utcnow()
    participant.completion_code = None if shared else codes.new_code()


def failed_checks_message(participant: Participant) -> str | None:
    """The reason a worker who failed checks is shown on the finish page (None for others);
    verify's rejection message carries the same words (schedule.failed_checks_text)."""
    if participant.status != ParticipantStatus.failed_checks:
        return None
    answered = db.session.execute(
        select(Round.kind, Round.guess, Example.boundary, Example.source)
        .join(Example, Example.id == Round.example_id)
        .where(
            Round.participant_id == participant.id,
            Round.guess.is_not(None),
            Round.kind != rounds.PRACTICE,
        )
        .order_by(Round.answered_at, Round.id)
    ).all()
    found = schedule.check_rounds(
        [
            (
                (r.source or {}).get("check", "all_human") if r.kind == rounds.CHECK else None,
                r.guess,
                r.boundary,
            )
            for r in answered
        ]
    )
    counted = participant.checks_passed + participant.checks_failed
    return schedule.failed_checks_text(found[schedule.FAIL], counted)


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
    values = {"code": code, "pid": participant.worker_id}
    return re.sub(
        r"\{(code|pid)\}", lambda m: quote(values[m.group(1)], safe=""), config.completion_url
    )


def slot_progress(study: Study, participant: Participant) -> tuple[int, int]:
    """(the number of the worker's current or next round, rounds required)."""
    config = config_of(study)
    required = required_rounds(config, participant)
    return min(participant.rounds_done + 1, required), required


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


def _criteria(config: StudyConfig, round_: Round) -> list:
    """The criteria to ask now, each worded for what there is to rate: after an "all human"
    answer no sentence was flagged, and an all-human text has no machine-written part."""
    if round_.kind != rounds.NORMAL or round_.ratings is not None:
        return []
    if not round_.answered:
        return config.likert
    example = round_.example
    said_human = round_.guess == example.n_sentences
    no_machine = example.boundary == example.n_sentences
    return [
        dataclasses.replace(
            c, question=c.wording(said_human if c.target == "flagged" else no_machine)
        )
        for c in config.likert
    ]


def round_context(round_: Round) -> dict:
    """What the round page shows for a study round: progress, the next step, ratings to give.

    With show_feedback = false, an answered paid round is shown on its own page that says the
    answer is recorded and shows neither the truth nor the points.
    """
    participant = db.session.get(Participant, round_.participant_id)
    study = participant.study
    config = config_of(study)
    number, total = slot_progress(study, participant)
    if round_.guess is not None and round_.kind != rounds.PRACTICE:
        number = participant.rounds_done  # this round is counted once answered
    extra = participant.finished_at is not None and round_.started_at > participant.finished_at
    context = {
        "study": study,
        "study_extra": extra,
        "study_number": number,
        "study_total": total,
        "study_finished": participant.status in FINISHED,
        "likert": _criteria(config, round_),
        "likert_when": config.likert_when,
    }
    if round_.answered and round_.kind == rounds.CHECK:
        example = round_.example
        context.update(
            check_kind=(example.source or {}).get("check", "all_human"),
            check_sentence=example.boundary + 1,
            check_passed=round_.guess == example.boundary,
        )
    if round_.answered and round_.kind != rounds.PRACTICE and not config.show_feedback:
        # Only what the worker saw, and nothing that tells the truth.
        context.update(
            template="crowd/recorded.html",
            sentences=list(round_.example.sentences[: round_.revealed]),
        )
    return context


def truth_hidden(player_id: int) -> bool:
    """True for a crowd worker in a study with show_feedback = false: no page or export other
    than the study's own may show them the true boundary or the points of their rounds (workers
    given the same texts could pool answers and collect per-exact bonuses)."""
    configs = db.session.scalars(
        select(Study.config)
        .join(Participant, Participant.study_id == Study.id)
        .where(Participant.player_id == player_id)
    )
    return any(not StudyConfig.from_json(config).show_feedback for config in configs)


# -- managing studies -----------------------------------------------------------------------


def set_open(study: Study, is_open: bool) -> None:
    study.is_open = is_open
    db.session.commit()


def participant_count(study: Study) -> int:
    return db.session.scalar(
        select(func.count(Participant.id)).where(Participant.study_id == study.id)
    )


# Settings that decide what each worker plays and how they are judged: fixed once anyone joined.
LOCKED_ONCE_JOINED = (
    "platform", "rounds", "max_rounds", "attention_check_rate", "all_human_checks",
    "fail_after_checks", "categories", "systems", "examples", "tutorial", "likert_when",
    "screening",
)  # fmt: skip


def _likert_shape(config: StudyConfig) -> list[tuple[str, str]]:
    return [(c.name, c.target) for c in config.likert]


def edit_study(study: Study, new: StudyConfig) -> list[str]:
    """Replace the study's settings with a new version of its file; returns the changed keys.

    Before anyone joined, anything may change (the pool and checks are built again). After,
    only wording, pay, codes, limits and similar may change: the settings that decide what
    workers play and how they are judged, and the names of the ratings, stay as they were.
    """
    if new.slug != study.slug:
        raise BadRequest(f"slug: the file is for {new.slug!r}, not {study.slug!r}")
    old = config_of(study)
    before, after = old.to_json(), new.to_json()
    changed = sorted(k for k in after if before.get(k) != after[k])
    if not changed:
        return []
    try:
        if participant_count(study):
            locked = [k for k in LOCKED_ONCE_JOINED if before.get(k) != after[k]]
            if _likert_shape(old) != _likert_shape(new):
                locked.append("likert (names or targets)")
            if locked:
                raise BadRequest(
                    f"workers have joined, so these settings cannot change: {', '.join(locked)}"
                )
        else:
            _drop_checks(study)
            study.pool = _build_pool(new)
            study.platform = new.platform
        study.title = new.title
        study.config = after
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    return changed


def _drop_checks(study: Study) -> None:
    ids = [
        *study.pool.get("checks", []),
        *study.pool.get("inside_checks", []),
        *study.pool.get("spare_checks", []),
    ]
    if ids:
        db.session.execute(delete(Example).where(Example.id.in_(ids)))


def delete_study(study: Study, force: bool = False) -> int:
    """Delete a study and everything it made: its checks, its workers' rounds and accounts,
    decisions and bonus records. Refused while it has participants unless `force` (the CLI
    exports first). Returns the number of participants deleted."""
    participants = list(
        db.session.scalars(select(Participant).where(Participant.study_id == study.id))
    )
    if participants and not force:
        raise Conflict(
            f"study {study.slug!r} has {len(participants)} participant(s); export first and "
            "pass --force to delete them with it"
        )
    try:
        ids = [p.id for p in participants]
        players = [p.player_id for p in participants]
        categories = set()
        if ids:
            scored = db.session.execute(
                select(Round.example_id, func.count(Round.id))
                .where(
                    Round.participant_id.in_(ids),
                    Round.kind == rounds.NORMAL,
                    Round.guess.is_not(None),
                )
                .group_by(Round.example_id)
            ).all()
            for example_id, n in scored:
                db.session.execute(
                    update(Example)
                    .where(Example.id == example_id)
                    .values(annotation_count=Example.annotation_count - n)
                )
            categories = set(
                db.session.scalars(
                    select(Category.slug)
                    .join(Example, Example.category_id == Category.id)
                    .join(Round, Round.example_id == Example.id)
                    .where(Round.participant_id.in_(ids))
                )
            )
        for model in (StudyDecision, StudyBonus, StudyRun):
            db.session.execute(delete(model).where(model.study_id == study.id))
        if ids:
            db.session.execute(delete(Round).where(Round.participant_id.in_(ids)))
            db.session.execute(delete(Participant).where(Participant.id.in_(ids)))
            for player in db.session.scalars(select(Player).where(Player.id.in_(players))):
                db.session.delete(player)  # the ORM events keep the leaderboard counts right
        _drop_checks(study)
        db.session.delete(study)
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise
    for slug in categories:
        standings.invalidate(slug)
    return len(participants)
