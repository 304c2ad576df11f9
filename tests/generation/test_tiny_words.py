"""The word-level tokenizer of the demo's tiny model (generation.tiny, `tokenizer="word"`): corpus
text round-trips, every token is a piece of the corpus, the vocabulary check counts words the way
a reader would, and a model trained with it (`train-tiny --tokenizer word`) writes only words of
the corpus it was trained on."""

from __future__ import annotations

import json

import pytest

from generation.sentences import split_sentences
from generation.tiny import out_of_vocabulary, train_word_tokenizer, words

from .conftest import demo_docs

TEXTS = [d["text"] for d in demo_docs("news", 3) + demo_docs("recipes", 3)]


@pytest.fixture(scope="module")
def tokenizer():
    return train_word_tokenizer(TEXTS)


def test_corpus_sentences_round_trip(tokenizer):
    """A word token carries the space before it, so a sentence is encoded as it stands in the
    text: after a space (only a text's first sentence opens without one)."""
    for text in TEXTS:
        sentences = split_sentences(text)
        assert len(sentences) >= 12
        for sentence in [sentences[0], *(" " + s for s in sentences[1:])]:
            ids = tokenizer(sentence, add_special_tokens=False)["input_ids"]
            assert tokenizer.unk_token_id not in ids, sentence
            assert tokenizer.decode(ids) == sentence
        assert tokenizer.decode(tokenizer(text, add_special_tokens=False)["input_ids"]) == text


def test_punctuation_rejoins_without_stray_spaces(tokenizer):
    pieces = ["Ġthe", "Ġbridge", ",", "Ġand", "Ġthe", "Ġtown", "."]
    ids = tokenizer.convert_tokens_to_ids(pieces)
    assert tokenizer.unk_token_id not in ids
    assert tokenizer.decode(ids) == " the bridge, and the town."


def test_every_token_is_a_piece_of_the_corpus(tokenizer):
    corpus_words = {w for text in TEXTS for w in words(text)}
    for token_id in set(range(len(tokenizer))) - set(tokenizer.all_special_ids):
        text = tokenizer.decode([token_id])
        assert set(words(text)) <= corpus_words, text
    # a word the corpus never holds is no token: it becomes the unknown (end-of-text) token
    assert tokenizer(" zyxwv", add_special_tokens=False)["input_ids"] == [tokenizer.unk_token_id]


def test_out_of_vocabulary_counts_letter_words_ignoring_case():
    vocabulary = {"the", "bridge", "s", "opens"}
    assert words("The bridge's 2 lanes—open!") == ["the", "bridge", "s", "lanes", "open"]
    assert out_of_vocabulary(["The bridge opens.", "The hoads on W Kos."], vocabulary) == (4, 8)
    assert out_of_vocabulary([], vocabulary) == (0, 0)


def test_train_tiny_word_writes_only_corpus_words(tmp_path):
    """`train-tiny --tokenizer word` trains with the demo model's settings (DEMO_CONFIG, here for
    fewer steps); the saved model loads as any Hugging Face model, its tokenizer gives a text back
    exactly, and at most 2% of the words it writes are not corpus words (pieces without a leading
    space may join, as "theThe": rare, never a misspelling)."""
    from generation.cli import main
    from generation.decoding import Decoding
    from generation.engines.base import Request
    from generation.generator import continue_batch
    from generation.models import load
    from generation.tiny import DEMO_CONFIG

    docs = demo_docs("news", 6) + demo_docs("recipes", 6)
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    out = tmp_path / "model"
    command = ["train-tiny", "--corpus", str(corpus), "--out", str(out), "--tokenizer", "word"]
    assert main([*command, "--steps", "60"]) == 0
    config = json.loads((out / "training.json").read_text(encoding="utf-8"))["config"]
    assert config == {**DEMO_CONFIG.__dict__, "steps": 60}
    lm = load(str(out), device="cpu", dtype="float32", progress=False)
    texts = [d["text"] for d in docs]
    assert lm.tokenizer.decode(lm.tokenizer(texts[0])["input_ids"]) == texts[0]
    requests = [
        Request(prompt=texts[i].split(". ")[0] + ".", needed=3, decoding=Decoding(p=1.0), seed=i,
                budget=60)
        for i in range(8)
    ]  # fmt: skip
    written = [c.text for c in continue_batch(lm, requests)]
    vocabulary = {w for text in texts for w in words(text)}
    unknown, total = out_of_vocabulary(written, vocabulary)
    assert total > 50
    assert unknown <= total * 0.02, written
