"""Small builders for test data, written through the models (a real database, no mocks)."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

from sqlalchemy import select

from app.catalog.pools import link_passages
from app.extensions import db
from app.game import answers, reveals, starts
from app.leaderboard import standings
from app.models import Category, Example, Player, Round, System

_ids = itertools.count(1)


def category(slug: str = "news", name: str | None = None) -> Category:
    found = db.session.scalar(select(Category).where(Category.slug == slug))
    if found:
        return found
    row = Category(slug=slug, name=name or slug.title(), description="")
    db.session.add(row)
    db.session.flush()
    return row


def system(name: str = "gpt2-xl") -> System:
    found = db.session.scalar(select(System).where(System.name == name))
    if found:
        return found
    row = System(name=name)
    db.session.add(row)
    db.session.flush()
    return row


def example(
    boundary: int = 4,
    n: int = 10,
    category_slug: str = "news",
    system_name: str = "gpt2-xl",
    sentences: list[str] | None = None,
    external_id: str | None = None,
    p: float | None = 0.5,
    passage: str | None = None,
    splice: str | None = None,
    kind: str = "normal",
    system_label: str | None = None,
) -> Example:
    """An example linked to its passage: `passage` names a shared source passage (variants of
    one passage share it; `splice` a second one, as a spliced baseline shows); by default each
    example is a passage of its own."""
    source = {"dataset": "test", "doc_id": passage} if passage else {}
    if splice:
        source["splice_doc_id"] = splice
    number = next(_ids)
    if sentences is None:
        sentences = [
            f"Sentence {i} of text {number} carries the marker zq{number}x{i}q." for i in range(n)
        ]
    row = Example(
        external_id=external_id or f"ex-{number}",
        category_id=category(category_slug).id,
        system_id=system("human" if boundary == n else system_name).id,
        system_label=system_label,
        sentences=sentences,
        n_sentences=len(sentences),
        boundary=boundary,
        decoding=None if p is None else {"strategy": "nucleus", "p": p},
        decoding_p=p,
        seed=number,
        source=source,
        meta={},
        kind=kind,
        annotation_count=0,
    )
    db.session.add(row)
    db.session.flush()
    link_passages([row])
    db.session.commit()
    return row


def player(username: str | None = None, password: str | None = None) -> Player:
    """A guest (no username) or a named player; hashing a password is slow, so it is optional."""
    row = Player(is_guest=username is None, username=username)
    if password:
        row.set_password(password)
    db.session.add(row)
    db.session.commit()
    return row


def round_of(player: Player, example: Example, chosen_category: str = "news", **options) -> Round:
    """A new round of the player's on `example`, started as the game starts every round
    (`starts.new_round`, which takes `options`), loaded as the ORM object."""
    view = starts.new_round(player, chosen_category, example=example, **options)
    assert view is not None, "the round was not started"
    return db.session.get(Round, view.id)


def started(player: Player, category_slug: str = "random", **options) -> Round:
    """The player's open round or a new one in the category, as "Play" starts it
    (`starts.start_round`, which takes `options`), loaded as the ORM object."""

    return db.session.get(Round, starts.start_round(player, category_slug, **options).id)


class Clock:
    """The site's clock, moved by hand: reading takes time in simulations (`use_clock`)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime.now(UTC).replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def use_clock(monkeypatch, *modules, start: datetime | None = None) -> Clock:
    """A `Clock` as `utcnow` of the game's rounds and boards (starts, reveals, answers,
    standings) and of `modules`."""
    clock = Clock(start)
    for module in (starts, reveals, answers, standings, *modules):
        monkeypatch.setattr(module, "utcnow", clock)
    return clock
