"""The detector comparison a reviewer accepts: only the sentences players saw are scored, all-human
texts are the negatives and reported apart, AUROC and TPR at fixed FPR are right, the baselines
equal their closed forms, online play never reads ahead, and every table and figure names the
model and its size."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import mannwhitneyu
from sklearn.metrics import roc_auc_score

from analysis import detect
from analysis.__main__ import main
from analysis.load import load
from roftcore.boundary import points

ROFT = Path(__file__).parent / "data" / "roft_sample.csv"
UNSEEN = ["The unseen part goes on.", "Nobody read this line.", "Nor this one at all."]


DEMO_MODEL = Path(__file__).parents[2] / "data" / "demo" / "model"


@pytest.fixture(scope="module")
def lm():
    """The shipped demo model: a 2-layer GPT-2 trained on the demo corpus (no download)."""
    from generation.models import load as load_model

    return load_model(str(DEMO_MODEL), device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def performer_dir(tmp_path_factory) -> Path:
    """A second, smaller GPT-2 on the demo model's tokenizer, trained here for a few steps."""
    import torch
    from transformers import AutoTokenizer, GPT2Config, GPT2LMHeadModel

    from tests.generation.conftest import demo_docs

    torch.manual_seed(7)
    tokenizer = AutoTokenizer.from_pretrained(DEMO_MODEL)
    eos = tokenizer.eos_token_id
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tokenizer),
            n_positions=256,
            n_embd=32,
            n_layer=1,
            n_head=2,
            bos_token_id=eos,
            eos_token_id=eos,
            pad_token_id=eos,
        )
    )
    text = " ".join(d["text"] for d in demo_docs("news", 4))
    ids = torch.tensor(tokenizer(text)["input_ids"])
    optimiser = torch.optim.AdamW(model.parameters(), lr=1e-2)
    for step in range(30):
        start = (step * 97) % (len(ids) - 65)
        batch = ids[start : start + 64][None]
        loss = model(input_ids=batch, labels=batch).loss
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    out = tmp_path_factory.mktemp("tiny-performer")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def performer(performer_dir):
    from generation.models import load as load_model

    return load_model(str(performer_dir), device="cpu", dtype="float32")


@pytest.fixture
def long_roft(tmp_path) -> Path:
    """The sample roft.csv with RoFT's quirk: generations that run on past the 10 shown
    sentences, on a machine text (boundary 4) and on the all-human text."""
    raw = pd.read_csv(ROFT, keep_default_na=False)
    tail = "_SEP_".join(UNSEEN)
    for prompt in (101, 104):
        rows = raw["prompt"] == prompt
        raw.loc[rows, "gen_body"] = [
            f"{g}_SEP_{tail}" if g else tail for g in raw.loc[rows, "gen_body"]
        ]
    path = tmp_path / "roft.csv"
    raw.to_csv(path, index=False)
    return path


@pytest.fixture
def found(long_roft, lm):
    return detect.detect(detect.read_texts(long_roft), lm, progress=False)


# -- what is scored ---------------------------------------------------------------------------


def test_only_the_sentences_players_saw_are_scored(long_roft, found):
    texts = detect.read_texts(long_roft).set_index("system")
    assert (texts["n_sentences"] == 10).all()
    assert texts.loc["grover_mega", "dropped"] == 3 and texts.loc["human", "dropped"] == 3
    assert not any(s in UNSEEN for sentences in texts["sentences"] for s in sentences)
    for name in detect.SINGLE_MODEL_SCORERS:
        assert all(len(json.loads(v)) == 10 for v in found[f"{name}_sentences"])
    assert found["dropped"].sum() == 6
    # The all-human text stays all human although its row carries a generation.
    human = found.set_index("system").loc["human"]
    assert human["boundary"] == 10 and bool(human["all_human"])
    # Every guess is one a player could give on the shown text.
    for variant in ("offline", "online"):
        assert found[f"curvature_{variant}"].between(1, 10).all()


def test_scores_follow_the_formulas_from_the_token_level(lm, performer):
    """Curvature and Binoculars of one sentence, recomputed from the models' logits."""
    import torch

    sentences = ["The council met on Monday.", "It voted to close the bridge for repairs."]
    per_sentence, whole = detect.score_text(lm, sentences, performer)
    tok = lm.tokenizer
    first = tok(sentences[0], add_special_tokens=False)["input_ids"]
    second = tok(" " + sentences[1], add_special_tokens=False)["input_ids"]
    ids = torch.tensor([[tok.eos_token_id, *first, *second]])
    with torch.no_grad():
        obs = torch.log_softmax(lm.model(input_ids=ids).logits[0, :-1].double(), -1)
        perf = torch.log_softmax(performer.model(input_ids=ids).logits[0, :-1].double(), -1)
    span = slice(len(first), len(first) + len(second))  # positions predicting sentence 1
    target = ids[0, 1:][span]
    ll = obs[span].gather(1, target[:, None]).squeeze(1)
    p = obs[span].exp()
    mean = (p * obs[span]).sum(1)
    var = (p * obs[span] ** 2).sum(1) - mean**2
    curvature = (ll.sum() - mean.sum()) / var.sum().sqrt()
    assert per_sentence["curvature"][1] == pytest.approx(float(curvature), rel=1e-4)
    assert per_sentence["loglik"][1] == pytest.approx(float(ll.mean()), rel=1e-4)
    perf_ll = perf[span].gather(1, target[:, None]).squeeze(1)
    xent = -(p * perf[span]).sum(1)
    log_ppl = -perf_ll.sum()  # the performer's, summed over the sentence's tokens
    binoculars = -log_ppl / xent.sum()  # minus the ratio: higher = machine
    assert per_sentence["binoculars"][1] == pytest.approx(float(binoculars), rel=1e-4)
    # The text's score is the same statistic over all its tokens.
    all_ll = obs.gather(1, ids[0, 1:, None]).squeeze(1)
    assert whole["loglik"] == pytest.approx(float(all_ll.mean()), rel=1e-4)


def test_binoculars_names_both_models_and_needs_one_tokenizer(long_roft, lm, performer):
    texts = detect.read_texts(long_roft).head(3)
    found = detect.detect(texts, lm, progress=False, performer=performer, folds=2)
    label = found["binoculars_model"].iloc[0]
    assert label.startswith("binoculars · observer ") and " / performer " in label
    assert detect.parameter_count(sum(p.numel() for p in performer.model.parameters())) in label
    assert all(len(json.loads(v)) == 10 for v in found["binoculars_sentences"])

    # A model with a tokenizer of its own cannot be Binoculars' performer.
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    from generation.models import LoadedModel
    from generation.tiny import train_tokenizer

    tokenizer = train_tokenizer(["A different vocabulary, learnt from one line."] * 5, 280)
    other = LoadedModel(
        model=GPT2LMHeadModel(
            GPT2Config(vocab_size=len(tokenizer), n_embd=16, n_layer=1, n_head=2, eos_token_id=0)
        ),
        tokenizer=tokenizer,
        name="other",
        device=torch.device("cpu"),
        dtype="float32",
    )
    with pytest.raises(ValueError, match="same tokenizer"):
        detect.detect(texts, lm, progress=False, performer=other)


# -- detection metrics ------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(-5, 5), min_size=1, max_size=30),
    st.lists(st.integers(-5, 5), min_size=1, max_size=30),
)
def test_auroc_is_the_mann_whitney_probability(pos, neg):
    """Ties included (integer scores tie often): sklearn and scipy agree with ours."""
    labels = [1] * len(pos) + [0] * len(neg)
    expected = roc_auc_score(labels, pos + neg)
    assert detect.auroc(pos, neg) == pytest.approx(expected)
    u = mannwhitneyu(pos, neg).statistic
    assert detect.auroc(pos, neg) == pytest.approx(u / (len(pos) * len(neg)))


def test_tpr_at_fixed_fpr_by_hand():
    negatives = list(range(1, 21))  # 20 negatives: 5% allows one false alarm, 1% none
    positives = [5, 15, 19.5, 21, 25]
    # "score >= 19.5": one false alarm (20), three of five found.
    assert detect.tpr_at_fpr(positives, negatives, 0.05) == pytest.approx(0.6)
    # "score >= 21": no false alarm, two of five.
    assert detect.tpr_at_fpr(positives, negatives, 0.01) == pytest.approx(0.4)
    assert detect.tpr_at_fpr([0.5], negatives, 0.01) == 0.0
    assert detect.tpr_at_fpr(positives, negatives, 1.0) == 1.0


def test_all_human_texts_are_the_negatives_and_reported_apart(found):
    table = detect.metrics(found)
    sentences = detect.labelled_sentences(found, "logrank")
    human_texts = found[found["all_human"]]
    for row in table[table["scorer"] == "logrank"].itertuples():
        if row.level == "text":
            assert row.n_negative == len(human_texts) == 1
            assert row.n_positive == (~found["all_human"]).sum() == 4
            scores = found["logrank_text"]
            expected = roc_auc_score(~found["all_human"], scores)
        elif row.negatives == "sentences of all-human texts":
            assert row.n_negative == 9 * len(human_texts)  # sentence 0 is never a choice
            part = sentences[sentences["machine"] | sentences["all_human"]]
            expected = roc_auc_score(part["machine"], part["score"])
        elif row.negatives == detect.POSITION_MATCHED:
            pos = sentences[sentences["machine"]]
            neg = sentences[sentences["all_human"]]
            pairs = pos.merge(neg, on="index", suffixes=("_p", "_n"))  # same position only
            wins = (pairs["score_p"] > pairs["score_n"]) + 0.5 * (
                pairs["score_p"] == pairs["score_n"]
            )
            expected = wins.mean()
            assert np.isnan(row.tpr_at_1pct_fpr)
        else:
            assert row.negatives == "every human-written sentence"
            part = sentences
            expected = roc_auc_score(part["machine"], part["score"])
        assert row.auroc == pytest.approx(expected)
    machine = sentences["machine"].sum()
    assert machine == sum(10 - b for b in found.loc[~found["all_human"], "boundary"])


# -- play beside the players ------------------------------------------------------------------


def test_baselines_equal_their_closed_forms(long_roft, found):
    # A uniform pick among N = 10 answers: late by j costs j points, from 5.
    assert detect.expected_random_points(4, 10) == pytest.approx((5 + 4 + 3 + 2 + 1) / 10)
    assert detect.expected_random_points(8, 10) == pytest.approx((5 + 4 + 3) / 10)
    assert detect.expected_random_points(10, 10) == pytest.approx(5 / 10)
    players = load(long_roft)
    result = detect.compare(players, found, n_boot=0)
    table = result["table"].set_index(["kind", "weighting", "who"])
    machine = found[~found["all_human"]]
    always = table.loc[(detect.MACHINE, "per text", "always human")]
    assert always["points"] == pytest.approx(np.mean([points(10, b) for b in machine["boundary"]]))
    assert always["exact"] == 0 and always["early"] == 0
    rand = table.loc[(detect.MACHINE, "per text", "random (expected)")]
    assert rand["points"] == pytest.approx(
        np.mean([sum(points(g, b) for g in range(1, 11)) / 10 for b in machine["boundary"]])
    )
    assert rand["exact"] == pytest.approx(0.1)
    assert rand["early"] == pytest.approx(np.mean([(b - 1) / 10 for b in machine["boundary"]]))
    human = table.loc[(detect.ALL_HUMAN, "per text", "random (expected)")]
    assert human["points"] == pytest.approx(0.5) and human["early"] == pytest.approx(0.9)
    assert table.loc[(detect.ALL_HUMAN, "per text", "always human")]["points"] == 5
    # The players' figures on the same texts, apart by kind.
    seen = players[players["boundary"] < 10]
    mean_by_text = seen.groupby("example")["points"].mean().mean()
    assert table.loc[(detect.MACHINE, "per text", "players")]["points"] == pytest.approx(
        mean_by_text
    )
    assert table.loc[(detect.MACHINE, "per annotation", "players")]["points"] == pytest.approx(
        seen["points"].mean()
    )
    alarms = players[players["boundary"] == 10]
    assert table.loc[(detect.ALL_HUMAN, "per text", "players")]["early"] == pytest.approx(
        (alarms["guess"] < 10).mean()
    )
    # The detector's false alarms on all-human texts, by hand.
    offline = table.loc[(detect.ALL_HUMAN, "per text", "detector offline")]
    for row in offline.itertuples():
        scorer = row.model.split(" · ")[0]
        guesses = found.loc[found["all_human"], f"{scorer}_offline"]
        assert row.early == pytest.approx((guesses < 10).mean())


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-10, 10), min_size=2, max_size=12),
    st.floats(-10, 10),
    st.lists(st.floats(-10, 10), min_size=12, max_size=12),
)
def test_online_guess_reads_nothing_after_it(scores, threshold, other):
    guess = detect.online_guess(scores, threshold)
    assert 1 <= guess <= len(scores)
    changed = scores[: guess + 1] + other[: max(len(scores) - guess - 1, 0)]
    assert detect.online_guess(changed, threshold) == guess
    vectorised = detect._online_guesses([np.array(scores)], np.array([threshold]))
    assert vectorised[0, 0] == guess


def test_online_play_on_the_model_never_uses_a_later_sentence(lm, long_roft, found):
    """Perturb every sentence after the one the online detector flags: same scores up to it,
    same guess; and a text's threshold comes from other texts only."""
    texts = detect.read_texts(long_roft)
    sentences = list(texts.loc[texts["system"] == "gpt2-xl"].iloc[0]["sentences"])
    for name in detect.SINGLE_MODEL_SCORERS:
        before, _ = detect.score_text(lm, sentences)
        threshold = before[name][3]  # reached by sentence 3 at the latest
        guess = detect.online_guess(before[name], threshold)
        assert guess <= 3
        changed = sentences[: guess + 1] + ["Bananas sing loudly in the attic."] * (9 - guess)
        after, _ = detect.score_text(lm, changed)
        np.testing.assert_allclose(after[name][: guess + 1], before[name][: guess + 1], rtol=1e-5)
        assert detect.online_guess(after[name], threshold) == guess
    scores = detect.sentence_lists(found, "logrank")
    examples = found["example"].tolist()
    boundaries = found["boundary"].to_numpy()
    _, thresholds = detect.cross_fitted_online(examples, scores, boundaries, folds=2)
    for i in range(len(scores)):
        moved = list(scores)
        moved[i] = scores[i] + 100.0  # this text's own scores change
        _, again = detect.cross_fitted_online(examples, moved, boundaries, folds=2)
        assert again[i] == thresholds[i]


# -- naming the model -------------------------------------------------------------------------


def test_model_name_and_size_in_every_table_and_figure(long_roft, performer_dir, tmp_path):
    out = tmp_path / "detect"
    args = ["detect", str(long_roft), "--out", str(out), "--model", str(DEMO_MODEL)]
    assert main([*args, "--no-progress", "--bootstrap", "20"]) == 0
    summary = json.loads((out / "detect_summary.json").read_text())
    n = summary["model"]["parameters"]
    assert n > 10_000
    named = f"gpt2 demo/model ({detect.parameter_count(n)} parameters)"
    assert detect.parameter_count(n) == "1.5M"  # the demo model's 1,544,064
    metrics = pd.read_csv(out / "detection_metrics.csv")
    assert metrics["model"].str.contains(named, regex=False).all()
    comparison = pd.read_csv(out / "comparison.csv")
    detector = comparison[comparison["who"].str.startswith("detector")]
    assert detector["model"].str.contains(named, regex=False).all()
    assert set(detector["who"]) == {"detector offline", "detector online"}
    text = (out / "detect.md").read_text()
    assert text.count(named) >= 3 * 4 + 2 * 3  # every metrics row, every detector play row
    assert summary["sentences_dropped"] == 6
    fig = detect.figure_of(pd.DataFrame(summary["table"]), summary)
    assert named in fig._suptitle.get_text()
    labels = [t.get_text() for ax in fig.axes for t in ax.get_yticklabels()]
    assert sum(named in label for label in labels) == 2 * 3 * 2  # 3 scorers × 2 variants × 2
    assert (out / "detector_vs_players.png").stat().st_size > 5000
    assert set(pd.read_csv(out / "sentence_scores.csv")["index"]) == set(range(10))
    # A clear error, not a traceback.
    assert main([*args, "--folds", "1"]) == 2
    # With a performer, Binoculars joins the tables, naming both models.
    both = tmp_path / "both"
    two = ["detect", str(long_roft), "--out", str(both), "--model", str(DEMO_MODEL)]
    assert main([*two, "--performer", str(performer_dir), "--no-progress", "--bootstrap", "0"]) == 0
    metrics = pd.read_csv(both / "detection_metrics.csv").set_index("scorer")
    assert metrics.loc["binoculars", "model"].iloc[0].startswith(f"binoculars · observer {named}")
    assert Path(performer_dir).name in metrics.loc["binoculars", "model"].iloc[0]


def test_auroc_interval_resamples_texts():
    rng = np.random.default_rng(3)
    pos, neg = rng.normal(1, 1, 60), rng.normal(0, 1, 80)
    pos_text, neg_text = np.repeat(np.arange(20), 3), np.repeat(np.arange(100, 120), 4)
    low, high = detect.auroc_interval(pos, neg, pos_text, neg_text, n_boot=300)
    assert low < detect.auroc(pos, neg) < high and high - low < 0.4
    # Sentences of one text move together: with strong text effects, resampling texts gives
    # a wider interval than treating every sentence as its own text.
    pos_text, neg_text = np.repeat(np.arange(10), 6), np.repeat(np.arange(100, 110), 8)
    pos = rng.normal(1, 1.5, 10)[pos_text] + rng.normal(0, 0.1, 60)
    neg = rng.normal(0, 1.5, 110)[neg_text] + rng.normal(0, 0.1, 80)
    clustered = detect.auroc_interval(pos, neg, pos_text, neg_text, n_boot=300)
    naive = detect.auroc_interval(pos, neg, np.arange(60), np.arange(100, 180), n_boot=300)
    assert clustered[1] - clustered[0] > 1.5 * (naive[1] - naive[0])
    assert detect.auroc_interval(pos, neg, pos_text, neg_text, n_boot=0) == (
        detect.auroc(pos, neg),
        detect.auroc(pos, neg),
    )


def test_texts_without_rounds_get_the_detector_and_baselines_only(tmp_path, capsys):
    """An export folder with an examples table and no rounds: no players' row, no crash."""
    demo = Path(__file__).parents[2] / "data" / "demo" / "examples.jsonl"
    records = [json.loads(line) for line in demo.read_text(encoding="utf-8").splitlines()]
    picked = [r for r in records if r["boundary"] < len(r["sentences"])][:3]
    picked += [r for r in records if r["boundary"] == len(r["sentences"])][:2]
    export = tmp_path / "export"
    export.mkdir()
    pd.DataFrame(
        {
            "example_id": [r["id"] for r in picked],
            "category": [r["category"] for r in picked],
            "system": [r["system"] for r in picked],
            "n_sentences": [len(r["sentences"]) for r in picked],
            "boundary": [r["boundary"] for r in picked],
            "sentences": [json.dumps(r["sentences"]) for r in picked],
        }
    ).to_csv(export / "examples.csv", index=False)
    out = tmp_path / "out"
    args = ["detect", str(export), "--out", str(out), "--model", str(DEMO_MODEL)]
    assert main([*args, "--no-progress", "--bootstrap", "0", "--folds", "2"]) == 0
    assert "no players' rounds" in capsys.readouterr().err
    table = pd.read_csv(out / "comparison.csv")
    assert "players" not in set(table["who"])
    assert set(table["kind"]) == {detect.MACHINE, detect.ALL_HUMAN}
    assert table.groupby("kind")["texts"].first().to_dict() == {
        detect.MACHINE: 3,
        detect.ALL_HUMAN: 2,
    }
