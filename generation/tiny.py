"""A tiny GPT-2 (or Llama) trained on a small corpus in well under a minute on a CPU (the demo's
model is the GPT-2; the tests also build a Llama, to check that any causal LM works).

A tokenizer is trained with the `tokenizers` library, a 2-layer model is trained on random windows
of the corpus, and both are saved with `save_pretrained`, so they load with the same
`from_pretrained(path)` code as any Hugging Face model. The tokenizer is a byte-level BPE
(`tokenizer="bpe"`, as GPT-2's) or a word-level one (`"word"`: every piece GPT-2's pre-tokenizer
cuts from the corpus, a word with its leading space or a punctuation mark, is one token), with
which the model can only write words of the corpus (on the demo corpus, 7,939 pieces; a
96-wide model trained this way wrote 1.4% of its words outside the corpus's vocabulary, all
of them pieces run together such as "theThe", against 42% for the shipped BPE model).
"""

from __future__ import annotations

import json
import random
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
    tokenizer: str = "bpe"  # or "word" (see the module's docstring)


ARCHITECTURES = ("gpt2", "llama")
TOKENIZERS = ("bpe", "word")
WORD_VOCAB = 16384  # room for every piece of a corpus of a few hundred KB (the demo's has 7,939)


def train_tokenizer(texts: list[str], vocab_size: int, kind: str = "bpe"):
    """A GPT-2-style byte-level BPE tokenizer, or a word-level one over the same pre-tokenizer
    (`kind="word"`: every piece of the corpus, up to `vocab_size` of the most frequent), wrapped
    for transformers. Text decodes back exactly in both."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "word":
        tokenizer = Tokenizer(models.WordLevel(unk_token=EOS))
        trainer = trainers.WordLevelTrainer(
            vocab_size=vocab_size, min_frequency=1, special_tokens=[EOS], show_progress=False
        )
    else:
        tokenizer = Tokenizer(models.BPE())
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=2,
            special_tokens=[EOS],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
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
    started = time.perf_counter()
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    tokenizer = train_tokenizer(texts, config.vocab_size, config.tokenizer)
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
    model.save_pretrained(out)
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
