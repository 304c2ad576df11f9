"""Within a study a worker never reads one source passage twice, in any version, checks
included (a check shows the passage it was built from)."""

from __future__ import annotations

from collections import Counter

import pytest
from sqlalchemy import select

from app.errors import BadRequest
from app.extensions import db
from app.models import ExamplePassage, Round
from tests import factories
from tests.crowd.helpers import join, make_study, play_lazy, play_slot


def passages_read(participant) -> Counter:
    rows = db.session.execute(
        select(ExamplePassage.passage_id)
        .join(Round, Round.example_id == ExamplePassage.example_id)
        .where(Round.participant_id == participant.id)
    ).all()
    return Counter(p for (p,) in rows)


def test_no_worker_reads_a_passage_twice(ctx):
    # Eight passages in three versions each (the old picker avoided only the same example),
    # and four all-human passages in two versions.
    for i in range(8):
        for _version in range(3):
            factories.example(boundary=3, category_slug="news", passage=f"doc-{i}")
    for i in range(4):
        for _version in range(2):
            factories.example(boundary=10, category_slug="news", passage=f"human-{i}")
    study = make_study(rounds=6, attention_check_rate=0.34, target_per_example=1)
    checks = study.pool["inside_checks"] + study.pool["spare_checks"]
    assert all(
        db.session.scalar(select(ExamplePassage.passage_id).where(ExamplePassage.example_id == c))
        for c in checks
    )  # every check is linked to its source's passage
    for n in range(6):
        worker = join(study, f"w{n}", f"s{n}")
        if n % 2:
            play_lazy(study, worker, "first")  # voids checks: spares come in
        else:
            for _ in range(6):
                play_slot(study, worker, flag_at=2)
        read = passages_read(worker)
        assert sum(read.values()) >= 6 and max(read.values()) == 1, read


def test_a_pool_with_too_few_passages_is_refused(ctx):
    for _version in range(12):
        factories.example(boundary=3, category_slug="news", passage="doc-only")
    for i in range(4):
        factories.example(boundary=10, category_slug="news", passage=f"human-{i}")
    with pytest.raises(BadRequest, match="source passages, fewer than the"):
        make_study(rounds=10, attention_check_rate=0.2)
