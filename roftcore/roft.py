"""The public RoFT dataset's conventions (pure): `_SEP_`-joined texts, N = 10, one id per text."""

from __future__ import annotations

import hashlib

SEP = "_SEP_"
N_SENTENCES = 10


def example_key(model: str, dataset: str, p: float | None, prompt_body: str, gen_body: str) -> str:
    """A stable id for one RoFT text: `flask import --format roft-csv` and `analysis.load` agree."""
    parts = [model, dataset, "" if p is None else repr(float(p)), prompt_body, gen_body]
    digest = hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:12]
    return f"roft-{digest}"
