"""A zero-shot machine baseline on the players' own texts: `python -m analysis detect`.

Each sentence of each text is scored with a local causal language model, conditioned on the
sentences before it: the mean log-likelihood of its tokens, and their mean log-rank (the log of
each actual token's rank among all tokens the model could have put there; GLTR's and DetectGPT's
zero-shot signals). Machine-written text is less surprising to a language model: higher
log-likelihood, lower log-rank.

Change-point rule: with s[i] the sentence score (log-likelihood, or minus the log-rank), the
detector's guess is the b in 1..N-1 that best splits the text into a human part s[0..b-1] and a
more machine-like part s[b..N-1], by the two-sample z = (mean after − mean before) /
(sd · sqrt(1/b + 1/(N−b))); when no split reaches `threshold`, it answers N, "all human". The
guess follows the boundary convention (docs/boundary.md) and is scored with RoFT's rule.

`compare` puts the detector beside the players on exactly the same texts: the texts the filtered
annotations cover, each text counted once per annotation (as often as players saw it) and once
per text, with 95% bootstrap intervals over texts.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.load import LoadError, recompute_points, resolve_input
from roftcore.roft import SEP
from roftcore.spreadsheet import restore_frame

STATISTICS = ("logrank", "loglik")


def change_point(scores: list[float] | np.ndarray, threshold: float = 2.0) -> tuple[int, float]:
    """(guess, z): the split after which sentences are most machine-like, or N below threshold."""
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


def sentence_scores(lm, sentences: list[str]) -> tuple[list[float], list[float]]:
    """Per sentence: mean token log-likelihood and mean token log-rank, each sentence conditioned
    on the ones before it (the first on the end-of-text token)."""
    import torch

    tokenizer = lm.tokenizer
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    ids, spans = [start], []
    for i, sentence in enumerate(sentences):
        piece = tokenizer((" " if i else "") + sentence, add_special_tokens=False)["input_ids"]
        spans.append((len(ids), len(ids) + len(piece)))
        ids.extend(piece)
    limit = getattr(lm.model.config, "n_positions", None) or getattr(
        lm.model.config, "max_position_embeddings", None
    )
    if limit and len(ids) > limit:
        ids = ids[:limit]
    tensor = torch.tensor([ids], device=lm.device)
    with torch.inference_mode():
        mask = torch.ones_like(tensor)
        logits = lm.model(input_ids=tensor, attention_mask=mask, use_cache=False).logits[0]
        logits = logits.float()
    logprobs = torch.log_softmax(logits[:-1], dim=-1)
    targets = tensor[0, 1:]
    chosen = logprobs.gather(1, targets.unsqueeze(1)).squeeze(1)
    ranks = (logprobs > chosen.unsqueeze(1)).sum(dim=1) + 1
    loglik = chosen.cpu().numpy()
    logrank = torch.log(ranks.float()).cpu().numpy()
    out_ll, out_lr = [], []
    for begin, end in spans:
        begin, end = min(begin, len(ids)) - 1, min(end, len(ids)) - 1  # positions predicting them
        if end <= begin:
            out_ll.append(float("nan"))
            out_lr.append(float("nan"))
            continue
        out_ll.append(float(loglik[begin:end].mean()))
        out_lr.append(float(logrank[begin:end].mean()))
    return out_ll, out_lr


def read_texts(path: str | Path) -> pd.DataFrame:
    """example, sentences, boundary, n_sentences, system, category for every text of the input:
    an export's examples table, or the distinct texts of a roft.csv."""
    from analysis.load import _example_key, _read_table

    path = Path(path)
    folder = path if path.is_dir() else path.parent
    for name in ("examples.parquet", "examples.csv"):
        if (folder / name).exists():
            table = _read_table(folder / name)
            return pd.DataFrame(
                {
                    "example": table["example_id"].astype(str),
                    "sentences": table["sentences"].map(json.loads),
                    "boundary": table["boundary"].astype(int),
                    "n_sentences": table["n_sentences"].astype(int),
                    "system": table["system"].astype(str),
                    "category": table["category"].astype(str),
                }
            )
    raw = _read_table(resolve_input(path))
    if "prompt_body" not in raw.columns:
        raise LoadError(f"{path}: no examples table and no texts (prompt_body, gen_body) to score")
    raw = raw.assign(example=_example_key(raw)).drop_duplicates("example")
    bodies = (
        raw["prompt_body"].fillna("").astype(str) + SEP + raw["gen_body"].fillna("").astype(str)
    )
    sentences = bodies.map(lambda b: [s.strip() for s in b.split(SEP) if s.strip()])
    return pd.DataFrame(
        {
            "example": raw["example"],
            "sentences": sentences,
            "boundary": raw["true_boundary_index"].astype(int) + 1,
            "n_sentences": sentences.map(len),
            "system": raw["model"].astype(str),
            "category": raw["dataset"].astype(str),
        }
    ).reset_index(drop=True)


def detect(
    texts: pd.DataFrame,
    lm,
    statistic: str = "logrank",
    threshold: float = 2.0,
    progress: bool = True,
) -> pd.DataFrame:
    """One row per text: the per-sentence scores, the detector's guess, z, points and distance."""
    from tqdm import tqdm

    if statistic not in STATISTICS:
        raise ValueError(f"statistic must be one of {', '.join(STATISTICS)}")
    rows = []
    for text in tqdm(texts.itertuples(), total=len(texts), disable=not progress, unit="text"):
        loglik, logrank = sentence_scores(lm, list(text.sentences))
        signal = np.nan_to_num(
            -np.asarray(logrank) if statistic == "logrank" else np.asarray(loglik)
        )
        guess, z = change_point(signal, threshold)
        rows.append(
            {
                "example": text.example,
                "system": text.system,
                "category": text.category,
                "n_sentences": len(text.sentences),
                "boundary": text.boundary,
                "guess": guess,
                "z": z,
                "loglik": json.dumps([round(v, 4) for v in loglik]),
                "logrank": json.dumps([round(v, 4) for v in logrank]),
            }
        )
    out = pd.DataFrame(rows)
    if len(out):
        out["points"] = recompute_points(out["guess"], out["boundary"])
        out["distance"] = out["guess"] - out["boundary"]
    return out


def read_detections(path: str | Path) -> pd.DataFrame:
    try:
        # Written by `analysis detect` with formula-safe cells (roftcore/spreadsheet.py).
        return restore_frame(pd.read_csv(path))
    except (OSError, ValueError) as error:
        raise LoadError(f"{path}: cannot read detections ({error})") from None


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


def compare(frame: pd.DataFrame, detections: pd.DataFrame, n_boot: int = 1000, seed: int = 0):
    """Detector and players on exactly the same texts (see the module docstring)."""
    det = detections.set_index("example")
    rows = frame[frame["example"].isin(det.index)]
    per_text = rows.assign(
        exact=(rows["guess"] == rows["boundary"]).astype(float),
        distance=rows["guess"] - rows["boundary"],
    ).groupby("example")
    players = per_text.agg(
        annotations=("points", "size"),
        points=("points", "mean"),
        exact=("exact", "mean"),
        distance=("distance", "mean"),
    )
    joined = players.merge(
        det[["guess", "points", "distance", "boundary", "n_sentences"]],
        how="left",
        left_index=True,
        right_index=True,
        suffixes=("", "_detector"),
    )
    joined["exact_detector"] = (joined["guess"] == joined["boundary"]).astype(float)
    table = []
    for weighting, weights in (
        ("per annotation", joined["annotations"].to_numpy(dtype=float)),
        ("per text", np.ones(len(joined))),
    ):
        for measure, ours, theirs in (
            ("mean points", "points", "points_detector"),
            ("exact rate", "exact", "exact_detector"),
            ("mean signed distance", "distance", "distance_detector"),
        ):
            for who, column in (("players", ours), ("detector", theirs)):
                estimate, low, high = _boot_mean(
                    joined[column].to_numpy(dtype=float), weights, n_boot, seed
                )
                table.append(
                    {
                        "weighting": weighting,
                        "measure": measure,
                        "who": who,
                        "estimate": estimate,
                        "ci_low": low,
                        "ci_high": high,
                    }
                )
    table = pd.DataFrame(table)
    summary = {
        "texts": len(joined),
        "annotations": int(joined["annotations"].sum()),
        "texts_without_annotations": int(len(det) - len(joined)),
        "detector_beats_players_on_texts": float(
            (joined["points_detector"] > joined["points"]).mean()
        )
        if len(joined)
        else None,
        "table": table.to_dict(orient="records"),
    }
    return {"table": table, "summary": summary, "per_text": joined.reset_index()}


def figure(out: Path, table: pd.DataFrame, summary: dict) -> str:
    import matplotlib.pyplot as plt

    part = table[table["weighting"] == "per annotation"]
    measures = list(dict.fromkeys(part["measure"]))
    fig, axes = plt.subplots(1, len(measures), figsize=(11, 3.6))
    for ax, measure in zip(np.atleast_1d(axes), measures, strict=True):
        rows = part[part["measure"] == measure].reset_index(drop=True)
        x = np.arange(len(rows))
        ax.bar(x, rows["estimate"], color=["#3b6ea5", "#9b4d96"][: len(rows)])
        err = np.vstack([rows["estimate"] - rows["ci_low"], rows["ci_high"] - rows["estimate"]])
        ax.errorbar(
            x, rows["estimate"], yerr=np.clip(err, 0, None), fmt="none", ecolor="black", capsize=3
        )
        ax.set_xticks(x, rows["who"])
        ax.axhline(0, color="black", lw=0.8)
        ax.set_title(measure)
        if measure != "mean signed distance":
            ax.set_ylim(bottom=0)
    fig.suptitle(
        f"Zero-shot detector vs players on the same {summary['texts']:,} texts "
        f"({summary['annotations']:,} annotations; 95% CI over texts)"
    )
    fig.tight_layout()
    fig.savefig(out / "detector_vs_players.png", dpi=150)
    plt.close(fig)
    return "detector_vs_players.png"


def markdown(result: dict) -> list[str]:
    s = result["summary"]
    table = result["table"].copy()
    table["estimate [95% CI]"] = [
        f"{r.estimate:.3f} [{r.ci_low:.3f}, {r.ci_high:.3f}]" for r in table.itertuples()
    ]
    shown = table.pivot_table(
        index=["weighting", "measure"], columns="who", values="estimate [95% CI]", aggfunc="first"
    ).reset_index()
    header = "| " + " | ".join(shown.columns) + " |"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in shown.itertuples(index=False)]
    beats = s["detector_beats_players_on_texts"]
    return [
        "## 9. Machine baseline on the same texts",
        "",
        "![detector vs players](detector_vs_players.png)",
        "",
        f"The zero-shot detector guessed once per text; {s['texts']} texts with "
        f"{s['annotations']} annotations are compared. It scores more points than the players' "
        f"average on {beats:.1%} of the texts."
        if beats is not None
        else "",
        "",
        header,
        "|" + "---|" * len(shown.columns),
        *body,
        "",
    ]
