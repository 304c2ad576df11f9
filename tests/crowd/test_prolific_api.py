"""`flask study verify --prolific-api … --apply --send` against a local server that answers as
Prolific's API documentation says (https://docs.prolific.com/api-reference): token auth, the
study's submissions in pages, bulk approve, reject with a category and a 100-character message,
bonuses set up then paid (paying is not idempotent: a second call pays again)."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.crowd import lookup
from app.crowd.prolific_api import ProlificClient, ProlificError
from tests.crowd.helpers import join, make_pool, play_lazy, play_slot
from tests.crowd.test_verify import BONUS, create

TOKEN = "test-token-123"
CATEGORIES = {
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
}  # fmt: skip


class FakeProlific:
    """The state of one Prolific study and the calls made to it."""

    def __init__(self, study_id: str, submissions: list[dict]):
        self.study_id = study_id
        self.submissions = {s["id"]: s for s in submissions}
        self.bulk: dict[str, list[tuple[str, float]]] = {}
        self.paid: list[tuple[str, float]] = []
        self.calls: list[tuple[str, str]] = []

    def handle(self, method: str, path: str, body: dict | None) -> tuple[int, object]:
        self.calls.append((method, path))
        if method == "GET" and (m := re.fullmatch(r"/api/v1/studies/(\w+)/submissions/", path)):
            rows = list(self.submissions.values())
            page = {"results": rows[:2], "_links": {"next": {"href": None}}}
            if len(rows) > 2:
                page["_links"]["next"]["href"] = f"/api/v1/studies/{m[1]}/submissions/?page=2"
            return 200, page
        if method == "GET" and path.endswith("/submissions/?page=2"):
            return 200, {"results": list(self.submissions.values())[2:], "_links": {}}
        if method == "POST" and path == "/api/v1/submissions/bulk-approve/":
            for pid in body["participant_ids"]:
                match = [s for s in self.submissions.values() if s["participant_id"] == pid]
                if not match or match[0]["status"] != "AWAITING REVIEW":
                    return 400, {"error": f"{pid} cannot be approved"}
                match[0]["status"] = "APPROVED"
            return 200, "The request to bulk approve has been made successfully."
        if method == "POST" and (m := re.fullmatch(r"/api/v1/submissions/(\w+)/transition/", path)):
            if body.get("action") != "REJECT" or body.get("rejection_category") not in CATEGORIES:
                return 400, {"error": "bad action or rejection_category"}
            if len(body.get("message", "")) < 100:
                return 400, {"error": "message must be at least 100 characters"}
            self.submissions[m[1]]["status"] = "REJECTED"
            return 200, self.submissions[m[1]]
        if method == "POST" and path == "/api/v1/submissions/bonus-payments/":
            lines = [line.split(",") for line in body["csv_bonuses"].splitlines()]
            known = {s["participant_id"] for s in self.submissions.values()}
            if body["study_id"] != self.study_id or any(pid not in known for pid, _ in lines):
                return 400, {"error": "unknown participant"}
            bulk_id = f"bulk{len(self.bulk) + 1}"
            self.bulk[bulk_id] = [(pid, float(amount)) for pid, amount in lines]
            return 201, {"id": bulk_id, "study": self.study_id, "amount": 0, "fees": 0}
        if method == "POST" and (
            m := re.fullmatch(r"/api/v1/bulk-bonus-payments/(\w+)/pay/", path)
        ):
            self.paid += self.bulk[m[1]]  # not idempotent, as documented
            return 202, f"Bulk bonus payment with ID {m[1]} is being processed asynchronously."
        return 404, {"error": "not found"}


@pytest.fixture
def prolific():
    state = {}

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method):
            if self.headers.get("Authorization") != f"Token {TOKEN}":
                status, payload = 401, {"error": "Invalid token"}
            else:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                status, payload = state["fake"].handle(method, self.path, body)
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            self._answer("GET")

        def do_POST(self):
            self._answer("POST")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_port}"
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
