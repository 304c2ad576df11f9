"""The pure parts: splitting, plans, top-p, checks, the Grover format, the splice baseline."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
import torch

from generation.baselines import splice
from generation.corpus import CorpusError, Document, read_corpus
from generation.decoding import DecodingPlan
from generation.filters import (
    REPEATED_SENTENCE,
    REPEATS_PROMPT,
    TOO_FEW,
    ContentFilter,
    quality_problem,
)
from generation.prompts import PDistribution, PlanError, grover_header, make_plan, prompt_text
from generation.sampling import complete_sentences, nucleus_probs
from generation.sentences import SPLITTER, split_sentences


def doc(doc_id: str, n: int, **meta) -> Document:
    sentences = tuple(f"Sentence {i} of {doc_id} is here." for i in range(n))
    return Document(id=doc_id, text=" ".join(sentences), sentences=sentences, **meta)


def test_splitter_keeps_abbreviations_and_names_itself():
    assert split_sentences("Dr. Strand met Mr. Lee at 5 p.m. today. They  talked.\nThen left!") == [
        "Dr. Strand met Mr. Lee at 5 p.m. today.",
        "They talked.",
        "Then left!",
    ]
    assert SPLITTER.startswith("pysbd ")


def test_p_distribution_parses_and_rejects_out_of_range():
    assert PDistribution.parse("uniform") == PDistribution()
    assert PDistribution.parse("0,0.4,1.0").values == (0.0, 0.4, 1.0)
    rng = random.Random(1)
    assert {PDistribution.parse("0,0.4,1.0").draw(rng) for _ in range(100)} == {0.0, 0.4, 1.0}
    drawn = [PDistribution.parse("uniform:0.5:0.6").draw(rng) for _ in range(100)]
    assert all(0.5 <= p <= 0.6 for p in drawn)
    for bad in ("1.5", "-0.1", "0,2", "nan", "uniform:0.9:0.1", "x"):
        with pytest.raises(PlanError):
            PDistribution.parse(bad)


def test_boundary_is_uniform_on_1_to_n_and_all_human_share_is_configurable():
    docs = [doc(f"d{i}", 12) for i in range(400)]
    plan = make_plan(docs, category="news", system_slug="m", n=10, per_doc=2, seed=3)
    counts = Counter(t.h for t in plan.tasks)
    assert set(counts) == set(range(1, 11))
    assert all(40 <= c <= 120 for c in counts.values())  # 800 draws, 80 expected each
    none = make_plan(docs, category="news", system_slug="m", n=10, seed=3, human_share=0.0)
    assert all(t.h < 10 for t in none.tasks)
    half = make_plan(docs, category="news", system_slug="m", n=10, seed=3, human_share=0.5)
    share = sum(t.all_human for t in half.tasks) / len(half.tasks)
    assert 0.4 < share < 0.6


def test_plan_is_reproducible_per_example_and_skips_short_documents():
    docs = [doc("a", 12), doc("short", 5), doc("b", 12)]
    p = DecodingPlan()
    first = make_plan(docs, category="news", system_slug="m", per_doc=3, seed=9, decoding=p)
    again = make_plan(docs, category="news", system_slug="m", per_doc=3, seed=9, decoding=p)
    alone = make_plan(docs[2:], category="news", system_slug="m", per_doc=3, seed=9, decoding=p)
    assert first.skipped_documents == ["short"]
    assert [(t.id, t.h, t.p, t.seed) for t in first.tasks] == [
        (t.id, t.h, t.p, t.seed) for t in again.tasks
    ]
    # An example's p and seed do not depend on the other documents of the run; its h does, as
    # boundaries are stratified over the run (tests/generation/test_trust.py).
    b_tasks = [(t.id, t.p, t.seed) for t in first.tasks if t.doc.id == "b"]
    assert b_tasks == [(t.id, t.p, t.seed) for t in alone.tasks]
    other = make_plan(docs, category="news", system_slug="m", per_doc=3, seed=10, decoding=p)
    assert [t.seed for t in other.tasks] != [t.seed for t in first.tasks]
    with pytest.raises(PlanError, match="at least 2"):
        make_plan(docs, category="news", system_slug="m", n=1)


def test_nucleus_keeps_the_smallest_set_reaching_p():
    logits = torch.log(torch.tensor([0.1, 0.5, 0.3, 0.1]))
    greedy = nucleus_probs(logits, 0.0)
    assert greedy.tolist() == [0.0, 1.0, 0.0, 0.0]
    top = nucleus_probs(logits, 0.7)  # 0.5 + 0.3 reaches 0.7
    assert torch.allclose(top, torch.tensor([0.0, 0.625, 0.375, 0.0]))
    assert torch.allclose(nucleus_probs(logits, 1.0), torch.softmax(logits, -1))
    tied = nucleus_probs(torch.tensor([1.0, 3.0, 3.0]), 0.0)
    assert tied.tolist() == [0.0, 1.0, 0.0]  # ties go to the lowest id, like argmax


def test_quality_rules():
    prompt = ["One.", "Two."]
    assert quality_problem(prompt, ["Three."], 2) == TOO_FEW
    assert quality_problem(prompt, ["Three.", "One."], 2) == REPEATS_PROMPT
    assert quality_problem(prompt, ["Two.", "Three."], 2) == REPEATS_PROMPT
    assert quality_problem(prompt, ["Three.", "Three."], 2) == REPEATED_SENTENCE
    assert quality_problem(prompt, ["Three.", "Four.", "Four."], 2) is None  # only kept ones count
    assert quality_problem(prompt, ["Three.", "Four."], 2, ["One.", "Two.", "Four."]) == (
        "copies_source"
    )


def test_complete_sentences_drops_an_unfinished_tail():
    assert complete_sentences("First one. Second one. And a thi", finished=False) == [
        "First one.",
        "Second one.",
    ]
    assert complete_sentences("First one. Second one.", finished=True) == [
        "First one.",
        "Second one.",
    ]
    assert complete_sentences("First one. Second", finished=True) == ["First one."]


def test_content_filter_matches_whole_words(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("# offensive words\nbadword\nvery bad phrase\n\n", encoding="utf-8")
    content = ContentFilter.from_file(words)
    assert content.words == ("badword", "very bad phrase")
    assert content.matches(["A BadWord here.", "Not badwords.", "A very bad phrase."]) == [
        "badword",
        "very bad phrase",
    ]
    assert content.matches(["Clean text."]) == []


def test_grover_format_puts_metadata_before_the_body():
    news = doc(
        "n1",
        12,
        title="Bridge repairs",
        date="2025-03-14",
        authors=("Ann Lee", "Bo Park"),
        domain="gazette.example",
    )
    text, meta = prompt_text(news, 2, "grover")
    assert text == (
        "<|begindomain|>gazette.example<|enddomain|><|begindate|>March 14, 2025<|enddate|>"
        "<|beginauthors|>Ann Lee, Bo Park<|endauthors|><|begintitle|>Bridge repairs<|endtitle|>"
        "<|beginarticle|>Sentence 0 of n1 is here. Sentence 1 of n1 is here."
    )
    assert meta == {
        "prompt_format": "grover",
        "grover_fields": ["domain", "date", "authors", "title"],
    }
    assert grover_header(doc("n2", 12, title="Only a title"))[1] == ["title"]
    assert prompt_text(news, 2, "plain") == (
        "Sentence 0 of n1 is here. Sentence 1 of n1 is here.",
        {"prompt_format": "plain"},
    )


def test_splice_never_takes_text_from_the_same_document():
    docs = [doc(f"d{i}", 12) for i in range(5)]
    plan = make_plan(docs, category="news", system_slug="s", per_doc=20, seed=1, human_share=0.0)
    for task in plan.tasks:
        donor, start, sentences = splice(task, docs, random.Random(task.seed))
        assert donor.id != task.doc.id
        assert len(sentences) == task.n - task.h
        assert sentences == list(donor.sentences[start : start + len(sentences)])
        assert not any(task.doc.id in s for s in sentences)
    lonely = make_plan(docs[:1], category="news", system_slug="s", seed=1, human_share=0.0)
    assert splice(lonely.tasks[0], docs[:1], random.Random(0))[0] is None


def test_corpus_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "a", "text": "Fine."}) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad.jsonl:2: not valid JSON"):
        read_corpus(path)
    path.write_text(json.dumps({"id": "a"}) + "\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"bad.jsonl:1: 'text' must be"):
        read_corpus(path)
    folder = tmp_path / "txt"
    folder.mkdir()
    (folder / "one.txt").write_text("A first sentence. A second one.", encoding="utf-8")
    assert [d.id for d in read_corpus(folder)] == ["one"]
    assert read_corpus(folder)[0].sentences == ("A first sentence.", "A second one.")
    with pytest.raises(CorpusError, match="no such corpus"):
        read_corpus(tmp_path / "missing.jsonl")
