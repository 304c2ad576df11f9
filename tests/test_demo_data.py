"""The shipped demo set: enough original passages, valid examples of each system, importable,
built by the generation pipeline from the shipped tiny model at a clean commit, holding a month of
daily challenges."""

from __future__ import annotations

import json
import re
from collections import Counter

from sqlalchemy import distinct, func, select

from app import PROJECT_ROOT
from app.catalog.importer import read_records
from app.catalog.pools import NORMAL
from app.extensions import db
from app.game import daily, daily_texts
from app.models import Category, Example, ExamplePassage
from generation.demo import DATASET, TINY_SYSTEM, N
from generation.sentences import split_sentences
from generation.tiny import corpus_texts, out_of_vocabulary, words

DEMO = PROJECT_ROOT / "data" / "demo"


def test_corpus_has_240_passages_of_12_sentences_in_three_categories():
    counts = Counter()
    for path in sorted((DEMO / "corpus").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            assert len(split_sentences(doc["text"])) >= 12, doc["id"]
            counts[path.stem] += 1
    assert set(counts) == {"news", "stories", "recipes"}
    assert min(counts.values()) >= 80 and sum(counts.values()) >= 240


def test_examples_are_valid_and_cover_every_system():
    records = read_records(DEMO / "examples.jsonl")
    assert len(records) >= 300
    systems = Counter(r.system for r in records)
    assert set(systems) == {"human", "splice-baseline", TINY_SYSTEM}
    assert {r.category for r in records} == {"news", "stories", "recipes"}
    corpus = {}
    for path in (DEMO / "corpus").glob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            doc = json.loads(line)
            corpus[doc["id"]] = split_sentences(doc["text"])
    for record in records:
        assert len(record.sentences) == N
        assert record.source["dataset"] == DATASET
        human_part = corpus[record.source["doc_id"]][: record.boundary]
        assert record.sentences[: record.boundary] == human_part
        if record.system == "human":
            assert record.boundary == N and record.decoding is None
        else:
            assert 1 <= record.boundary < N
        if record.system == "splice-baseline":
            assert record.source["splice_doc_id"] != record.source["doc_id"]
        if record.system == TINY_SYSTEM:
            assert 0 <= record.decoding["p"] <= 1 and record.seed is not None
            machine = record.sentences[record.boundary :]
            assert not set(machine) & set(corpus[record.source["doc_id"]])


def test_every_example_names_the_clean_commit_that_made_it():
    records = read_records(DEMO / "examples.jsonl")
    versions = {r.provenance["code_version"] for r in records}
    assert len(versions) == 1
    version = versions.pop()
    assert re.fullmatch(r"generation \S+ \(git [0-9a-f]{12}\)", version), version  # no +dirty
    manifest = json.loads((DEMO / "examples.jsonl.manifest.json").read_text(encoding="utf-8"))
    assert manifest["code_version"] == version


def test_manifest_and_shipped_model_are_small_and_complete():
    manifest = json.loads((DEMO / "examples.jsonl.manifest.json").read_text(encoding="utf-8"))
    assert manifest["status"] == "complete"
    assert manifest["examples"] == len(read_records(DEMO / "examples.jsonl"))
    assert manifest["counts"]["made"] == manifest["examples"]
    model_bytes = sum(p.stat().st_size for p in (DEMO / "model").iterdir())
    assert model_bytes < 5_000_000
    assert (DEMO / "model" / "config.json").exists()


def test_machine_sentences_are_in_words_of_the_corpus():
    """At most 2% of the words the tiny model wrote are not words of the corpus (its word-level
    tokenizer writes only corpus pieces; a word can still be made of two pieces run together)."""
    vocabulary = {w for text in corpus_texts(DEMO / "corpus") for w in words(text)}
    machine = [
        sentence
        for record in read_records(DEMO / "examples.jsonl")
        if record.system == TINY_SYSTEM
        for sentence in record.sentences[record.boundary :]
    ]
    unknown, total = out_of_vocabulary(machine, vocabulary)
    assert len(machine) >= 1000 and total >= 10_000
    assert unknown / total <= 0.02, f"{unknown} of {total} machine words are not corpus words"


def test_shipped_tokenizer_round_trips_the_corpus():
    """The shipped model's tokenizer, loaded as any Hugging Face tokenizer, writes every corpus
    text back exactly, with no unknown token."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(DEMO / "model")
    manifest = json.loads((DEMO / "examples.jsonl.manifest.json").read_text(encoding="utf-8"))
    assert manifest["model"]["training"]["config"]["tokenizer"] == "word"
    for text in corpus_texts(DEMO / "corpus"):
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        assert tokenizer.unk_token_id not in ids
        assert tokenizer.decode(ids) == text


def test_demo_imports_with_the_cli(runner, ctx):
    result = runner.invoke(args=["load-demo", "--if-empty"])
    assert result.exit_code == 0, result.output
    assert "Imported" in result.output
    again = runner.invoke(args=["load-demo", "--if-empty"])
    assert "already has examples" in again.output


def test_the_demo_holds_a_month_of_daily_challenges_and_a_pool_for_normal_play(runner, ctx):
    """`flask load-demo` holds back enough texts for 30 days of challenges that keep every
    composition rule, and leaves texts of every category for normal play."""
    result = runner.invoke(args=["load-demo"])
    assert result.exit_code == 0, result.output
    status = daily.pool_status()
    assert status.days_left >= 30
    days = daily_texts.plan_days(daily._candidates(), set(), ctx.config["DAILY_SIZE"])
    assert daily_texts.full_days(days) == status.days_left
    for day in days[:30]:
        kinds = Counter(c.kind for c in day.texts)
        assert (
            kinds[daily_texts.MACHINE] >= 3
            and kinds[daily_texts.HUMAN] >= 1
            and kinds[daily_texts.SPLICE] <= 1
        )
        assert max(Counter(c.category_id for c in day.texts).values()) <= 2
        positions = Counter(c.position for c in day.texts if c.position is not None)
        assert max(positions.values()) <= 2
    checked = runner.invoke(args=["daily", "status"])
    assert checked.exit_code == 0 and f"Days left: about {status.days_left} more" in checked.output
    normal = dict(
        db.session.execute(
            select(Category.slug, func.count(distinct(ExamplePassage.passage_id)))
            .join(Example, Example.category_id == Category.id)
            .join(ExamplePassage, ExamplePassage.example_id == Example.id)
            .where(Example.kind == NORMAL)
            .group_by(Category.slug)
        ).all()
    )
    assert set(normal) == {"news", "stories", "recipes"} and min(normal.values()) >= 15
