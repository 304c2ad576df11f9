"""The comment taxonomy reads real players: RoFT's labels kept exactly ("other" is never a
coreference), non-reasons and abstention, the misses real players' comments exposed, a held-out
figure that the docs cannot drift from, and a command that measures it on a researcher's labels."""

from __future__ import annotations

import csv
import random
import re
from pathlib import Path

import pandas as pd
import pytest

from analysis import comments, taxonomy
from analysis.__main__ import main
from analysis.load import load
from roftcore.reasons import REASON_NAMES

DOCS = Path(__file__).parents[2] / "docs" / "taxonomy.md"
ROFT = Path(__file__).parent / "data" / "roft_sample.csv"

# -- RoFT's reason labels ---------------------------------------------------------------------


@pytest.mark.parametrize("name", REASON_NAMES)
def test_each_of_the_eight_labels_maps_to_itself(name):
    spelled = [name, name.upper(), name.replace("_", " ").title(), name.replace("_", "-")]
    assert comments.canonical_reasons(pd.Series(spelled)).tolist() == [name] * 4
    flags = comments.reason_flags(pd.DataFrame({"reasons": [name]}))
    assert flags.loc[0].to_dict() == {n: n == name for n in REASON_NAMES}


def test_other_stays_other_and_is_never_a_coreference():
    raw = pd.Series(["other", "Other", "grammar;other", "other;hunch", "hunch", ""])
    mapped = comments.canonical_reasons(raw)
    assert mapped.tolist() == ["other", "other", "grammar;other", "other;hunch", "hunch", ""]
    flags = comments.reason_flags(pd.DataFrame({"reasons": mapped}))
    assert not flags["coreference"].any()
    assert flags["grammar"].tolist() == [False, False, True, False, False, False]


def test_a_roft_file_citing_other_shows_no_invented_reason(tmp_path):
    rows = pd.read_csv(ROFT)
    rows["reason"] = ["['other']", "['grammar', 'other']"] * (len(rows) // 2) + ["['other']"] * (
        len(rows) % 2
    )
    rows.to_csv(tmp_path / "roft.csv", index=False)
    frame = load(tmp_path / "roft.csv")
    reasons = frame.assign(reasons=comments.canonical_reasons(frame["reasons"]))
    shares = comments.reason_flags(reasons).mean()
    assert shares["coreference"] == 0.0
    assert shares.drop("grammar").sum() == 0.0
    assert shares["grammar"] == pytest.approx((len(rows) // 2) / len(rows))


def test_free_text_beside_labels_is_classified_and_labels_kept():
    raw = pd.Series(["grammar;it repeats itself", "idk", "asdfgh jkl", "other;off topic"])
    assert comments.canonical_reasons(raw).tolist() == [
        "grammar;repetition",
        "not_a_reason",
        "not_a_reason",
        "other;irrelevant",
    ]


# -- the classifier ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ["idk", "IDK lol", "just a guess", "dunno", "no idea tbh", "random guess", "?", "...",
     "gut feeling", "i repeat, no idea", "in fact i just guessed", "vibes"],
)  # fmt: skip
def test_non_reasons_are_not_a_reason(text):
    found = taxonomy.classify_comment(text)
    assert found.labels == ("not_a_reason",), found


def test_a_reason_beside_a_shrug_wins():
    assert taxonomy.classify_comment("idk, it repeats itself").labels == ("repetition",)


@pytest.mark.parametrize("text", ["asdfgh jkl", "qwxz bnmv", "zzzzz", "jkjkjk hjhj"])
def test_gibberish_gives_no_reason(text):
    # No word of it is English (the spell checker's word list): keyboard mashing states no reason.
    found = taxonomy.classify_comment(text)
    assert found.labels == ("not_a_reason",), found
    assert found.decided_by == "rule: not_a_reason (no English word)"
    abstaining = taxonomy.CoderSettings(gibberish=taxonomy.UNCLASSIFIED)
    assert taxonomy.classify_many([text], settings=abstaining)[0].abstained


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("the ending doesnt flow from the start", ("irrelevant",)),
        ("feels incoherent with what came before", ("irrelevant",)),
        ("it does not relate to the recipe", ("irrelevant",)),
        ("the subjet shifts compleetly", ("irrelevant",)),  # word-list spelling
        ("could go either way", ("not_a_reason",)),
        ("oops clicked the wrong sentence", ("not_a_reason",)),
        ("hmm what", ("not_a_reason",)),
        ("has a web link in it", ("grammar",)),
        ("a newspaper wouldnt say it like that", ("style",)),
        ("reads unnatural", ("style",)),
        ("way to vague", ("generic",)),  # "to" for "too"
        ("not repetitive at all, just off topic", ("irrelevant",)),  # negation
        ('"the the" twice, not sure', ("repetition",)),  # quoted evidence beats the hedge
    ],
)
def test_how_players_phrase_reasons(text, labels):
    found = taxonomy.classify_comment(text)
    assert found.labels == labels, found


def test_incoherent_follows_the_setting():
    text = "totally incoherent"
    assert taxonomy.classify_comment(text).labels == ("irrelevant",)
    other = taxonomy.CoderSettings(incoherent="common_sense")
    assert taxonomy.classify_many([text], settings=other)[0].labels == ("common_sense",)


def test_spelling_uses_the_word_list_and_keeps_the_taxonomy_words():
    assert taxonomy.normalise("the topik changes suddnely") == "the topic changes suddenly"
    assert taxonomy.normalise("idk, coreference") == "idk, coreference"
    assert taxonomy.normalise("suddnely", spelling=False) == "suddnely"


@pytest.mark.parametrize(
    ("text", "labels"),
    [
        ("doesn't make sense", ("common_sense",)),
        ("dosent make sence", ("common_sense",)),  # misspelt function words
        ("so random", ("irrelevant",)),
        ("no transition at all", ("irrelevant",)),  # absence is the complaint
        ("sounds robotic", ("style",)),
        ("way too formal for a recipe", ("style",)),
        ("sudden change in tone", ("style",)),
        ("thats not how taxes work", ("contradicts_knowledge",)),  # no cue word
        ("obama wasnt a senator from texas", ("contradicts_knowledge",)),
        ("weird characters like ### at the end", ("grammar",)),  # not a person
        ('the word "their" should be "there"', ("grammar",)),  # quoted evidence
        ('"it" refers to nothing', ("coreference",)),
        ("a tense moment then suddenly a recipe", ("irrelevant",)),  # "tense": no grammar
        ("mentions the mayor again for no reason", ("repetition",)),
        ("pronoun doesnt match", ("coreference",)),
        ("repeats itself and has typos", ("grammar", "repetition")),
    ],
)
def test_what_real_players_write(text, labels):
    found = taxonomy.classify_comment(text)
    assert found.labels == labels, found


def test_classes_are_the_eight_reasons_style_and_not_a_reason():
    assert (*REASON_NAMES, "style", "not_a_reason") == taxonomy.CLASSES
    assert taxonomy.OTHER not in taxonomy.CLASSES and taxonomy.UNCLASSIFIED not in taxonomy.CLASSES
    assert set(taxonomy.RULES) == set(taxonomy.CLASSES)


# -- the evaluation set and the held-out figure -----------------------------------------------


def test_evaluation_set_split_is_the_seeded_third_and_never_trained_on():
    rows = taxonomy.read_evaluation_set()
    assert len(rows) >= 300
    order = list(range(len(rows)))
    random.Random(20).shuffle(order)
    test_ids = {rows[i].id for i in order[: len(rows) // 3]}
    assert {r.id for r in rows if r.split == "test"} == test_ids
    assert {r.split for r in rows} == {"dev", "test"}
    assert all(set(r.labels) <= set(taxonomy.CLASSES) for r in rows)
    texts, _ = taxonomy.training_rows()
    held_out = {taxonomy.normalise(r.text) for r in rows if r.split == "test"}
    assert not held_out & {taxonomy.normalise(t) for t in texts}


def test_threshold_is_the_one_calibrated_on_dev():
    assert taxonomy.calibrate()["threshold"] == taxonomy.ABSTAIN_THRESHOLD


def _docs_block() -> str:
    text = DOCS.read_text(encoding="utf-8")
    found = re.search(r"<!-- heldout:start -->\n(.*?)\n<!-- heldout:end -->", text, re.S)
    assert found, "docs/taxonomy.md lost its held-out block"
    return found.group(1).strip()


def test_docs_show_the_held_out_figures_the_code_computes_now():
    assert _docs_block() == taxonomy.format_scores(taxonomy.heldout_scores()).strip()


def test_held_out_figure_is_never_passed_off_as_the_datas():
    scores = taxonomy.heldout_scores()
    assert scores["n"] == sum(r.split == "test" for r in taxonomy.read_evaluation_set())
    caveat = taxonomy.heldout_caveat()
    assert f"on {scores['n']} held-out explanations" in caveat
    assert "team wrote" in caveat and "not real players" in caveat
    assert "not its accuracy on the comments analysed here" in caveat
    assert "53 real players' explanations from RoFT's 2020 study (cross-validated" in caveat
    frame = pd.DataFrame({"explanation": ["it repeats itself", "idk"]})
    assert comments.explanation_report(frame).heldout == caveat


# -- scores and the taxonomy-check command ----------------------------------------------------


def _write(path: Path, rows: list[list[str]]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return path


def test_taxonomy_check_prints_per_class_figures_and_the_confusion_matrix(tmp_path, capsys):
    path = _write(
        tmp_path / "mine.csv",
        [
            ["id", "explanation", "labels"],
            ["1", "it repeats itself", "repetition"],
            ["2", "idk", "not_a_reason"],
            ["3", "typo", "irrelevant"],  # labelled grammar: wrong
            ["4", "that bit with the mayor and the boat", "grammar"],  # abstained: a miss
            ["5", "repeats itself and has typos", "grammar;repetition"],
        ],
    )
    assert main(["taxonomy-check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "comments: 5; labelled (not abstained): 4; coverage 0.80" in out
    assert "accuracy where labelled 0.75" in out  # 3 of the 4 labelled
    assert "| grammar | 2 | 2 | 1 | 0.50 | 0.50 |" in out
    assert "| repetition | 2 | 2 | 2 | 1.00 | 1.00 |" in out
    assert "| irrelevant | 1 | 0 | 0 | – | 0.00 |" in out
    assert "| irrelevant | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |" not in out
    # by main class: the irrelevant comment went to grammar; the grammar one was abstained on;
    # the grammar;repetition one counts under repetition, its main class, which is right
    assert "| irrelevant | 1 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |" in out
    assert "| grammar | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 1 |" in out
    assert "| repetition | 0 | 2 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 | 0 |" in out


def test_taxonomy_check_reads_a_single_label_column(tmp_path, capsys):
    path = _write(tmp_path / "one.csv", [["text", "label"], ["idk", "not_a_reason"]])
    assert main(["taxonomy-check", str(path)]) == 0
    assert "accuracy where labelled 1.00" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("rows", "where", "says"),
    [
        ([["explanation", "labels"], ["typo", "grammar"], ["idk", "shrug"]], ":3:", "'shrug'"),
        ([["comment", "labels"], ["typo", "grammar"]], ":1:", "'explanation'"),
        ([["explanation", "labels"], ["  ", "grammar"]], ":2:", "empty"),
        ([["explanation", "labels"], ["typo", ""]], ":2:", "no label"),
        ([["explanation", "labels"], ["typo", "grammar", "extra"]], ":2:", "fields"),
        ([["explanation", "labels"], ["idk", "not_a_reason;grammar"]], ":2:", "stand alone"),
        ([["explanation", "labels"]], "", "no rows"),
    ],
)
def test_taxonomy_check_names_file_and_line_of_bad_input(tmp_path, capsys, rows, where, says):
    path = _write(tmp_path / "bad.csv", rows)
    assert main(["taxonomy-check", str(path)]) == 2
    captured = capsys.readouterr()
    assert f"{path}{where}" in captured.err and says in captured.err
    assert "Traceback" not in captured.err and captured.out == ""


def test_taxonomy_check_on_a_missing_or_binary_file(tmp_path, capsys):
    assert main(["taxonomy-check", str(tmp_path / "nope.csv")]) == 2
    assert "nope.csv: cannot open" in capsys.readouterr().err
    (tmp_path / "bin.csv").write_bytes(b"explanation,labels\n\xff\xfe,grammar\n")
    assert main(["taxonomy-check", str(tmp_path / "bin.csv")]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_taxonomy_check_help_names_the_format(capsys):
    with pytest.raises(SystemExit):
        main(["taxonomy-check", "--help"])
    out = capsys.readouterr().out
    assert "explanation" in out and "labels" in out and "not_a_reason" in out


def test_docs_give_the_real_comments_figure_the_code_quotes():
    text = (Path(__file__).resolve().parents[2] / "docs" / "taxonomy.md").read_text()
    real = taxonomy.REAL_COMMENTS_CV
    row = f"| now, cross-validated | {real['precision']:.2f} | {real['coverage']:.2f} | "
    assert row + f"{real['fully_right']:.2f} |" in text
    assert f"{real['n']} explanations real players wrote in RoFT's 2020 study" in text
