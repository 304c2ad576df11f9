"""A tiny GPT-2 (or Llama) trained on a small corpus on a CPU (the demo's model is a GPT-2; the
tests also build a Llama, to check that any causal LM works).

A tokenizer is built with the `tokenizers` library: byte-level BPE (the default, as GPT-2's), or
word-level ("word", the demo's), whose vocabulary is every word and punctuation mark of the corpus,
so every token the model writes is a word of the corpus. A 2-layer model is trained on random
windows of the corpus, and both are saved with `save_pretrained`, so they load with the same
`from_pretrained(path)` code as any Hugging Face model.
"""

from __future__ import annotations

import json
import random
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

EOS = "<|endoftext|>"


def corpus_texts(path: Path) -> list[str]:
    """Every document's text: a JSONL file, a folder of .jsonl files, or a folder of .txt.
    (It lived in generation.cli; the CLI and the demo builder both use it from here.)"""
    from generation.corpus import read_corpus

    path = Path(path)
    if path.is_dir() and any(path.glob("*.jsonl")):
        docs = [d for file in sorted(path.glob("*.jsonl")) for d in read_corpus(file)]
    else:
        docs = read_corpus(path)
    return [d.text for d in docs]


@dataclass(frozen=True)
class TinyConfig:
    vocab_size: int = 1024
    layers: int = 2
    heads: int = 4
    width: int = 128
    positions: int = 1024
    block: int = 64
    batch: int = 16
    steps: int = 400
    lr: float = 5e-3
    seed: int = 2026
    architecture: str = "gpt2"  # or "llama"
    tokenizer: str = "bpe"  # or "word"
    save_dtype: str = "float32"  # or "float16": half the bytes on disk; loads as any dtype


ARCHITECTURES = ("gpt2", "llama")
TOKENIZERS = ("bpe", "word")
SAVE_DTYPES = {"float32": torch.float32, "float16": torch.float16}
# The demo's model (`python -m generation demo`): a word-level GPT-2 sized to train in a few
# minutes on two CPU cores, saved in float16 to stay under 5 MB.
DEMO_CONFIG = TinyConfig(
    tokenizer="word", block=128, batch=8, steps=1000, lr=3e-3, save_dtype="float16"
)
_LETTERS = re.compile(r"[A-Za-z]+")


def words(text: str) -> list[str]:
    """The words of a text as the vocabulary check counts them: runs of letters, lowercased."""
    return [w.lower() for w in _LETTERS.findall(text)]


def out_of_vocabulary(sentences: list[str], vocabulary: set[str]) -> tuple[int, int]:
    """(words not in `vocabulary`, all words) over `sentences`, counted by `words`."""
    found = [w for sentence in sentences for w in words(sentence)]
    return sum(w not in vocabulary for w in found), len(found)


def train_word_tokenizer(texts: list[str]):
    """A word-level tokenizer, wrapped for transformers: GPT-2's byte-level pre-tokenizer splits
    words, numbers and punctuation (each word keeping the space before it), and the vocabulary is
    every piece of the corpus, so corpus text round-trips exactly and decoding re-joins
    punctuation without stray spaces."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.WordLevel(unk_token=EOS))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.WordLevelTrainer(
        vocab_size=10**7, min_frequency=1, special_tokens=[EOS], show_progress=False
    )
    tokenizer.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=EOS, eos_token=EOS, unk_token=EOS
    )


def train_tokenizer(texts: list[str], vocab_size: int):
    """A GPT-2-style byte-level BPE tokenizer, wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=EOS, eos_token=EOS, unk_token=EOS
    )


def _build(config: TinyConfig, vocab: int, eos: int):
    special = {"bos_token_id": eos, "eos_token_id": eos, "pad_token_id": eos}
    if config.architecture == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        return LlamaForCausalLM(
            LlamaConfig(
                vocab_size=vocab,
                hidden_size=config.width,
                intermediate_size=2 * config.width,
                num_hidden_layers=config.layers,
                num_attention_heads=config.heads,
                num_key_value_heads=config.heads,
                max_position_embeddings=config.positions,
                **special,
            )
        )
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(
        GPT2Config(
            vocab_size=vocab,
            n_positions=config.positions,
            n_embd=config.width,
            n_layer=config.layers,
            n_head=config.heads,
            **special,
        )
    )


def train_tiny(texts: list[str], out: Path, config: TinyConfig = TinyConfig(), log=print) -> dict:
    """Train a tokenizer and a tiny model on `texts`; save both to `out`. Returns a summary."""
    if not texts:
        raise ValueError("no texts to train on")
    if config.architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}")
    if config.tokenizer not in TOKENIZERS:
        raise ValueError(f"tokenizer must be one of {', '.join(TOKENIZERS)}")
    if config.save_dtype not in SAVE_DTYPES:
        raise ValueError(f"save_dtype must be one of {', '.join(SAVE_DTYPES)}")
    started = time.perf_counter()
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    if config.tokenizer == "word":
        tokenizer = train_word_tokenizer(texts)
    else:
        tokenizer = train_tokenizer(texts, config.vocab_size)
    ids: list[int] = []
    for text in texts:
        ids.extend(tokenizer(text, add_special_tokens=False)["input_ids"])
        ids.append(tokenizer.eos_token_id)
    data = torch.tensor(ids, dtype=torch.long)
    if len(data) <= config.block + 1:
        raise ValueError(f"the corpus has {len(data)} tokens: too few for blocks of {config.block}")
    model = _build(config, len(tokenizer), tokenizer.eos_token_id)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=config.lr, total_steps=config.steps, pct_start=0.1
    )
    generator = torch.Generator().manual_seed(config.seed)
    loss_value = float("nan")
    for step in range(config.steps):
        starts = torch.randint(
            0, len(data) - config.block - 1, (config.batch,), generator=generator
        )
        batch = torch.stack([data[s : s + config.block] for s in starts.tolist()])
        loss = model(input_ids=batch, labels=batch).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        loss_value = loss.item()
        if log and (step + 1) % max(1, config.steps // 5) == 0:
            log(f"step {step + 1}/{config.steps}: loss {loss_value:.3f}")
    model.eval()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.to(SAVE_DTYPES[config.save_dtype]).save_pretrained(out)
    tokenizer.save_pretrained(out)
    summary = {
        "config": asdict(config),
        "corpus_tokens": len(data),
        "final_loss": round(loss_value, 4),
        "parameters": sum(p.numel() for p in model.parameters()),
        "seconds": round(time.perf_counter() - started, 1),
    }
    (out / "training.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
