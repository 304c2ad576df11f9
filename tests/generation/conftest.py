"""A tiny GPT-2 trained once per session on a few KB of the demo corpus, and a small corpus."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import PROJECT_ROOT

DEMO_CORPUS = PROJECT_ROOT / "data" / "demo" / "corpus"


def read(path) -> list[dict]:
    """The records of a JSON-lines file."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()]


def manifest_of(path) -> dict:
    """The manifest written beside an output file."""
    return json.loads(path.with_name(path.name + ".manifest.json").read_text())


def cli_args(corpus, out, options: str, *extra: str) -> list[str]:
    """`generate`'s arguments: the corpus, the output, `options` (split on spaces), `extra`."""
    return ["generate", "--corpus", str(corpus), "--out", str(out), *options.split(), *extra]


def demo_docs(category: str, count: int) -> list[dict]:
    lines = (DEMO_CORPUS / f"{category}.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines[:count]]


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread():
    """Tiny models run faster on one thread, and the suite shares a small machine."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """Tokenizer and weights trained briefly, saved with save_pretrained (as users' models are)."""
    from generation.tiny import TinyConfig, train_tiny

    texts = [d["text"] for d in demo_docs("news", 4) + demo_docs("stories", 4)]
    assert 4_000 < sum(len(t) for t in texts) < 20_000  # a few KB
    out = tmp_path_factory.mktemp("tiny-gpt2")
    config = TinyConfig(vocab_size=400, width=64, heads=2, block=64, batch=8, steps=150, lr=1e-2)
    train_tiny(texts, out, config, log=None)
    return out


@pytest.fixture(scope="session")
def lm(tiny_model_dir):
    from generation.models import load

    return load(str(tiny_model_dir), device="cpu", dtype="float32")


@pytest.fixture
def corpus_file(tmp_path) -> Path:
    """Six news documents with title, date, authors and domain, plus one that is too short."""
    path = tmp_path / "news.jsonl"
    docs = [*demo_docs("news", 6), {"id": "short-1", "text": "Too short. Only two sentences."}]
    path.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    """A second architecture: a 2-layer Llama with the same kind of tokenizer, trained briefly."""
    from generation.tiny import TinyConfig, train_tiny

    texts = [d["text"] for d in demo_docs("news", 4) + demo_docs("stories", 4)]
    out = tmp_path_factory.mktemp("tiny-llama")
    config = TinyConfig(
        vocab_size=400,
        width=64,
        heads=2,
        block=64,
        batch=8,
        steps=150,
        lr=1e-2,
        architecture="llama",
    )
    train_tiny(texts, out, config, log=None)
    return out
