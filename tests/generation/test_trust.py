"""Generated data one can trust: the category from any field, splices within it, stratified
boundaries that survive the filters, no broken characters or in-sentence loops, the decoding that
ran recorded as it ran, and provenance on every record."""

from __future__ import annotations

import json
import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from generation.cli import main
from generation.corpus import CorpusError, read_corpus
from generation.decoding import RAID_GRID, Decoding
from generation.filters import (
    BAD_CHARACTERS,
    LOOP_IN_SENTENCE,
    NO_WORDS,
    bad_character,
    quality_problem,
    sentence_loop,
)
from generation.prompts import (
    boundary_distribution,
    make_plan,
    stratified_counts,
)
from tests.generation.conftest import demo_docs, manifest_of, read
from tests.generation.test_pure import doc


def write_jsonl(path, rows) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def chi_square(observed: dict[int, int], expected: dict[int, float]) -> float:
    return sum((observed.get(h, 0) - e) ** 2 / e for h, e in expected.items() if e > 0)


# --- the category field, and splices within it ----------------------------------------------


def genre_corpus(tmp_path):
    """News and stories whose category is in a field called `genre` (no `category` field)."""
    docs = [{**d, "genre": "News"} for d in demo_docs("news", 8)]
    docs += [{**d, "genre": "Short Stories"} for d in demo_docs("stories", 8)]
    path = tmp_path / "mixed.jsonl"
    write_jsonl(path, docs)
    return path, {d["id"]: d["genre"] for d in docs}


def test_splices_stay_within_a_category_named_by_any_field(tmp_path):
    corpus, genre = genre_corpus(tmp_path)
    slug = {"News": "news", "Short Stories": "short-stories"}
    out = tmp_path / "splice.jsonl"
    args = ["baseline", "--corpus", str(corpus), "--out", str(out), "-n", "5", "--per-doc", "3"]
    assert main([*args, "--category-field", "genre", "--human-share", "0", "--no-progress"]) == 0
    rows = read(out)
    assert len(rows) == 48
    assert {r["category"] for r in rows} == {"news", "short-stories"}
    for row in rows:
        assert row["category"] == slug[genre[row["source"]["doc_id"]]]
        donor = row["source"]["splice_doc_id"]
        assert slug[genre[donor]] == row["category"], f"{row['id']} spliced across genres"
        assert row["provenance"]["generation"]["donor_category"] == row["category"]


def test_a_corpus_with_a_genre_field_but_no_option_gets_a_warning(tmp_path, capsys):
    corpus, _genre = genre_corpus(tmp_path)
    out = tmp_path / "h.jsonl"
    assert main(["human", "--corpus", str(corpus), "--out", str(out), "--no-progress"]) == 0
    assert "pass --category-field genre" in capsys.readouterr().err


def test_a_document_without_the_named_field_is_an_error_naming_file_and_line(tmp_path, capsys):
    path = tmp_path / "c.jsonl"
    write_jsonl(path, [{"id": "a", "text": "One. Two.", "genre": "x"}, {"id": "b", "text": "One."}])
    with pytest.raises(CorpusError, match=r"c\.jsonl:2: no 'genre' field"):
        read_corpus(path, "genre")
    out = tmp_path / "o.jsonl"
    code = main(["human", "--corpus", str(path), "--out", str(out), "--category-field", "genre"])
    assert code == 2 and "c.jsonl:2" in capsys.readouterr().err and not out.exists()


# --- stratified boundaries, kept through the filters -----------------------------------------


def test_boundaries_are_stratified_exactly_over_the_allowed_range():
    docs = [doc(f"d{i}", 12) for i in range(53)]
    plan = make_plan(docs, category="news", system_slug="m", n=10, seed=4)
    counts = Counter(t.h for t in plan.tasks)
    # 53 examples over h = 1..10: every h gets 5 or 6, never a random 2 or 9.
    assert set(counts) == set(range(1, 11))
    assert sorted(counts.values()) == [5] * 7 + [6] * 3
    expected = {h: 53 * p for h, p in boundary_distribution(10, None).items()}
    # chi-square is only the rounding: 7 × 0.3² / 5.3 + 3 × 0.7² / 5.3 (random draws: about 9).
    assert chi_square(counts, expected) == pytest.approx(2.1 / 5.3)
    # An all-human share: 40 examples at 0.3 -> exactly 12 all-human, 7 at each other h.
    shared = make_plan(docs[:40], category="news", system_slug="m", n=5, seed=4, human_share=0.3)
    assert Counter(t.h for t in shared.tasks) == {1: 7, 2: 7, 3: 7, 4: 7, 5: 12}
    # Stratified within each category, not only overall.
    mixed = [doc(f"n{i}", 12, category="news") for i in range(20)]
    mixed += [doc(f"s{i}", 12, category="stories") for i in range(20)]
    plan = make_plan(mixed, category="x", system_slug="m", n=5, seed=1, human_share=0.0)
    for category in ("news", "stories"):
        assert Counter(t.h for t in plan.tasks if t.category == category) == {
            h: 5 for h in range(1, 5)
        }


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 5000),
    n=st.integers(2, 30),
    share=st.none() | st.floats(0, 1),
    seed=st.integers(0, 2**32),
)
def test_stratified_counts_sum_and_stay_within_one_of_expectation(count, n, share, seed):
    dist = boundary_distribution(n, share)
    assert sum(dist.values()) == pytest.approx(1)
    counts = stratified_counts(count, dist, random.Random(seed))
    assert sum(counts.values()) == count
    assert all(abs(counts[h] - count * p) < 1 for h, p in dist.items())


def zebra_corpus(tmp_path, docs: int = 30, sentences: int = 12):
    """Documents where about one sentence in twelve mentions zebras: a splice of many sentences is
    far likelier to contain one than a splice of a few, so a word filter on 'zebra' rejects early
    boundaries (long machine parts) far more often than late ones."""
    rng = random.Random(7)
    rows = []
    for d in range(docs):
        text = " ".join(
            f"Line {i} of paper {d} talks about {'zebras' if rng.random() < 0.08 else 'maps'}."
            for i in range(sentences)
        )
        rows.append({"id": f"doc{d}", "text": text})
    path = tmp_path / "zoo.jsonl"
    write_jsonl(path, rows)
    words = tmp_path / "words.txt"
    words.write_text("zebras\n", encoding="utf-8")
    return path, words


def kept_and_requested(out) -> tuple[dict, dict]:
    boundaries = manifest_of(out)["counts"]["boundaries"]
    return boundaries["requested"], boundaries["kept"]


def test_rejections_are_resampled_so_the_kept_boundaries_match_the_requested(tmp_path, capsys):
    corpus, words = zebra_corpus(tmp_path)
    common = ["baseline", "--corpus", str(corpus), "-n", "10", "--per-doc", "2", "--seed", "3"]
    common += ["--filter-words", str(words), "--human-share", "0", "--no-progress"]

    plain = tmp_path / "plain.jsonl"
    assert main([*common, "--out", str(plain), "--resample-rounds", "0"]) == 0
    requested, kept = kept_and_requested(plain)
    assert sum(requested.values()) == 60 and set(requested.values()) == {6, 7}  # stratified
    early = sum(kept[str(h)] for h in range(1, 4)) / sum(requested[str(h)] for h in range(1, 4))
    late = sum(kept[str(h)] for h in range(7, 10)) / sum(requested[str(h)] for h in range(7, 10))
    assert early + 0.2 < late  # the filter's skew, left alone, moves the kept set late
    assert "short of the requested" in capsys.readouterr().err

    out = tmp_path / "resampled.jsonl"
    assert main([*common, "--out", str(out), "--resample-rounds", "10"]) == 0
    requested, kept = kept_and_requested(out)
    assert kept == requested  # exactly the requested counts at every h
    rows = read(out)
    assert Counter(str(r["boundary"]) for r in rows) == Counter(requested)
    assert not any("zebras" in s for r in rows for s in r["sentences"][r["boundary"] :])
    stand_ins = [r for r in rows if "replaces" in r["meta"]]
    assert stand_ins
    originals = {r["meta"]["replaces"] for r in stand_ins}
    for row in stand_ins:  # named after the passage it was built from, not the rejected one
        doc = row["source"]["doc_id"]
        assert re.fullmatch(rf"{re.escape(doc)}-splice-baseline-r\d+-\d+", row["id"]), row["id"]
        assert not row["id"].startswith(row["meta"]["replaces"])
    assert len({r["id"] for r in rows}) == len(rows) and originals
    printed = capsys.readouterr().err
    assert "boundary h  requested" in printed and "matches the requested one" in printed
    # A resumed run makes the same replacements: nothing new, the same file.
    manifest = manifest_of(out)
    assert manifest["counts"]["replacements"] > 0 and not manifest["warnings"]


# --- characters and loops --------------------------------------------------------------------


def test_replacement_character_and_control_characters_are_rejected():
    prompt = ["It began well."]
    assert quality_problem(prompt, ["A fine line.", "Broken \ufffd bytes."], 2) == BAD_CHARACTERS
    assert quality_problem(prompt, ["A fine line.", "End\x04 of text."], 2) == BAD_CHARACTERS
    assert quality_problem(prompt, ["Bell\x07 rang.", "Then quiet."], 2) == BAD_CHARACTERS
    fine = ["A tab\there is fine.", "So is café — and “quotes”."]
    assert quality_problem(prompt, fine, 2) is None
    assert bad_character("plain text") is None and bad_character("x\x00") == "\x00"


def test_splices_with_broken_characters_never_reach_the_output(tmp_path):
    docs = demo_docs("news", 10)
    for d in docs[::2]:  # half the donors carry a decoding error in every sentence
        d["text"] = d["text"].replace(". ", " \ufffd. ")
    corpus = tmp_path / "news.jsonl"
    write_jsonl(corpus, docs)
    out = tmp_path / "out.jsonl"
    args = ["baseline", "--corpus", str(corpus), "--out", str(out), "-n", "4", "--per-doc", "2"]
    assert main([*args, "--human-share", "0", "--no-progress"]) == 0
    rows = read(out)
    assert rows and not any("\ufffd" in s for r in rows for s in r["sentences"][r["boundary"] :])


def test_a_sentence_without_a_word_is_rejected():
    # A tiny model trained by the tests once ended a text with a lone ".", which the generation
    # test then found in the source document: every player would have spotted it.
    for empty in [".", "…", '"', " . ", "?!", "—"]:
        assert quality_problem(["Start."], ["Fine.", empty], 2) == NO_WORDS, empty
    for fine in ["No.", "5.", "Oh!", "«Oui.»", "Ça va.", "It's 9 a.m."]:
        assert quality_problem(["Start."], ["Fine.", fine], 2) is None, fine


def test_a_loop_inside_one_sentence_is_rejected_and_speech_is_not():
    looped = [
        "The council said the city of the city of the city would pay.",
        "I went to the store and I went to the store and I went to the store.",
        "It was the the the the best of times.",
    ]
    for sentence in looped:
        assert sentence_loop(sentence) is not None, sentence
        assert quality_problem(["Start."], ["Fine.", sentence], 2) == LOOP_IN_SENTENCE
    fine = [
        "No, no, no, she said.",
        "It was very, very good.",
        "He said that that was that.",
        "Bake for ten minutes, turn, and bake for ten minutes more.",
    ]
    for sentence in fine:
        assert sentence_loop(sentence) is None, sentence


# --- the decoding that ran -------------------------------------------------------------------


def test_a_repetition_penalty_is_not_recorded_as_plain_nucleus_sampling():
    plain = Decoding(p=0.9).to_json()
    assert plain["strategy"] == "nucleus" and plain["steps"] == ["top_p=0.9", "sample"]
    penalised = Decoding(p=0.9, repetition_penalty=1.2).to_json()
    assert penalised["strategy"] == "sampling"
    assert penalised["steps"] == ["repetition_penalty=1.2", "top_p=0.9", "sample"]
    hot = Decoding(p=1.0, temperature=0.7, top_k=40).to_json()
    assert hot["steps"] == ["temperature=0.7", "top_k=40", "sample"]
    greedy = Decoding(p=0.0, repetition_penalty=1.2, temperature=0.5).to_json()
    assert greedy["strategy"] == "greedy"
    assert greedy["steps"] == ["repetition_penalty=1.2", "argmax"]  # temperature does not run
    assert [d.to_json()["strategy"] for d in RAID_GRID] == [
        "greedy",
        "greedy",
        "nucleus",
        "sampling",
    ]


def test_a_penalty_run_records_its_penalty_and_every_record_has_provenance(
    corpus_file, tmp_path, tiny_model_dir
):
    out = tmp_path / "pen.jsonl"
    args = ["generate", "--corpus", str(corpus_file), "--out", str(out), "--model"]
    args += [str(tiny_model_dir), "--device", "cpu", "--system", "tiny", "-n", "4"]
    args += ["--per-doc", "2", "--p", "0.8", "--repetition-penalty", "1.3", "--no-progress"]
    assert main([*args, "--tokens-per-sentence", "30"]) == 0
    rows = read(out)
    model_rows = [r for r in rows if r["system"] == "tiny"]
    assert model_rows
    for row in model_rows:
        assert row["decoding"]["strategy"] == "sampling"
        assert row["decoding"]["repetition_penalty"] == 1.3
        assert row["decoding"]["steps"][0] == "repetition_penalty=1.3"
        assert row["provenance"]["generation"]["method"] == "model"
    for row in rows:
        assert row["provenance"]["code_version"].startswith("generation ")
    for row in (r for r in rows if r["system"] == "human"):
        assert row["provenance"]["generation"]["method"] == "human"
        assert row["provenance"]["model"] is None


def test_human_and_splice_records_carry_provenance(corpus_file, tmp_path):
    human, splice = tmp_path / "human.jsonl", tmp_path / "splice.jsonl"
    base = ["--corpus", str(corpus_file), "-n", "4", "--no-progress"]
    assert main(["human", *base, "--out", str(human)]) == 0
    assert main(["baseline", *base, "--out", str(splice), "--per-doc", "3"]) == 0
    for row in read(human) + read(splice):
        provenance = row["provenance"]
        assert provenance["code_version"].startswith("generation ")
        assert provenance["model"] is None and provenance["weights_sha256"] is None
        method = provenance["generation"]["method"]
        assert method == ("human" if row["system"] == "human" else "splice")
        if method == "splice":
            assert provenance["generation"]["donor_doc_id"] == row["source"]["splice_doc_id"]
