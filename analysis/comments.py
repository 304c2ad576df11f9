"""Reasons and free-text explanations.

Reasons: the share of rounds citing each of RoFT's eight reasons, by system and by category, and
the mean points of rounds citing each. Reasons given as free text instead of reason names (some
exports of RoFT's data have them) are mapped to names with the comment taxonomy first.

Explanations: normalised (lower case, punctuation and digits dropped, whitespace collapsed) and
de-duplicated twice: exact duplicates of the normalised text, then near-duplicates (word
TF-IDF cosine similarity >= NEAR_DUPLICATE_SIMILARITY) merged into one. Each unique comment is then
given every reason type it states, or "other", by the comment taxonomy (`analysis.taxonomy`:
normalisation and fuzzy cue matching, readable rules with negation, and a scikit-learn model
trained on the labelled development set); the per-comment table says which rule or the model
decided. The comments left as "other" are clustered with TF-IDF + NMF; each cluster is shown with
its top terms and example comments. When there are more than `max_comments` unique comments, a
fixed-seed random sample of that many is classified and clustered, and the output says so.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis import taxonomy
from roftcore.reasons import REASON_NAMES

NEAR_DUPLICATE_SIMILARITY = 0.9
RULES = taxonomy.RULES  # the cue patterns, one readable table (analysis/taxonomy.py)
MAX_TABLE_COMMENTS = 5000  # rows of the per-comment table (the most frequent comments)


def rules_table() -> pd.DataFrame:
    """The taxonomy's cue patterns, one row per reason."""
    return pd.DataFrame(
        [
            {"reason": reason, "cues": " | ".join(p.removeprefix("!") for p in patterns)}
            for reason, patterns in taxonomy.RULES.items()
        ]
    )


def classify(text: str) -> str:
    """The main reason type of one comment, or "other" (see analysis.taxonomy)."""
    return taxonomy.classify_comment(text).primary


def canonical_reasons(reasons: pd.Series) -> pd.Series:
    """Reason strings ("a;b") whose parts are not reason names are read as free text and mapped
    to the names the taxonomy gives them; names pass through unchanged."""
    values = reasons.astype("str").fillna("")
    unique = pd.unique(values)
    known = set(REASON_NAMES)
    free = [v for v in unique if v and not set(v.split(";")) <= known]
    if not free:
        return values
    labels = taxonomy.classify_many([v.replace(";", ", ") for v in free])
    mapping = {v: ";".join(c.labels) for v, c in zip(free, labels, strict=True)}
    return values.map(lambda v: mapping.get(v, v))


def reason_flags(frame: pd.DataFrame) -> pd.DataFrame:
    """One boolean column per reason name: did the round cite it?"""
    padded = ";" + frame["reasons"].astype("str").fillna("") + ";"
    return pd.DataFrame(
        {name: padded.str.contains(f";{name};", regex=False) for name in REASON_NAMES},
        index=frame.index,
    )


def reason_shares(frame: pd.DataFrame, by: str) -> pd.DataFrame:
    """Share of rounds citing each reason, per value of `by` (rows: values; plus a row count)."""
    flags = reason_flags(frame).astype(float)
    flags[by] = frame[by].to_numpy()
    table = flags.groupby(by).mean()
    table.insert(0, "rows", frame.groupby(by).size())
    return table.reset_index()


def reason_points(frame: pd.DataFrame, n_boot: int = 0, seed: int = 0) -> pd.DataFrame:
    """For each reason: rounds citing it, their share, and their mean points with a 95% interval
    over annotators (with n_boot > 0)."""
    from analysis.inference import level_means

    flags = reason_flags(frame)
    rows = []
    for name in REASON_NAMES:
        mask = flags[name].to_numpy()
        cited = frame[mask].assign(_all=name)
        means = level_means(cited, "_all", "points", n_boot, seed) if mask.any() else None
        nan = float("nan")
        rows.append(
            {
                "reason": name,
                "rounds": int(mask.sum()),
                "share": float(mask.mean()) if len(mask) else nan,
                "mean_points": float(means["mean"].iloc[0]) if means is not None else nan,
                "ci_low": float(means["ci_low"].iloc[0]) if means is not None else nan,
                "ci_high": float(means["ci_high"].iloc[0]) if means is not None else nan,
            }
        )
    return pd.DataFrame(rows)


def normalise(texts: pd.Series) -> pd.Series:
    out = texts.astype("str").fillna("").str.lower()
    out = out.str.replace(r"[^a-z' ]+", " ", regex=True).str.replace(r"\s+", " ", regex=True)
    return out.str.strip()


@dataclass
class CommentReport:
    total: int
    non_empty: int
    unique_exact: int
    unique_near: int
    sampled: bool
    sample_size: int
    classes: pd.DataFrame
    table: pd.DataFrame  # one row per unique comment: text, rows, labels, primary, decided_by
    clusters: list[dict] = field(default_factory=list)
    note: str = ""


def _near_duplicate_groups(texts: list[str]) -> np.ndarray:
    """A group label per text: connected components of TF-IDF cosine >= the threshold."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    from sklearn.feature_extraction.text import TfidfVectorizer

    if len(texts) < 2:
        return np.zeros(len(texts), dtype=int)
    try:
        matrix = TfidfVectorizer(ngram_range=(1, 2), min_df=1).fit_transform(texts)
    except ValueError:  # nothing but stop words / empty vocabulary
        return np.arange(len(texts))
    labels = np.arange(len(texts))
    # Sparse similarity, in row blocks so memory stays bounded; each block only against the
    # rows from its own start on (the pairs before it were found already).
    edges = []
    block = 2000
    for start in range(0, matrix.shape[0], block):
        sims = (matrix[start : start + block] @ matrix[start:].T).tocoo()
        keep = (sims.data >= NEAR_DUPLICATE_SIMILARITY) & (sims.row < sims.col)
        edges.append((sims.row[keep] + start, sims.col[keep] + start))
    rows = np.concatenate([e[0] for e in edges]) if edges else np.zeros(0, int)
    cols = np.concatenate([e[1] for e in edges]) if edges else np.zeros(0, int)
    graph = sp.coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(texts), len(texts)))
    _, labels = connected_components(graph, directed=False)
    return labels


def _clusters(texts: list[str], n_clusters: int, seed: int) -> list[dict]:
    from sklearn.decomposition import NMF
    from sklearn.feature_extraction.text import TfidfVectorizer

    if len(texts) < max(4, n_clusters):
        return []
    try:
        vectorizer = TfidfVectorizer(stop_words="english", min_df=2, max_features=5000)
        matrix = vectorizer.fit_transform(texts)
    except ValueError:
        return []
    k = min(n_clusters, matrix.shape[1], matrix.shape[0] - 1)
    if k < 2:
        return []
    model = NMF(n_components=k, init="nndsvda", random_state=seed, max_iter=300)
    with warnings.catch_warnings(), np.errstate(invalid="ignore"):
        # Tiny or degenerate inputs make NMF warn about convergence; the clusters still stand.
        warnings.simplefilter("ignore")
        weights = model.fit_transform(matrix)
    terms = np.array(vectorizer.get_feature_names_out())
    assigned = weights.argmax(axis=1)
    strength = weights.max(axis=1)
    out = []
    for c in range(k):
        members = np.flatnonzero((assigned == c) & (strength > 0))
        if not len(members):
            continue
        best = members[np.argsort(-strength[members])][:3]
        out.append(
            {
                "cluster": c + 1,
                "size": len(members),
                "top_terms": list(terms[np.argsort(-model.components_[c])[:8]]),
                "examples": [texts[i] for i in best],
            }
        )
    return sorted(out, key=lambda row: -row["size"])


def explanation_report(
    frame: pd.DataFrame, max_comments: int = 20_000, n_clusters: int = 8, seed: int = 0
) -> CommentReport:
    """De-duplicate, classify by rules and cluster the free-text explanations."""
    raw = frame["explanation"].astype("str").fillna("")
    normalised = normalise(raw)
    non_empty = normalised[normalised.str.len() > 0]
    first_raw = (
        pd.DataFrame({"norm": non_empty, "raw": raw[non_empty.index]})
        .drop_duplicates("norm")
        .reset_index(drop=True)
    )
    unique_exact = len(first_raw)
    sampled = unique_exact > max_comments
    note = ""
    if sampled:
        first_raw = first_raw.sample(n=max_comments, random_state=seed).reset_index(drop=True)
        note = (
            f"{unique_exact} unique comments: a random sample of {max_comments} (seed {seed}) "
            "was de-duplicated for near-duplicates, classified and clustered."
        )
    groups = _near_duplicate_groups(first_raw["norm"].tolist())
    first_raw["group"] = groups
    rows_per_norm = normalised[normalised.str.len() > 0].value_counts()
    first_raw["rows"] = first_raw["norm"].map(rows_per_norm).fillna(0).astype("int64")
    first_raw["group_rows"] = first_raw.groupby("group")["rows"].transform("sum")
    unique_near_frame = first_raw.drop_duplicates("group")
    found = taxonomy.classify_many(unique_near_frame["raw"].tolist())
    unique_near_frame = unique_near_frame.assign(
        labels=[";".join(c.labels) or taxonomy.OTHER for c in found],
        primary=[c.primary for c in found],
        decided_by=[c.decided_by for c in found],
    )
    counts = {name: 0 for name in [*REASON_NAMES, taxonomy.OTHER]}
    for c in found:
        for name in c.labels or (taxonomy.OTHER,):
            counts[name] += 1
    total = max(len(unique_near_frame), 1)
    classes = pd.DataFrame(
        {
            "reason_type": list(counts),
            "comments": list(counts.values()),
            "share": [v / total for v in counts.values()],
            "as_main_reason": [sum(c.primary == name for c in found) for name in counts],
        }
    )
    table = (
        unique_near_frame.drop(columns=["rows"])
        .rename(columns={"raw": "text", "group_rows": "rows"})[
            ["text", "rows", "labels", "primary", "decided_by"]
        ]
        .sort_values(["rows", "text"], ascending=[False, True])
        .head(MAX_TABLE_COMMENTS)
        .reset_index(drop=True)
    )
    others = unique_near_frame.loc[unique_near_frame["primary"] == taxonomy.OTHER, "raw"].tolist()
    return CommentReport(
        total=len(raw),
        non_empty=len(non_empty),
        unique_exact=unique_exact,
        unique_near=len(unique_near_frame),
        sampled=sampled,
        sample_size=len(first_raw),
        classes=classes,
        table=table,
        clusters=_clusters(others, n_clusters, seed),
        note=note,
    )
