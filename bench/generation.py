"""Benchmark: batched generation against one example at a time (what RoFT did).

Same model, same prompts, same token budget (every example generates exactly --new-tokens tokens,
end-of-text ignored), nucleus sampling at p = 0.9 with a seed per example; the model is a randomly
initialised GPT-2 built from its config (the right cost, meaningless text), so nothing is
downloaded. Reports examples/s of both and their ratio, measured in one run.

    .venv/bin/python bench/generation.py                 # GPT-2 small on the CPU (~1-3 minutes)
    .venv/bin/python bench/generation.py --size xl --device cuda --dtype bfloat16 --examples 64
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from generation.decoding import Decoding  # noqa: E402
from generation.generator import Request, continue_batch  # noqa: E402
from generation.models import LoadedModel, resolve_device  # noqa: E402
from generation.sentences import split_sentences  # noqa: E402
from generation.tiny import train_tokenizer  # noqa: E402

SIZES = {  # GPT-2 sizes (layers, width, heads)
    "small": (12, 768, 12),
    "medium": (24, 1024, 16),
    "large": (36, 1280, 20),
    "xl": (48, 1600, 25),
}
VOCAB = 50257


def build(size: str, device: str, dtype: str) -> LoadedModel:
    from transformers import GPT2Config, GPT2LMHeadModel

    layers, width, heads = SIZES[size]
    texts = [
        json.loads(line)["text"]
        for path in sorted((ROOT / "data" / "demo" / "corpus").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    tokenizer = train_tokenizer(texts, 4096)
    tokenizer.padding_side = "left"
    tokenizer.pad_token = tokenizer.eos_token
    torch.manual_seed(0)
    config = GPT2Config(n_layer=layers, n_embd=width, n_head=heads, vocab_size=VOCAB)
    target = resolve_device(device)
    torch_dtype = getattr(torch, dtype)
    with torch.device(target):
        model = GPT2LMHeadModel(config).to(torch_dtype).eval()
    return LoadedModel(
        model=model,
        tokenizer=tokenizer,
        name=f"random-gpt2-{size}",
        device=target,
        dtype=dtype,
        eos_ids=[tokenizer.eos_token_id],
    )


def prompts(count: int) -> list[str]:
    texts = []
    for path in sorted((ROOT / "data" / "demo" / "corpus").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            sentences = split_sentences(json.loads(line)["text"])
            texts.append(" ".join(sentences[: 1 + len(texts) % 4]))  # 1 to 4 sentences
    return [texts[i % len(texts)] for i in range(count)]


def timed(fn) -> float:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=list(SIZES), default="small", help="GPT-2 size")
    parser.add_argument("--examples", type=int, default=16, help="examples per side (16)")
    parser.add_argument("--batch-size", type=int, default=16, help="batch size (16)")
    parser.add_argument("--new-tokens", type=int, default=32, help="tokens per example (32)")
    parser.add_argument("--device", default="cpu", help="cpu (default), cuda, auto")
    parser.add_argument(
        "--dtype", default="float32", choices=["float32", "bfloat16", "float16"], help="dtype"
    )
    args = parser.parse_args()
    lm = build(args.size, args.device, args.dtype)
    texts = prompts(args.examples)
    requests = [
        Request(prompt=t, needed=1, decoding=Decoding(p=0.9), seed=i, budget=args.new_tokens)
        for i, t in enumerate(texts)
    ]

    def batched():
        out = []
        for start in range(0, len(requests), args.batch_size):
            chunk = requests[start : start + args.batch_size]
            out += continue_batch(lm, chunk, stop_on_sentences=False)
        return out

    def one_at_a_time():
        return [continue_batch(lm, [r], stop_on_sentences=False)[0] for r in requests]

    continue_batch(lm, requests[:2], stop_on_sentences=False)  # warm-up
    results = {}
    t_batched = timed(lambda: results.setdefault("batched", batched()))
    t_single = timed(lambda: results.setdefault("single", one_at_a_time()))
    tokens = {k: sum(r.new_tokens for r in v) for k, v in results.items()}
    assert tokens["batched"] == tokens["single"] == args.examples * args.new_tokens, tokens
    report = {
        "model": lm.name,
        "parameters": sum(p.numel() for p in lm.model.parameters()),
        "device": str(lm.device),
        "dtype": args.dtype,
        "threads": torch.get_num_threads(),
        "examples": args.examples,
        "batch_size": args.batch_size,
        "new_tokens": args.new_tokens,
        "batched_examples_per_s": round(args.examples / t_batched, 3),
        "one_at_a_time_examples_per_s": round(args.examples / t_single, 3),
        "ratio": round(t_single / t_batched, 2),
        "batched_s": round(t_batched, 2),
        "one_at_a_time_s": round(t_single, 2),
    }
    print(json.dumps(report))
    print(
        f"batched {report['batched_examples_per_s']} ex/s vs one at a time "
        f"{report['one_at_a_time_examples_per_s']} ex/s: {report['ratio']}x",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
