"""Decoding with settings and a random generator per example, the same in any batch.

Hugging Face `generate` takes one set of decoding settings for a whole batch and samples every row
from the one global random generator, so a row's text would depend on its neighbours. Here a logits
processor picks each row's next token itself (`decide`: its own repetition penalty, temperature,
top-k, top-p and min-p, and its own uniform draws) and hands `generate` a one-hot score, which
greedy search then takes. `generate` still does the caching, padding and stopping, for any
causal LM.

Decisions use the row's own draws u[0], u[1], … (drawn up front from its seed), so step t always
uses u[t], and `replay` can recompute every decision of a finished row from one unbatched forward
pass (see generation.generator: this is how a row is made independent of its batch).

p = 0 is greedy (argmax, ties to the lowest id); p = 1 keeps every token. Sampling walks the kept
tokens in token-id order (inverse CDF), so near-equal probabilities swapping places cannot change
the choice.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import LogitsProcessor, StoppingCriteria

from generation.decoding import Decoding
from generation.sentences import (  # noqa: F401 (complete_sentences is re-exported)
    complete_sentences,
    enough_sentences,
    split_sentences,
)


def nucleus_mask(probs_sorted: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Which of the descending-sorted probabilities (rows) the nucleus keeps.

    The nucleus is the smallest prefix whose mass reaches p; the first token is always kept and
    p >= 1 keeps everything (a float sum may fall short of 1).
    """
    before = torch.cumsum(probs_sorted, dim=-1) - probs_sorted
    keep = before < p.unsqueeze(-1).to(probs_sorted.dtype)
    keep[:, 0] = True
    keep |= (p >= 1.0).unsqueeze(-1).to(keep.device)
    return keep


def nucleus_probs(logits: torch.Tensor, p: float) -> torch.Tensor:
    """The renormalised next-token distribution of one row of logits under top-p (for tests and
    inspection; decoding uses `decide`)."""
    probs = torch.softmax(logits.float(), dim=-1)
    order = torch.sort(probs, descending=True, stable=True)
    keep = nucleus_mask(order.values.unsqueeze(0), torch.tensor([p]))[0]
    out = torch.zeros_like(probs)
    out[order.indices[keep]] = order.values[keep]
    return out / out.sum()


@dataclass(frozen=True)
class RowSettings:
    """The decoding settings of a batch's rows as tensors (one value per row)."""

    greedy: torch.Tensor
    p: torch.Tensor
    temperature: torch.Tensor
    top_k: torch.Tensor  # 0 = off
    min_p: torch.Tensor  # 0 = off
    penalty: torch.Tensor  # 1 = off

    @classmethod
    def of(cls, rows: Sequence[Decoding], device=None) -> RowSettings:
        def tensor(values, dtype=torch.float64):
            return torch.tensor(values, dtype=dtype, device=device)

        return cls(
            greedy=tensor([d.greedy for d in rows], torch.bool),
            p=tensor([d.p for d in rows]),
            temperature=tensor([d.temperature or 1.0 for d in rows]),
            top_k=tensor([d.top_k or 0 for d in rows], torch.long),
            min_p=tensor([d.min_p or 0.0 for d in rows]),
            penalty=tensor([d.repetition_penalty or 1.0 for d in rows]),
        )


def _renormalised(probs: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    kept = torch.where(keep, probs, torch.zeros_like(probs))
    return kept / kept.sum(dim=-1, keepdim=True)


def decide(
    scores: torch.Tensor, seen: torch.Tensor, rows: RowSettings, u: torch.Tensor
) -> torch.Tensor:
    """The next token of every row: scores (B, V) logits, seen (B, V) tokens already in the row
    (for the repetition penalty), u (B,) the row's uniform draw for this step."""
    scores = scores.double()
    penalty = rows.penalty.unsqueeze(1)
    penalised = torch.where(scores > 0, scores / penalty, scores * penalty)
    scores = torch.where(seen & (penalty != 1.0), penalised, scores)
    greedy = scores.argmax(dim=-1)

    probs = torch.softmax(scores / rows.temperature.unsqueeze(1), dim=-1)
    vocab = probs.shape[-1]
    order = torch.sort(probs, descending=True, stable=True)
    k = rows.top_k.clamp(max=vocab)
    if bool((k > 0).any()):
        kth = order.values.gather(1, (k - 1).clamp(min=0).unsqueeze(1))
        keep = (probs >= kth) | (k == 0).unsqueeze(1)
        probs = _renormalised(probs, keep)
        order = torch.sort(probs, descending=True, stable=True)
    in_nucleus = nucleus_mask(order.values, rows.p)
    keep = torch.zeros_like(in_nucleus).scatter(1, order.indices, in_nucleus)
    probs = _renormalised(probs, keep)
    if bool((rows.min_p > 0).any()):
        floor = rows.min_p.unsqueeze(1) * probs.max(dim=-1, keepdim=True).values
        probs = _renormalised(probs, probs >= floor)
    cumulative = torch.cumsum(probs, dim=-1)
    target = (u.to(probs.device) * cumulative[:, -1]).unsqueeze(1)
    sampled = torch.searchsorted(cumulative, target, right=True).squeeze(1).clamp(max=vocab - 1)
    # A float cumsum can end a hair below the target: take the last kept token then.
    last_kept = vocab - 1 - torch.argmax((probs > 0).flip(1).to(torch.int8), dim=1)
    sampled = torch.minimum(sampled, last_kept)
    return torch.where(rows.greedy, greedy, sampled)


def seen_mask(input_ids: torch.Tensor, padding: torch.Tensor, vocab: int) -> torch.Tensor:
    """(B, V): which tokens appear in each row after its `padding` leading pad positions."""
    positions = torch.arange(input_ids.shape[1], device=input_ids.device)
    real = positions.unsqueeze(0) >= padding.to(input_ids.device).unsqueeze(1)
    counts = torch.zeros(input_ids.shape[0], vocab, dtype=torch.int32, device=input_ids.device)
    counts.scatter_add_(1, input_ids, real.to(torch.int32))
    return counts > 0


def draws(seed: int, count: int) -> torch.Tensor:
    """The row's uniform draws u[0..count-1] from its own generator (on the CPU, so they do not
    depend on the device)."""
    generator = torch.Generator(device="cpu")
    generator.manual_seed(seed)
    return torch.rand(count, generator=generator, dtype=torch.float64)


class RowSampler(LogitsProcessor):
    """Choose each row's next token with `decide`, its own settings and its own draws.

    Row i's step is its number of tokens past `start_length` plus `offsets[i]` (the tokens it
    already had when this call began), so a continued row keeps using the right draws.
    """

    def __init__(
        self,
        rows: Sequence[Decoding],
        u: Sequence[torch.Tensor],
        padding: Sequence[int],
        start_length: int,
        offsets: Sequence[int] | None = None,
    ):
        self.settings = RowSettings.of(rows)
        self.u = list(u)
        self.padding = torch.tensor(list(padding), dtype=torch.long)
        self.start_length = start_length
        self.offsets = list(offsets or [0] * len(rows))

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.start_length
        u = torch.stack(
            [
                draws_row[min(step + offset, len(draws_row) - 1)]
                for draws_row, offset in zip(self.u, self.offsets, strict=True)
            ]
        )
        settings = self.settings
        if settings.p.device != scores.device:
            settings = RowSettings(*(getattr(settings, f).to(scores.device) for f in FIELDS))
            self.settings = settings
        seen = seen_mask(input_ids, self.padding, scores.shape[-1])
        chosen = decide(scores, seen, settings, u)
        out = torch.full_like(scores, float("-inf"))
        out.scatter_(-1, chosen.unsqueeze(1), 0.0)
        return out


FIELDS = ("greedy", "p", "temperature", "top_k", "min_p", "penalty")


def replay(
    logits: torch.Tensor,
    prompt_ids: Sequence[int],
    tokens: Sequence[int],
    decoding: Decoding,
    u: torch.Tensor,
) -> list[int]:
    """Every decision of one row recomputed from `logits` (T, V): the scores before each of its T
    tokens, from one forward pass of prompt + tokens alone. Returns the tokens `decide` picks."""
    count = len(tokens)
    if count == 0:
        return []
    vocab = logits.shape[-1]
    device = logits.device
    base = torch.zeros(vocab, dtype=torch.int32, device=device)
    base[torch.tensor(list(prompt_ids), dtype=torch.long, device=device)] = 1
    steps = torch.zeros(count, vocab, dtype=torch.int32, device=device)
    if count > 1:
        previous = torch.tensor(list(tokens[:-1]), dtype=torch.long, device=device)
        steps[torch.arange(1, count, device=device), previous] = 1
    seen = (steps.cumsum(dim=0) + base) > 0
    rows = RowSettings.of([decoding] * count, device=device)
    return decide(logits, seen, rows, u[:count]).tolist()


class EnoughSentences(StoppingCriteria):
    """Stop a row once its continuation holds `needed[i]` complete sentences or it reached its own
    token budget `budgets[i]`. It looks only at the row's own tokens, so a row stops at the same
    token whatever batch it is in."""

    def __init__(self, tokenizer, prompt_length: int, needed: list[int], budgets: list[int]):
        self.tokenizer = tokenizer
        self.prompt_length = prompt_length
        self.needed = needed
        self.budgets = budgets

    def __call__(self, input_ids: torch.LongTensor, scores, **kwargs) -> torch.BoolTensor:
        generated = input_ids[:, self.prompt_length :]
        length = generated.shape[1]
        done = []
        for row, needed in enumerate(self.needed):
            if length >= self.budgets[row]:
                done.append(True)
                continue
            text = self.tokenizer.decode(generated[row], skip_special_tokens=True)
            done.append(enough_sentences(text, needed))
        return torch.tensor(done, dtype=torch.bool, device=input_ids.device)
