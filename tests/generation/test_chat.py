"""--prompt-format chat: a continuation instruction in the model's chat template, replies cleaned
of preambles, closing remarks, refusals and comments. The model is a tiny GPT-2 trained here on
chat-formatted conversations whose replies often open with a preamble, so the stripping works on
what a real model wrote."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from app import PROJECT_ROOT
from generation.cli import main
from generation.corpus import read_corpus
from generation.engines.chat import (
    INSTRUCTION,
    INSTRUCTION_NAME,
    META_COMMENT,
    REFUSAL,
    RESTARTS_PROMPT,
    STRAY_PREAMBLE,
    chat_messages,
    clean_reply,
)
from tests.generation.conftest import cli_args, read
from tests.generation.openai_server import serve

TEMPLATE = (
    "{% for message in messages %}<|{{ message['role'] }}|>\n{{ message['content'] }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)
PREAMBLES = ("Sure! Here is the continuation:\n", "Here's the continuation:\n", "Certainly. ", "")
CORPUS = PROJECT_ROOT / "data" / "demo" / "corpus"
N = 4
KEY_ENV, KEY = "ROFT_TEST_CHAT_KEY", "sk-chat-test-key"
# What a preamble left in a kept sentence would look like.
LEFT_OVER = re.compile(r"^(?:sure|certainly|of course|here's|here is)\b|continuation:", re.I)


def rendered(user: str, reply: str) -> str:
    """A conversation as TEMPLATE renders it, with the assistant's reply."""
    return f"<|user|>\n{user}\n<|assistant|>\n{reply}"


@pytest.fixture(scope="module")
def tiny_chat_dir(tmp_path_factory) -> Path:
    """A tiny GPT-2 with a chat template, trained briefly on conversations (the instruction and
    1-3 human sentences; a reply of the next two sentences, three in four with a preamble). Each
    training row is a conversation's last 64 tokens: the assistant's turn and what precedes it."""
    import torch

    from generation.tiny import TinyConfig, _build, train_tokenizer

    docs = read_corpus(CORPUS / "news.jsonl")[:6] + read_corpus(CORPUS / "stories.jsonl")[:6]
    texts = []
    for i, doc in enumerate(docs):
        for h in (1, 2, 3):
            user = chat_messages(" ".join(doc.sentences[:h]))[0]["content"]
            reply = PREAMBLES[(i + h) % 4] + " ".join(doc.sentences[h : h + 2])
            texts.append(rendered(user, reply))
    config = TinyConfig(vocab_size=1500, width=64, heads=2, block=64, batch=8, steps=300, lr=1e-2)
    tokenizer = train_tokenizer(texts, config.vocab_size)
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|assistant|>"]})
    tokenizer.chat_template = TEMPLATE
    eos = tokenizer.eos_token_id
    rows = []
    for text in texts:
        ids = [*tokenizer(text, add_special_tokens=False)["input_ids"], eos][-config.block :]
        rows.append(ids + [eos] * (config.block - len(ids)))
    data = torch.tensor(rows)
    torch.manual_seed(config.seed)
    model = _build(config, len(tokenizer), eos)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    generator = torch.Generator().manual_seed(config.seed)
    for _ in range(config.steps):
        batch = data[torch.randint(0, len(data), (config.batch,), generator=generator)]
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    model.eval()
    out = tmp_path_factory.mktemp("tiny-chat")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


CHAT = (
    f"-n {N} --per-doc 3 --seed 3 --p uniform:0.8:1 --tokens-per-sentence 30 --max-attempts 4"
    " --prompt-format chat --no-progress"
)


def chat_args(corpus, out, *extra) -> list[str]:
    return cli_args(corpus, out, CHAT, *extra)


def machine_sentences(row: dict) -> list[str]:
    return row["sentences"][row["boundary"] :]


def test_a_chat_run_keeps_no_preamble_and_records_the_instruction(
    corpus_file, tmp_path, tiny_chat_dir
):
    out = tmp_path / "chat.jsonl"
    model = ["--model", str(tiny_chat_dir), "--device", "cpu", "--system", "tiny-chat"]
    assert main(chat_args(corpus_file, out, *model)) == 0
    rows = read(out)
    made = [r for r in rows if r["boundary"] < N]
    assert made, "the tiny chat model should give some usable continuations"
    manifest = json.loads((tmp_path / "chat.jsonl.manifest.json").read_text())
    chat = manifest["chat"]
    # The model opened replies with preambles, and they were stripped from what was kept.
    assert chat["preamble_stripped"] >= 1
    assert chat["preamble_stripped"] == sum(r["meta"]["chat"]["preamble"] is not None for r in made)
    assert chat["kept"] == len(made)
    assert chat["instruction"]["text"] == INSTRUCTION
    dropped = manifest["counts"]["dropped_by_reason"]
    assert chat["dropped"][STRAY_PREAMBLE] == dropped.get(STRAY_PREAMBLE, 0)
    template_sha = hashlib.sha256(TEMPLATE.encode()).hexdigest()
    for row in made:
        assert row["meta"]["prompt_format"] == "chat"
        assert not any(LEFT_OVER.search(s) for s in machine_sentences(row)), row["sentences"]
        assert len(machine_sentences(row)) == N - row["boundary"]
        prov = row["provenance"]["generation"]["chat"]
        assert prov["instruction"] == {
            "name": INSTRUCTION_NAME,
            "sha256": hashlib.sha256(INSTRUCTION.encode()).hexdigest(),
        }
        assert prov["template"]["source"] == "tokenizer"
        assert prov["template"]["sha256"] == template_sha
        # The chat budget leaves room for a preamble, and is recorded as applied.
        assert row["decoding"]["max_new_tokens"] == 30 * (N - row["boundary"] + 2)


def test_chat_format_needs_a_model_with_a_chat_template(
    corpus_file, tmp_path, tiny_model_dir, capsys
):
    out = tmp_path / "chat.jsonl"
    assert main(chat_args(corpus_file, out, "--model", str(tiny_model_dir), "--device", "cpu"))
    assert "has no chat template" in capsys.readouterr().err
    assert not out.exists()


PROMPT = ["The council met on Monday.", "It voted to close the bridge."]


def test_a_chat_run_gives_the_same_examples_through_a_chat_endpoint(
    corpus_file, tmp_path, tiny_chat_dir
):
    out = tmp_path / "chat.jsonl"
    model = ["--model", str(tiny_chat_dir), "--device", "cpu", "--system", "tiny-chat"]
    assert main(chat_args(corpus_file, out, *model)) == 0
    rows = read(out)
    # The same conversations through an OpenAI-compatible chat endpoint: the same examples.
    remote = tmp_path / "remote.jsonl"
    with serve(tiny_chat_dir, "tiny-chat-served", KEY_ENV, KEY) as server:
        api = ["--engine", "openai", "--base-url", server["base"], "--model", "tiny-chat-served"]
        api += ["--api-key-env", KEY_ENV, "--system", "tiny-chat", "--concurrency", "3"]
        import os

        os.environ[KEY_ENV] = KEY
        try:
            assert main(chat_args(corpus_file, remote, *api)) == 0
        finally:
            del os.environ[KEY_ENV]
        bodies = server["stats"]()["bodies"]
    theirs = read(remote)
    assert [r["sentences"] for r in theirs] == [r["sentences"] for r in rows]
    assert all(b["messages"][0]["content"].startswith(INSTRUCTION) for b in bodies)
    for row in theirs:
        if row["boundary"] < N:
            gen = row["provenance"]["generation"]
            assert gen["endpoint"] == "chat" and gen["chat"]["template"]["source"] == "server"
            assert gen["chat"]["instruction"]["name"] == INSTRUCTION_NAME


@pytest.mark.parametrize(
    ("reply", "text", "preamble", "closing"),
    [
        (
            "Sure! Here is the continuation:\n\nWork starts in May. Drivers must detour.",
            "Work starts in May. Drivers must detour.",
            "Sure! Here is the continuation:",
            None,
        ),
        ("Here's the continuation:\nWork starts in May.", "Work starts in May.", "Here's", None),
        (
            "Certainly. Work starts in May.\n\nLet me know if you would like more.",
            "Work starts in May.",
            "Certainly.",
            "Let me know if you would like more.",
        ),
        ("Of course the mayor objected.", "Of course the mayor objected.", None, None),
        ("Work starts in May.", "Work starts in May.", None, None),
    ],
)
def test_clean_reply_strips_preambles_and_closings(reply, text, preamble, closing):
    cleaned = clean_reply(reply, PROMPT)
    assert cleaned.problem is None
    assert cleaned.text == text
    assert (cleaned.preamble or "").startswith(preamble or "") and (
        (cleaned.preamble is None) == (preamble is None)
    )
    assert cleaned.closing == closing


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("I'm sorry, but I can't continue this text.", REFUSAL),
        ("Sure! I cannot help with that request.", REFUSAL),
        ("As an AI language model, I will continue: the bridge closed.", META_COMMENT),
        ("The council met on Monday. It voted again.", RESTARTS_PROMPT),
        ("the council met on monday.  Then it rained.", RESTARTS_PROMPT),
        ("Work starts in May.\nCertainly. Drivers must detour.", STRAY_PREAMBLE),
        ("Work starts in May. Here's the dark. Drivers must detour.", STRAY_PREAMBLE),
        ("Drivers were told: here's the detour for May.", None),
        ("Sure opened and the mill sorted one.", STRAY_PREAMBLE),
    ],
)
def test_clean_reply_rejects_refusals_comments_and_restarts(reply, problem):
    assert clean_reply(reply, PROMPT).problem == problem


def test_only_the_sentences_a_continuation_keeps_are_judged():
    """What a model writes past the sentences kept never decides: its length differs by engine."""
    reply = "Work starts in May. Drivers must detour. Certainly. As an AI, I hope this helps."
    assert clean_reply(reply, PROMPT, keep=2).problem is None
    assert clean_reply(reply, PROMPT, keep=3).problem == STRAY_PREAMBLE
    assert clean_reply(reply, PROMPT).problem is not None
