"""`flask study verify --prolific-api … --apply --send` against the local stand-in for Prolific's
API (tests/crowd/prolific_standin.py): token auth, the study's submissions in pages, bulk
approve, reject with a category and a 100-character message, bonuses set up then paid (paying
is not idempotent: a second call pays again)."""

from __future__ import annotations

import pytest

from app.crowd import lookup
from app.crowd.prolific_api import ProlificClient, ProlificError
from tests.crowd.helpers import join, make_pool, play_lazy, play_slot
from tests.crowd.prolific_standin import TOKEN, FakeProlific, serve
from tests.crowd.test_verify import BONUS, create


@pytest.fixture
def prolific():
    state: dict = {}
    server = serve(state)
    yield state
    server.shutdown()


def test_verify_through_the_api_acts_once_and_pays_once(app, runner, ctx, tmp_path, prolific):
    make_pool(normal=20, human=6)
    assert create(runner, tmp_path, BONUS).exit_code == 0
    study = lookup.get_study("pilot")
    good = join(study, "5f00good", "sub-a")
    for _ in range(6):
        play_slot(study, good, flag_at=None)
    lazy = join(study, "5f00lazy", "sub-b")
    play_lazy(study, lazy, "human")
    join(study, "5f00gone", "sub-c")
    prolific["fake"] = FakeProlific(
        "st1",
        [
            {"id": "suba", "participant_id": "5f00good", "status": "AWAITING REVIEW",
             "study_code": "C1DONE01"},
            {"id": "subb", "participant_id": "5f00lazy", "status": "AWAITING REVIEW",
             "study_code": "C2FAIL02"},
            {"id": "subc", "participant_id": "5f00gone", "status": "RETURNED", "study_code": None},
        ],
    )  # fmt: skip
    app.config.update(PROLIFIC_API_TOKEN=TOKEN, PROLIFIC_API_URL=prolific["url"])
    args = ["study", "verify", "pilot", "--prolific-api", "st1", "--apply", "--send"]
    first = runner.invoke(args=[*args, "--out", str(tmp_path / "one")])
    assert first.exit_code == 0, first.output
    assert "3 row(s), 3 worker(s)" in first.output  # both pages read
    assert "Sent to Prolific: 1 approved, 1 rejected, 1 bonus(es) paid." in first.output
    fake = prolific["fake"]
    assert fake.submissions["suba"]["status"] == "APPROVED"
    assert fake.submissions["subb"]["status"] == "REJECTED"
    assert fake.submissions["subc"]["status"] == "RETURNED"  # neither approved nor rejected
    assert fake.paid == [("5f00good", 0.2)]
    second = runner.invoke(args=[*args, "--out", str(tmp_path / "two")])
    assert second.exit_code == 0, second.output
    assert "Sent to Prolific: 0 approved, 0 rejected, 0 bonus(es) paid." in second.output
    assert fake.paid == [("5f00good", 0.2)]  # the ledger kept the second run from paying again
    assert "already approved there" in second.output


def test_the_client_reports_refusals_and_a_wrong_token(prolific):
    prolific["fake"] = FakeProlific("st1", [])
    with pytest.raises(ProlificError, match="HTTP 401"):
        list(ProlificClient("wrong", prolific["url"]).submissions("st1"))
    client = ProlificClient(TOKEN, prolific["url"])
    with pytest.raises(ProlificError, match="at least 100 characters"):
        client.reject("nosuch", "FAILED_CHECK", "too short")
    with pytest.raises(ProlificError, match="cannot reach Prolific"):
        ProlificClient(TOKEN, "http://127.0.0.1:9").submissions("st1").__next__()
    with pytest.raises(ProlificError, match="PROLIFIC_API_TOKEN is not set"):
        ProlificClient("")


def test_send_needs_the_api_and_apply(runner, ctx, tmp_path):
    make_pool()
    create(runner, tmp_path)
    refused = runner.invoke(args=["study", "verify", "pilot", "--prolific-api", "st1", "--send"])
    assert refused.exit_code != 0 and "--send needs --prolific-api and --apply" in refused.output
    no_token = runner.invoke(args=["study", "verify", "pilot", "--prolific-api", "st1"])
    assert no_token.exit_code != 0 and "PROLIFIC_API_TOKEN is not set" in no_token.output
