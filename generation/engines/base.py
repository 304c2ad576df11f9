"""The engine interface: `generate(requests) -> continuations`, each carrying the parameters the
engine actually applied.

A `Request` is one example's prompt with its decoding settings, seed and token budget; a
`Continuation` is the text the engine wrote for it. The pipeline (`generation.pipeline`), the CLI
and the demo builder talk to an engine only through this interface; the engines are
`generation.engines.hf` (transformers, in this process) and `generation.engines.openai` (any
OpenAI-compatible server, such as vLLM). This module imports neither torch nor transformers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from generation.decoding import Decoding


class EngineError(RuntimeError):
    """An engine that cannot do its work (a server that refuses, a model it does not serve)."""


@dataclass(frozen=True)
class Request:
    prompt: str
    needed: int  # sentences wanted
    decoding: Decoding
    seed: int
    budget: int  # most new tokens
    # For --prompt-format chat: the conversation ({"role", "content"} dicts). The engine applies
    # the model's chat template to it (hf) or sends it to the chat endpoint (openai); `prompt`
    # then holds the human sentences only.
    messages: tuple[dict, ...] | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Continuation:
    text: str
    sentences: list[str]  # complete sentences only
    new_tokens: int
    finished: bool  # ended by itself (end-of-text token, or a stop string)
    repairs: int = field(default=0, compare=False)  # times the unbatched check corrected it
    settled: bool = field(default=True, compare=False)  # the last check agreed
    # Set when the engine could not continue the prompt at all (e.g. "prompt_too_long").
    problem: str | None = field(default=None, compare=False)
    # What goes into the record's provenance.generation for this example, beyond the engine's
    # own fields: for the OpenAI engine, the request as sent and what the server reported.
    provenance: dict | None = field(default=None, compare=False)


def unusable(problem: str) -> Continuation:
    """The result for a request the engine could not run."""
    return Continuation(text="", sentences=[], new_tokens=0, finished=False, problem=problem)


class Engine(Protocol):
    """What the pipeline, the CLI and the demo builder need from an engine."""

    name: str  # the model as named by the user (hub id, folder or served model id)

    def generate(self, requests: list[Request]) -> list[Continuation]:
        """One continuation per request, in the requests' order."""
        ...

    def describe(self) -> dict:
        """The run manifest's `model` entry."""
        ...

    def provenance(self, code_version: str) -> dict:
        """The `provenance` every record of this engine carries (roftcore.records)."""
        ...

    def warnings(self, prompt_format: str) -> list[str]:
        """Problems worth telling the user before the run starts."""
        ...
