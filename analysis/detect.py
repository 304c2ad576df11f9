"""Zero-shot detectors on the players' own texts: `python -m analysis detect`.

What is scored. Exactly the sentences a player was shown: an export's examples as stored, and for
a roft.csv the prompt then the generation, the first 10 (roftcore.roft.shown_sentences; the rest
of RoFT's generations were never on screen). Each sentence is scored with a causal language model
loaded with `from_pretrained`, conditioned on the shown sentences before it, from the scores of
its tokens. Every scorer is oriented so that higher means more machine-like:

- ``loglik``: mean token log-probability (GLTR, DetectGPT's baseline);
- ``logrank``: minus the mean log-rank of the actual tokens (GLTR);
- ``curvature``: Fast-DetectGPT's conditional probability curvature with one model, analytic:
  (sum of log p(x_t) − sum of E[log p]) / sqrt(sum of Var[log p]), the expectation and variance
  taken under the model's own next-token distribution at each position;
- ``binoculars`` (with a second model): minus Binoculars' ratio, the performer's log-perplexity
  over the observer-to-performer cross-entropy, both summed over the sentence's tokens (the two
  models must share a tokenizer).

A text's score is the same statistic over all its shown tokens.

Detection (`metrics`). Sentence level: the machine-written sentences against human-written ones,
with three sets of negatives: the sentences of all-human texts; the same, compared only at the
same position (machine sentences sit later in a text, where every sentence has more context);
and every human sentence (the prefixes of machine texts too). Sentence 0 is left out: it is
always human and never a player's choice. Text level: texts with a machine part against
all-human texts. AUROC (the Mann-Whitney probability, ties counted half; a 95% interval that
resamples texts) and the true-positive rate at 1% and 5% false positives (the best rate among
thresholds "score ≥ t" whose false-positive rate is at most that).

Play (`compare`). The detector plays each text as a player would, in two variants:

- offline: it sees every shown sentence and picks the split after which sentences are most
  machine-like by a two-sample z (`change_point`), or "all human" when no split reaches
  `threshold`;
- online: it reads the sentences in order and must commit, as a player does: it flags the first
  sentence (from sentence 1) whose score reaches a threshold, else answers "all human". The
  threshold is chosen on other texts (five folds over texts; the one with the most mean points on
  the other four folds), so no text's own scores tune its guess.

Beside the players on exactly the same texts, with two baselines: always "all human"
(guess = N), and a random player who picks one of the N answers uniformly (its expectation,
exactly). Machine texts and all-human texts are reported apart; on all-human texts a guess before
N is a false alarm. Every table and figure names the scoring model and its parameter count.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score, roc_curve

from analysis.load import LoadError, recompute_points, resolve_input
from roftcore.roft import N_SENTENCES, shown_sentences
from roftcore.spreadsheet import restore_frame

if TYPE_CHECKING:
    from generation.models import LoadedModel

SINGLE_MODEL_SCORERS = ("loglik", "logrank", "curvature")
SCORERS = (*SINGLE_MODEL_SCORERS, "binoculars")
FPR_LEVELS = (0.01, 0.05)
FOLDS = 5
MACHINE, ALL_HUMAN = "machine texts", "all-human texts"
POSITION_MATCHED = "sentences of all-human texts at the same position"


# -- naming the model -------------------------------------------------------------------------


def parameter_count(n: int) -> str:
    """124439808 → '124.4M'; 1.3e9 → '1.3B'; 266k → '266k'."""
    if n >= 1e9:
        return f"{n / 1e9:.1f}B"
    if n >= 1e6:
        return f"{n / 1e6:.1f}M"
    return f"{n / 1e3:.0f}k"


def model_name(lm: LoadedModel) -> str:
    """A hub id as given; a local folder by its architecture and its last two path components
    (`gpt2 demo/model`): a bare folder name such as "model" says nothing, a full path leaks the
    machine's layout."""
    name = str(lm.name)
    local = Path(name).expanduser()
    if not local.exists():
        return name
    kind = getattr(lm.model.config, "model_type", None) or type(lm.model).__name__
    where = f"{local.resolve().parent.name}/{local.name}" if local.resolve().parent.name else name
    return f"{kind} {where}"


def model_label(lm: LoadedModel) -> str:
    params = sum(p.numel() for p in lm.model.parameters())
    return f"{model_name(lm)} ({parameter_count(params)} parameters)"


def scorer_label(scorer: str, lm: LoadedModel, performer: LoadedModel | None = None) -> str:
    if scorer == "binoculars":
        return f"binoculars · observer {model_label(lm)} / performer {model_label(performer)}"
    return f"{scorer} · {model_label(lm)}"


# -- scoring ----------------------------------------------------------------------------------


def _encode(tokenizer, sentences: list[str], limit: int | None) -> tuple[list[int], list]:
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    ids, spans = [start], []
    for i, sentence in enumerate(sentences):
        piece = tokenizer((" " if i else "") + sentence, add_special_tokens=False)["input_ids"]
        spans.append((len(ids), len(ids) + len(piece)))
        ids.extend(piece)
    if limit and len(ids) > limit:
        ids = ids[:limit]
    return ids, spans


def _log_probs(lm: LoadedModel, ids: list[int]):
    import torch

    tensor = torch.tensor([ids], device=lm.device)
    with torch.inference_mode():
        logits = lm.model(
            input_ids=tensor, attention_mask=torch.ones_like(tensor), use_cache=False
        ).logits[0]
    return torch.log_softmax(logits[:-1].float(), dim=-1), tensor[0, 1:]


def token_scores(
    lm: LoadedModel, sentences: list[str], performer: LoadedModel | None = None
) -> tuple[dict, list]:
    """Per token (position t predicts token t+1): log p, log-rank, E[log p] and Var[log p] under
    the model, and with a performer its log p and the observer-to-performer cross-entropy; and
    each sentence's span of positions. Position t sees only tokens 0..t."""
    import torch

    from generation.models import max_positions

    limits = [max_positions(m.model) for m in (lm, performer) if m is not None]
    limit = min((v for v in limits if v), default=None)
    ids, spans = _encode(lm.tokenizer, sentences, limit)
    logp, targets = _log_probs(lm, ids)
    chosen = logp.gather(1, targets.unsqueeze(1)).squeeze(1)
    ranks = (logp > chosen.unsqueeze(1)).sum(dim=1) + 1
    probs = logp.exp()
    finite = torch.where(probs > 0, logp, torch.zeros_like(logp))  # 0 · log 0 = 0, not NaN
    mean = (probs * finite).sum(dim=1)
    var = (probs * finite.square()).sum(dim=1) - mean.square()
    out = {
        "loglik": chosen,
        "logrank": torch.log(ranks.float()),
        "mean": mean,
        "var": var.clamp_min(0),
    }
    if performer is not None:
        plogp, _ = _log_probs(performer, ids)
        out["perf_loglik"] = plogp.gather(1, targets.unsqueeze(1)).squeeze(1)
        # Same tokenizer, but the embedding tables may be padded to different sizes: the cross
        # entropy runs over the rows both have (padding rows hold no real token).
        width = min(probs.shape[1], plogp.shape[1])
        cross = torch.where(
            probs[:, :width] > 0, plogp[:, :width], torch.zeros_like(probs[:, :width])
        )
        out["xent"] = -(probs[:, :width] * cross).sum(dim=1)
    n = len(ids)
    positions = [(min(b, n) - 1, min(e, n) - 1) for b, e in spans]  # positions predicting them
    return {k: v.cpu().numpy().astype(float) for k, v in out.items()}, positions


def aggregate(tokens: dict, begin: int, end: int) -> dict[str, float]:
    """Every scorer over the tokens predicted at positions begin..end-1 (higher = machine)."""
    if end <= begin:
        return {name: float("nan") for name in SCORERS}
    part = {k: v[begin:end] for k, v in tokens.items()}
    var = part["var"].sum()
    out = {
        "loglik": float(part["loglik"].mean()),
        "logrank": float(-part["logrank"].mean()),
        "curvature": float((part["loglik"].sum() - part["mean"].sum()) / np.sqrt(max(var, 1e-12))),
        "binoculars": float("nan"),
    }
    if "xent" in part:
        # Binoculars: the performer's log-perplexity over the cross-entropy (their code's
        # choice of models); low means machine, so the score is minus the ratio.
        log_ppl = -part["perf_loglik"].sum()
        out["binoculars"] = float(-log_ppl / max(part["xent"].sum(), 1e-12))
    return out


def score_text(
    lm: LoadedModel, sentences: list[str], performer: LoadedModel | None = None
) -> tuple[dict, dict]:
    """({scorer: per-sentence scores}, {scorer: whole-text score}) for one shown text."""
    tokens, positions = token_scores(lm, sentences, performer)
    per = [aggregate(tokens, b, e) for b, e in positions]
    sentence = {name: [p[name] for p in per] for name in SCORERS}
    valid = [(b, e) for b, e in positions if e > b]
    whole = aggregate(tokens, valid[0][0], valid[-1][1]) if valid else aggregate(tokens, 0, 0)
    return sentence, whole


# -- playing ----------------------------------------------------------------------------------


def change_point(scores: list[float] | np.ndarray, threshold: float = 2.0) -> tuple[int, float]:
    """(guess, z): the split after which sentences are most machine-like, or N below threshold.

    The guess is the b in 1..N-1 that best splits s into s[0..b-1] and a more machine-like
    s[b..N-1] by z = (mean after − mean before) / (sd · sqrt(1/b + 1/(N−b))); N = all human."""
    s = np.asarray(scores, dtype=float)
    n = len(s)
    if n < 2:
        return n, 0.0
    sd = s.std(ddof=1) if n > 2 else abs(s[1] - s[0])
    best, best_z = n, -np.inf
    for b in range(1, n):
        gap = s[b:].mean() - s[:b].mean()
        z = gap / (max(sd, 1e-9) * np.sqrt(1 / b + 1 / (n - b)))
        if z > best_z:
            best, best_z = b, z
    return (best if best_z >= threshold else n), float(best_z)


def online_guess(scores: list[float] | np.ndarray, threshold: float) -> int:
    """The first sentence k ≥ 1 whose score reaches `threshold`, else N (all human). Deciding on
    sentence k reads scores[0..k] only, as a player reads up to the sentence they flag."""
    s = np.nan_to_num(np.asarray(scores, dtype=float), nan=-np.inf)
    for k in range(1, len(s)):
        if s[k] >= threshold:
            return k
    return len(s)


def _online_guesses(scores: list[np.ndarray], thresholds: np.ndarray) -> np.ndarray:
    """guesses[t, i]: `online_guess(scores[i], thresholds[t])`, vectorised: with M the running
    maximum of s[1..k], the guess is 1 + #{k in 1..N-1 : M[k] < t}."""
    width = max((len(s) for s in scores), default=1)
    running = np.full((len(scores), max(width - 1, 1)), np.inf)
    for i, s in enumerate(scores):
        tail = np.nan_to_num(np.asarray(s[1:], dtype=float), nan=-np.inf)
        if len(tail):
            running[i, : len(tail)] = np.maximum.accumulate(tail)
    return 1 + (running[None, :, :] < thresholds[:, None, None]).sum(axis=2)


def calibrate_threshold(scores: list[np.ndarray], boundaries: np.ndarray) -> float:
    """The online threshold with the most mean points on these texts (ties: the higher one);
    +inf (always 'all human') is a candidate."""
    pooled = np.concatenate([np.asarray(s[1:], dtype=float) for s in scores] or [np.zeros(0)])
    pooled = np.unique(pooled[np.isfinite(pooled)])
    if len(pooled) > 400:
        pooled = np.unique(np.quantile(pooled, np.linspace(0, 1, 400)))
    candidates = np.append(pooled, np.inf)
    guesses = _online_guesses(scores, candidates)
    b = np.broadcast_to(np.asarray(boundaries)[None, :], guesses.shape)
    mean_points = recompute_points(guesses.ravel(), b.ravel()).reshape(guesses.shape).mean(axis=1)
    best = np.flatnonzero(mean_points == mean_points.max())[-1]
    return float(candidates[best])


def fold_of(example: str, folds: int = FOLDS) -> int:
    """A text's fold, from its id alone (stable across runs and machines)."""
    return int(hashlib.sha256(str(example).encode("utf-8")).hexdigest(), 16) % folds


def cross_fitted_online(
    examples: list[str], scores: list[np.ndarray], boundaries: np.ndarray, folds: int = FOLDS
) -> tuple[np.ndarray, np.ndarray]:
    """(guesses, thresholds): each text played online with a threshold chosen on the texts of
    the other folds only."""
    fold = np.array([fold_of(e, folds) for e in examples])
    guesses = np.zeros(len(scores), dtype=int)
    thresholds = np.zeros(len(scores))
    for f in np.unique(fold):
        train = np.flatnonzero(fold != f)
        test = np.flatnonzero(fold == f)
        if len(train):
            t = calibrate_threshold([scores[i] for i in train], boundaries[train])
        else:  # one fold only: nothing else to learn from; never flag
            t = np.inf
        for i in test:
            guesses[i] = online_guess(scores[i], t)
            thresholds[i] = t
    return guesses, thresholds


# -- reading the texts ------------------------------------------------------------------------


def read_texts(path: str | Path) -> pd.DataFrame:
    """example, sentences (as shown), dropped, boundary, n_sentences, system, category for every
    text of the input: an export's examples table, or the distinct texts of a roft.csv."""
    from analysis.load import example_keys, read_table

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    for name in ("examples.parquet", "examples.csv"):
        if (folder / name).exists():
            table = read_table(folder / name)
            sentences = table["sentences"].map(json.loads)
            return pd.DataFrame(
                {
                    "example": table["example_id"].astype(str),
                    "sentences": sentences,
                    "dropped": 0,
                    "boundary": table["boundary"].astype(int),
                    "n_sentences": sentences.map(len),
                    "system": table["system"].astype(str),
                    "category": table["category"].astype(str),
                }
            )
    raw = read_table(resolve_input(path))
    if "prompt_body" not in raw.columns:
        raise LoadError(f"{path}: no examples table and no texts (prompt_body, gen_body) to score")
    raw = raw.assign(example=example_keys(raw)).drop_duplicates("example")
    shown = [
        shown_sentences(p, g, N_SENTENCES)
        for p, g in zip(
            raw["prompt_body"].fillna("").astype(str),
            raw["gen_body"].fillna("").astype(str),
            strict=True,
        )
    ]
    sentences = pd.Series([s for s, _ in shown], index=raw.index)
    return pd.DataFrame(
        {
            "example": raw["example"],
            "sentences": sentences,
            "dropped": [d for _, d in shown],
            "boundary": raw["true_boundary_index"].astype(int) + 1,
            "n_sentences": sentences.map(len),
            "system": raw["model"].astype(str),
            "category": raw["dataset"].astype(str),
        }
    ).reset_index(drop=True)


# -- detecting --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scorers:
    """Which scorers ran and the label naming each one's model(s) and size."""

    labels: dict[str, str]

    @classmethod
    def of(cls, lm: LoadedModel, performer: LoadedModel | None = None) -> Scorers:
        names = SCORERS if performer is not None else SINGLE_MODEL_SCORERS
        return cls({name: scorer_label(name, lm, performer) for name in names})


def detect(
    texts: pd.DataFrame,
    lm: LoadedModel,
    threshold: float = 2.0,
    progress: bool = True,
    performer: LoadedModel | None = None,
    folds: int = FOLDS,
) -> pd.DataFrame:
    """One row per text: for every scorer the per-sentence and whole-text scores, the offline
    guess (change point, z) and the online guess (threshold chosen on the other folds)."""
    from tqdm import tqdm

    if performer is not None and performer.tokenizer.get_vocab() != lm.tokenizer.get_vocab():
        raise LoadError("binoculars needs two models with the same tokenizer; these differ")
    scorers = Scorers.of(lm, performer)
    rows = []
    for text in tqdm(texts.itertuples(), total=len(texts), disable=not progress, unit="text"):
        per_sentence, whole = score_text(lm, list(text.sentences), performer)
        row = {
            "example": text.example,
            "system": text.system,
            "category": text.category,
            "n_sentences": len(text.sentences),
            "boundary": int(text.boundary),
            "dropped": int(getattr(text, "dropped", 0)),
        }
        for name, label in scorers.labels.items():
            values = per_sentence[name]
            guess, z = change_point(np.nan_to_num(np.asarray(values)), threshold)
            row[f"{name}_model"] = label
            row[f"{name}_sentences"] = json.dumps([round(v, 5) for v in values])
            row[f"{name}_text"] = whole[name]
            row[f"{name}_offline"] = guess
            row[f"{name}_offline_z"] = z
        rows.append(row)
    out = pd.DataFrame(rows)
    if not len(out):
        return out
    out["all_human"] = out["boundary"] >= out["n_sentences"]
    for name in scorers.labels:
        guesses, thresholds = cross_fitted_online(
            out["example"].tolist(),
            sentence_lists(out, name),
            out["boundary"].to_numpy(),
            folds,
        )
        out[f"{name}_online"] = guesses
        out[f"{name}_online_threshold"] = thresholds
    return out


def scorers_in(detections: pd.DataFrame) -> dict[str, str]:
    """{scorer: label} of a detections table."""
    return {
        name: str(detections[f"{name}_model"].iloc[0])
        for name in SCORERS
        if f"{name}_sentences" in detections.columns and len(detections)
    }


def sentence_lists(detections: pd.DataFrame, scorer: str) -> list[np.ndarray]:
    return [
        np.asarray(json.loads(v) if isinstance(v, str) else v, dtype=float)
        for v in detections[f"{scorer}_sentences"]
    ]


def sentence_table(detections: pd.DataFrame) -> pd.DataFrame:
    """One row per shown sentence: example, index, written_by, and every scorer's score."""
    scorers = scorers_in(detections)
    rows = []
    lists = {name: sentence_lists(detections, name) for name in scorers}
    for i, text in enumerate(detections.itertuples()):
        for k in range(text.n_sentences):
            row = {
                "example": text.example,
                "index": k,
                "written_by": "machine" if k >= text.boundary else "human",
                "all_human_text": bool(text.all_human),
            }
            row.update({name: lists[name][i][k] for name in scorers})
            rows.append(row)
    return pd.DataFrame(rows)


def read_detections(path: str | Path) -> pd.DataFrame:
    try:
        # Written by `analysis detect` with formula-safe cells (roftcore/spreadsheet.py).
        frame = restore_frame(pd.read_csv(path))
    except (OSError, ValueError) as error:
        raise LoadError(f"{path}: cannot read detections ({error})") from None
    if not scorers_in(frame):
        raise LoadError(f"{path}: not a detections.csv from this version of `analysis detect`")
    frame["example"] = frame["example"].astype(str)
    frame["all_human"] = frame["boundary"] >= frame["n_sentences"]
    return frame


# -- detection metrics ------------------------------------------------------------------------


def _labelled(positives, negatives) -> tuple[np.ndarray, np.ndarray] | None:
    """Labels (1 positive, 0 negative) and scores for scikit-learn; None when a side is empty."""
    pos = np.asarray(positives, dtype=float)
    neg = np.asarray(negatives, dtype=float)
    if not len(pos) or not len(neg):
        return None
    return np.r_[np.ones(len(pos)), np.zeros(len(neg))], np.concatenate([pos, neg])


def auroc(positives, negatives) -> float:
    """P(score of a positive > score of a negative) + half the ties (scikit-learn's
    `roc_auc_score`, rather than our own ranks)."""
    labelled = _labelled(positives, negatives)
    return float(roc_auc_score(*labelled)) if labelled else float("nan")


def tpr_at_fpr(positives, negatives, fpr: float) -> float:
    """The highest true-positive rate of a rule "score ≥ t" whose false-positive rate on the
    negatives is at most `fpr` (0 when only t above every score qualifies), read off
    scikit-learn's `roc_curve` with every threshold kept."""
    labelled = _labelled(positives, negatives)
    if labelled is None:
        return float("nan")
    false, true, _thresholds = roc_curve(*labelled, drop_intermediate=False)
    return float(true[false <= fpr + 1e-9].max())


def labelled_sentences(detections: pd.DataFrame, scorer: str) -> pd.DataFrame:
    """One row per shown sentence after sentence 0: example, index, machine, all_human, score."""
    rows = []
    for text, scores in zip(
        detections.itertuples(), sentence_lists(detections, scorer), strict=True
    ):
        for k in range(1, len(scores)):
            rows.append(
                {
                    "example": text.example,
                    "index": k,
                    "machine": k >= text.boundary,
                    "all_human": bool(text.all_human),
                    "score": scores[k],
                }
            )
    return pd.DataFrame(rows, columns=["example", "index", "machine", "all_human", "score"])


class _Pairs:
    """Positive-negative pairs within strata (all in one stratum when none are given), set up
    once so that weighted AUROCs (bootstrap replicates) cost one cumulative sum each.

    Kept beside scikit-learn: `roc_auc_score` pairs every positive with every negative (no
    strata), and a thousand weighted calls would sort the scores a thousand times."""

    def __init__(self, pos, neg, pos_stratum=None, neg_stratum=None):
        pos_stratum = np.zeros(len(pos)) if pos_stratum is None else np.asarray(pos_stratum)
        neg_stratum = np.zeros(len(neg)) if neg_stratum is None else np.asarray(neg_stratum)
        self.parts = []
        for stratum in np.unique(pos_stratum):
            p_idx = np.flatnonzero(pos_stratum == stratum)
            n_idx = np.flatnonzero(neg_stratum == stratum)
            if not len(n_idx):
                continue
            n_idx = n_idx[np.argsort(neg[n_idx], kind="mergesort")]
            lo = np.searchsorted(neg[n_idx], pos[p_idx], side="left")
            hi = np.searchsorted(neg[n_idx], pos[p_idx], side="right")
            self.parts.append((p_idx, n_idx, lo, hi))

    def auroc(self, w_pos: np.ndarray, w_neg: np.ndarray) -> float:
        wins = total = 0.0
        for p_idx, n_idx, lo, hi in self.parts:
            cum = np.concatenate([[0], np.cumsum(w_neg[n_idx])])
            wins += float((w_pos[p_idx] * (cum[lo] + 0.5 * (cum[hi] - cum[lo]))).sum())
            total += float(w_pos[p_idx].sum() * cum[-1])
        return wins / total if total else float("nan")


def stratified_auroc(positives, negatives, pos_stratum, neg_stratum) -> float:
    """The AUROC over pairs in the same stratum only (e.g. the same sentence position): the
    probability that a positive outscores a negative at the same position, ties half."""
    pos = np.asarray(positives, dtype=float)
    neg = np.asarray(negatives, dtype=float)
    return _Pairs(pos, neg, pos_stratum, neg_stratum).auroc(np.ones(len(pos)), np.ones(len(neg)))


def auroc_interval(
    positives,
    negatives,
    pos_text,
    neg_text,
    n_boot: int = 1000,
    seed: int = 0,
    pos_stratum=None,
    neg_stratum=None,
) -> tuple[float, float]:
    """95% percentile interval of the AUROC (within strata when given), resampling texts: a
    text's sentences go together. pos_text / neg_text: the text each score belongs to."""
    pos = np.asarray(positives, dtype=float)
    neg = np.asarray(negatives, dtype=float)
    pairs = _Pairs(pos, neg, pos_stratum, neg_stratum)
    value = pairs.auroc(np.ones(len(pos)), np.ones(len(neg)))
    if n_boot <= 0 or not len(pos) or not len(neg):
        return value, value
    texts, codes = np.unique(
        np.concatenate([np.asarray(pos_text), np.asarray(neg_text)]).astype(str),
        return_inverse=True,
    )
    pos_code, neg_code = codes[: len(pos)], codes[len(pos) :]
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        count = np.bincount(rng.integers(0, len(texts), len(texts)), minlength=len(texts))
        draw = pairs.auroc(count[pos_code].astype(float), count[neg_code].astype(float))
        if not np.isnan(draw):
            draws.append(draw)
    if not draws:
        return value, value
    low, high = np.quantile(draws, [0.025, 0.975])
    return float(low), float(high)


def metrics(detections: pd.DataFrame, n_boot: int = 1000, seed: int = 0) -> pd.DataFrame:
    """AUROC (with a 95% interval over texts) and TPR at 1% / 5% FPR per scorer, at sentence
    level (two choices of negatives) and at text level (machine texts against all-human
    texts)."""
    rows = []
    for name, label in scorers_in(detections).items():
        sentences = labelled_sentences(detections, name).dropna(subset=["score"])
        texts = detections.dropna(subset=[f"{name}_text"])
        machine = sentences[sentences["machine"]]
        for level, positives, negatives, what, score in (
            (
                "sentence",
                machine,
                sentences[~sentences["machine"] & sentences["all_human"]],
                "sentences of all-human texts",
                "score",
            ),
            (
                "sentence",
                machine,
                sentences[~sentences["machine"] & sentences["all_human"]],
                POSITION_MATCHED,
                "score",
            ),
            (
                "sentence",
                machine,
                sentences[~sentences["machine"]],
                "every human-written sentence",
                "score",
            ),
            (
                "text",
                texts[~texts["all_human"]],
                texts[texts["all_human"]],
                "all-human texts",
                f"{name}_text",
            ),
        ):
            pos, neg = positives[score].to_numpy(float), negatives[score].to_numpy(float)
            strata = {}
            if what == POSITION_MATCHED:
                strata = {"pos_stratum": positives["index"], "neg_stratum": negatives["index"]}
            low, high = auroc_interval(
                pos, neg, positives["example"], negatives["example"], n_boot, seed, **strata
            )
            row = {
                "scorer": name,
                "model": label,
                "level": level,
                "negatives": what,
                "n_positive": len(pos),
                "n_negative": len(neg),
                "auroc": stratified_auroc(pos, neg, **strata) if strata else auroc(pos, neg),
                "auroc_low": low,
                "auroc_high": high,
            }
            for level_fpr in FPR_LEVELS:  # one threshold for all positions: not for strata
                row[f"tpr_at_{round(level_fpr * 100)}pct_fpr"] = (
                    float("nan") if strata else tpr_at_fpr(pos, neg, level_fpr)
                )
            rows.append(row)
    return pd.DataFrame(rows)


# -- play beside the players ------------------------------------------------------------------


def expected_random_points(boundary: int, n: int) -> float:
    """A player who picks one of the N answers (sentence 1..N-1 or all human) uniformly."""
    return float(recompute_points(np.arange(1, n + 1), np.full(n, boundary)).mean())


def _boot_mean(values: np.ndarray, weights: np.ndarray, n_boot: int, seed: int) -> tuple:
    rng = np.random.default_rng(seed)
    estimate = float(np.average(values, weights=weights)) if weights.sum() else float("nan")
    if n_boot <= 0 or len(values) < 2:
        return estimate, estimate, estimate
    draws = rng.poisson(1.0, size=(n_boot, len(values))) * weights
    totals = draws.sum(axis=1)
    boot = (draws @ values)[totals > 0] / totals[totals > 0]
    low, high = np.quantile(boot, [0.025, 0.975])
    return estimate, float(low), float(high)


def play_per_text(detections: pd.DataFrame, players: pd.DataFrame | None) -> pd.DataFrame:
    """One row per text and player kind: exact (0..1), points and early (a guess before the
    boundary: a false alarm on an all-human text), for the players (mean over the text's
    annotations), each scorer offline and online, always-human and random (expected)."""
    texts = detections.set_index("example")
    if players is not None:
        rows = players[players["example"].isin(texts.index)]
        texts = texts.loc[texts.index.isin(rows["example"])]
    b = texts["boundary"].to_numpy()
    n = texts["n_sentences"].to_numpy()
    kind = np.where(texts["all_human"], ALL_HUMAN, MACHINE)
    frames = []

    def add(who: str, model: str, exact, points, early, annotations) -> None:
        frames.append(
            pd.DataFrame(
                {
                    "example": texts.index,
                    "kind": kind,
                    "who": who,
                    "model": model,
                    "exact": np.asarray(exact, dtype=float),
                    "points": np.asarray(points, dtype=float),
                    "early": np.asarray(early, dtype=float),
                    "annotations": annotations,
                }
            )
        )

    annotations = np.ones(len(texts))
    if players is not None:
        by_text = (
            rows.assign(
                exact=(rows["guess"] == rows["boundary"]).astype(float),
                early=(rows["guess"] < rows["boundary"]).astype(float),
            )
            .groupby("example")
            .agg(
                annotations=("points", "size"),
                points=("points", "mean"),
                exact=("exact", "mean"),
                early=("early", "mean"),
            )
            .reindex(texts.index)
        )
        annotations = by_text["annotations"].to_numpy(dtype=float)
        add("players", "", by_text["exact"], by_text["points"], by_text["early"], annotations)
    for name, label in scorers_in(detections).items():
        for variant in ("offline", "online"):
            g = texts[f"{name}_{variant}"].to_numpy(dtype=int)
            add(
                f"detector {variant}",
                label,
                g == b,
                recompute_points(g, b),
                g < b,
                annotations,
            )
    add("always human", "", b == n, recompute_points(n, b), np.zeros(len(b)), annotations)
    add(
        "random (expected)",
        "",
        1 / n,
        [expected_random_points(int(x), int(y)) for x, y in zip(b, n, strict=True)],
        (b - 1) / n,
        annotations,
    )
    return pd.concat(frames, ignore_index=True)


def compare(
    frame: pd.DataFrame | None, detections: pd.DataFrame, n_boot: int = 1000, seed: int = 0
) -> dict:
    """The detector (each scorer, offline and online), the players and both baselines on
    exactly the same texts, machine texts and all-human texts apart; and the detection metrics.

    Returns {"table": the play table, "metrics": `metrics`, "summary": JSON-ready, "per_text"}.
    Estimates are means over texts ("per text") and over annotations ("per annotation", each
    text weighted by how often players saw it), with 95% bootstrap intervals over texts."""
    scored_texts = len(detections)
    if frame is not None:  # the texts the players' rows cover, and only those
        detections = detections[detections["example"].isin(frame["example"])]
    per_text = play_per_text(detections, frame)
    weightings = [("per text", False)]
    if frame is not None:
        weightings.insert(0, ("per annotation", True))
    table = []
    for (kind, who, model), part in per_text.groupby(["kind", "who", "model"], sort=False):
        for weighting, by_annotation in weightings:
            weights = part["annotations"].to_numpy() if by_annotation else np.ones(len(part))
            row = {
                "kind": kind,
                "weighting": weighting,
                "who": who,
                "model": model,
                "texts": len(part),
            }
            for measure in ("exact", "points", "early"):
                estimate, low, high = _boot_mean(
                    part[measure].to_numpy(dtype=float), weights, n_boot, seed
                )
                row[measure] = estimate
                row[f"{measure}_low"], row[f"{measure}_high"] = low, high
            table.append(row)
    table = pd.DataFrame(table)
    if len(table):  # machine texts first, then all-human texts; within each, as added
        rank = table["kind"].map({MACHINE: 0, ALL_HUMAN: 1})
        table = table.iloc[np.lexsort((np.arange(len(table)), rank))].reset_index(drop=True)
    scored = metrics(detections, n_boot, seed)
    texts = per_text.drop_duplicates("example")
    summary = {
        "texts": len(texts),
        "machine_texts": int((texts["kind"] == MACHINE).sum()),
        "all_human_texts": int((texts["kind"] == ALL_HUMAN).sum()),
        "annotations": int(texts["annotations"].sum()) if frame is not None else 0,
        "texts_without_annotations": int(scored_texts - len(texts)),
        "scorers": scorers_in(detections),
        "sentences_dropped": int(detections["dropped"].sum()) if "dropped" in detections else 0,
        "table": table.to_dict(orient="records"),
        "metrics": scored.to_dict(orient="records"),
    }
    return {"table": table, "metrics": scored, "summary": summary, "per_text": per_text}


# -- figure and markdown ----------------------------------------------------------------------


def _who(row) -> str:
    return f"{row.who}: {row.model}" if row.model else row.who


def figure(out: Path, table: pd.DataFrame, summary: dict) -> str:
    """Write `figure_of` to detector_vs_players.png in `out`; returns the file name."""
    import matplotlib.pyplot as plt

    fig = figure_of(table, summary)
    fig.savefig(out / "detector_vs_players.png", dpi=150)
    plt.close(fig)
    return "detector_vs_players.png"


def figure_of(table: pd.DataFrame, summary: dict):
    """Mean points per text on machine texts and on all-human texts, every player kind with its
    95% interval; the baselines are drawn as lines, the scoring model named on each bar."""
    import matplotlib.pyplot as plt

    part = table[table["weighting"] == "per text"]
    kinds = [k for k in (MACHINE, ALL_HUMAN) if k in set(part["kind"])]
    n_bars = int((part["kind"] == kinds[0]).sum()) - 2 if kinds else 1
    fig, axes = plt.subplots(1, max(len(kinds), 1), figsize=(13, 1.6 + 0.4 * n_bars), squeeze=False)
    palette = {"players": "#3b6ea5", "detector offline": "#9b4d96", "detector online": "#d89bd0"}
    for ax, kind in zip(axes[0], kinds, strict=False):
        rows = part[part["kind"] == kind]
        bars = rows[~rows["who"].isin(["always human", "random (expected)"])].reset_index()
        y = np.arange(len(bars))
        colours = [palette.get(w, "#888888") for w in bars["who"]]
        ax.barh(y, bars["points"], color=colours)
        err = np.vstack([bars["points"] - bars["points_low"], bars["points_high"] - bars["points"]])
        ax.errorbar(bars["points"], y, xerr=np.clip(err, 0, None), fmt="none", ecolor="black")
        ax.set_yticks(y, [_who(r) for r in bars.itertuples()], fontsize=7)
        ax.invert_yaxis()
        for baseline, style in (("always human", "--"), ("random (expected)", ":")):
            line = rows[rows["who"] == baseline]
            if len(line):
                ax.axvline(line["points"].iloc[0], color="black", ls=style, lw=1, label=baseline)
        ax.set_xlim(0, 5.25)
        ax.set_xlabel("mean points per text (95% CI over texts)")
        ax.set_title(f"{kind} (n = {int(rows['texts'].iloc[0])})")
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2)
    models = sorted({label.split(" · ", 1)[1] for label in summary.get("scorers", {}).values()})
    fig.suptitle(
        "Zero-shot detectors vs players on the same texts; scoring model: " + "; ".join(models),
        fontsize=10,
    )
    fig.tight_layout()
    return fig


def _ci(row, measure: str, digits: int = 2) -> str:
    value, low, high = (
        getattr(row, measure),
        getattr(row, f"{measure}_low"),
        getattr(row, f"{measure}_high"),
    )
    if np.isnan(value):
        return "–"
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def _num(value: float) -> str:
    return "–" if np.isnan(value) else f"{value:.3f}"


def _tpr(value: float, n_negative: int, rate: float) -> str:
    """A TPR at a fixed FPR, only when the negatives can measure that FPR (n >= 1/rate)."""
    if n_negative * rate < 1:
        return f"– (< {round(1 / rate)} negatives)"
    return _num(value)


def markdown_tables(result: dict) -> list[str]:
    """The detection table and the play table, in Markdown."""
    lines = [
        "| scorer (model, parameters) | level | negatives | positives | negatives (n) "
        "| AUROC [95% CI] | TPR at 1% FPR | TPR at 5% FPR |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in result["metrics"].itertuples():
        lines.append(
            f"| {r.model} | {r.level} | {r.negatives} | {r.n_positive} | {r.n_negative} | "
            f"{r.auroc:.3f} [{r.auroc_low:.3f}, {r.auroc_high:.3f}] | "
            f"{_tpr(r.tpr_at_1pct_fpr, r.n_negative, 0.01)} | "
            f"{_tpr(r.tpr_at_5pct_fpr, r.n_negative, 0.05)} |"
        )
    lines += [
        "",
        "| texts | weighting | who | exact rate | mean points | guessed before the boundary |",
        "|---|---|---|---|---|---|",
    ]
    table = result["table"]
    shown = table[(table["weighting"] == "per text") | (table["who"] == "players")]
    for r in shown.itertuples():
        early = "false alarm " if r.kind == ALL_HUMAN else ""
        lines.append(
            f"| {r.kind} (n = {r.texts}) | {r.weighting} | {_who(r)} | {_ci(r, 'exact')} | "
            f"{_ci(r, 'points')} | {early}{_ci(r, 'early')} |"
        )
    return lines


def markdown(result: dict) -> list[str]:
    s = result["summary"]
    return [
        "## 9. Machine baseline on the same texts",
        "",
        "![detector vs players](detector_vs_players.png)",
        "",
        f"Scored: the sentences players were shown ({s['sentences_dropped']} never-shown "
        f"sentences dropped); {s['machine_texts']} machine texts and {s['all_human_texts']} "
        f"all-human texts, reported apart; {s['annotations']} annotations. Offline: the "
        "detector sees all shown sentences and picks the boundary; online: it reads in order "
        "and commits at the first sentence whose score reaches a threshold chosen on other "
        "texts. Random is the exact expectation of a uniform pick among the N answers. "
        "Mean points per text with 95% bootstrap intervals over texts (comparison.csv also "
        "weights every row by annotations); the players' intervals here resample texts, so "
        "they differ from section 2's, which resample annotators. A true-positive rate at a "
        "false-positive rate r needs at least 1/r negatives (100 for 1%, 20 for 5%): with fewer, "
        "a single false alarm is already more than r, and the rate is not given.",
        "",
        *markdown_tables(result),
        "",
    ]
