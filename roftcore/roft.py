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


def split_body(body: str | None) -> list[str]:
    """The sentences of a `_SEP_`-joined body, each stripped; an empty body has none."""
    return [s.strip() for s in body.split(SEP)] if body and body.strip() else []


def shown_sentences(
    prompt_body: str | None, gen_body: str | None, n: int = N_SENTENCES
) -> tuple[list[str], int]:
    """The sentences a RoFT player was shown, and how many of the row's sentences were not.

    RoFT showed the prompt and then the generation, N = 10 sentences in all; roft.csv's
    `gen_body` often runs on (up to 48 sentences in total), and those sentences were never on
    screen. They are dropped here, for the importer and the analysis alike.
    """
    sentences = split_body(prompt_body) + split_body(gen_body)
    return sentences[:n], max(len(sentences) - n, 0)
