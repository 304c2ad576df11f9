"""The transformers engine: a Hugging Face causal LM in this process (`--engine hf`).

Prompts are batched by length (within the window the pipeline hands over) and continued with
`generation.generator.continue_batch`, which gives every row the text it would get alone. A prompt
that does not fit the model's context with its token budget is not run ("prompt_too_long").
"""

from __future__ import annotations

import hashlib
from dataclasses import replace

from generation.engines.base import Continuation, EngineError, Request, unusable
from generation.filters import PROMPT_TOO_LONG
from generation.generator import continue_batch, fits, prompt_lengths
from generation.models import LoadedModel, max_positions
from generation.prompts import grover_tags


class HFEngine:
    def __init__(self, lm: LoadedModel, batch_size: int = 16):
        self.lm = lm
        self.name = lm.name
        self.batch_size = max(1, batch_size)

    # -- the interface ------------------------------------------------------------------------
    def generate(self, requests: list[Request]) -> list[Continuation]:
        prompts = [self.prompt_of(r) for r in requests]
        lengths = prompt_lengths(self.lm, prompts)
        results: list[Continuation | None] = [None] * len(requests)
        runnable = []
        for i, request in enumerate(requests):
            if fits(self.lm, lengths[i], request.budget):
                runnable.append(i)
            else:
                results[i] = unusable(PROMPT_TOO_LONG)
        runnable.sort(key=lambda i: (lengths[i], i))
        budgets = [r.budget for r in requests]
        for batch in self._batches(runnable, lengths, budgets):
            batch_requests = [replace(requests[i], prompt=prompts[i]) for i in batch]
            for i, result in zip(batch, continue_batch(self.lm, batch_requests), strict=True):
                results[i] = result
        return results  # type: ignore[return-value]

    def describe(self) -> dict:
        return self.lm.describe()

    def provenance(self, code_version: str) -> dict:
        return self.lm.provenance(code_version)

    def warnings(self, prompt_format: str) -> list[str]:
        return tag_warnings(self.lm, prompt_format)

    # -- chat ---------------------------------------------------------------------------------
    def check_chat(self) -> None:
        if not getattr(self.lm.tokenizer, "chat_template", None):
            raise EngineError(
                f"--prompt-format chat: the tokenizer of {self.lm.name} has no chat template "
                "(an instruction-tuned model has one in tokenizer_config.json or "
                "chat_template.jinja)"
            )

    def chat_template(self) -> dict:
        """Which template formats the conversations: the model's own, by its SHA-256."""
        template = self.lm.tokenizer.chat_template
        return {
            "source": "tokenizer",
            "name": f"{self.lm.name} chat_template",
            "sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
        }

    def prompt_of(self, request: Request) -> str:
        """The text the model reads: the prompt, or the conversation in the chat template."""
        if request.messages is None:
            return request.prompt
        return self.lm.tokenizer.apply_chat_template(
            [dict(m) for m in request.messages], add_generation_prompt=True, tokenize=False
        )

    # -- batching -----------------------------------------------------------------------------
    def _batches(self, order: list[int], lengths: list[int], budgets: list[int]) -> list[list[int]]:
        """Consecutive batches of at most `batch_size` requests (sorted by prompt length) in which
        every row fits the model's context: rows that stop early keep stepping until the longest
        budget of the batch is spent, so the longest prompt plus the longest budget must fit."""
        limit = max_positions(self.lm.model)
        batches: list[list[int]] = []
        current: list[int] = []
        longest = budget = 0
        for i in order:
            new_longest = max(longest, lengths[i])
            new_budget = max(budget, budgets[i])
            full = len(current) >= self.batch_size
            too_long = limit is not None and new_longest + new_budget > limit
            if current and (full or too_long):
                batches.append(current)
                current, new_longest, new_budget = [], lengths[i], budgets[i]
            current.append(i)
            longest, budget = new_longest, new_budget
        if current:
            batches.append(current)
        return batches


def tag_warnings(lm: LoadedModel, prompt_format: str) -> list[str]:
    """For the Grover format: every tag the tokenizer does not hold as one token (it would be split
    into pieces, and the model would read characters, not the field markers it was trained on)."""
    if prompt_format != "grover":
        return []
    split = [tag for tag in grover_tags() if len(lm.tokenizer.tokenize(tag)) != 1]
    if not split:
        return []
    return [
        f"the tokenizer of {lm.name} splits {len(split)} Grover tag(s) into several tokens "
        f"({', '.join(split)}): use a Grover checkpoint whose tokenizer has them as special "
        "tokens, or --prompt-format plain"
    ]
