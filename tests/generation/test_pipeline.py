"""The pipeline with a tiny GPT-2 trained in the session: decoding, records, resume, errors."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
import torch

from app.catalog.records import parse_lines
from generation import pipeline
from generation.cli import main
from generation.decoding import Decoding
from generation.generator import Request, continue_batch
from generation.sentences import split_sentences
from tests.generation.conftest import cli_args, read

N = 4


def prompts(count: int) -> list[str]:
    return [
        "The town council met on Monday.",
        "Fiona walked to the harbour with her dog. It was raining hard.",
        "Rinse the lentils under cold water.",
        "The bridge will close for repairs. Drivers should use Millrace Road. Work starts soon.",
    ][:count]


def _norm(sentence: str) -> str:
    return " ".join(sentence.lower().split())


PIPELINE = (
    f"-n {N} --per-doc 3 --seed 5 --p uniform:0.8:1 --tokens-per-sentence 30 --batch-size 4"
    " --max-attempts 4 --no-progress"
)


def generate_args(corpus, out, *extra) -> list[str]:
    return cli_args(corpus, out, PIPELINE, *extra)


@pytest.fixture
def model_args(tiny_model_dir):
    return ["--model", str(tiny_model_dir), "--device", "cpu", "--system", "tiny"]


def test_p_zero_is_greedy_decoding(lm):
    requests = [
        Request(prompt=text, needed=99, decoding=Decoding(p=0.0), seed=i, budget=12)
        for i, text in enumerate(prompts(2))
    ]
    ours = continue_batch(lm, requests, stop_on_sentences=False)
    for request, result in zip(requests, ours, strict=True):
        encoded = lm.tokenizer(request.prompt, return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            greedy = lm.model.generate(
                **encoded,
                do_sample=False,
                max_new_tokens=12,
                min_new_tokens=12,
                pad_token_id=lm.tokenizer.pad_token_id,
            )
        expected = lm.tokenizer.decode(greedy[0, encoded["input_ids"].shape[1] :])
        assert result.new_tokens == 12
        assert result.text == expected


def test_batched_equals_one_at_a_time(lm):
    requests = [
        Request(
            prompt=text,
            needed=2,
            decoding=Decoding(p=p, repetition_penalty=1.2),
            seed=7 + i,
            budget=60,
        )
        for i, (text, p) in enumerate(zip(prompts(4), [0.0, 0.0, 0.9, 1.0], strict=True))
    ]
    batched = continue_batch(lm, requests)
    alone = [continue_batch(lm, [r])[0] for r in requests]
    assert batched == alone
    assert len({r.text for r in batched}) > 1


def test_same_seed_same_text_and_other_seeds_differ(lm):
    request = Request(prompt=prompts(1)[0], needed=2, decoding=Decoding(p=1.0), seed=11, budget=40)
    first = continue_batch(lm, [request])[0]
    assert continue_batch(lm, [request])[0] == first
    others = {
        continue_batch(lm, [Request(request.prompt, 2, Decoding(p=1.0), seed, 40)])[0].text
        for seed in (12, 13, 14)
    }
    assert others - {first.text}


def test_generate_writes_valid_examples_of_exactly_n_sentences(corpus_file, tmp_path, model_args):
    out = tmp_path / "out.jsonl"
    assert main(generate_args(corpus_file, out, *model_args)) == 0
    rows = read(out)
    manifest = json.loads((tmp_path / "out.jsonl.manifest.json").read_text())
    assert manifest["status"] == "complete"
    counts = manifest["counts"]
    assert counts["planned"] == 18 and counts["skipped_documents"] == 1
    assert counts["made"] == len(rows) > 0
    # Every example tried (the plan's and the replacements for rejected ones) is made or dropped.
    assert counts["made"] + counts["dropped"] == 18 + counts["replacements"]
    assert manifest["model"]["name_or_path"] == model_args[1]
    assert manifest["settings"]["p"] == "uniform:0.8:1"
    assert "generation" in manifest["code_version"]
    parsed = list(parse_lines(out.read_text(encoding="utf-8").splitlines()))
    assert all(not isinstance(r, Exception) for r in parsed), parsed
    source = {json.loads(line)["id"]: json.loads(line) for line in corpus_file.open()}
    for row in rows:
        assert len(row["sentences"]) == N
        h = row["boundary"]
        doc = source[row["source"]["doc_id"]]
        assert doc["text"].startswith(" ".join(row["sentences"][:h]))
        assert row["source"]["splitter"].startswith("pysbd")
        if row["system"] == "human":
            assert h == N and row["decoding"] is None
        else:
            assert row["system"] == "tiny"
            assert 0.8 <= row["decoding"]["p"] <= 1 and row["decoding"]["top_k"] is None
            assert row["provenance"]["weights_sha256"] == manifest["model"]["weights_sha256"]
            assert isinstance(row["seed"], int)
            # No machine sentence is one of the document's own later sentences (a memorised
            # human text would carry a wrong boundary). A short generic sentence may still occur
            # inside a longer human one, so this compares sentences, not substrings.
            later = {_norm(s) for s in split_sentences(doc["text"])[h:]}
            assert later.isdisjoint(_norm(s) for s in row["sentences"][h:])
    # The same run again gives the same examples.
    again = tmp_path / "again.jsonl"
    assert main(generate_args(corpus_file, again, *model_args)) == 0
    assert read(again) == rows


def test_all_human_share(corpus_file, tmp_path, model_args, capfd):
    out = tmp_path / "human.jsonl"
    assert main(generate_args(corpus_file, out, *model_args, "--human-share", "1")) == 0
    # --no-progress: no bar at all, transformers' weight-loading bar included.
    err = capfd.readouterr().err
    assert "%|" not in err and "Loading" not in err, err
    rows = read(out)
    assert len(rows) == 18
    assert all(r["boundary"] == N and r["system"] == "human" for r in rows)
    # Named as human, not after the model of the run that made them.
    assert all(re.fullmatch(rf"{r['source']['doc_id']}-human-\d", r["id"]) for r in rows)
    manifest = json.loads((tmp_path / "human.jsonl.manifest.json").read_text())
    assert (
        manifest["settings"]["corpus_sha256"]
        == hashlib.sha256(corpus_file.read_bytes()).hexdigest()
    )
    # The `human` command's passages and the run's are the same texts: a merge keeps them once.
    alone = tmp_path / "alone.jsonl"
    assert main(["human", "--corpus", str(corpus_file), "--out", str(alone), "-n", str(N)]) == 0
    merged = tmp_path / "merged.jsonl"
    assert main(["merge", "--out", str(merged), str(out), str(alone)]) == 0
    ids = [r["id"] for r in read(merged)]
    assert len(ids) == len(set(ids)) == 18


def test_resume_after_a_kill_gives_the_uninterrupted_set(
    corpus_file, tmp_path, model_args, monkeypatch
):
    whole = tmp_path / "whole.jsonl"
    assert main(generate_args(corpus_file, whole, *model_args)) == 0

    killed = tmp_path / "killed.jsonl"
    real_window = pipeline._run_window
    calls = []

    def dies_on_second_window(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_window(*args, **kwargs)

    monkeypatch.setattr(pipeline, "WINDOW_BATCHES", 1)
    monkeypatch.setattr(pipeline, "_run_window", dies_on_second_window)
    assert main(generate_args(corpus_file, killed, *model_args)) == 130
    assert not killed.exists()  # nothing looks complete
    part = tmp_path / "killed.jsonl.part"
    manifest = json.loads((tmp_path / "killed.jsonl.manifest.json").read_text())
    assert manifest["status"] == "incomplete"
    assert 0 < len(part.read_text().splitlines()) < len(read(whole))
    with part.open("a") as handle:  # a torn last line, as a kill mid-write leaves
        handle.write('{"id": "torn')
    monkeypatch.setattr(pipeline, "_run_window", real_window)

    assert main(generate_args(corpus_file, killed, *model_args)) == 2  # refuses without --resume
    assert main(generate_args(corpus_file, killed, *model_args, "--resume")) == 0
    resumed = read(killed)
    assert len({r["id"] for r in resumed}) == len(resumed)
    by_id = {r["id"]: r for r in read(whole)}
    assert {r["id"]: r for r in resumed} == by_id
    done = json.loads((tmp_path / "killed.jsonl.manifest.json").read_text())
    assert done["status"] == "complete"
    assert done["counts"]["made"] == len(by_id)
    # Changing a setting that changes the examples is refused on resume.
    changed = generate_args(corpus_file, killed, *model_args, "--resume", "--seed", "6")
    assert main(changed) == 2


def test_content_filter_removes_and_counts(corpus_file, tmp_path, model_args):
    words = tmp_path / "words.txt"
    words.write_text("the\nand\n", encoding="utf-8")
    out = tmp_path / "filtered.jsonl"
    assert main(generate_args(corpus_file, out, *model_args, "--filter-words", str(words))) == 0
    manifest = json.loads((tmp_path / "filtered.jsonl.manifest.json").read_text())
    removed = manifest["counts"]["dropped_by_reason"].get("content_filter", 0)
    assert removed > 0
    assert sum(manifest["counts"]["filtered_words"].values()) >= removed
    dropped = read(tmp_path / "filtered.jsonl.dropped.jsonl")
    assert sum(r["reason"] == "content_filter" for r in dropped) == removed
    for row in read(out):
        machine = " ".join(row["sentences"][row["boundary"] :]).lower().split()
        assert "the" not in machine and "and" not in machine


def test_grover_prompt_format_is_recorded(corpus_file, tmp_path, model_args):
    out = tmp_path / "grover.jsonl"
    args = generate_args(corpus_file, out, *model_args, "--prompt-format", "grover")
    assert main(args) == 0
    machine = [r for r in read(out) if r["system"] == "tiny"]
    assert machine
    for row in machine:
        assert row["meta"]["prompt_format"] == "grover"
        assert row["meta"]["grover_fields"] == ["domain", "date", "authors", "title"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (["--model", "./no/such/model"], "does not exist"),
        (["--p", "1.5"], "p must be in [0, 1]"),
        (["-n", "1"], "at least 2"),
        (["--system-label", "x" * 101], "1 to 100 characters"),
        (["--preset", "raid", "--top-k", "5"], "sets every decoding setting"),
    ],
)
def test_bad_input_fails_clearly_without_output(
    corpus_file, tmp_path, model_args, capsys, change, message
):
    out = tmp_path / "bad.jsonl"
    assert main(generate_args(corpus_file, out, *model_args, *change)) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


def test_bad_corpus_line_names_file_and_line(tmp_path, model_args, capsys):
    corpus = tmp_path / "broken.jsonl"
    corpus.write_text('{"id": "a", "text": "One. Two."}\n{"id": "b"\n', encoding="utf-8")
    assert main(generate_args(corpus, tmp_path / "x.jsonl", *model_args)) == 2
    assert f"{corpus}:2: not valid JSON" in capsys.readouterr().err


def test_help_for_every_subcommand(capsys):
    for command in ("split", "human", "baseline", "generate", "merge", "train-tiny", "demo"):
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0
        assert "usage: python -m generation " + command in capsys.readouterr().out


def test_baseline_human_and_merge_import_into_the_site(corpus_file, tmp_path, runner, ctx):
    common = ["--corpus", str(corpus_file), "--no-progress", "-n", str(N)]
    human, splice, merged = (tmp_path / f"{k}.jsonl" for k in ("human", "splice", "all"))
    assert main(["human", *common, "--out", str(human)]) == 0
    assert main(["baseline", *common, "--out", str(splice), "--per-doc", "2"]) == 0
    assert main(["merge", "--out", str(merged), str(human), str(splice)]) == 0
    rows = read(merged)
    # An all-human passage both runs made (the same id and text) is one text.
    both = {r["id"] for r in read(human)} & {r["id"] for r in read(splice)}
    assert all(r["system"] == "human" for r in read(splice) if r["id"] in both)
    assert len(rows) == len(read(human)) + len(read(splice)) - len(both) == 6 + 12 - len(both)
    for row in rows:
        if row["system"] == "splice-baseline":
            assert row["source"]["splice_doc_id"] != row["source"]["doc_id"]
    result = runner.invoke(args=["import", str(merged)])
    assert result.exit_code == 0, result.output
    assert f"Imported {len(rows)} example(s)" in result.output


def test_a_merge_names_the_code_as_it_was_before_writing_its_output(tmp_path, monkeypatch):
    """Rewriting a tracked output (data/demo/examples.jsonl) makes a checkout dirty: the merged
    manifest must name the version the run started from, not the one its own write made."""
    from generation import records

    part, out = tmp_path / "part.jsonl", tmp_path / "all.jsonl"
    part.write_text(
        json.dumps({"id": "a", "category": "news", "system": "human", "sentences": ["x", "y"],
                    "boundary": 2}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    monkeypatch.setattr(
        records, "code_version", lambda: "generation 1 (git abc+dirty)" if out.exists() else
        "generation 1 (git abc)"
    )  # fmt: skip
    merged = records.merge([part], out)
    assert out.exists() and merged["code_version"] == "generation 1 (git abc)"
    manifest = json.loads(records.paths_for(out)["manifest"].read_text(encoding="utf-8"))
    assert manifest["code_version"] == "generation 1 (git abc)"
