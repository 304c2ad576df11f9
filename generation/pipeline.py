"""Runs: a plan of examples → records written one at a time, with retries, filtering and resume."""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from dataclasses import dataclass

from tqdm import tqdm

from generation import filters
from generation.baselines import splice
from generation.corpus import Document
from generation.filters import ContentFilter, quality_problem
from generation.generator import Request, continue_batch, fits, prompt_lengths
from generation.models import LoadedModel, max_positions
from generation.prompts import Plan, Task, prompt_text, replacement, retry_seed
from generation.records import RunWriter, base_provenance, code_version, make_record

HUMAN = "human"
WINDOW_BATCHES = 8  # prompts are sorted by length within a window of this many batches
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
    provenance: dict | None = None  # LoadedModel.provenance(): carried by every model record
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
    lm: LoadedModel,
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
                _run_window(chunk, writer, lm, options)
                bar.update(sum(not t.replaces for t in chunk))
                if on_window:
                    on_window()

        with_replacements(plan, writer, run, options.resample_rounds)


def _run_window(
    tasks: list[Task], writer: RunWriter, lm: LoadedModel, options: GenerateOptions
) -> None:
    prompts = {
        t.id: prompt_text(t.doc, t.h, options.prompt_format) for t in tasks if not t.all_human
    }
    lengths = dict(
        zip(prompts, prompt_lengths(lm, [text for text, _ in prompts.values()]), strict=True)
    )
    outcome: dict[str, tuple[str, object]] = {}  # id -> ("record", dict) | ("drop", reason, ...)
    human = base_provenance(HUMAN, (options.provenance or {}).get("code_version") or _version())
    todo: list[Task] = []
    for task in tasks:
        if task.all_human:
            outcome[task.id] = ("record", human_record(task, options.dataset, provenance=human))
        elif not fits(lm, lengths[task.id], _budget(task, options)):
            outcome[task.id] = ("drop", filters.PROMPT_TOO_LONG, None)
        else:
            todo.append(task)
    attempt = 0
    while todo and attempt < options.max_attempts:
        todo.sort(key=lambda t: (lengths[t.id], t.index))
        failed: list[Task] = []
        for batch in _batches(todo, lengths, options, max_positions(lm.model)):
            requests = [
                Request(
                    prompt=prompts[t.id][0],
                    needed=t.n - t.h,
                    decoding=t.decoding,
                    seed=retry_seed(t.seed, attempt),
                    budget=_budget(t, options),
                )
                for t in batch
            ]
            results = continue_batch(lm, requests)
            for task, request, result in zip(batch, requests, results, strict=True):
                writer.counts.repaired += result.repairs > 0
                writer.counts.unsettled += not result.settled
                needed = task.n - task.h
                problem = quality_problem(
                    task.prompt, result.sentences, needed, source=list(task.doc.sentences)
                )
                if problem is not None:
                    outcome[task.id] = ("drop", problem, None)
                    # Greedy decoding (p = 0) ignores the seed: a retry would repeat itself.
                    if not task.decoding.greedy and attempt + 1 < options.max_attempts:
                        failed.append(task)
                        writer.counts.retries += 1
                    continue
                continuation = result.sentences[:needed]
                if options.content_filter and (
                    words := options.content_filter.matches(continuation)
                ):
                    outcome[task.id] = ("drop", "content_filter", words)
                    continue
                outcome[task.id] = ("record", _model_record(task, request, continuation, options))
                outcome[task.id][1]["meta"].update({**prompts[task.id][1], "attempt": attempt})
        todo = failed
        attempt += 1
    for task in tasks:  # written in plan order
        kind, *rest = outcome[task.id]
        if kind == "record":
            writer.write(rest[0])
        else:
            writer.drop(task.id, rest[0], rest[1], p=task.p, h=task.h)


def _batches(
    tasks: list[Task], lengths: dict[str, int], options: GenerateOptions, limit: int | None
) -> list[list[Task]]:
    """Consecutive batches of at most `batch_size` tasks (sorted by prompt length) in which every
    row fits the model's context: rows that stop early keep stepping until the longest budget of
    the batch is spent, so the longest prompt plus the longest budget must fit."""
    batches: list[list[Task]] = []
    current: list[Task] = []
    longest = budget = 0
    for task in tasks:
        new_longest = max(longest, lengths[task.id])
        new_budget = max(budget, _budget(task, options))
        full = len(current) >= options.batch_size
        too_long = limit is not None and new_longest + new_budget > limit
        if current and (full or too_long):
            batches.append(current)
            current, new_longest, new_budget = [], lengths[task.id], _budget(task, options)
        current.append(task)
        longest, budget = new_longest, new_budget
    if current:
        batches.append(current)
    return batches


def _model_record(
    task: Task, request: Request, continuation: list[str], options: GenerateOptions
) -> dict:
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
        provenance=_model_provenance(options),
        system_label=options.system_label,
    )


def _model_provenance(options: GenerateOptions) -> dict:
    """The model's provenance with `generation.method` = "model" (every record says how it was
    made: human, splice or model)."""
    if options.provenance is None:
        return base_provenance("model", _version())
    generation = {"method": "model", **(options.provenance.get("generation") or {})}
    return {**options.provenance, "generation": generation}
