"""`python -m generation`: turn human-written documents into boundary examples for the site."""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from generation import distributed
from generation.corpus import (
    CorpusError,
    Document,
    category_field_hint,
    corpus_sha256,
    default_category,
    read_corpus,
)
from generation.decoding import PRESETS, DecodingPlan
from generation.engines.base import EngineError
from generation.engines.options import add_engine_options
from generation.filters import ContentFilter, FilterError
from generation.models import DTYPES, ModelError
from generation.prompts import PROMPT_FORMATS, PlanError, make_plan, slug
from generation.records import (
    OutputError,
    RunWriter,
    boundary_report,
    code_version,
    merge,
    paths_for,
    shard_path,
)

CATEGORY_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")
EPILOG = (
    "Positions follow the boundary convention (docs/boundary.md): a record's boundary is the "
    "0-based index of the first machine-written sentence, 1..N, and N means all human. "
    "Guide: docs/generation.md. Every subcommand has its own --help."
)


class UsageError(ValueError):
    """Arguments that do not make sense together."""


KNOWN_ERRORS = (
    CorpusError,
    PlanError,
    ModelError,
    OutputError,
    FilterError,
    UsageError,
    EngineError,
)


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1], got {text}")
    return value


def _add_corpus(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--corpus",
        type=Path,
        required=True,
        help="a JSONL file ({id, text, optional title, date, authors, domain} per line) "
        "or a folder of .txt files (one document each)",
    )
    parser.add_argument(
        "--category",
        help="the examples' category (a lowercase slug such as news) for documents without a "
        "`category` field of their own; default: the corpus file's name without .jsonl, or the "
        "folder's name",
    )
    parser.add_argument("--dataset", help="source.dataset in every record (default: the category)")
    parser.add_argument(
        "-n", "--sentences", type=int, default=10, help="sentences per example, N (default 10)"
    )


def _add_run(parser: argparse.ArgumentParser, per_doc: bool = True) -> None:
    parser.add_argument("--out", type=Path, required=True, help="output JSONL file")
    if per_doc:
        parser.add_argument(
            "--per-doc", type=int, default=1, help="examples per document (default 1)"
        )
    parser.add_argument(
        "--seed", type=int, default=0, help="run seed: the same seed makes the same examples"
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="finish a killed run with the same settings (keeps what it wrote, no duplicates)",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def _add_selection(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--human-share",
        type=_fraction,
        default=None,
        help="share of all-human examples (h = N); by default h is uniform on 1..N, so 1/N "
        "are all-human; with a share, the others have h uniform on 1..N-1",
    )
    parser.add_argument(
        "--max-attempts",
        type=int,
        default=3,
        help="tries per example before it is dropped and counted (default 3)",
    )
    parser.add_argument(
        "--filter-words",
        type=Path,
        help="word list (one word or phrase a line, # comments): drop examples whose "
        "machine-written part contains one, and count them",
    )


def _add_trust(parser: argparse.ArgumentParser, resample: bool = True) -> None:
    """Options for data one can trust: the corpus's category field, and replacements."""
    parser.add_argument(
        "--category-field",
        default="category",
        metavar="FIELD",
        help="the JSONL field that holds each document's category (default `category`); with "
        "another name (genre, topic, …) every document must have it, its value is made a slug, "
        "and splices stay within it",
    )
    if resample:
        parser.add_argument(
            "--resample-rounds",
            type=int,
            default=3,
            metavar="R",
            help="rounds of replacements for examples the filters reject: each gets one with "
            "the same h and decoding from another document of its category, so the kept "
            "boundary distribution matches the requested one (default 3; 0: only count them)",
        )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m generation",
        description="Make boundary examples (N sentences, the first h human-written, the rest "
        "from a language model or a baseline) as JSONL for `flask import`.",
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    split = sub.add_parser(
        "split",
        help="split a corpus into sentences and report which documents are long enough",
        description="Write each document's sentences as JSONL ({id, sentences}) and count the "
        "documents too short for N sentences.",
    )
    _add_corpus(split)
    _add_trust(split, resample=False)
    split.add_argument("--out", type=Path, help="output JSONL (default: standard output)")

    human = sub.add_parser(
        "human",
        help="all-human examples: the first N sentences of each document",
        description="One all-human example (boundary = N, system 'human') per document.",
    )
    _add_corpus(human)
    _add_run(human, per_doc=False)
    _add_trust(human, resample=False)

    baseline = sub.add_parser(
        "baseline",
        help="RoFT's splice baseline (no model)",
        description="The first h sentences of a document, then N - h consecutive sentences of "
        "another document of the same corpus (system 'splice-baseline').",
    )
    _add_corpus(baseline)
    _add_run(baseline)
    _add_selection(baseline)
    _add_trust(baseline)
    baseline.add_argument(
        "--system", default="splice-baseline", help="system name (default splice-baseline)"
    )

    gen = sub.add_parser(
        "generate",
        help="continue human prompts with a causal language model",
        description="Continue the first h sentences of each document with a Hugging Face "
        "causal LM at a nucleus p drawn per example, keep N - h sentences, and write one record "
        "per example. Under torchrun the work is sharded across processes and merged.",
        epilog=EPILOG,
    )
    _add_corpus(gen)
    _add_run(gen)
    _add_selection(gen)
    _add_trust(gen)
    gen.add_argument(
        "--model", required=True, help="hub id (gpt2, gpt2-xl, …) or a folder from save_pretrained"
    )
    gen.add_argument("--revision", help="hub branch, tag or commit of the model")
    gen.add_argument(
        "--system", help="system name in the records (default: the model's name, e.g. gpt2-xl)"
    )
    gen.add_argument(
        "--system-label",
        help="a display name for the system (at most 100 characters), for the game to show "
        "players instead of a generic description",
    )
    gen.add_argument(
        "--p",
        default="uniform",
        help="nucleus p per example: uniform (on [0, 1], default), uniform:LOW:HIGH, or a list "
        "such as 0,0.4,1.0; 0 is greedy (argmax), 1 samples from the whole distribution",
    )
    gen.add_argument(
        "--temperature",
        help="sampling temperature, or a list such as 0.7,1.0 drawn per example (default 1)",
    )
    gen.add_argument(
        "--top-k", help="keep the k most likely tokens (a list is drawn per example; default off)"
    )
    gen.add_argument(
        "--min-p",
        help="keep tokens at least MIN_P times as likely as the most likely one "
        "(a list is drawn per example; default off)",
    )
    gen.add_argument(
        "--repetition-penalty",
        help="CTRL repetition penalty such as 1.2 (a list is drawn per example; default off)",
    )
    gen.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="raid: each example gets one of RAID's settings (greedy; sampling at temperature 1; "
        "each without and with repetition penalty 1.2); excludes the settings above",
    )
    gen.add_argument(
        "--prompt-format",
        choices=(*PROMPT_FORMATS, "chat"),
        default="plain",
        help="plain: the sentences only; grover: domain, date, authors and title in Grover's "
        "<|beginX|>…<|endX|> fields before <|beginarticle|> and the body; chat: for "
        "instruction-tuned models, a continuation instruction and the sentences in the model's "
        "chat template (preambles such as 'Sure! Here is…' are stripped and counted)",
    )
    gen.add_argument(
        "--device", default="auto", help="auto (default: cuda if present), cpu, cuda, cuda:N"
    )
    gen.add_argument(
        "--dtype",
        choices=list(DTYPES),
        default="auto",
        help="weights' dtype (auto: float32 on CPU, bfloat16 on GPU)",
    )
    gen.add_argument("--batch-size", type=int, default=16, help="prompts per batch (default 16)")
    gen.add_argument(
        "--tokens-per-sentence",
        type=int,
        default=48,
        help="token budget per sentence to generate (default 48)",
    )
    gen.add_argument("--max-new-tokens", type=int, help="cap on new tokens per example")
    gen.add_argument(
        "--shard",
        help="run only shard I of K (I/K, e.g. 0/4) into OUT's shard file; torchrun sets this "
        "by itself",
    )

    add_engine_options(gen)

    merge_p = sub.add_parser(
        "merge",
        help="merge finished outputs (several runs, or the shards of one run) into one file",
        description="Concatenate finished outputs into OUT (ids must be unique) and write OUT's "
        "manifest with the summed counts. With --shards, OUT's shard files are found and put "
        "back in plan order.",
    )
    merge_p.add_argument("--out", type=Path, required=True, help="merged JSONL file")
    merge_p.add_argument("inputs", nargs="*", type=Path, help="finished JSONL outputs")
    merge_p.add_argument(
        "--shards", action="store_true", help="merge the files OUT.shard-*-of-K.jsonl"
    )

    tiny = sub.add_parser(
        "train-tiny",
        help="train a tiny GPT-2 (and its tokenizer) on a corpus, in minutes on a CPU",
        description="Train a tokenizer (byte-level BPE, or word-level with --tokenizer word) and "
        "a 2-layer GPT-2 on the corpus texts and save both with save_pretrained (loadable with "
        "--model FOLDER).",
    )
    tiny.add_argument(
        "--corpus",
        type=Path,
        required=True,
        help="a JSONL corpus, a folder of .jsonl corpora, or a folder of .txt files",
    )
    tiny.add_argument("--out", type=Path, required=True, help="folder for the model")
    tiny.add_argument("--steps", type=int, default=None, help="training steps")
    tiny.add_argument("--seed", type=int, default=None, help="training seed")
    tiny.add_argument(
        "--architecture", choices=["gpt2", "llama"], default="gpt2", help="model (default gpt2)"
    )
    tiny.add_argument(
        "--tokenizer",
        choices=["bpe", "word"],
        default="bpe",
        help="bpe: a byte-level BPE of 1,024 pieces (default); word: every word and punctuation "
        "mark of the corpus is a token, so the model writes only the corpus's words, trained with "
        "the shipped demo model's settings (generation.tiny.DEMO_CONFIG: 1,000 steps, a few "
        "minutes on two cores, saved in float16)",
    )

    demo = sub.add_parser(
        "demo",
        help="rebuild the shipped demo set (all-human, splice baseline, tiny GPT-2)",
        description="For every <category>.jsonl in the corpus folder: one all-human example, "
        "two splice-baseline examples and four tiny-GPT-2 examples per document; merged "
        "into one file with a manifest. Trains the tiny model first if it is missing.",
    )
    demo.add_argument("--corpus", type=Path, default=Path("data/demo/corpus"), help="corpus folder")
    demo.add_argument("--model", type=Path, default=Path("data/demo/model"), help="model folder")
    demo.add_argument(
        "--out", type=Path, default=Path("data/demo/examples.jsonl"), help="output JSONL"
    )
    demo.add_argument("--seed", type=int, default=2026, help="run seed (default 2026)")
    demo.add_argument("--retrain", action="store_true", help="train the tiny model again")
    demo.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return parser


def _settings(args: argparse.Namespace) -> dict:
    """The run's settings as the manifest keeps them, with the SHA-256 of the corpus read."""
    out = {}
    for key, value in vars(args).items():
        out[key] = str(value) if isinstance(value, Path) else value
    corpus = getattr(args, "corpus", None)
    if corpus is not None and Path(corpus).exists():
        out["corpus_sha256"] = corpus_sha256(Path(corpus))
    return out


def _load_docs(args) -> tuple[list[Document], str, str]:
    if getattr(args, "resample_rounds", 0) < 0:
        raise UsageError(f"--resample-rounds must be 0 or more, got {args.resample_rounds}")
    docs = read_corpus(args.corpus, args.category_field)
    if args.category_field == "category" and (hint := category_field_hint(docs)):
        print(f"warning: {hint}", file=sys.stderr)
    category = (args.category or default_category(args.corpus)).lower()
    if not CATEGORY_RE.fullmatch(category):
        raise UsageError(f"category {category!r} must be a lowercase slug (letters, digits, -)")
    return docs, category, args.dataset or category


def _positive(name: str, value: int | None) -> None:
    if value is not None and value < 1:
        raise UsageError(f"{name} must be at least 1, got {value}")


def cmd_split(args) -> int:
    docs, _category, _dataset = _load_docs(args)
    if args.sentences < 2:
        raise PlanError(f"N (sentences per example) must be at least 2, got {args.sentences}")
    handle = args.out.open("w", encoding="utf-8") if args.out else sys.stdout
    short = 0
    try:
        for doc in docs:
            enough = len(doc.sentences) >= args.sentences
            short += not enough
            row = {"id": doc.id, "sentences": list(doc.sentences), "enough": enough}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
    finally:
        if args.out:
            handle.close()
    print(
        f"{len(docs)} document(s); {len(docs) - short} with at least {args.sentences} sentences, "
        f"{short} too short (skipped by the other commands)",
        file=sys.stderr,
    )
    return 0


def _run(writer: RunWriter, body, extra: dict | None = None) -> int:
    if writer.already_complete:
        print(f"{writer.paths['out']} is already complete; nothing to do.", file=sys.stderr)
        return 0
    try:
        body()
    except KeyboardInterrupt:
        writer.fail("interrupted", extra=extra)
        print(
            f"interrupted: run again with --resume to finish {writer.paths['out']}", file=sys.stderr
        )
        return 130
    except Exception as error:
        writer.fail(f"{type(error).__name__}: {error}", extra=extra)
        raise
    writer.finish(extra=extra)
    counts = writer.counts.to_json()
    print(
        f"wrote {counts['made']} example(s) to {writer.paths['out']} "
        f"(dropped {counts['dropped']}, tried {counts['replacements']} replacement(s), "
        f"skipped {counts['skipped_documents']} short document(s))",
        file=sys.stderr,
    )
    for line in boundary_report(writer.counts):
        print(line, file=sys.stderr)
    return 0


def cmd_human(args) -> int:
    from generation.pipeline import run_human

    docs, category, dataset = _load_docs(args)
    plan = make_plan(
        docs,
        category=category,
        system_slug="human",
        n=args.sentences,
        seed=args.seed,
        human_share=1.0,
    )
    writer = RunWriter(args.out, _settings(args), resume=args.resume, overwrite=args.overwrite)
    return _run(writer, lambda: run_human(plan, writer, dataset, progress=not args.no_progress))


def cmd_baseline(args) -> int:
    from generation.pipeline import run_baseline

    _positive("--max-attempts", args.max_attempts)
    docs, category, dataset = _load_docs(args)
    content_filter = ContentFilter.from_file(args.filter_words) if args.filter_words else None
    plan = make_plan(
        docs,
        category=category,
        system_slug=slug(args.system),
        n=args.sentences,
        per_doc=args.per_doc,
        seed=args.seed,
        human_share=args.human_share,
    )
    writer = RunWriter(args.out, _settings(args), resume=args.resume, overwrite=args.overwrite)
    return _run(
        writer,
        lambda: run_baseline(
            plan,
            writer,
            docs,
            dataset=dataset,
            max_attempts=args.max_attempts,
            content_filter=content_filter,
            progress=not args.no_progress,
            system=args.system,
            resample_rounds=args.resample_rounds,
        ),
    )


def default_system(model: str) -> str:
    """A system name from a model id or path: `openai-community/gpt2-xl` → `gpt2-xl`."""
    return Path(model.rstrip("/")).name or model


def cmd_generate(args) -> int:
    from generation.engines import options as engine_options
    from generation.pipeline import GenerateOptions, run_generate

    for name in ("--per-doc", "--batch-size", "--max-attempts", "--tokens-per-sentence"):
        _positive(name, getattr(args, name[2:].replace("-", "_")))
    _positive("--max-new-tokens", args.max_new_tokens)
    if args.system_label is not None and not 0 < len(args.system_label.strip()) <= 100:
        raise UsageError("--system-label must be 1 to 100 characters")
    decoding = DecodingPlan.build(
        p=args.p,
        temperature=args.temperature,
        top_k=args.top_k,
        min_p=args.min_p,
        repetition_penalty=args.repetition_penalty,
        preset=args.preset,
    )
    docs, category, dataset = _load_docs(args)
    content_filter = ContentFilter.from_file(args.filter_words) if args.filter_words else None
    system = args.system or default_system(args.model)
    plan = make_plan(
        docs,
        category=category,
        system_slug=slug(system),
        n=args.sentences,
        per_doc=args.per_doc,
        seed=args.seed,
        human_share=args.human_share,
        decoding=decoding,
    )
    shard = distributed.from_environment()
    if shard is None and args.shard:
        try:
            shard = distributed.parse_shard(args.shard)
        except ValueError as error:
            raise UsageError(str(error)) from None
    out = args.out
    device = args.device
    if shard is not None and shard.count > 1:
        plan.tasks = [t for t in plan.tasks if shard.owns(t.index)]
        out = shard_path(args.out, shard.index, shard.count)
        if shard.distributed:
            distributed.init()
            if device in ("auto", "cuda"):
                import torch

                if torch.cuda.is_available():
                    device = f"cuda:{shard.local_rank % torch.cuda.device_count()}"
    settings = _settings(args)
    settings["p"] = decoding.p.describe() if not decoding.preset else None
    settings["decoding"] = decoding.describe()
    settings["shard"] = f"{shard.index}/{shard.count}" if shard else None
    settings = engine_options.engine_settings(args, settings)
    engine = engine_options.make_engine(args, device)
    provenance = engine.provenance(code_version())
    if args.prompt_format == "chat":
        provenance = engine_options.with_chat(provenance, engine)
    extra = {"model": engine.describe()}
    warnings = engine.warnings(args.prompt_format)
    options = GenerateOptions(
        system=system,
        dataset=dataset,
        prompt_format=args.prompt_format,
        batch_size=engine_options.window_size(args),
        max_attempts=args.max_attempts,
        tokens_per_sentence=args.tokens_per_sentence,
        max_new_tokens=args.max_new_tokens,
        content_filter=content_filter,
        progress=not args.no_progress,
        provenance=provenance,
        system_label=args.system_label,
        resample_rounds=args.resample_rounds,
    )
    code = 1
    try:
        writer = RunWriter(out, settings, resume=args.resume, overwrite=args.overwrite)
        for warning in warnings:
            writer.warn(warning)
            print(f"warning: {warning}", file=sys.stderr)

        def body() -> None:
            try:
                run_generate(plan, writer, engine, options)
            finally:
                if args.prompt_format == "chat":
                    counts = writer.counts.to_json()
                    extra["chat"] = engine_options.chat_summary(writer.paths["part"], counts)
                if hasattr(engine, "request_stats"):
                    extra["requests"] = engine.request_stats()

        code = _run(writer, body, extra=extra)
    finally:
        if shard is not None and shard.distributed:
            everyone_ok = distributed.all_ok(code == 0)
            if everyone_ok and shard.is_main:
                shards = [shard_path(args.out, i, shard.count) for i in range(shard.count)]
                merged = merge(shards, args.out, by_task=True, extra=extra)
                print(f"merged {merged['examples']} example(s) into {args.out}", file=sys.stderr)
            distributed.barrier()
            distributed.shutdown()
            if not everyone_ok and code == 0:
                code = 1
    return code


def tag_warnings(lm, prompt_format: str) -> list[str]:
    """Grover tags the tokenizer splits (see generation.engines.hf.tag_warnings)."""
    from generation.engines.hf import tag_warnings as warnings

    return warnings(lm, prompt_format)


def cmd_merge(args) -> int:
    inputs = list(args.inputs)
    if args.shards:
        name = re.compile(
            rf"{re.escape(args.out.stem)}\.shard-\d+-of-(\d+){re.escape(args.out.suffix)}"
        )
        found = {p: name.fullmatch(p.name) for p in args.out.parent.iterdir()}
        inputs = sorted(p for p, match in found.items() if match)
        if not inputs:
            raise UsageError(f"no shard files {args.out.stem}.shard-I-of-K{args.out.suffix}")
        counts = {found[p].group(1) for p in inputs}
        expected = int(next(iter(counts)))
        if len(counts) != 1 or len(inputs) != expected:
            raise UsageError(f"expected {expected} shard files, found {len(inputs)}: {inputs}")
    if not inputs:
        raise UsageError("nothing to merge: give input files or --shards")
    if args.out in inputs or paths_for(args.out)["out"] in inputs:
        raise UsageError("the output cannot also be an input")
    merged = merge(inputs, args.out, by_task=args.shards)
    print(f"merged {merged['examples']} example(s) into {args.out}", file=sys.stderr)
    return 0


def cmd_train_tiny(args) -> int:
    from dataclasses import replace

    from generation.tiny import DEMO_CONFIG, TinyConfig, corpus_texts, train_tiny

    # word: the demo model's settings, so `--tokenizer word` on the demo corpus trains the shipped
    # model (as `demo --retrain` does)
    config = DEMO_CONFIG if args.tokenizer == "word" else TinyConfig()
    config = replace(config, architecture=args.architecture)
    if args.steps is not None:
        _positive("--steps", args.steps)
        config = replace(config, steps=args.steps)
    if args.seed is not None:
        config = replace(config, seed=args.seed)
    summary = train_tiny(corpus_texts(args.corpus), args.out, config, log=_stderr)
    _stderr(
        f"saved to {args.out}: {summary['parameters']} parameters, loss {summary['final_loss']}, "
        f"{summary['seconds']} s"
    )
    return 0


def _stderr(message: str) -> None:
    print(message, file=sys.stderr)


def cmd_demo(args) -> int:
    from generation.demo import build_demo

    build_demo(
        corpus=args.corpus,
        model=args.model,
        out=args.out,
        seed=args.seed,
        retrain=args.retrain,
        progress=not args.no_progress,
    )
    return 0


COMMANDS = {
    "split": cmd_split,
    "human": cmd_human,
    "baseline": cmd_baseline,
    "generate": cmd_generate,
    "merge": cmd_merge,
    "train-tiny": cmd_train_tiny,
    "demo": cmd_demo,
}


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except KNOWN_ERRORS as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
