"""The splice baseline (pure): the continuation is a run of sentences from another document."""

from __future__ import annotations

import random

from generation.corpus import Document
from generation.prompts import Task


def splice(
    task: Task, corpus: list[Document], rng: random.Random, default_category: str | None = None
) -> tuple[Document | None, int, list[str]]:
    """(donor, start, sentences): N - h consecutive sentences of a random other document of the
    same category that has enough of them; the donor is never the task's own document.
    (None, 0, []) when none fits. Documents without a category field are of `default_category`
    (the run's)."""
    needed = task.n - task.h
    donors = [
        d
        for d in corpus
        if d.id != task.doc.id
        and len(d.sentences) >= needed
        and (d.category or default_category or task.category) == task.category
    ]
    if not donors:
        return None, 0, []
    donor = rng.choice(donors)
    start = rng.randint(0, len(donor.sentences) - needed)
    return donor, start, list(donor.sentences[start : start + needed])
