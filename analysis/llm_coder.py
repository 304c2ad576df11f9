"""A language-model coder for players' explanations, through the generation engine interface.

Each unique comment goes to a chat model (any OpenAI-compatible server, such as vLLM) with a
written codebook: RoFT's eight reasons, "other" (a reason, but none of the eight) and
"not_a_reason". Settings are deterministic (temperature 0, top-p 1, a fixed seed, a short token
budget). The answer must be one line of codebook names joined by commas; an answer that is not
(prose, an empty reply, a name outside the codebook) is asked again once, with a reminder; if the
second answer is no better, the comment stays uncoded and is counted as `malformed` or
`off_codebook`, never guessed. `provenance()` names the model, the prompt's SHA-256 and the
settings, so a reader can run the same coding again.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

from roftcore.reasons import REASON_NAMES

OTHER = "other"
NOT_A_REASON = "not_a_reason"
CODEBOOK_LABELS: tuple[str, ...] = (*REASON_NAMES, OTHER, NOT_A_REASON)
MALFORMED = "malformed"
OFF_CODEBOOK = "off_codebook"

CODEBOOK = """You code players' explanations from a game in which people read a text one sentence
at a time and say which sentence they think a language model wrote. Each explanation says why the
player thought so. Give every reason the explanation states, using only these labels:

grammar: the sentence is ungrammatical, misspelt, badly punctuated or badly formatted
repetition: it repeats words, phrases or ideas from the text
irrelevant: it is off topic, or does not follow from or connect to the sentences before it
contradicts_sentence: it contradicts an earlier sentence of the same text
contradicts_knowledge: it gets facts about the world wrong
common_sense: it describes something implausible or illogical, or does not make sense
coreference: it mixes up who or what is referred to (pronouns, names, characters)
generic: it is vague, bland or generic filler
other: the explanation gives a reason, but none of the above (for example tone or register)
not_a_reason: the explanation gives no reason (a guess, "idk", a misclick, keyboard mashing)

A negated reason is no reason ("not repetitive" is not repetition). "not_a_reason" stands alone.
Answer with the labels only, on one line, joined by commas, and nothing else."""

REMINDER = (
    "Your answer could not be read. Answer again with labels from the list only, on one line, "
    "joined by commas, and nothing else."
)


def prompt_sha256() -> str:
    """The SHA-256 of the codebook and the reminder, as sent."""
    return hashlib.sha256(f"{CODEBOOK}\n\n{REMINDER}".encode()).hexdigest()


def messages(comment: str, retry_of: str | None = None) -> tuple[dict, ...]:
    """The conversation for one comment (with the first answer and the reminder on a retry)."""
    out = [
        {"role": "system", "content": CODEBOOK},
        {"role": "user", "content": f"Explanation: {comment}"},
    ]
    if retry_of is not None:
        out += [
            {"role": "assistant", "content": retry_of},
            {"role": "user", "content": REMINDER},
        ]
    return tuple(out)


def parse(answer: str) -> tuple[tuple[str, ...] | None, str | None]:
    """(labels, None) for a readable answer, or (None, MALFORMED / OFF_CODEBOOK)."""
    text = answer.strip().strip(".").strip()
    if not text or "\n" in text or len(text) > 200:
        return None, MALFORMED
    parts = [re.sub(r"[\s\-]+", "_", p.strip().strip("\"'`").lower()) for p in text.split(",")]
    if not all(re.fullmatch(r"[a-z_]+", p) for p in parts):
        return None, MALFORMED
    if any(p not in CODEBOOK_LABELS for p in parts):
        return None, OFF_CODEBOOK
    labels = tuple(name for name in CODEBOOK_LABELS if name in parts)
    if NOT_A_REASON in labels and len(labels) > 1:
        return None, MALFORMED  # "not_a_reason" stands alone
    return labels, None


@dataclass(frozen=True)
class Coded:
    labels: tuple[str, ...]  # () when uncoded
    problem: str | None  # MALFORMED or OFF_CODEBOOK when uncoded
    answers: tuple[str, ...]  # what the model said, first answer and retry

    @property
    def primary(self) -> str:
        return self.labels[0] if self.labels else "unclassified"

    @property
    def decided_by(self) -> str:
        if self.problem:
            return f"none: {self.problem} answer after a retry ({self.answers[-1][:60]!r})"
        return "language model" + (" (after a retry)" if len(self.answers) > 1 else "")


@dataclass
class LLMCoder:
    """Codes comments with `engine` (generation.engines.openai.OpenAIEngine, chat endpoint)."""

    engine: object
    seed: int = 0
    max_tokens: int = 40
    counts: dict = field(default_factory=lambda: {MALFORMED: 0, OFF_CODEBOOK: 0, "retries": 0})

    def _ask(self, batch: list[tuple[str, str | None]]) -> list[str]:
        from generation.decoding import Decoding
        from generation.engines.base import Request

        requests = [
            Request(
                prompt=comment,
                needed=10**6,  # no sentence cut: the whole answer is read
                decoding=Decoding(p=0.0),  # greedy: temperature 0, top-p 1
                seed=self.seed,
                budget=self.max_tokens,
                messages=messages(comment, retry_of),
            )
            for comment, retry_of in batch
        ]
        return [c.text for c in self.engine.generate(requests)]

    def code(self, comments: list[str]) -> list[Coded]:
        """One result per comment, in order (each unique text is asked once)."""
        unique = list(dict.fromkeys(comments))
        first = self._ask([(c, None) for c in unique])
        results: dict[str, Coded] = {}
        again: list[int] = []
        for i, (comment, answer) in enumerate(zip(unique, first, strict=True)):
            labels, problem = parse(answer)
            if problem is None:
                results[comment] = Coded(labels, None, (answer,))
            else:
                again.append(i)
        self.counts["retries"] += len(again)
        second = self._ask([(unique[i], first[i]) for i in again]) if again else []
        for i, answer in zip(again, second, strict=True):
            labels, problem = parse(answer)
            if problem is not None:
                self.counts[problem] += 1
            results[unique[i]] = Coded(labels or (), problem, (first[i], answer))
        return [results[c] for c in comments]

    def settings(self) -> dict:
        return {
            "temperature": 0.0,
            "top_p": 1.0,
            "seed": self.seed,
            "max_tokens": self.max_tokens,
            "retries_on_a_bad_answer": 1,
        }

    def provenance(self) -> dict:
        describe = self.engine.describe()
        return {
            "coder": "language model",
            "engine": describe.get("engine"),
            "model": self.engine.name,
            "served": describe.get("served"),
            "base_urls": describe.get("base_urls"),
            "prompt_sha256": prompt_sha256(),
            "codebook_labels": list(CODEBOOK_LABELS),
            "settings": self.settings(),
        }
