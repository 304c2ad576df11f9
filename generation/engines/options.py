"""The `generate` command's engine options (`--engine`, the OpenAI server's settings and
`--prompt-format chat`), and building the engine they describe. Kept here so the CLI only adds
this block and calls `make_engine`."""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from generation.engines.base import EngineError
from generation.engines.chat import INSTRUCTION, instruction_provenance

ENGINE_CHOICES = ("hf", "openai")
# Options that only say how to reach the server: a resumed run may change them.
OPENAI_OPTIONS = (
    "base_url",
    "api_key_env",
    "concurrency",
    "max_retries",
    "retry_base",
    "request_timeout",
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "engine",
        "hf runs the model here with transformers; openai sends each example to an "
        "OpenAI-compatible server (vLLM, TGI, a hosted API) with its own settings and seed",
    )
    group.add_argument(
        "--engine", choices=ENGINE_CHOICES, default="hf", help="hf (default) or openai"
    )
    group.add_argument(
        "--base-url",
        action="append",
        metavar="URL",
        help="openai: the server's API root, e.g. http://localhost:8000/v1; give it once per "
        "replica to spread the requests over several servers",
    )
    group.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="NAME",
        help="openai: the environment variable holding the API key (default OPENAI_API_KEY; "
        "unset means no key is sent); the key is never written or printed",
    )
    group.add_argument(
        "--concurrency",
        type=_positive_int,
        default=8,
        help="openai: requests in flight at once (default 8)",
    )
    group.add_argument(
        "--max-retries",
        type=int,
        default=6,
        help="openai: retries of a request answered 429 or 5xx, or whose connection failed "
        "(default 6), with exponential backoff and jitter or the server's Retry-After",
    )
    group.add_argument(
        "--retry-base",
        type=_seconds,
        default=1.0,
        help="openai: the first backoff's upper bound in seconds, doubled each retry (default 1)",
    )
    group.add_argument(
        "--request-timeout",
        type=_seconds,
        default=600.0,
        help="openai: seconds to wait for one answer (default 600)",
    )
    group.add_argument(
        "--stop",
        action="append",
        metavar="TEXT",
        help="openai: a stop string sent with every request (repeat for more); the Grover "
        "format always stops at <|endofarticle|>",
    )


def check_engine_args(args) -> None:
    if args.engine == "openai":
        if not args.base_url:
            raise EngineError("--engine openai needs --base-url (e.g. http://localhost:8000/v1)")
        if args.max_retries < 0:
            raise EngineError(f"--max-retries must be 0 or more, got {args.max_retries}")
    elif args.base_url or args.stop:
        raise EngineError("--base-url and --stop are for --engine openai")


def engine_settings(args, settings: dict) -> dict:
    """The run's settings as the manifest keeps them (and a resumed run must match). The hf
    engine's are exactly what they were before engines existed; the openai engine's leave out
    how the server is reached (it may move between a run and its resume)."""
    settings = dict(settings)
    for key in (*OPENAI_OPTIONS, "stop"):
        settings.pop(key, None)
    if args.engine == "hf":
        settings.pop("engine", None)
        return settings
    for key in ("device", "dtype", "revision", "batch_size"):
        settings.pop(key, None)
    settings["stop"] = args.stop
    return settings


def make_engine(args, device: str):
    """The engine the arguments ask for, checked (model loaded, or the server asked)."""
    check_engine_args(args)
    if args.engine == "openai":
        from generation.engines.openai import OpenAIEngine

        engine = OpenAIEngine(
            args.model,
            args.base_url,
            api_key_env=args.api_key_env,
            concurrency=args.concurrency,
            max_retries=args.max_retries,
            retry_base=args.retry_base,
            timeout=args.request_timeout,
            stop=tuple(args.stop or ()),
            prompt_format=args.prompt_format,
        )
        engine.check()
    else:
        from generation import models
        from generation.engines.hf import HFEngine

        lm = models.load(
            args.model,
            device=device,
            dtype=args.dtype,
            revision=args.revision,
            progress=not args.no_progress,
        )
        engine = HFEngine(lm, batch_size=args.batch_size)
    if args.prompt_format == "chat":
        engine.check_chat()
    return engine


def window_size(args) -> int:
    """Examples per batch, for the pipeline's windows: the batch size (hf) or the concurrency."""
    return args.concurrency if args.engine == "openai" else args.batch_size


def chat_provenance(engine) -> dict:
    """What every chat-format record carries in provenance.generation.chat."""
    return {"instruction": instruction_provenance(), "template": engine.chat_template()}


def with_chat(provenance: dict, engine) -> dict:
    generation = {**provenance.get("generation", {}), "chat": chat_provenance(engine)}
    return {**provenance, "generation": generation}


def chat_summary(part: Path, counts: dict) -> dict:
    """The manifest's `chat` entry: the instruction, the template, and how many kept examples
    had a preamble or a closing remark stripped (from the records themselves, so a resumed run
    counts what it kept earlier too), and the examples dropped for a chat reason."""
    stripped: Counter = Counter()
    kept = 0
    if part.exists():
        for line in part.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            chat = (record.get("meta") or {}).get("chat")
            if chat is None:
                continue
            kept += 1
            stripped["preamble"] += chat.get("preamble") is not None
            stripped["closing"] += chat.get("closing") is not None
    from generation.engines import chat

    reasons = (
        chat.REFUSAL,
        chat.META_COMMENT,
        chat.RESTARTS_PROMPT,
        chat.STRAY_PREAMBLE,
        chat.EMPTY_REPLY,
    )
    dropped = counts.get("dropped_by_reason", {})
    return {
        "instruction": {**instruction_provenance(), "text": INSTRUCTION},
        "kept": kept,
        "preamble_stripped": stripped["preamble"],
        "closing_stripped": stripped["closing"],
        "dropped": {reason: dropped.get(reason, 0) for reason in reasons},
    }
