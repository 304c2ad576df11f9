"""Passages: no player is served another variant of a passage they have read; the pools of normal
play and the daily challenge never share a passage."""

from __future__ import annotations

import json
import random

import pytest
from sqlalchemy import func, select

from app.catalog import pools
from app.catalog.importer import import_file
from app.catalog.passages import MAX_KEY_CHARS, passage_keys
from app.extensions import db
from app.game import answers, reveals, sets, starts
from app.models import Example, ExamplePassage, PassageRead, Platform, Study
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import answer, answer_http, finish, reveal_http, start_http

# -- the pure core ----------------------------------------------------------------------------


def test_passage_keys_name_the_source_and_a_splice():
    assert passage_keys({"dataset": "d", "doc_id": "n1"}, "x") == ["d/n1"]
    assert passage_keys({"dataset": "d", "doc_id": "n1", "splice_doc_id": "n7"}, "x") == [
        "d/n1",
        "d/n7",
    ]
    # A splice of a passage into itself is still one passage.
    assert passage_keys({"dataset": "d", "doc_id": 3, "splice_doc_id": 3}, "x") == ["d/3"]
    # No document id: the example is a passage of its own.
    assert passage_keys({}, "ex-9") == ["example/ex-9"]
    assert passage_keys(None, "ex-9") == ["example/ex-9"]
    long = passage_keys({"dataset": "d", "doc_id": "z" * 1000}, "x")[0]
    assert long.startswith("sha256:") and len(long) <= MAX_KEY_CHARS


# -- serving ----------------------------------------------------------------------------------


def test_a_read_passage_is_never_served_again_in_another_variant(ctx):
    first = factories.example(boundary=4, passage="doc-1")
    factories.example(boundary=10, passage="doc-1")  # the all-human variant
    factories.example(boundary=6, passage="doc-1", p=0.9)
    other = factories.example(boundary=3, passage="doc-2")
    player = factories.player()
    answer(player, first, 4)
    served = factories.started(player, "news")
    assert served.example_id == other.id
    finish(player, served, 3)
    with pytest.raises(starts.NoExamplesLeft, match="read every text in News"):
        factories.started(player, "news")
    read = set(db.session.scalars(select(PassageRead.passage_id)))
    assert len(read) == 2


def test_operators_may_allow_other_variants(ctx):
    ctx.config["AVOID_REPEATED_PASSAGES"] = False
    first = factories.example(boundary=4, passage="doc-1")
    second = factories.example(boundary=10, passage="doc-1")
    player = factories.player()
    answer(player, first, 4)
    assert factories.started(player, "news").example_id == second.id


def test_a_splice_counts_both_of_its_passages_as_read(ctx):
    spliced = factories.example(boundary=4, passage="doc-1", splice="doc-2", p=None)
    other_source = factories.example(boundary=10, passage="doc-2")
    player = factories.player()
    answer(player, spliced, 4)
    # The rest of doc-2 would give the splice away, and the splice gave doc-2 away.
    with pytest.raises(starts.NoExamplesLeft):
        factories.started(player, "news")
    assert db.session.get(Example, other_source.id).annotation_count == 0


def test_played_out_category_names_the_others_still_open(app, client):
    with app.app_context():
        factories.example(boundary=2, category_slug="news", passage="n")
        factories.example(boundary=2, category_slug="stories", passage="s")
    token = csrf_token(client)
    start = start_http(client, token)
    round_id = int(start.headers["Location"].rsplit("/", 1)[1])
    reveal_http(client, token, round_id, 1)
    answer_http(client, token, round_id, 2, reasons="hunch")
    again = start_http(client, token)
    body = again.get_data(as_text=True)
    assert again.status_code == 409
    assert "You have read every text in News" in body
    assert "Still new for you: <strong>Stories</strong>" in body


# -- pools ------------------------------------------------------------------------------------


def _records(tmp_path, docs_per_category: int = 10, variants: int = 3):
    lines = []
    for category in ("news", "stories"):
        for doc in range(docs_per_category):
            for v in range(variants):
                n = 6
                boundary = n if v == 0 else 2 + v
                lines.append(
                    {
                        "id": f"{category}-{doc}-{v}",
                        "category": category,
                        "system": "human" if v == 0 else "tiny",
                        "sentences": [f"S{i} of {category} {doc}." for i in range(n)],
                        "boundary": boundary,
                        "decoding": None if v == 0 else {"strategy": "nucleus", "p": 0.5},
                        "source": {"dataset": "t", "doc_id": f"{category}-{doc}"},
                    }
                )
    path = tmp_path / "examples.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def _pool_of_passages() -> dict[int, set[str]]:
    kinds: dict[int, set[str]] = {}
    rows = db.session.execute(
        select(ExamplePassage.passage_id, Example.kind).join(
            Example, Example.id == ExamplePassage.example_id
        )
    )
    for passage, kind in rows:
        kinds.setdefault(passage, set()).add(kind)
    return kinds


def test_import_holds_back_a_share_of_passages_per_category_whole(ctx, tmp_path):
    report = import_file(_records(tmp_path), reserve_daily=0.3)
    assert report.pools == {"normal": 42, "daily": 18, "spare": 0}
    per_passage = _pool_of_passages()
    # Every variant of a passage is in one pool.
    assert all(len(kinds) == 1 for kinds in per_passage.values())
    daily_by_category = db.session.execute(
        select(Example.category_id, func.count())
        .where(Example.kind == "daily")
        .group_by(Example.category_id)
    ).all()
    assert sorted(count for _, count in daily_by_category) == [9, 9]


def test_a_later_variant_joins_its_passage_s_pool(ctx, tmp_path):
    import_file(_records(tmp_path), reserve_daily=0.5)
    held = db.session.scalars(select(Example).where(Example.kind == "daily")).first()
    doc = held.source["doc_id"]
    extra = tmp_path / "more.jsonl"
    extra.write_text(
        json.dumps(
            {
                "id": "late-variant",
                "category": "news",
                "system": "tiny",
                "sentences": ["a.", "b.", "c."],
                "boundary": 2,
                "source": {"dataset": "t", "doc_id": doc},
            }
        )
    )
    report = import_file(extra)
    assert report.pools["daily"] == 1
    assert db.session.scalar(select(Example.kind).where(Example.external_id == "late-variant")) == (
        "daily"
    )


def test_reserving_later_takes_only_passages_nobody_has_read(ctx):
    read = factories.example(boundary=3, passage="read")
    for i in range(9):
        factories.example(boundary=3, passage=f"fresh-{i}")
    answer(factories.player(), read, 3)
    moved = pools.reserve_unread(1.0, random.Random(1))
    assert moved.passages == 9 and moved.daily == 9
    assert db.session.get(Example, read.id).kind == "normal"
    with pytest.raises(ValueError):
        pools.reserve_unread(0)


def test_reserving_leaves_every_study_pool_alone_conditions_included(ctx):
    # A study with conditions keeps, beside its lists of ids, a pool per condition and the
    # allocation's seed (app/crowd/admin.py).
    own, conditioned, free = (factories.example(passage=f"p{i}") for i in range(3))
    pool = {"normal": [own.id], "tutorial": [], "checks": [], "inside_checks": [],
            "conditions": {"long": {"normal": [conditioned.id], "tutorial": []}},
            "allocation_seed": 12345}  # fmt: skip
    db.session.add(Study(slug="s", title="S", platform=Platform.prolific, config={}, pool=pool))
    db.session.commit()
    assert pools.reserve_unread(1.0, random.Random(1)).passages == 1
    assert [e.kind for e in (own, conditioned, free)] == ["normal", "normal", "daily"]


def test_sets_skip_passages_read_in_a_set_too(ctx):
    factories.example(boundary=3, passage="p")
    factories.example(boundary=10, passage="p")
    player = factories.player()
    first = sets.play(player, "news")
    assert first.set_id is not None
    reveals.reveal_next(player, first.id, 1)
    answers.submit_answer(player, first.id, answers.parse_answer("machine", 2, ["hunch"], ""))
    with pytest.raises(starts.NoExamplesLeft):
        sets.play(player, "news")


def test_the_daily_draw_grows_along_splices_to_spare_few_texts():
    # Passages 1-2-3-4-5-6 each spliced with the next: holding back three should keep them in a
    # run (one splice across the pools), never scattered.
    candidates = dict.fromkeys(range(1, 7), 1)
    neighbours = pools._splice_links([(i, i + 1) for i in range(1, 6)])
    for seed in range(20):
        drawn = sorted(pools._choose(candidates, 0.5, random.Random(seed), neighbours))
        assert len(drawn) == 3 and drawn[-1] - drawn[0] == 2, drawn
