"""Which human-written source passages an example is built from. Pure: no Flask, no database.

Every variant built from one passage (the all-human text, each model continuation, each splice)
shares the passage's key, `dataset/doc_id`. A spliced baseline also shows sentences of a second
passage (`splice_doc_id`), so it carries that key too. A record without a `doc_id` is a passage
of its own.
"""

from __future__ import annotations

import hashlib

MAX_KEY_CHARS = 400


def _fit(key: str) -> str:
    if len(key) <= MAX_KEY_CHARS:
        return key
    return "sha256:" + hashlib.sha256(key.encode("utf-8")).hexdigest()


def passage_keys(source: dict | None, external_id: str) -> list[str]:
    """The passage keys of an example with this `source` and id, its own passage first."""
    source = source or {}
    dataset = str(source.get("dataset") or "").strip()
    doc = source.get("doc_id")
    keys = [_fit(f"{dataset}/{doc}" if doc not in (None, "") else f"example/{external_id}")]
    splice = source.get("splice_doc_id")
    if splice not in (None, ""):
        spliced = _fit(f"{dataset}/{splice}")
        if spliced not in keys:
            keys.append(spliced)
    return keys
