"""Runs: a plan of examples → records written one at a time, with retries, filtering and resume.

Model continuations come from an engine (`generation.engines`): the pipeline hands it a window of
requests and checks what comes back, whichever engine wrote it."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

from tqdm import tqdm

from generation.baselines import splice
from generation.corpus import Document
from generation.engines.base import Continuation, Engine, Request
from generation.engines.chat import chat_messages, clean_reply
from generation.filters import ContentFilter, quality_problem
from generation.prompts import Plan, Task, prompt_text, replacement, retry_seed
from generation.records import RunWriter, base_provenance, code_version, make_record
from generation.sentences import complete_sentences

HUMAN = "human"
WINDOW_BATCHES = 8  # prompts are sorted by length within a window of this many batches
CHAT = "chat"  # --prompt-format chat: the model's chat template and a continuation instruction
CHAT_SLACK = 2  # extra sentences (and their tokens) a chat reply may spend on a preamble
RESAMPLE_ROUNDS = 3  # rounds of replacements for rejected examples (see prompts.replacement)


@dataclass
class GenerateOptions:
    system: str
    dataset: str
    prompt_format: str = "plain"
    batch_size: int = 16
    max_attempts: int = 3
    tokens_per_sentence: int = 48
    max_new_tokens: int | None = None
    content_filter: ContentFilter | None = None
    progress: bool = True
    provenance: dict | None = None  # Engine.provenance(): carried by every model record
    system_label: str | None = None  # the display name players may see
    resample_rounds: int = RESAMPLE_ROUNDS  # 0: a rejected example is only counted


def _task_meta(task: Task) -> dict:
    meta = {"task": task.index}
    if task.replaces:
        meta["replaces"] = task.replaces
    return meta


def with_replacements(
    plan: Plan, writer: RunWriter, run: Callable[[list[Task]], None], rounds: int
) -> None:
    """Run the plan's pending tasks, then, for up to `rounds` rounds, a replacement (same
    category, h and decoding; another document) for every example the filters rejected, so the
    kept set keeps the requested boundary distribution. Rejections stay in the dropped file; which
    examples were rejected is read from the writer, so a resumed run makes the same replacements."""
    current = [t for t in plan.tasks if not t.all_human]
    run([t for t in plan.tasks if not writer.is_done(t.id)])
    for round_ in range(1, rounds + 1):
        rejected = [t for t in current if t.id in writer.dropped_ids]
        current = [r for t in rejected if (r := replacement(t, plan, round_)) is not None]
        if not current:
            break
        writer.counts.replacements += len(current)
        run([t for t in current if not writer.is_done(t.id)])
    table = writer.counts.boundaries()
    short = {h: n - table["kept"][h] for h, n in table["requested"].items() if table["kept"][h] < n}
    if short:
        writer.warn(
            "the kept boundary distribution is short of the requested one (h: missing): "
            + ", ".join(f"{h}: {n}" for h, n in short.items())
        )


def human_record(
    task: Task, dataset: str, meta: dict | None = None, provenance: dict | None = None
) -> dict:
    return make_record(
        id=task.id,
        category=task.category,
        system=HUMAN,
        sentences=list(task.doc.sentences[: task.n]),
        boundary=task.n,
        doc_id=task.doc.id,
        dataset=dataset,
        meta={"prompt_format": "plain", **_task_meta(task), **(meta or {})},
        provenance=provenance or base_provenance(HUMAN, _version()),
    )


@functools.cache
def _version() -> str:
    return code_version()


def _bar(total: int, initial: int, enabled: bool, desc: str):
    return tqdm(
        total=total, initial=initial, disable=not enabled, unit="ex", desc=desc, dynamic_ncols=True
    )


def run_human(plan: Plan, writer: RunWriter, dataset: str, progress: bool = True) -> None:
    """All-human examples: the first N sentences of each document."""
    writer.plan(plan.tasks, len(plan.skipped_documents))
    pending = [t for t in plan.tasks if not writer.is_done(t.id)]
    provenance = base_provenance(HUMAN, code_version())
    with _bar(len(plan.tasks), len(plan.tasks) - len(pending), progress, HUMAN) as bar:
        for task in pending:
            writer.write(human_record(task, dataset, provenance=provenance))
            bar.update()


def run_baseline(
    plan: Plan,
    writer: RunWriter,
    corpus: list[Document],
    *,
    dataset: str,
    max_attempts: int = 3,
    content_filter: ContentFilter | None = None,
    progress: bool = True,
    system: str = "splice-baseline",
    resample_rounds: int = RESAMPLE_ROUNDS,
) -> None:
    """RoFT's splice baseline: after the prompt, N - h sentences from another document of the same
    corpus (category); h = N examples are all-human. Rejected examples are replaced (see
    `with_replacements`)."""
    writer.plan(plan.tasks, len(plan.skipped_documents))
    pending = [t for t in plan.tasks if not writer.is_done(t.id)]
    version = code_version()
    human = base_provenance(HUMAN, version)
    with _bar(len(plan.tasks), len(plan.tasks) - len(pending), progress, system) as bar:

        def run(tasks: list[Task]) -> None:
            for task in tasks:
                if not task.replaces:
                    bar.update()
                if task.all_human:
                    writer.write(human_record(task, dataset, provenance=human))
                    continue
                _splice_example(
                    task,
                    plan,
                    writer,
                    corpus,
                    dataset=dataset,
                    system=system,
                    max_attempts=max_attempts,
                    content_filter=content_filter,
                    version=version,
                )

        with_replacements(plan, writer, run, resample_rounds)


def _splice_example(
    task: Task,
    plan: Plan,
    writer: RunWriter,
    corpus: list[Document],
    *,
    dataset: str,
    system: str,
    max_attempts: int,
    content_filter: ContentFilter | None,
    version: str,
) -> None:
    """One splice example: written, or dropped with its reason."""
    problem = None
    for attempt in range(max_attempts):
        seed = retry_seed(task.seed, attempt)
        donor, start, continuation = splice(task, corpus, random.Random(seed), plan.category)
        if donor is None:
            problem = "no_donor"
            break
        problem = quality_problem(task.prompt, continuation, task.n - task.h)
        if problem is None:
            break
        writer.counts.retries += 1
    if problem is not None:
        writer.drop(task.id, problem, h=task.h)
        return
    if content_filter and (words := content_filter.matches(continuation)):
        writer.drop(task.id, "content_filter", words, h=task.h)
        return
    writer.write(
        make_record(
            id=task.id,
            category=task.category,
            system=system,
            sentences=task.prompt + continuation,
            boundary=task.h,
            doc_id=task.doc.id,
            dataset=dataset,
            seed=seed,
            source_extra={"splice_doc_id": donor.id, "splice_start": start},
            meta={"prompt_format": "plain", **_task_meta(task), "attempt": attempt},
            provenance=base_provenance(
                "splice",
                version,
                donor_doc_id=donor.id,
                donor_category=donor.category or plan.category,
                donor_start=start,
            ),
        )
    )


def _budget(task: Task, options: GenerateOptions) -> int:
    budget = options.tokens_per_sentence * (task.n - task.h)
    if options.max_new_tokens:
        budget = min(budget, options.max_new_tokens)
    return budget


def run_generate(
    plan: Plan,
    writer: RunWriter,
    engine: Engine,
    options: GenerateOptions,
    on_window: Callable[[], None] | None = None,
) -> None:
    """Model continuations for every planned example not yet written (h = N: all-human), and
    replacements for the rejected ones (see `with_replacements`)."""
    writer.plan(plan.tasks, len(plan.skipped_documents))
    pending = [t for t in plan.tasks if not writer.is_done(t.id)]
    window = max(1, options.batch_size) * WINDOW_BATCHES
    with _bar(
        len(plan.tasks), len(plan.tasks) - len(pending), options.progress, options.system
    ) as bar:

        def run(tasks: list[Task]) -> None:
            for start in range(0, len(tasks), window):
                chunk = tasks[start : start + window]
                _run_window(chunk, writer, engine, options)
                bar.update(sum(not t.replaces for t in chunk))
                if on_window:
                    on_window()

        with_replacements(plan, writer, run, options.resample_rounds)


def _prompt(task: Task, options: GenerateOptions) -> tuple[str, dict, tuple[dict, ...] | None]:
    """The prompt text, what `meta` records about its format, and the conversation (chat)."""
    if options.prompt_format == CHAT:
        text, _meta = prompt_text(task.doc, task.h, "plain")
        return text, {"prompt_format": CHAT}, chat_messages(text)
    text, meta = prompt_text(task.doc, task.h, options.prompt_format)
    return text, meta, None


def _request(task: Task, attempt: int, prompt, options: GenerateOptions) -> Request:
    text, _meta, messages = prompt
    needed, budget = task.n - task.h, _budget(task, options)
    if messages is not None:  # room for a preamble the reply may open with
        needed += CHAT_SLACK
        budget += options.tokens_per_sentence * CHAT_SLACK
    return Request(
        prompt=text,
        needed=needed,
        decoding=task.decoding,
        seed=retry_seed(task.seed, attempt),
        budget=budget,
        messages=messages,
    )


def _run_window(
    tasks: list[Task], writer: RunWriter, engine: Engine, options: GenerateOptions
) -> None:
    outcome: dict[str, tuple[str, object]] = {}  # id -> ("record", dict) | ("drop", reason, ...)
    human = base_provenance(HUMAN, (options.provenance or {}).get("code_version") or _version())
    todo: list[Task] = []
    for task in tasks:
        if task.all_human:
            outcome[task.id] = ("record", human_record(task, options.dataset, provenance=human))
        else:
            todo.append(task)
    prompts = {t.id: _prompt(t, options) for t in todo}
    attempt = 0
    while todo and attempt < options.max_attempts:
        todo.sort(key=lambda t: t.index)
        failed: list[Task] = []
        requests = [_request(t, attempt, prompts[t.id], options) for t in todo]
        results = engine.generate(requests)
        for task, request, result in zip(todo, requests, results, strict=True):
            if result.problem is not None:  # the engine could not run it (no retry helps)
                outcome[task.id] = ("drop", result.problem, None)
                continue
            writer.counts.repaired += result.repairs > 0
            writer.counts.unsettled += not result.settled
            needed = task.n - task.h
            sentences, chat_meta = result.sentences, None
            problem = None
            if request.messages is not None:
                cleaned = clean_reply(result.text, task.prompt, keep=needed)
                problem = cleaned.problem
                sentences = complete_sentences(cleaned.text, result.finished)
                chat_meta = {"preamble": cleaned.preamble, "closing": cleaned.closing}
            if problem is None:
                problem = quality_problem(
                    task.prompt, sentences, needed, source=list(task.doc.sentences)
                )
            if problem is not None:
                outcome[task.id] = ("drop", problem, None)
                # Greedy decoding (p = 0) ignores the seed: a retry would repeat itself.
                if not task.decoding.greedy and attempt + 1 < options.max_attempts:
                    failed.append(task)
                    writer.counts.retries += 1
                continue
            continuation = sentences[:needed]
            if options.content_filter and (words := options.content_filter.matches(continuation)):
                outcome[task.id] = ("drop", "content_filter", words)
                continue
            record = _model_record(task, request, result, continuation, options)
            record["meta"].update({**prompts[task.id][1], "attempt": attempt})
            if chat_meta is not None:
                record["meta"]["chat"] = chat_meta
            outcome[task.id] = ("record", record)
        todo = failed
        attempt += 1
    for task in tasks:  # written in plan order
        kind, *rest = outcome[task.id]
        if kind == "record":
            writer.write(rest[0])
        else:
            writer.drop(task.id, rest[0], rest[1], p=task.p, h=task.h)


def _model_record(
    task: Task,
    request: Request,
    result: Continuation,
    continuation: list[str],
    options: GenerateOptions,
) -> dict:
    provenance = _model_provenance(options)
    if result.provenance:
        generation = {**provenance.get("generation", {}), **result.provenance}
        provenance = {**provenance, "generation": generation}
    return make_record(
        id=task.id,
        category=task.category,
        system=options.system,
        sentences=task.prompt + continuation,
        boundary=task.h,
        doc_id=task.doc.id,
        dataset=options.dataset,
        decoding=task.decoding.to_json(max_new_tokens=request.budget),
        seed=request.seed,
        meta=_task_meta(task),
        provenance=provenance,
        system_label=options.system_label,
    )


def _model_provenance(options: GenerateOptions) -> dict:
    """The model's provenance with `generation.method` = "model" (every record says how it was
    made: human, splice or model)."""
    if options.provenance is None:
        return base_provenance("model", _version())
    generation = {"method": "model", **(options.provenance.get("generation") or {})}
    return {**options.provenance, "generation": generation}
