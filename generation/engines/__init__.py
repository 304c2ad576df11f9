"""Engines that continue prompts, behind one interface (see `generation.engines.base`).

- `hf`: a Hugging Face causal LM through transformers, in this process (`generation.engines.hf`);
- `openai`: any OpenAI-compatible server, e.g. vLLM or a hosted API (`generation.engines.openai`).
"""

from generation.engines.base import Continuation, Engine, EngineError, Request, unusable

ENGINES = ("hf", "openai")

__all__ = ["ENGINES", "Continuation", "Engine", "EngineError", "Request", "unusable"]
