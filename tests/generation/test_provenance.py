"""Exact provenance and modern decoding: the same example at any batch size (GPT-2 and Llama),
the unbatched check and its repairs, per-example settings and the RAID preset, the model's own
generation_config.json switched off and recorded, weights SHA-256, the output lock, drop counts,
Grover tag warnings and the category from a document field."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from generation import sampling
from generation.cli import main
from generation.decoding import RAID_GRID, Decoding, DecodingPlan
from generation.generator import Request, continue_batch
from generation.models import load
from generation.prompts import PlanError
from generation.records import OutputError, RunWriter
from roftcore.records import validate
from tests.generation.conftest import cli_args, manifest_of, read


def run(corpus, out, model, *extra) -> int:
    options = "--device cpu --system tiny -n 4 --per-doc 4 --seed 13 --tokens-per-sentence 30"
    return main(cli_args(corpus, out, f"{options} --no-progress", "--model", str(model), *extra))


@pytest.mark.parametrize("architecture", ["gpt2", "llama"])
def test_same_examples_at_any_batch_size(
    corpus_file, tmp_path, tiny_model_dir, tiny_llama_dir, architecture
):
    model = tiny_model_dir if architecture == "gpt2" else tiny_llama_dir
    outputs = {}
    for size in (1, 5, 32):
        out = tmp_path / f"b{size}.jsonl"
        args = ["--batch-size", str(size), "--p", "0,0.5,0.9,1", "--per-doc", "6"]
        assert run(corpus_file, out, model, *args) == 0
        outputs[size] = (read(out), read(tmp_path / f"b{size}.jsonl.dropped.jsonl"))
    assert len(outputs[1][0]) >= 8
    assert outputs[1] == outputs[5] == outputs[32]
    machine = [r for r in outputs[1][0] if r["system"] == "tiny"]
    assert machine and {r["provenance"]["generation"]["architecture"] for r in machine} == {
        "GPT2LMHeadModel" if architecture == "gpt2" else "LlamaForCausalLM"
    }


def noisy_batches(monkeypatch, scale: float = 2.0) -> None:
    """Make batched scores differ from unbatched ones (as other kernels and padding do, but much
    more): rows of a batch of two or more get noise; a single row does not."""
    real = sampling.RowSampler.__call__
    generator = torch.Generator().manual_seed(0)

    def call(self, input_ids, scores):
        if scores.shape[0] > 1:
            scores = scores + scale * torch.randn(scores.shape, generator=generator)
        return real(self, input_ids, scores)

    monkeypatch.setattr(sampling.RowSampler, "__call__", call)


def test_rows_checked_alone_undo_what_batching_changed(lm, monkeypatch):
    prompts = [
        "The town council met on Monday.",
        "Fiona walked to the harbour with her dog.",
        "Rinse the lentils under cold water.",
        "The bridge will close for repairs.",
    ]
    requests = [
        Request(p, 2, Decoding(p=0.95, repetition_penalty=1.1), seed=i, budget=40)
        for i, p in enumerate(prompts)
    ]
    alone = [continue_batch(lm, [r])[0] for r in requests]
    noisy_batches(monkeypatch)
    unchecked = continue_batch(lm, requests, check=False)
    assert unchecked != alone  # the test can fail: batching noise changes the text
    checked = continue_batch(lm, requests)
    assert checked == alone
    assert sum(c.repairs for c in checked) > 0 and all(c.settled for c in checked)


def test_decide_applies_each_setting_to_its_own_row():
    logits = torch.log(torch.tensor([[0.05, 0.4, 0.3, 0.25]] * 5))
    rows = sampling.RowSettings.of(
        [
            Decoding(p=0.0),  # greedy
            Decoding(p=1.0, top_k=1),  # top-1 is greedy too
            Decoding(p=1.0, min_p=0.9),  # only tokens >= 0.9 * 0.4
            Decoding(p=0.5),  # nucleus {1, 2}
            Decoding(p=1.0, temperature=0.01),  # sharp: argmax
        ]
    )
    seen = torch.zeros(5, 4, dtype=torch.bool)
    for u in (0.01, 0.3, 0.6, 0.99):
        chosen = sampling.decide(logits, seen, rows, torch.full((5,), u, dtype=torch.float64))
        assert chosen[:3].tolist() == [1, 1, 1] and chosen[4] == 1
        assert chosen[3] in (1, 2)
    # u walks the kept tokens in id order: below 0.4/0.7 of the mass is token 1, then token 2.
    nucleus = sampling.RowSettings.of([Decoding(p=0.5)])
    pick = [
        sampling.decide(logits[:1], seen[:1], nucleus, torch.tensor([u], dtype=torch.float64))
        for u in (0.5, 0.6)
    ]
    assert [int(t) for t in pick] == [1, 2]
    # The repetition penalty lowers a seen token below the next one (0.4 / 3 < 0.3).
    penalised = sampling.RowSettings.of([Decoding(p=0.0, repetition_penalty=3.0)])
    seen_one = torch.tensor([[False, True, False, False]])
    assert int(sampling.decide(logits[:1], seen_one, penalised, torch.zeros(1))) == 2


def test_decoding_plan_and_raid_preset_rules():
    plan = DecodingPlan.build(temperature="0.7,1.3", top_k="0,40", min_p="0.05")
    assert plan.temperatures == (0.7, 1.3) and plan.top_ks == (0, 40) and plan.min_ps == (0.05,)
    with pytest.raises(PlanError, match="preset raid sets every"):
        DecodingPlan.build(preset="raid", temperature="0.7")
    for bad in ({"temperature": "0"}, {"top_k": "-1"}, {"min_p": "2"}, {"top_k": "x"}):
        with pytest.raises(PlanError):
            DecodingPlan.build(**bad)
    cells = [d.to_json() for d in RAID_GRID]
    assert [(c["strategy"], c["repetition_penalty"]) for c in cells] == [
        ("greedy", None),
        ("greedy", 1.2),
        ("nucleus", None),
        ("sampling", 1.2),  # a penalty ran: not plain nucleus sampling
    ]


def test_raid_preset_records_every_setting(corpus_file, tmp_path, tiny_model_dir):
    out = tmp_path / "raid.jsonl"
    assert run(corpus_file, out, tiny_model_dir, "--preset", "raid", "--per-doc", "8") == 0
    rows = [r for r in read(out) if r["system"] == "tiny"]
    manifest = manifest_of(out)
    assert manifest["settings"]["decoding"]["grid"] == [d.to_json() for d in RAID_GRID]
    # Which cells survive the filters depends on what the tiny model writes (greedy text from it
    # may end no sentence); every planned example is either made or counted as dropped.
    counts = manifest["counts"]
    assert counts["made"] + counts["dropped"] == counts["planned"] + counts["replacements"]
    assert rows
    cells = {d.preset: d.to_json() for d in RAID_GRID}
    for row in rows:
        decoding = row["decoding"]
        assert set(decoding) >= {"strategy", "p", "temperature", "top_k", "min_p"}
        cell = cells[decoding["preset"]]
        assert {k: decoding[k] for k in cell if k != "max_new_tokens"} == {
            k: v for k, v in cell.items() if k != "max_new_tokens"
        }
        validate(row, 1)


def test_temperature_top_k_min_p_per_example(corpus_file, tmp_path, tiny_model_dir):
    out = tmp_path / "modern.jsonl"
    args = ["--p", "0.9,1", "--temperature", "0.7,1.2", "--top-k", "0,20", "--min-p", "0.05"]
    assert run(corpus_file, out, tiny_model_dir, *args, "--system-label", "A tiny model") == 0
    rows = [r for r in read(out) if r["system"] == "tiny"]
    assert {r["system_label"] for r in rows} == {"A tiny model"}
    assert {r["decoding"]["temperature"] for r in rows} == {0.7, 1.2}
    assert {r["decoding"]["top_k"] for r in rows} == {None, 20}
    assert {r["decoding"]["min_p"] for r in rows} == {0.05}
    assert {r["decoding"]["strategy"] for r in rows} == {"sampling"}


def test_model_generation_config_is_switched_off_and_recorded(tiny_model_dir, tmp_path):
    import shutil

    from transformers import GenerationConfig

    shadow = tmp_path / "with-defaults"
    shutil.copytree(tiny_model_dir, shadow)
    GenerationConfig(
        do_sample=True,
        repetition_penalty=5.0,
        no_repeat_ngram_size=1,
        top_k=3,
        bos_token_id=0,
        eos_token_id=0,
    ).save_pretrained(shadow)
    plain, loud = load(str(tiny_model_dir), device="cpu"), load(str(shadow), device="cpu")
    assert loud.model_defaults == {
        "do_sample": True,
        "no_repeat_ngram_size": 1,
        "repetition_penalty": 5.0,
        "top_k": 3,
    }
    assert plain.model_defaults == {}
    request = Request("The town council met on Monday.", 99, Decoding(p=0.0), seed=1, budget=20)
    ours = continue_batch(loud, [request], stop_on_sentences=False)[0]
    assert ours == continue_batch(plain, [request], stop_on_sentences=False)[0]
    # What generate() would have done with the file's defaults: a different text.
    encoded = loud.tokenizer(request.prompt, return_tensors="pt", add_special_tokens=False)
    torch.manual_seed(0)
    with torch.inference_mode():
        silent = loud.model.generate(
            **encoded,
            generation_config=GenerationConfig.from_pretrained(shadow),
            max_new_tokens=20,
            min_new_tokens=20,
        )
    assert loud.tokenizer.decode(silent[0, encoded["input_ids"].shape[1] :]) != ours.text
    assert loud.provenance("v")["generation"]["model_generation_config_ignored"]["top_k"] == 3


def test_weights_sha256_is_the_digest_of_the_weight_files(lm, tiny_model_dir):
    weights = tiny_model_dir / "model.safetensors"
    file_digest = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert lm.weight_files == {"model.safetensors": file_digest}
    combined = hashlib.sha256(f"model.safetensors {file_digest}\n".encode()).hexdigest()
    assert lm.weights_sha256 == combined
    assert lm.provenance("v")["weights_sha256"] == combined


def test_a_second_writer_of_the_same_output_is_refused(
    corpus_file, tmp_path, tiny_model_dir, capsys
):
    out = tmp_path / "locked.jsonl"
    first = RunWriter(out, {"seed": 13})
    try:
        with pytest.raises(OutputError, match="being written by process"):
            RunWriter(out, {"seed": 13}, resume=True)
        assert run(corpus_file, out, tiny_model_dir, "--resume") == 2
        assert "being written" in capsys.readouterr().err
    finally:
        first.close()
    assert run(corpus_file, out, tiny_model_dir, "--overwrite") == 0  # free again


def test_manifest_counts_drops_by_p_and_prompt_length(corpus_file, tmp_path, tiny_model_dir):
    out = tmp_path / "drops.jsonl"
    assert run(corpus_file, out, tiny_model_dir, "--p", "0,1", "--max-attempts", "1") == 0
    counts = manifest_of(out)["counts"]
    for key in ("by_p", "by_prompt_sentences"):
        table = counts[key]
        assert sum(row["planned"] for row in table.values()) == counts["planned"]
        assert sum(row["made"] for row in table.values()) == counts["made"]
        assert sum(row["dropped"] for row in table.values()) == counts["dropped"]
    assert set(counts["by_p"]) <= {"0.0-0.2", "0.8-1.0", "none"}
    assert set(counts["by_prompt_sentences"]) <= {"1", "2", "3", "4"}


def test_grover_tags_the_tokenizer_splits_are_warned_about(corpus_file, tmp_path, tiny_model_dir):
    out = tmp_path / "grover.jsonl"
    assert run(corpus_file, out, tiny_model_dir, "--prompt-format", "grover") == 0
    warnings = [w for w in manifest_of(out)["warnings"] if "Grover" in w]
    assert len(warnings) == 1 and "<|beginarticle|>" in warnings[0]
    with_tags = tmp_path / "grover-model"
    tagged = load(str(tiny_model_dir), device="cpu")
    from generation.cli import tag_warnings
    from generation.prompts import grover_tags

    tagged.tokenizer.add_special_tokens({"additional_special_tokens": grover_tags()})
    assert tag_warnings(tagged, "grover") == []
    assert tag_warnings(tagged, "plain") == []
    assert not with_tags.exists()


def test_category_comes_from_the_document_field(tmp_path, tiny_model_dir):
    from tests.generation.conftest import demo_docs

    docs = demo_docs("news", 3) + [{**d, "category": "tales"} for d in demo_docs("stories", 3)]
    corpus = tmp_path / "mixed.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "splice.jsonl"
    args = ["baseline", "--corpus", str(corpus), "--out", str(out), "-n", "4", "--per-doc", "3"]
    assert main([*args, "--no-progress", "--human-share", "0"]) == 0
    rows = read(out)
    by_doc = {d["id"]: d.get("category", "mixed") for d in docs}
    assert {r["category"] for r in rows} == {"mixed", "tales"}
    for row in rows:
        assert row["category"] == by_doc[row["source"]["doc_id"]]
        assert by_doc[row["source"]["splice_doc_id"]] == row["category"]  # same category
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": "x", "text": "One. Two.", "category": "Big News"}) + "\n")
    assert main(["split", "--corpus", str(bad), "--out", str(tmp_path / "s.jsonl")]) == 2
