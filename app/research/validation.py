"""Checking the comment coder on a study's own comments: draw a sample, let one or two
researchers label it blind, then report how far the coder agrees with them.

A scope is a study's slug, or "site" for every player's explanations. `draw` takes a random sample
of the scope's unique comments, stratified by the text's category with proportional allocation
(each category gets its share of the sample, so the sample stays self-weighting and the coder's
confusion measured on it applies to all the comments), and keeps its order, so labelling resumes
where it stopped. `next_item` serves a researcher the first item they have not labelled; the page
never shows the coder's label. `results` codes every unique comment of the scope with the offline
coder (analysis.taxonomy, which needs requirements-research.txt) and hands the labels to
analysis.validation: Cohen's κ with its interval, per-class precision and recall, the researchers'
agreement with each other and the reason shares corrected for the coder's errors.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass

from sqlalchemy import func, select

from app.crowd import lookup
from app.errors import BadRequest, NotFound
from app.extensions import db
from app.models import Category, CodingLabel, CodingSample, Example, Participant, Player, Round

SITE = "site"
# RoFT's eight reasons, a reason outside them, no reason: what researchers choose from (the same
# list as analysis.validation.LABELS, which the site does not import to stay light).
LABELS: tuple[tuple[str, str], ...] = (
    ("grammar", "Grammar: ungrammatical, misspelt, badly punctuated or formatted"),
    ("repetition", "Repetition: repeats words, phrases or ideas"),
    ("irrelevant", "Irrelevant: off topic, does not follow from what came before"),
    ("contradicts_sentence", "Contradicts an earlier sentence"),
    ("contradicts_knowledge", "Contradicts facts about the world"),
    ("common_sense", "Common sense: implausible, illogical, makes no sense"),
    ("coreference", "Coreference: mixes up who or what is meant"),
    ("generic", "Generic: vague, bland filler"),
    ("other", "Other: a reason, but none of these (e.g. tone)"),
    ("not_a_reason", "Not a reason: a guess, idk, a misclick"),
)
LABEL_NAMES = tuple(name for name, _ in LABELS)
DEFAULT_SIZE = 200
MAX_SIZE = 2000


def _check_scope(scope: str) -> str:
    if scope != SITE:
        lookup.get_study(scope)  # NotFound for a slug no study has
    return scope


def _rounds(scope: str):
    query = (
        select(Round.explanation, Category.slug, Round.reasons)
        .join(Example, Round.example_id == Example.id)
        .join(Category, Example.category_id == Category.id)
        .where(Round.guess.is_not(None))
    )
    if scope != SITE:
        study = lookup.get_study(scope)
        query = query.join(Participant, Round.participant_id == Participant.id).where(
            Participant.study_id == study.id
        )
    return db.session.execute(query).all()


def comments(scope: str) -> dict[str, str]:
    """The scope's unique non-empty explanations (stripped), each with its most common category."""
    seen: dict[str, Counter] = {}
    for explanation, category, _ in _rounds(_check_scope(scope)):
        text = (explanation or "").strip()
        if text:
            seen.setdefault(text, Counter())[category] += 1
    return {text: counts.most_common(1)[0][0] for text, counts in seen.items()}


def sample_of(scope: str) -> list[CodingSample]:
    return list(
        db.session.scalars(
            select(CodingSample).where(CodingSample.scope == scope).order_by(CodingSample.position)
        )
    )


def _allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional allocation with largest remainders (never more than a stratum holds)."""
    total = sum(sizes.values())
    exact = {k: n * v / total for k, v in sizes.items()}
    out = {k: int(x) for k, x in exact.items()}
    for k in sorted(exact, key=lambda k: (out[k] - exact[k], k))[: n - sum(out.values())]:
        out[k] += 1
    return {k: min(v, sizes[k]) for k, v in out.items()}


def draw(scope: str, size: int = DEFAULT_SIZE, seed: int = 0) -> list[CodingSample]:
    """The scope's sample, drawn now if it has none (a drawn sample is never redrawn)."""
    existing = sample_of(_check_scope(scope))
    if existing:
        return existing
    if not 1 <= size <= MAX_SIZE:
        raise BadRequest(f"The sample size must be between 1 and {MAX_SIZE}.")
    found = comments(scope)
    if not found:
        raise NotFound("There are no explanations here to label yet.")
    rng = random.Random(seed)
    strata: dict[str, list[str]] = {}
    for text in sorted(found):
        strata.setdefault(found[text], []).append(text)
    take = _allocate({k: len(v) for k, v in strata.items()}, min(size, len(found)))
    chosen = [
        (text, k) for k, texts in sorted(strata.items()) for text in rng.sample(texts, take[k])
    ]
    rng.shuffle(chosen)
    items = [
        CodingSample(scope=scope, text=text, stratum=stratum, position=i, seed=seed)
        for i, (text, stratum) in enumerate(chosen, start=1)
    ]
    db.session.add_all(items)
    db.session.commit()
    return items


@dataclass
class Progress:
    item: CodingSample | None  # the next one to label; None when all are done
    done: int
    total: int


def next_item(scope: str, researcher: Player) -> Progress:
    items = sample_of(_check_scope(scope))
    mine = set(
        db.session.scalars(
            select(CodingLabel.sample_id)
            .join(CodingSample)
            .where(CodingSample.scope == scope, CodingLabel.researcher_id == researcher.id)
        )
    )
    left = [item for item in items if item.id not in mine]
    return Progress(left[0] if left else None, len(items) - len(left), len(items))


def record(scope: str, item_id: int, researcher: Player, label: str) -> None:
    """Store (or change) a researcher's label for an item of the scope's sample."""
    if label not in LABEL_NAMES:
        raise BadRequest(f"Unknown label {label[:40]!r}; choose one of {', '.join(LABEL_NAMES)}.")
    # An id no row can have (beyond the database's integers) is not looked up.
    item = db.session.get(CodingSample, item_id) if 0 < item_id < 2**31 else None
    if item is None or item.scope != scope:
        raise NotFound("That comment is not in this sample.")
    existing = db.session.scalar(
        select(CodingLabel).where(
            CodingLabel.sample_id == item.id, CodingLabel.researcher_id == researcher.id
        )
    )
    if existing is None:
        db.session.add(CodingLabel(sample_id=item.id, researcher_id=researcher.id, label=label))
    else:
        existing.label = label
    db.session.commit()


def labels_table(scope: str) -> list[tuple[int, str, int, str]]:
    """(item id, text, researcher id, label) for every label of the scope, oldest first."""
    rows = db.session.execute(
        select(CodingSample.id, CodingSample.text, CodingLabel.researcher_id, CodingLabel.label)
        .join(CodingLabel, CodingLabel.sample_id == CodingSample.id)
        .where(CodingSample.scope == scope)
        .order_by(CodingLabel.id)
    ).all()
    return [tuple(row) for row in rows]


def researchers(scope: str) -> int:
    return db.session.scalar(
        select(func.count(func.distinct(CodingLabel.researcher_id)))
        .join(CodingSample)
        .where(CodingSample.scope == scope)
    )


def results(scope: str, n_boot: int = 1000, seed: int = 0) -> dict:
    """The validation report for the scope (analysis.validation), plus players' chips beside it.

    The truth for each item is its first label; where a second researcher labelled the same item,
    the two are compared."""
    try:
        from analysis import taxonomy, validation
    except ImportError as error:  # the site alone does not install the analysis requirements
        raise BadRequest(
            f"The report needs the analysis requirements (requirements-research.txt): {error}"
        ) from None
    first: dict[int, tuple[str, int, str]] = {}
    second: dict[int, str] = {}
    for item_id, text, researcher_id, label in labels_table(_check_scope(scope)):
        if item_id not in first:
            first[item_id] = (text, researcher_id, label)
        elif item_id not in second and researcher_id != first[item_id][1]:
            second[item_id] = label
    if not first:
        raise NotFound("No comment of this sample is labelled yet.")
    every = sorted(comments(scope))
    coded = {
        text: validation.coder_label(c.labels, c.primary)
        for text, c in zip(every, taxonomy.classify_many(every), strict=True)
    }
    truth = [label for _, _, label in first.values()]
    coded_sample = [
        coded.get(text) or validation.coder_label(*_one(taxonomy, text))
        for text, _, _ in first.values()
    ]
    both = [i for i in first if i in second]
    pairs = ([first[i][2] for i in both], [second[i] for i in both]) if both else None
    result = validation.report(truth, coded_sample, list(coded.values()), pairs, n_boot, seed)
    result["chips"] = chip_shares(scope)
    result["researchers_count"] = researchers(scope)
    return result


def _one(taxonomy, text: str) -> tuple[tuple[str, ...], str]:
    found = taxonomy.classify_comment(text)
    return found.labels, found.primary


def chip_shares(scope: str) -> dict[str, float]:
    """Share of the scope's answered rounds citing each of RoFT's eight reason chips."""
    rows = _rounds(_check_scope(scope))
    counts: Counter = Counter()
    for _, _, reasons in rows:
        counts.update(set(reasons or []))
    return {name: counts[name] / len(rows) if rows else 0.0 for name in LABEL_NAMES[:8]}
