"""Read our exports and the public RoFT `roft.csv` into one DataFrame schema.

One row per answered round (an annotation). Positions follow the boundary convention
(roftcore.boundary, docs/boundary.md): `boundary` is the index of the first machine-written sentence
(N = all human) and `guess` the index of the flagged sentence (N = "all human"). RoFT's
`true_boundary_index` and `predicted_boundary_index` are one less; they are converted here, at the
edge, and nowhere else.

Columns of the canonical frame (`CANONICAL`):

=================== ========== =====================================================================
column              dtype      meaning
=================== ========== =====================================================================
annotator           str        pseudonym of the player or worker
example             str        identifier of the text (for roft.csv: a hash of its texts)
date                datetime   when the round was answered (UTC; NaT when unknown)
system              str        the generating system (RoFT's `model`); "human" for all-human texts
category            str        the dataset or category (RoFT's `dataset`)
group               str        RoFT's `group`, or our participant group ("public", a study name)
p                   float      nucleus sampling p (NaN when unknown or not decoded)
n_sentences         int        N, the number of sentences in the text
boundary            int        index of the first machine sentence, 1..N (N = all human)
guess               int        the player's guess, same convention
points_stored       float      the points stored with the row (NaN when absent)
points              int        points recomputed from guess and boundary with the scoring rule
reasons             str        the chosen reason names joined by ";" ("" for none)
explanation         str        free-text explanation ("" for none)
order               float      the annotator's n-th round, from 1
seconds             float      seconds spent on the round (NaN when unknown)
attention_check     bool       the round was an attention check
attention_passed    float      1.0 passed, 0.0 failed, NaN not a check or unknown
participant_kind    str        "public" or "crowd"
study               str        the crowd study, "" for none
condition           str        the worker's condition in a study with conditions, "" for none
detector_hints      str        the detector hint's levels the round showed (a JSON list, one per
                               sentence: low, unsure, high), "" in a condition without the hint
participant_status  str        a crowd worker's outcome on the site (completed, failed_checks,
                               returned, timed_out, ...); "" for public players or unknown
decision            str        the worker's current decision (approve, reject, review, returned,
                               pending); "" when none was recorded or the input has none
source              str        "dump" or "roft-csv"
<survey columns>    int        the RoFT survey answers, -1 for no answer
=================== ========== =====================================================================
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from roftcore.boundary import points as score_points
from roftcore.roft import example_key
from roftcore.spreadsheet import restore_frame

ROFT_COLUMNS: tuple[str, ...] = (
    "date",
    "model",
    "dataset",
    "annotator",
    "group",
    "dec_strat_value",
    "predicted_boundary_index",
    "true_boundary_index",
    "points",
    "reason",
    "prompt",
    "prompt_body",
    "generation",
    "gen_body",
    "recipe_familiarity",
    "news_familiarity",
    "stories_familiarity",
    "gen_familiarity",
    "native_speaker",
    "read_guide",
)
SURVEY_COLUMNS: tuple[str, ...] = ROFT_COLUMNS[14:]
SEP = "_SEP_"
ROFT_N_SENTENCES = 10

CANONICAL: tuple[str, ...] = (
    "annotator",
    "example",
    "date",
    "system",
    "category",
    "group",
    "p",
    "n_sentences",
    "boundary",
    "guess",
    "points_stored",
    "points",
    "reasons",
    "explanation",
    "order",
    "seconds",
    "attention_check",
    "attention_passed",
    "participant_kind",
    "study",
    "condition",
    "detector_hints",
    "participant_status",
    "decision",
    "source",
    *SURVEY_COLUMNS,
)

TEXT_COLUMNS = ("prompt", "prompt_body", "generation", "gen_body")
ROUNDS_BASENAMES = ("rounds.parquet", "rounds.csv")
SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")


# A worker's decision has one spelling in the analysis: the export's (approve, reject, review,
# returned, pending: app/crowd/verify_submissions.py). A preregistered plan may name the first
# two in the past tense (app/crowd/preregistration.DECISIONS): both go through
# `canonical_decision`.
DECISION_ALIASES = {"approved": "approve", "rejected": "reject"}


def canonical_decision(value: object) -> str:
    """'Approved ' -> 'approve', 'rejected' -> 'reject'; other decisions lower-cased as they are."""
    text = str(value).strip().lower()
    return DECISION_ALIASES.get(text, text)


def canonical_decisions(values: pd.Series) -> pd.Series:
    """`canonical_decision` over a column (once per distinct value: fast on 10^6 rows)."""
    return values.map({v: canonical_decision(v) for v in values.unique()})


class LoadError(ValueError):
    """The input is not something `load` understands; the message says what was expected."""


def recompute_points(guess: pd.Series | np.ndarray, boundary: pd.Series | np.ndarray) -> np.ndarray:
    """Points for every row, from the one scoring function in roftcore.boundary.

    The function fills a table over every (guess, boundary) pair in the data's range once, and
    every row looks its points up there, so it stays the single definition of the rule while
    the work is vectorised.
    """
    g = np.asarray(guess, dtype=np.int64)
    b = np.asarray(boundary, dtype=np.int64)
    if g.size == 0:
        return np.zeros(0, dtype=np.int64)
    g_low, b_low = int(g.min()), int(b.min())
    width, height = int(g.max()) - g_low + 1, int(b.max()) - b_low + 1
    if width * height > 1_000_000:  # a range this wide: score the distinct pairs only
        pairs, inverse = np.unique(np.stack([g, b], axis=1), axis=0, return_inverse=True)
        table = np.array([score_points(int(x), int(y)) for x, y in pairs], dtype=np.int64)
        return table[inverse.reshape(-1)]
    table = np.array(
        [
            [score_points(x, y) for y in range(b_low, b_low + height)]
            for x in range(g_low, g_low + width)
        ],
        dtype=np.int64,
    )
    return table[g - g_low, b - b_low]


def _normalise_reasons(values: pd.Series) -> pd.Series:
    """ "['a', 'b']", '["a","b"]', "a;b" or "a, b" → "a;b"; missing → ""."""
    text = values.astype("str").fillna("")
    text = text.where(~values.isna(), "")
    text = text.str.replace(r"[\[\]'\"]", "", regex=True)
    text = text.str.replace(r"\s*[,;]\s*", ";", regex=True).str.strip().str.strip(";")
    return text.replace({"nan": "", "None": ""})


def _int_or(values: pd.Series, default: int) -> pd.Series:
    return pd.to_numeric(values, errors="coerce").fillna(default).astype("int64")


def _survey(values: pd.Series) -> pd.Series:
    """Survey answers as integers; True/False become 1/0 and anything missing -1."""
    if values.dtype == bool:
        return values.astype("int64")
    if pd.api.types.is_numeric_dtype(values):
        return values.fillna(-1).astype("int64")
    lowered = values.astype("str").str.strip().str.lower()
    mapped = lowered.map({"true": "1", "false": "0"}).fillna(lowered)
    return _int_or(mapped, -1)


def _dates(values: pd.Series) -> pd.Series:
    if pd.api.types.is_datetime64_any_dtype(values):
        return pd.to_datetime(values, utc=True)
    try:
        return pd.to_datetime(values, errors="raise", utc=True, format="ISO8601")
    except (ValueError, TypeError):
        return pd.to_datetime(values, errors="coerce", utc=True, format="mixed")


def _str(values: pd.Series | None, length: int, default: str = "") -> pd.Series:
    if values is None:
        return pd.Series([default] * length, dtype="str")
    return values.astype("str").where(values.notna(), default)


def example_keys(frame: pd.DataFrame) -> pd.Series:
    """The example id `flask import --format roft-csv` gives a text (roft_csv.example_key)."""
    parts = ["model", "dataset", "dec_strat_value", "prompt_body", "gen_body"]
    texts = frame[parts].copy()
    for column in ("model", "dataset", "prompt_body", "gen_body"):
        texts[column] = texts[column].astype("str").where(texts[column].notna(), "").str.strip()
    texts["model"] = texts["model"].str.strip()
    texts["dec_strat_value"] = pd.to_numeric(texts["dec_strat_value"], errors="coerce")
    codes, uniques = pd.factorize(pd.MultiIndex.from_frame(texts.fillna({"dec_strat_value": -1})))
    keys = np.array(
        [example_key(m, d, None if p == -1 else float(p), pb, gb) for m, d, p, pb, gb in uniques],
        dtype=object,
    )
    return pd.Series(keys[codes], index=frame.index, dtype="str")


def from_roft_frame(raw: pd.DataFrame, source: str = "roft-csv") -> pd.DataFrame:
    """Convert a frame with the RoFT twenty columns (and optionally our richer ones)."""
    missing = [c for c in ROFT_COLUMNS if c not in raw.columns and c not in SURVEY_COLUMNS]
    if "example_id" in raw.columns:  # our dumps: texts are optional, the example is named
        missing = [c for c in missing if c not in TEXT_COLUMNS]
    if missing:
        raise LoadError(f"missing RoFT column(s): {', '.join(missing)}")
    n = len(raw)
    out = pd.DataFrame(index=raw.index)
    out["annotator"] = _str(raw["annotator"], n)
    if "example_id" in raw.columns:
        out["example"] = _str(raw["example_id"], n)
    else:
        out["example"] = example_keys(raw)
    out["date"] = _dates(raw["date"])
    out["system"] = _str(raw.get("system", raw["model"]), n)
    out["category"] = _str(raw.get("category", raw["dataset"]), n)
    out["group"] = _str(raw["group"], n)
    p_col = raw["decoding_p"] if "decoding_p" in raw.columns else raw["dec_strat_value"]
    out["p"] = pd.to_numeric(p_col, errors="coerce").astype("float64")
    if "n_sentences" in raw.columns:
        out["n_sentences"] = _int_or(raw["n_sentences"], ROFT_N_SENTENCES)
    else:
        out["n_sentences"] = ROFT_N_SENTENCES
    out["boundary"] = _int_or(raw["true_boundary_index"], -1) + 1
    out["guess"] = _int_or(raw["predicted_boundary_index"], -1) + 1
    out["points_stored"] = pd.to_numeric(raw["points"], errors="coerce").astype("float64")
    out["reasons"] = _normalise_reasons(raw["reason"])
    out["explanation"] = _str(raw.get("explanation"), n)
    if "order_index" in raw.columns:
        out["order"] = pd.to_numeric(raw["order_index"], errors="coerce").astype("float64")
    else:
        # roft.csv has no order column: the annotator's n-th answer by date.
        out["order"] = out.groupby("annotator")["date"].rank(method="first").astype("float64")
    out["seconds"] = (
        pd.to_numeric(raw["seconds"], errors="coerce").astype("float64")
        if "seconds" in raw.columns
        else np.nan
    )
    if "attention_check" in raw.columns:
        check = raw["attention_check"].astype("str").str.lower().isin(["true", "1", "1.0"])
        out["attention_check"] = check.to_numpy(dtype=bool)
    else:
        out["attention_check"] = False
    if "attention_passed" in raw.columns:
        passed = raw["attention_passed"].astype("str").str.lower()
        out["attention_passed"] = np.select(
            [passed.isin(["true", "1", "1.0"]), passed.isin(["false", "0", "0.0"])],
            [1.0, 0.0],
            np.nan,
        )
    else:
        out["attention_passed"] = np.nan
    out["participant_kind"] = _str(raw.get("participant_kind"), n, "public")
    out["study"] = _str(raw.get("study"), n)
    out["condition"] = _str(raw.get("condition"), n)  # "" when the study has no conditions
    out["detector_hints"] = _str(raw.get("detector_hints"), n)  # analysis.hint reads it
    out["participant_status"] = _str(raw.get("participant_status"), n)
    out["decision"] = canonical_decisions(_str(raw.get("decision"), n))
    out["source"] = source
    for column in SURVEY_COLUMNS:
        out[column] = _survey(raw[column]) if column in raw.columns else -1
    return finish(out)


def finish(frame: pd.DataFrame) -> pd.DataFrame:
    """Check positions, recompute points and put the columns in canonical order."""
    bad = (
        (frame["boundary"] < 1)
        | (frame["boundary"] > frame["n_sentences"])
        | (frame["guess"] < 0)
        | (frame["guess"] > frame["n_sentences"])
    )
    if bad.any():
        first = frame.index[bad.to_numpy()][0]
        raise LoadError(
            f"{int(bad.sum())} row(s) have a boundary or guess outside 1..N (first: row {first}); "
            "is this a RoFT file with true_boundary_index 0..9?"
        )
    frame["points"] = recompute_points(frame["guess"], frame["boundary"])
    frame = frame.reset_index(drop=True)
    return frame[list(CANONICAL)]


def _read_sqlite(path: Path) -> pd.DataFrame:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if "rounds" not in tables:
            raise LoadError(
                f"{path}: a SQLite file without a `rounds` table is not one of our dumps"
            )
        names = [r[1] for r in conn.execute("PRAGMA table_info(rounds)")]
        columns = ", ".join(f'"{c}"' for c in _wanted(names))
        return pd.read_sql_query(f"SELECT {columns} FROM rounds", conn)


def _wanted(columns: list[str]) -> list[str]:
    """Our dumps name the example in `example_id`: their text columns need not be read."""
    if "example_id" in columns:
        return [c for c in columns if c not in TEXT_COLUMNS]
    return list(columns)


def read_table(path: Path) -> pd.DataFrame:
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        names = pq.read_schema(path).names
        return pd.read_parquet(path, columns=_wanted(names))
    if suffix in SQLITE_SUFFIXES:
        return _read_sqlite(path)
    if suffix in (".csv", ".gz"):
        names = list(pd.read_csv(path, nrows=0).columns)
        return pd.read_csv(
            path, usecols=_wanted(names), keep_default_na=True, na_values=[""], low_memory=False
        )
    raise LoadError(f"{path}: expected a .csv, .parquet or .sqlite file or an export folder")


def resolve_input(path: str | Path) -> Path:
    """The file the rounds are read from: the path itself, or the rounds file of an export."""
    path = Path(path)
    if not path.exists():
        raise LoadError(f"{path}: no such file or folder")
    if not path.is_dir():
        return path
    for name in ROUNDS_BASENAMES:
        if (path / name).exists():
            return path / name
    for candidate in sorted(path.iterdir()):
        if candidate.suffix.lower() in SQLITE_SUFFIXES:
            return candidate
    raise LoadError(f"{path}: no rounds.csv, rounds.parquet or SQLite file in this folder")


def sha256_of(path: str | Path) -> str:

    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def read_raw(path: str | Path) -> tuple[pd.DataFrame, str]:
    """The rounds table of an export (folder or file) or a roft.csv, and where it came from."""
    source = resolve_input(path)
    raw = _unguarded(read_table(source), source)
    if Path(path).is_dir():
        return raw, "dump"
    kind = "dump" if "example_id" in raw.columns else "roft-csv"
    return raw, kind


def _unguarded(frame: pd.DataFrame, path: Path) -> pd.DataFrame:
    """Our CSV exports prefix formula-like text cells with an apostrophe (roftcore/spreadsheet.py,
    named in their manifest); remove it so the text is what the player wrote."""
    if path.suffix.lower() == ".csv" and read_export_info(path).get("csv_cells"):
        return restore_frame(frame)
    return frame


def load(path: str | Path) -> pd.DataFrame:
    """One DataFrame in the canonical schema from any supported input (see the module docstring)."""
    raw, kind = read_raw(path)
    return from_roft_frame(raw, source=kind)


def read_export_info(path: str | Path) -> dict:
    """The manifest of one of our exports (empty for roft.csv or when there is none)."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    manifest = folder / "manifest.json"
    if manifest.exists():
        return json.loads(manifest.read_text(encoding="utf-8"))
    return {}


PREREGISTRATION = "preregistration.json"


def plan_digest(plan: dict) -> str:
    """The SHA-256 the site stores with a frozen plan: of its canonical JSON (sorted keys, no
    spaces)."""
    text = json.dumps(plan, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_preregistration(path: str | Path) -> dict | None:
    """The export's preregistration.json (None when there is none), each version with
    `sha256_ok`: whether its stored SHA-256 is that of its plan. A LoadError names the file when
    it is not the expected shape."""
    path = Path(path)
    file = (path if path.is_dir() else path.parent) / PREREGISTRATION
    if not file.exists():
        return None
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        versions = data["versions"]
        for version in versions:
            version["sha256_ok"] = plan_digest(version["plan"]) == version.get("sha256")
    except (ValueError, KeyError, TypeError) as error:
        raise LoadError(
            f"{file}: not a preregistration (expected {{'study', 'versions': [{{'version', "
            f"'frozen_at', 'sha256', 'plan'}}]}}): {error}"
        ) from error
    if not versions:
        raise LoadError(f"{file}: the preregistration has no version")
    return data


def apply_selection(
    frame: pd.DataFrame,
    categories: list[str] | None = None,
    systems: list[str] | None = None,
    since: str | None = None,
) -> pd.DataFrame:
    """Rows of the given categories and systems, answered on or after `since` (ISO date)."""
    keep = pd.Series(True, index=frame.index)
    if categories:
        keep &= frame["category"].isin(categories)
    if systems:
        keep &= frame["system"].isin(systems)
    if since:
        keep &= frame["date"] >= pd.Timestamp(since, tz="UTC")
    return frame[keep].reset_index(drop=True)
