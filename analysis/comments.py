"""Reasons and free-text explanations.

Reasons: the share of rounds citing each of RoFT's eight reasons, by system and by category, and
the mean points of rounds citing each. Reason labels are kept exactly (`reason_label`): each of
the eight names is its own reason, RoFT's "other" stays "other" and our "hunch" stays "hunch";
neither is ever read as text. Only parts that are no label at all (free text, which some exports
of RoFT's data have) go through the comment taxonomy, which may answer "not_a_reason" or
"unclassified" (counted as no reason).

Explanations: normalised (lower case, punctuation and digits dropped, whitespace collapsed) and
de-duplicated twice: exact duplicates of the normalised text, then near-duplicates (word
TF-IDF cosine similarity >= NEAR_DUPLICATE_SIMILARITY) merged into one. Each unique comment is
then given every class it states, "not_a_reason", or "unclassified" when the comment taxonomy
(`analysis.taxonomy`: normalisation and fuzzy cue matching, readable rules with negation, and a
scikit-learn model) is unsure; the per-comment table says which rule or the model decided. The
comments left "unclassified" are clustered with TF-IDF + NMF; each cluster is shown with its top
terms and example comments. When there are more than `max_comments` unique comments, a
fixed-seed random sample of that many is classified and clustered, and the output says so.
`CommentReport.heldout` says what the classifier's held-out figure is and is not.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from analysis import taxonomy
from roftcore.reasons import HUNCH, REASON_NAMES

NEAR_DUPLICATE_SIMILARITY = 0.9
RULES = taxonomy.RULES  # the cue patterns, one readable table (analysis/taxonomy.py)
MAX_TABLE_COMMENTS = 5000  # rows of the per-comment table (the most frequent comments)
# Reason labels kept as they are: RoFT's eight, RoFT's "other", and the site's "hunch".
REASON_LABELS: tuple[str, ...] = (*REASON_NAMES, taxonomy.OTHER, HUNCH)


def rules_table() -> pd.DataFrame:
    """The taxonomy's cue patterns, one row per reason."""
    return pd.DataFrame(
        [
            {"reason": reason, "cues": " | ".join(p.removeprefix("!") for p in patterns)}
            for reason, patterns in taxonomy.RULES.items()
        ]
    )


def classify(text: str) -> str:
    """The main class of one comment, or "unclassified" (see analysis.taxonomy)."""
    return taxonomy.classify_comment(text).primary


def reason_label(part: str) -> str | None:
    """The reason label a part of a reasons string names ("Contradicts sentence" and
    "contradicts-sentence" name contradicts_sentence; "Other" names other), or None for free
    text. A label is never read as text: "other" is no cue for any reason."""
    key = re.sub(r"[\s\-]+", "_", part.strip().lower())
    return key if key in REASON_LABELS else None


def canonical_reasons(reasons: pd.Series) -> pd.Series:
    """Reason strings ("a;b") with each label kept exactly (`reason_label`), in its canonical
    spelling; parts that are no label are read as one free-text comment and replaced by the
    classes the taxonomy gives it ("unclassified" when it is unsure)."""
    values = reasons.astype("str").fillna("")
    mapping: dict[str, str] = {}
    free_text: dict[str, str] = {}
    for value in pd.unique(values):
        parts = [p for p in value.split(";") if p.strip()]
        labels = [reason_label(p) for p in parts]
        free = [p.strip() for p, label in zip(parts, labels, strict=True) if label is None]
        mapping[value] = ";".join(dict.fromkeys(label for label in labels if label))
        if free:
            free_text[value] = ", ".join(free)
    if free_text:
        found = taxonomy.classify_many(list(free_text.values()))
        for value, c in zip(free_text, found, strict=True):
            given = [*mapping[value].split(";"), *(c.labels or (taxonomy.UNCLASSIFIED,))]
            mapping[value] = ";".join(dict.fromkeys(x for x in given if x))
    return values.map(mapping)


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
    # What the classifier's held-out figure is (team-written, not these comments): print this
    # instead of any accuracy figure (taxonomy.heldout_caveat).
    heldout: str = ""


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
        labels=[";".join(c.labels) or taxonomy.UNCLASSIFIED for c in found],
        primary=[c.primary for c in found],
        decided_by=[c.decided_by for c in found],
    )
    counts = {name: 0 for name in [*taxonomy.CLASSES, taxonomy.UNCLASSIFIED]}
    for c in found:
        for name in c.labels or (taxonomy.UNCLASSIFIED,):
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
    unsure = unique_near_frame["primary"] == taxonomy.UNCLASSIFIED
    others = unique_near_frame.loc[unsure, "raw"].tolist()
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
        heldout=taxonomy.heldout_caveat(),
    )
