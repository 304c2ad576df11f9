"""Batched continuation of prompts with any causal LM: left padding, attention masks, decoding
settings and a seed per row, per-row stopping once enough sentences are written, and the same
result in any batch.

Batching changes the numbers a model computes for a row (other shapes, other kernels, padding), by
a hair; now and then that hair flips a sampled token, and the text diverges. So every row is
checked after its batch: one forward pass of the row alone (prompt + continuation, no padding)
gives the scores before each of its tokens, and `sampling.replay` recomputes every decision from
them with the row's own draws. A row whose decisions all agree is kept. At the first decision that
differs, the row takes the token the unbatched pass chose and continues alone from there; then it
is checked again. What comes out is the text whose every token is the decision on the row's own
unbatched scores, whatever batch it was generated in.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessorList, StoppingCriteriaList

from generation.engines.base import Continuation, Request  # they lived here
from generation.models import LoadedModel, max_positions
from generation.sampling import (
    EnoughSentences,
    RowSampler,
    complete_sentences,
    draws,
    enough_sentences,
    replay,
)

MAX_REPAIRS = 8


class _Recorder(EnoughSentences):
    """EnoughSentences that remembers the length at which each row stopped."""

    def __init__(self, *args, stop_on_sentences: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.stopped_at: dict[int, int] = {}
        self.stop_on_sentences = stop_on_sentences

    def __call__(self, input_ids, scores, **kwargs):
        length = input_ids.shape[1] - self.prompt_length
        if self.stop_on_sentences:
            done = super().__call__(input_ids, scores, **kwargs)
        else:
            done = torch.tensor([length >= b for b in self.budgets], device=input_ids.device)
        for row, flag in enumerate(done.tolist()):
            if row in self.stopped_at:
                done[row] = True
            elif flag:
                self.stopped_at[row] = length
        return done


def prompt_lengths(lm: LoadedModel, prompts: list[str]) -> list[int]:
    if not prompts:
        return []
    return [len(ids) for ids in _encode(lm, prompts)]


def _encode(lm: LoadedModel, prompts: list[str]) -> list[list[int]]:
    return lm.tokenizer(prompts, add_special_tokens=False)["input_ids"]


def fits(lm: LoadedModel, prompt_tokens: int, budget: int) -> bool:
    limit = max_positions(lm.model)
    return limit is None or prompt_tokens + budget <= limit


def _generate(
    lm: LoadedModel,
    rows: list[tuple[list[int], list[int]]],
    requests: list[Request],
    stop_on_sentences: bool,
) -> list[list[int]]:
    """One `generate` call: each row is (prompt ids, tokens it already has). Returns each row's
    tokens (those it had and the new ones), cut where it stopped, end-of-text token included."""
    if len(rows) > 1 and any(prefix for _, prefix in rows):
        raise ValueError("only a single row can continue from tokens it already has")
    pad = lm.tokenizer.pad_token_id
    inputs = [prompt + prefix for prompt, prefix in rows]
    width = max(len(ids) for ids in inputs)
    padding = [width - len(ids) for ids in inputs]
    input_ids = torch.tensor([[pad] * n + ids for n, ids in zip(padding, inputs, strict=True)])
    attention_mask = torch.tensor([[0] * n + [1] * (width - n) for n in padding])
    already = [len(prefix) for _, prefix in rows]
    prompt_length = width - already[0]  # one row when it has a prefix; else everyone's width
    limit = max_positions(lm.model)
    longest = max(len(prompt) for prompt, _ in rows)
    if limit is not None and longest + max(r.budget for r in requests) > limit:
        raise ValueError(
            f"batch does not fit the model's {limit} positions: longest prompt {longest} tokens "
            f"+ largest budget {max(r.budget for r in requests)} (split the batch)"
        )
    sampler = RowSampler(
        [r.decoding for r in requests],
        [draws(r.seed, r.budget) for r in requests],
        padding,
        start_length=width,
        offsets=already,
    )
    recorder = _Recorder(
        lm.tokenizer,
        prompt_length,
        [r.needed for r in requests],
        [r.budget for r in requests],
        stop_on_sentences=stop_on_sentences,
    )
    new_tokens = max(r.budget - a for r, a in zip(requests, already, strict=True))
    output = lm.model.generate(
        input_ids=input_ids.to(lm.device),
        attention_mask=attention_mask.to(lm.device),
        do_sample=False,
        num_beams=1,
        max_new_tokens=max(new_tokens, 1),
        logits_processor=LogitsProcessorList([sampler]),
        stopping_criteria=StoppingCriteriaList([recorder]),
        pad_token_id=pad,
        eos_token_id=lm.eos_ids if stop_on_sentences else None,
        top_k=None,
        top_p=None,
        temperature=None,
    )
    eos = set(lm.eos_ids) if stop_on_sentences else set()
    out = []
    for row, tokens in enumerate(output[:, prompt_length:].tolist()):
        tokens = tokens[: recorder.stopped_at.get(row, len(tokens))]
        for i, token in enumerate(tokens[already[row] :], start=already[row]):
            if token in eos:
                tokens = tokens[: i + 1]
                break
        out.append(tokens)
    return out


def _unbatched_choices(
    lm: LoadedModel, prompt: list[int], tokens: list[int], request: Request
) -> list[int]:
    """The tokens the decision rule picks at each step on the row's own unbatched scores."""
    if not tokens:
        return []
    ids = torch.tensor([prompt + tokens[:-1]], device=lm.device)
    logits = lm.model(input_ids=ids, attention_mask=torch.ones_like(ids), use_cache=False).logits
    scores = logits[0, len(prompt) - 1 :]
    return replay(scores, prompt, tokens, request.decoding, draws(request.seed, request.budget))


def _stops(lm: LoadedModel, tokens: list[int], request: Request, stop_on_sentences: bool) -> bool:
    if len(tokens) >= request.budget:
        return True
    if not stop_on_sentences:
        return False
    if tokens[-1] in lm.eos_ids:
        return True
    text = lm.tokenizer.decode(tokens, skip_special_tokens=True)
    return enough_sentences(text, request.needed)


def _settle(
    lm: LoadedModel,
    prompt: list[int],
    tokens: list[int],
    request: Request,
    stop_on_sentences: bool,
) -> tuple[list[int], int, bool]:
    """Check a row against its unbatched scores and repair it (see the module docstring)."""
    for repairs in range(MAX_REPAIRS + 1):
        chosen = _unbatched_choices(lm, prompt, tokens, request)
        differs = next(
            (i for i, (a, b) in enumerate(zip(tokens, chosen, strict=True)) if a != b), None
        )
        if differs is None:
            return tokens, repairs, True
        if repairs == MAX_REPAIRS:
            break
        tokens = [*tokens[:differs], chosen[differs]]
        if not _stops(lm, tokens, request, stop_on_sentences):
            tokens = _generate(lm, [(prompt, tokens)], [request], stop_on_sentences)[0]
    return tokens, MAX_REPAIRS, False


@torch.inference_mode()
def continue_batch(
    lm: LoadedModel,
    requests: list[Request],
    *,
    stop_on_sentences: bool = True,
    check: bool = True,
) -> list[Continuation]:
    """Continue every prompt in one batched `generate` call, then check each row alone."""
    if not requests:
        return []
    prompts = _encode(lm, [r.prompt for r in requests])
    batch = _generate(lm, [(p, []) for p in prompts], requests, stop_on_sentences)
    eos = set(lm.eos_ids) if stop_on_sentences else set()
    results = []
    for prompt, tokens, request in zip(prompts, batch, requests, strict=True):
        repairs, settled = 0, True
        if check:
            tokens, repairs, settled = _settle(lm, prompt, tokens, request, stop_on_sentences)
        finished = bool(tokens) and tokens[-1] in eos
        body = tokens[:-1] if finished else tokens
        text = lm.tokenizer.decode(body, skip_special_tokens=True)
        results.append(
            Continuation(
                text=text,
                sentences=complete_sentences(text, finished),
                new_tokens=len(body),
                finished=finished,
                repairs=repairs,
                settled=settled,
            )
        )
    return results
