"""Reasons and free-text explanations.

Reasons: the share of rounds citing each of RoFT's eight reasons, by system and by category, and
the mean points of rounds citing each.

Explanations: normalised (lower case, punctuation and digits dropped, whitespace collapsed) and
de-duplicated twice: exact duplicates of the normalised text, then near-duplicates (word
TF-IDF cosine similarity >= NEAR_DUPLICATE_SIMILARITY) merged into one. Each unique comment is then
given one of the eight reason types, or "other", by the first matching rule of `RULES` (a readable
keyword table, printed in the report). The comments left as "other" are clustered with TF-IDF + NMF;
each cluster is shown with its top terms and example comments. When there are more than
`max_comments` unique comments, a fixed-seed random sample of that many is classified and
clustered, and the output says so.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from roftcore.reasons import REASONS

REASON_NAMES: tuple[str, ...] = tuple(REASONS)
NEAR_DUPLICATE_SIMILARITY = 0.9

# (reason, pattern, what it looks for). The first rule that matches a comment wins.
RULES: tuple[tuple[str, str, str], ...] = (
    (
        "repetition",
        r"\brepeat\w*|\brepetit\w*|\bsame (?:word|phrase|thing|sentence)|\bagain and again|"
        r"\bredundan\w*|\bloop\w*",
        "repeats, repetition, same word/phrase, redundant, loops",
    ),
    (
        "grammar",
        r"\bgrammar\w*|\bgrammatical\w*|\bpunctuat\w*|\bspell\w*|\btypo\w*|\btense\b|"
        r"\bsyntax\b|\bcapitali[sz]\w*|\bformat\w*|\bcomma\w*",
        "grammar, punctuation, spelling, typo, tense, formatting",
    ),
    (
        "contradicts_sentence",
        r"\bcontradict\w*|\binconsisten\w*|\bearlier (?:it|they|he|she) said|\bdoesn'?t match",
        "contradicts, inconsistent, doesn't match what was said",
    ),
    (
        "contradicts_knowledge",
        r"\bfactual\w*|\bfacts?\b|\bwrong (?:date|year|place|name)|\bnot true\b|\bfalse\b|"
        r"\bincorrect\b|\bhistor\w*",
        "facts, factual, incorrect, wrong date/place, not true",
    ),
    (
        "common_sense",
        r"\bcommon ?sense\b|\bimpossible\b|\bmakes? no sense\b|\bnonsens\w*|\bimplausib\w*|"
        r"\bcould ?n[o']t happen\b|\billogical\b|\babsurd\w*|\bweird\b|\bodd\b|\bstrange\b",
        "common sense, impossible, makes no sense, nonsense, illogical, weird",
    ),
    (
        "coreference",
        r"\bpronoun\w*|\bwho is\b|\bwho'?s\b|\bcharacter\w*|\bname changed\b|\bwrong person\b|"
        r"\bhe\b.*\bshe\b|\bshe\b.*\bhe\b|\bcoreferen\w*|\bsubject changed\b",
        "pronoun, who is, character, name changed, wrong person, he/she mix",
    ),
    (
        "irrelevant",
        r"\birrelevan\w*|\boff[- ]topic\b|\bunrelated\b|\bout of place\b|\bnothing to do\b|"
        r"\bchange[sd]? (?:the )?(?:topic|subject)\b|\bdoesn'?t fit\b|\bnot related\b|\brandom\b|"
        r"\bflow\b|\babrupt\w*",
        "irrelevant, off topic, unrelated, out of place, changes topic, abrupt, random",
    ),
    (
        "generic",
        r"\bgeneric\b|\bvague\b|\bbland\b|\bfiller\b|\bboring\b|\bcliche\w*|\bclich[eé]\b|"
        r"\bsimple\b|\bshort\b|\bempty\b",
        "generic, vague, bland, filler, boring, cliché",
    ),
)


def rules_table() -> pd.DataFrame:
    return pd.DataFrame(
        [{"order": i + 1, "reason": r, "looks_for": d} for i, (r, _p, d) in enumerate(RULES)]
    )


_COMPILED = [(reason, re.compile(pattern)) for reason, pattern, _ in RULES]


def classify(text: str) -> str:
    """The reason type of one comment by the first matching rule, else "other"."""
    lowered = text.lower()
    for reason, pattern in _COMPILED:
        if pattern.search(lowered):
            return reason
    return "other"


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


def reason_points(frame: pd.DataFrame) -> pd.DataFrame:
    """For each reason: rounds citing it, their share, and their mean points."""
    flags = reason_flags(frame)
    pts = frame["points"].to_numpy(dtype=float)
    rows = []
    for name in REASON_NAMES:
        mask = flags[name].to_numpy()
        rows.append(
            {
                "reason": name,
                "rounds": int(mask.sum()),
                "share": float(mask.mean()) if len(mask) else float("nan"),
                "mean_points": float(pts[mask].mean()) if mask.any() else float("nan"),
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
    # Sparse similarity, in row blocks so memory stays bounded.
    edges = []
    block = 2000
    for start in range(0, matrix.shape[0], block):
        sims = (matrix[start : start + block] @ matrix.T).tocoo()
        keep = (sims.data >= NEAR_DUPLICATE_SIMILARITY) & (sims.row + start < sims.col)
        edges.append((sims.row[keep] + start, sims.col[keep]))
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
    unique_near_frame = first_raw.drop_duplicates("group")
    labels = [classify(t) for t in unique_near_frame["raw"]]
    unique_near_frame = unique_near_frame.assign(reason_type=labels)
    classes = (
        unique_near_frame.groupby("reason_type")
        .size()
        .reindex([*REASON_NAMES, "other"], fill_value=0)
        .rename("comments")
        .reset_index()
    )
    classes["share"] = classes["comments"] / max(len(unique_near_frame), 1)
    others = unique_near_frame.loc[unique_near_frame["reason_type"] == "other", "raw"].tolist()
    return CommentReport(
        total=len(raw),
        non_empty=len(non_empty),
        unique_exact=unique_exact,
        unique_near=len(unique_near_frame),
        sampled=sampled,
        sample_size=len(first_raw),
        classes=classes,
        clusters=_clusters(others, n_clusters, seed),
        note=note,
    )
