"""The coder's validation service: a stratified sample, blind resumable labels, the report."""

from __future__ import annotations

import pytest

from app.accounts import service as accounts
from app.errors import BadRequest, NotFound
from app.research import validation
from tests.conftest import csrf_token
from tests.research.validation_helpers import seed_rounds


@pytest.fixture
def seeded(app):
    with app.app_context():
        labels = seed_rounds()
        one = accounts.sign_up("lab1", "a long password here", consent=False, researcher=True)
        two = accounts.sign_up("lab2", "a long password here", consent=False, researcher=True)
        yield labels, one, two


def test_sample_is_proportional_by_category_and_kept(seeded):
    labels, *_ = seeded
    everything = validation.comments("site")
    assert set(everything) == set(labels)
    items = validation.draw("site", 36, seed=3)
    assert len(items) == 36 and len({i.text for i in items}) == 36
    share = {s: sum(v == s for v in everything.values()) / len(everything) for s in ("news",)}
    drawn = sum(i.stratum == "news" for i in items) / len(items)
    assert abs(drawn - share["news"]) <= 1 / 36
    again = validation.draw("site", 10, seed=9)  # a drawn sample is never redrawn
    assert [i.id for i in again] == [i.id for i in items]


def test_labels_are_resumable_per_researcher_and_reported(seeded):
    labels, one, two = seeded
    items = validation.draw("site", 20)
    for item in items[:12]:
        validation.record("site", item.id, one, labels[item.text])
    progress = validation.next_item("site", one)
    assert (progress.done, progress.total, progress.item.id) == (12, 20, items[12].id)
    assert validation.next_item("site", two).done == 0
    for item in items[:12]:
        validation.record("site", item.id, two, labels[item.text])
    result = validation.results("site", n_boot=100)
    assert result["sample"] == 12 and result["researchers"]["kappa"] == pytest.approx(1.0)
    assert result["kappa"]["kappa"] > 0.6
    assert result["chips"]["repetition"] > 0 and result["chips"]["coreference"] == 0


def test_bad_input_is_refused_with_a_reason(seeded):
    _, one, _ = seeded
    with pytest.raises(NotFound):
        validation.next_item("no-such-study", one)
    with pytest.raises(BadRequest):
        validation.draw("site", 0)
    items = validation.draw("site", 5)
    with pytest.raises(BadRequest, match="Unknown label"):
        validation.record("site", items[0].id, one, "vibes")
    with pytest.raises(NotFound):
        validation.record("site", 10**6, one, "grammar")
    with pytest.raises(NotFound, match="labelled"):
        validation.results("site")


def test_pages_need_a_researcher_and_answer_4xx(app, client, seeded):
    assert client.get("/research/validation/site").status_code in (302, 401, 403)
    token = csrf_token(client, "/login")
    login = {"csrf_token": token, "username": "lab1", "password": "a long password here"}
    assert client.post("/login", data=login).status_code == 302
    page = client.get("/research/validation/site")
    assert page.status_code == 200 and b"Draw the sample" in page.data
    assert client.get("/research/validation/nope").status_code == 404
    token = csrf_token(client, "/research/validation/site")
    draw = "/research/validation/site/draw"
    assert client.post(draw, data={"csrf_token": token, "size": "x"}).status_code == 400
    assert client.post(draw, data={"csrf_token": token, "size": "5"}).status_code == 302
    page = client.get("/research/validation/site")
    assert b"0 of 5 labelled" in page.data
    label = {"csrf_token": token, "item": "1", "label": "nope"}
    assert client.post("/research/validation/site/label", data=label).status_code == 400


def test_flask_validation_commands(app, seeded, tmp_path):
    labels, *_ = seeded
    runner = app.test_cli_runner()
    drawn = runner.invoke(args=["validation", "draw", "site", "--size", "10"])
    assert drawn.exit_code == 0 and "a sample of 10 comments" in drawn.output
    with app.app_context():
        items = validation.sample_of("site")
        keys = [(validation.LABEL_NAMES.index(labels[i.text]) + 1) % 10 for i in items[:6]]
    answers = "".join(f"{key}\n" for key in keys) + "q\n"  # six labels, then stop
    labelled = runner.invoke(args=["validation", "label", "site", "--as", "lab1"], input=answers)
    assert labelled.exit_code == 0 and "[6/10]" in labelled.output
    assert "mixes up who" in labelled.output  # the choices, never the coder's label
    report = runner.invoke(args=["validation", "report", "site", "--bootstrap", "50"])
    assert report.exit_code == 0 and "on 6 comments" in report.output
    assert "corrected share | 95% CI" in report.output
    out = tmp_path / "labels.csv"
    exported = runner.invoke(args=["validation", "export", "site", str(out)])
    assert exported.exit_code == 0 and out.read_text().count("\n") == 7
    refused = runner.invoke(args=["validation", "label", "site", "--as", "nobody"])
    assert refused.exit_code != 0 and "is no researcher" in refused.output


def test_an_item_id_beyond_the_database_integers_is_not_found(seeded):
    _, one, _ = seeded
    validation.draw("site", 3)
    with pytest.raises(NotFound):
        validation.record("site", 2**80, one, "grammar")


def test_exported_labels_are_safe_in_a_spreadsheet_and_read_back_as_written(app, seeded, tmp_path):
    from analysis.validation import read_labels
    from tests import factories
    from tests.game_helpers import others_answer

    _, one, _ = seeded
    formula = "=HYPERLINK(1) it repeats the same words"
    others_answer(factories.example(), [3], formula)
    for item in validation.draw("site", validation.MAX_SIZE):
        validation.record("site", item.id, one, "repetition")
    out = tmp_path / "labels.csv"
    result = app.test_cli_runner().invoke(args=["validation", "export", "site", str(out)])
    assert result.exit_code == 0, result.output
    written = out.read_text(encoding="utf-8")
    # The cell starts with an apostrophe, so a spreadsheet shows it as text, not a formula.
    assert f"\n'{formula}" in written
    # The analysis reads it back as the player wrote it.
    read = dict(read_labels(out))
    assert [t for t in read if t.startswith(formula)] and not [t for t in read if "'=" in t]
