"""The language-model coder end to end against a stand-in OpenAI-compatible server."""

from __future__ import annotations

import csv
import json

import pytest

from analysis import llm_coder
from analysis.__main__ import main
from tests.analysis.codebook_server import MODEL, StandIn


@pytest.fixture
def server():
    stand_in = StandIn()
    stand_in.thread.start()
    yield stand_in
    stand_in.shutdown()
    stand_in.server_close()


def _comments(path, texts):
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["explanation"])
        writer.writerows([[t] for t in texts])
    return path


def test_codes_each_unique_comment_and_counts_bad_answers(tmp_path, server, capsys):
    texts = [
        "it repeats the mayor twice",
        "it repeats the mayor twice",  # asked once
        "off topic and a typo",
        "idk",
        "banana bread in a news story",  # off the codebook twice: counted, not guessed
        "a long ramble",  # prose twice: counted, not guessed
        "vague, second try",  # prose first, a label on the retry
    ]
    source = _comments(tmp_path / "comments.csv", texts)
    argv = ["taxonomy", str(source), "--out", str(tmp_path / "out"), "--engine", "openai"]
    assert main([*argv, "--base-url", server.url, "--model", MODEL, "--seed", "7"]) == 0
    rows = list(csv.DictReader((tmp_path / "out" / "coded_comments.csv").open()))
    by_text = {r["text"]: r for r in rows}
    assert len(rows) == 6
    assert by_text["it repeats the mayor twice"]["rows"] == "2"
    assert by_text["it repeats the mayor twice"]["labels"] == "repetition"
    assert by_text["off topic and a typo"]["labels"] == "grammar;irrelevant"
    assert by_text["idk"]["labels"] == "not_a_reason"
    assert by_text["banana bread in a news story"]["labels"] == "unclassified"
    assert by_text["a long ramble"]["labels"] == "unclassified"
    assert by_text["vague, second try"]["labels"] == "generic"
    assert "after a retry" in by_text["vague, second try"]["decided_by"]
    summary = json.loads((tmp_path / "out" / "coding.json").read_text())
    assert summary["malformed"] == 1 and summary["off_codebook"] == 1
    assert summary["retries"] == 3 and summary["coded"] == 4 and summary["uncoded"] == 2
    provenance = summary["provenance"]
    assert provenance["model"] == MODEL
    assert provenance["prompt_sha256"] == llm_coder.prompt_sha256()
    assert provenance["settings"]["temperature"] == 0.0 and provenance["settings"]["seed"] == 7
    # What was sent: deterministic settings, the codebook as the system message.
    assert len(server.bodies) == 6 + 3
    for body in server.bodies:
        assert body["temperature"] == 0.0 and body["top_p"] == 1.0 and body["seed"] == 7
        assert body["messages"][0] == {"role": "system", "content": llm_coder.CODEBOOK}
    assert "malformed 1" in capsys.readouterr().out


def test_rules_stay_the_default(tmp_path):
    source = _comments(tmp_path / "c.csv", ["it repeats itself", "idk"])
    assert main(["taxonomy", str(source), "--out", str(tmp_path / "o")]) == 0
    summary = json.loads((tmp_path / "o" / "coding.json").read_text())
    assert summary["provenance"]["coder"] == "rules" and summary["coded"] == 2


def test_a_server_without_the_model_is_a_clear_error(tmp_path, server, capsys):
    """The model list is only a hint (see generation's engines): a model it does not name is
    tried with one short completion, and the server's refusal stops the run with a clear error."""
    source = _comments(tmp_path / "c.csv", ["idk"])
    argv = ["taxonomy", str(source), "--out", str(tmp_path / "o"), "--engine", "openai"]
    assert main([*argv, "--base-url", server.url, "--model", "nope"]) == 2
    err = capsys.readouterr().err
    assert "could not complete with model 'nope'" in err and "does not exist" in err
    assert [b["model"] for b in server.bodies] == ["nope"]  # one probe, no comment sent


@pytest.mark.parametrize(
    ("answer", "labels", "problem"),
    [
        ("repetition", ("repetition",), None),
        (" Grammar, repetition. ", ("grammar", "repetition"), None),
        ("contradicts-sentence", ("contradicts_sentence",), None),
        ("style", None, "off_codebook"),
        ("", None, "malformed"),
        ("I think: grammar", None, "malformed"),
        ("not_a_reason, grammar", None, "malformed"),
    ],
)
def test_parse(answer, labels, problem):
    assert llm_coder.parse(answer) == (labels, problem)


def test_researchers_labels_validate_the_language_model_coder(tmp_path, server):
    texts = ["it repeats itself", "off topic again", "idk", "a long ramble", "the mayor again"]
    source = _comments(tmp_path / "comments.csv", texts * 3)
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "explanation,label\n"
        "it repeats itself,repetition\n"
        "off topic again,irrelevant\n"
        "idk,not_a_reason\n"
        "a long ramble,other\n"  # the server's answer is unreadable: uncoded, against recall
        "the mayor again,repetition\n"  # the server says other: a confusion
    )
    argv = ["taxonomy", str(source), "--out", str(tmp_path / "out"), "--engine", "openai"]
    argv += ["--base-url", server.url, "--model", MODEL, "--coder-labels", str(labels)]
    assert main([*argv, "--bootstrap", "100"]) == 0
    summary = json.loads((tmp_path / "out" / "coding.json").read_text())
    assert summary["validation"]["sample"] == 5
    assert 0 < summary["validation"]["kappa"]["kappa"] < 1
    text = (tmp_path / "out" / "validation.md").read_text()
    assert "| repetition | 2 | 1 | 1.00 | 0.50 |" in text
    assert "corrected share | 95% CI" in text
