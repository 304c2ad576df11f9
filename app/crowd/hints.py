"""The detector hint (a machine-informed crowd): in a condition with `detector_hint = true`, each
revealed sentence shows, in plain words, how machine-like a detector found it.

The scores are computed offline by `python -m analysis detect` (its detections.csv, one list of
per-sentence scores per text and scorer) and stored with each text, in its `meta["detector"]`
({"scorer", "model", "scores"}); an example file may carry the same when imported.
`flask study hints SLUG detections.csv` stores them for the study's texts (an attention check
takes its source text's) and fixes the study's cut points: the thirds of the scores of its
texts' sentences. A sentence then reads as low, unsure or high; the hint says nothing of where
the boundary is, and only revealed sentences show one. The words shown are stored with the round.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from sqlalchemy import select

from app.crowd import conditions
from app.crowd.config import StudyConfig
from app.crowd.pool import check_ids
from app.errors import BadRequest
from app.extensions import db
from app.models import Example, Participant, Round, Study
from roftcore.spreadsheet import restore_frame

LEVELS = ("low", "unsure", "high")
WORDS = {
    "low": "The detector finds little that is machine-like in this sentence.",
    "unsure": "The detector is unsure about this sentence.",
    "high": "The detector finds this sentence machine-like.",
}


def read_scores(path: Path, scorer: str | None) -> tuple[str, dict[str, dict]]:
    """(scorer, {example id: {"scorer", "model", "scores"}}) from a detections.csv."""
    try:
        frame = restore_frame(pd.read_csv(path))
    except (OSError, ValueError) as error:
        raise BadRequest(f"{path}: cannot read detections ({error})") from None
    found = sorted(c.removesuffix("_sentences") for c in frame if c.endswith("_sentences"))
    if "example" not in frame or not found:
        raise BadRequest(f"{path}: not a detections.csv from `python -m analysis detect`")
    if scorer is None:
        scorer = found[0]
    if scorer not in found:
        raise BadRequest(f"{path}: --scorer {scorer!r} is not in it (it has {', '.join(found)})")
    model_column = f"{scorer}_model"
    out = {}
    for row in frame.itertuples(index=False):
        values = getattr(row, f"{scorer}_sentences")
        scores = json.loads(values) if isinstance(values, str) else list(values)
        out[str(row.example)] = {
            "scorer": scorer,
            "model": str(getattr(row, model_column, "")) if model_column in frame else "",
            "scores": [None if s is None or not np.isfinite(s) else float(s) for s in scores],
        }
    return scorer, out


def _study_texts(study: Study) -> list[int]:
    ids = set(study.pool["normal"]) | set(study.pool.get("tutorial", []))
    for pool in (study.pool.get("conditions") or {}).values():
        ids |= set(pool["normal"]) | set(pool["tutorial"])
    return sorted(ids)


def store(study: Study, path: Path | None, scorer: str | None = None) -> dict:
    """Store the detector's scores with the study's texts (from `path`, or those the texts were
    imported with) and fix the study's cut points; commits. Returns {"scorer", "texts",
    "missing", "cuts"}."""
    scores = read_scores(path, scorer)[1] if path is not None else {}
    texts = db.session.scalars(select(Example).where(Example.id.in_(_study_texts(study)))).all()
    kept: dict[str, dict] = {}
    sentences: dict[str, list[str]] = {}
    for example in texts:
        found = scores.get(example.external_id) or (example.meta or {}).get("detector")
        if not found or len(found.get("scores", [])) < example.n_sentences:
            continue
        found = {**found, "scores": found["scores"][: example.n_sentences]}
        example.meta = {**(example.meta or {}), "detector": found}
        kept[example.external_id] = found
        sentences[example.external_id] = list(example.sentences)
    for check in db.session.scalars(
        select(Example).where(Example.id.in_(sorted(set(check_ids(study.pool)))))
    ):
        name = (check.source or {}).get("from_example")
        if name not in kept:
            continue
        original, source = sentences[name], kept[name]["scores"]
        # Where the check shows its own sentence (its instruction), the hint is unsure: no tell.
        shown = [
            source[i] if i < len(original) and check.sentences[i] == original[i] else None
            for i in range(check.n_sentences)
        ]
        check.meta = {**(check.meta or {}), "detector": {**kept[name], "scores": shown}}
    pooled = [s for found in kept.values() for s in found["scores"][1:] if s is not None]
    if not pooled:
        db.session.rollback()
        where = str(path) if path is not None else f"study {study.slug!r}"
        raise BadRequest(f"{where}: no detector scores for any text of study {study.slug!r}")
    # The first sentence is always human: it does not set the cut points.
    cuts = [float(np.quantile(pooled, 1 / 3)), float(np.quantile(pooled, 2 / 3))]
    names = sorted({found.get("scorer", "") for found in kept.values()})
    study.pool = {**study.pool, "detector_cuts": cuts}
    db.session.commit()
    return {
        "scorer": ", ".join(names),
        "texts": len(kept),
        "missing": len(texts) - len(kept),
        "cuts": cuts,
    }


def levels(study: Study, example: Example) -> list[str] | None:
    """The hint's level for each sentence of the text, or None when it has no scores (or the
    study no cut points)."""
    cuts = study.pool.get("detector_cuts")
    found = (example.meta or {}).get("detector")
    if not cuts or not found:
        return None
    low, high = cuts
    out = []
    for score in found["scores"][: example.n_sentences]:
        if score is None:
            out.append("unsure")
        else:
            out.append("low" if score <= low else "high" if score > high else "unsure")
    return out


def for_round(round_: Round) -> list[str] | None:
    """The levels a study round shows (None: its worker's condition shows no hint)."""
    participant = db.session.get(Participant, round_.participant_id)
    study = participant.study
    config = conditions.settings_for(StudyConfig.from_json(study.config), participant.condition)
    if not config.detector_hint:
        return None
    if round_.detector_hints is None:
        shown = levels(study, round_.example)
        if shown is not None:
            round_.detector_hints = shown
            db.session.commit()
    return round_.detector_hints
