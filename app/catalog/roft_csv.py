"""The public RoFT dataset (`roft.csv`) → our example records. Pure: no Flask, no database.

Each distinct text in the file (same model, dataset, p, prompt and generation) becomes one
example: the sentences RoFT showed its players, prompt_body then gen_body split on `_SEP_`, the
first 10 in all (roftcore.roft.shown_sentences; roft.csv's generations often run on to 48
sentences that nobody saw, and those are dropped and counted). boundary = true_boundary_index + 1
(the convention in docs/boundary.md; 9 = all human becomes boundary 10 = N). A text with no
machine sentence among those shown is all human: its system is "human" and it has no decoding.
The original model name, prompt and generation ids, and the number of sentences dropped, are kept
in `meta`.
"""

from __future__ import annotations

import csv
import math
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from roftcore.records import ExampleRecord, RecordError, validate
from roftcore.roft import example_key, shown_sentences, split_body

NEEDED = ("model", "dataset", "dec_strat_value", "true_boundary_index", "prompt_body", "gen_body")


class RoftCsvError(ValueError):
    """The file cannot be converted; `errors` name each bad row (1-based, header = row 1)."""

    def __init__(self, path: Path, errors: list[str]):
        self.path = path
        self.errors = errors
        shown = "\n  ".join(errors[:20])
        more = f"\n  … and {len(errors) - 20} more" if len(errors) > 20 else ""
        super().__init__(f"{path}: nothing converted, {len(errors)} problem(s):\n  {shown}{more}")


def parse_p(value: str | float | None) -> float | None:
    """RoFT's dec_strat_value as a float, or None when missing or not a number."""
    if value is None:
        return None
    try:
        p = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(p) else p


def slug(text: str) -> str:
    value = re.sub(r"[^a-z0-9_-]+", "-", text.strip().lower()).strip("-")
    return (value or "roft")[:64]


@dataclass(frozen=True)
class Conversion:
    """The records of a roft.csv file and what was left out of them."""

    records: list[ExampleRecord]
    texts_trimmed: int  # texts whose row had sentences beyond the 10 RoFT showed
    sentences_dropped: int  # those sentences, in all

    def dropped_message(self) -> str:
        if not self.texts_trimmed:
            return "Every text had at most the 10 sentences RoFT showed; nothing was dropped."
        return (
            f"Dropped {self.sentences_dropped} sentence(s) that RoFT never showed, from "
            f"{self.texts_trimmed} of {len(self.records)} text(s): each keeps its first 10."
        )


def convert(rows: Iterable[dict], path: Path = Path("roft.csv")) -> Conversion:
    """Records for the distinct texts of the rows, each cut to the sentences RoFT showed, with
    the count of texts trimmed and sentences dropped."""
    records: dict[str, ExampleRecord] = {}
    trimmed = dropped_total = 0
    errors: list[str] = []
    for number, row in enumerate(rows, start=2):
        missing = [c for c in NEEDED if c not in row]
        if missing:
            raise RoftCsvError(path, [f"the file has no column(s) {', '.join(missing)}"])
        model = (row["model"] or "").strip()
        dataset = (row["dataset"] or "").strip()
        prompt_body = row["prompt_body"] or ""
        gen_body = row["gen_body"] or ""
        p = parse_p(row["dec_strat_value"])
        key = example_key(model, dataset, p, prompt_body, gen_body)
        if key in records:
            continue
        try:
            index = int(float(row["true_boundary_index"]))
        except (TypeError, ValueError):
            errors.append(f"row {number}: true_boundary_index is not a number")
            continue
        prompt = split_body(prompt_body)
        if len(prompt) != index + 1:
            errors.append(
                f"row {number}: the prompt has {len(prompt)} sentence(s) but "
                f"true_boundary_index {index} says the last human sentence is number {index + 1}"
            )
            continue
        sentences, dropped = shown_sentences(prompt_body, gen_body)
        all_human = len(sentences) == index + 1
        obj = {
            "id": key,
            "category": slug(dataset),
            "system": "human" if all_human else (model or "unknown"),
            "sentences": sentences,
            "boundary": index + 1,
            "decoding": None if all_human or p is None else {"strategy": "nucleus", "p": p},
            "source": {"dataset": "roft", "doc_id": str(row.get("prompt") or "")},
            "meta": {
                "imported_from": "roft.csv",
                "roft_model": model,
                "roft_dataset": dataset,
                "roft_prompt": str(row.get("prompt") or ""),
                "roft_generation": str(row.get("generation") or ""),
                "roft_sentences_dropped": dropped,
            },
        }
        try:
            records[key] = validate(obj, number)
        except RecordError as error:
            errors.append(f"row {number}: {error.message}")
            continue
        trimmed += dropped > 0
        dropped_total += dropped
    if errors:
        raise RoftCsvError(path, errors)
    if not records:
        raise RoftCsvError(path, ["no rows in the file"])
    return Conversion(list(records.values()), trimmed, dropped_total)


def read_roft_csv_counted(path: Path) -> Conversion:
    """Every distinct text of a roft.csv file as an example record (all-or-nothing), with the
    count of sentences dropped because RoFT never showed them."""
    path = Path(path)
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            return convert(csv.DictReader(handle), path)
    except OSError as error:
        raise RoftCsvError(path, [f"cannot read file ({error.strerror})"]) from None
    except UnicodeDecodeError as error:
        raise RoftCsvError(path, [f"not UTF-8 text ({error.reason})"]) from None
