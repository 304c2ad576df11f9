"""A tiny model with a word-level tokenizer (generation.tiny, `tokenizer="word"`) writes only
words of the corpus it was trained on, and its tokenizer gives the text back exactly."""

from __future__ import annotations

import re

from tests.generation.conftest import demo_docs

WORD = re.compile(r"[A-Za-z]+")


def test_a_word_level_tiny_model_writes_only_corpus_words(tmp_path):
    from generation.decoding import Decoding
    from generation.engines.base import Request
    from generation.generator import continue_batch
    from generation.models import load
    from generation.tiny import TinyConfig, train_tiny

    texts = [d["text"] for d in demo_docs("news", 6) + demo_docs("recipes", 6)]
    config = TinyConfig(tokenizer="word", vocab_size=4096, width=64, heads=2, steps=120)
    summary = train_tiny(texts, tmp_path, config, log=None)
    assert summary["config"]["tokenizer"] == "word"
    lm = load(str(tmp_path), device="cpu", dtype="float32", progress=False)
    sample = texts[0]
    assert lm.tokenizer.decode(lm.tokenizer(sample)["input_ids"]) == sample
    vocabulary = {w for text in texts for w in WORD.findall(text)}
    requests = [
        Request(prompt=texts[i].split(". ")[0] + ".", needed=3, decoding=Decoding(p=1.0), seed=i,
                budget=60)
        for i in range(8)
    ]  # fmt: skip
    written = " ".join(c.text for c in continue_batch(lm, requests))
    words = WORD.findall(written)
    assert len(words) > 50
    # Pieces without a leading space may join ("TheThe"): rare, never a misspelling.
    outside = [w for w in words if w not in vocabulary]
    assert len(outside) <= len(words) * 0.02, outside
