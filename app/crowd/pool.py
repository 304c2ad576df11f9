"""A study's pool of texts and its attention checks, built when the study is made."""

from __future__ import annotations

import random

from sqlalchemy import delete, select

from app.crowd import schedule
from app.crowd.config import StudyConfig
from app.errors import BadRequest
from app.extensions import db
from app.models import (
    Category,
    Example,
    ExamplePassage,
    Study,
    System,
)
from app.models.rounds import CHECK_ROUND, NORMAL_ROUND

CHECK_SYSTEM = "attention-check"
# The lists of example ids in a study's pool (and, normal and tutorial, in a condition's own).
POOL_KEYS = ("normal", "checks", "inside_checks", "spare_checks", "tutorial")
CHECK_INSTRUCTION = (
    "This is an attention check, so please answer that every sentence of this text is "
    "human-written: choose “still human” at each step and “all human” at the end."
)
INSIDE_INSTRUCTION = (
    "This sentence is an attention check: please say that a machine wrote this sentence."
)


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
    query = select(Example.id).where(Example.kind == NORMAL_ROUND)
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
    for where in (Example.id.in_(pool), Example.kind == NORMAL_ROUND):
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
        kind=CHECK_ROUND,
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
    human_needed, inside_needed = config.checks
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


def build_pool(config: StudyConfig, checks: bool = True) -> dict:
    """The study's texts, practice texts and (with `checks`) its attention checks, made now."""
    pool = _pool(config)
    tutorial = _resolve_ids(config.tutorial, "tutorial") if config.tutorial else []
    pool = [i for i in pool if i not in set(tutorial)]
    human, inside, spare = _attention_checks(config, pool) if checks else ([], [], [])
    normal_needed = config.rounds - sum(config.checks)
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


def every_text(pool: dict) -> set[int]:
    """Every example id a study's pool holds: its texts, practice texts and checks, and each
    condition's own texts (the pool's other entries, such as the allocation seed, are not)."""
    found = {i for key in POOL_KEYS for i in pool.get(key, [])}
    for own in (pool.get("conditions") or {}).values():
        found.update(*(own.get(key, []) for key in POOL_KEYS))
    return found


def check_ids(pool: dict) -> list[int]:
    """The attention checks a study's pool holds (made for the study): all human, inside a text
    and spare."""
    return [i for key in ("checks", "inside_checks", "spare_checks") for i in pool.get(key, [])]


def drop_checks(study: Study) -> None:
    ids = check_ids(study.pool)
    if ids:
        db.session.execute(delete(Example).where(Example.id.in_(ids)))
