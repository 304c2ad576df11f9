"""A local stand-in for Prolific's API, for tests: a small threaded HTTP server that checks each
request against the request shapes Prolific documents (https://docs.prolific.com/api-reference;
see app/crowd/prolific_api.py for the list), answers as Prolific does, and keeps its own state:
studies, submissions, bulk bonuses (and every payment made), messages.

It can be told to fail a request (`fail`): answer 500, or answer nothing until the client gives
up, before or after doing what was asked (the worst case for a payment: paid, answer lost).
The client under test is the production one; only its base URL points here.

Every request that breaks a documented shape is answered 400 and kept in `shape_errors`, so a
test can assert that none was sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from decimal import Decimal, InvalidOperation
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from itertools import count
from urllib.parse import parse_qs, urlsplit

TOKEN = "test-token-123"
CATEGORIES = {
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
}  # fmt: skip
CODE_TYPES = {
    "COMPLETED", "FAILED_ATTENTION_CHECK", "FOLLOW_UP_STUDY", "GIVE_BONUS", "INCOMPATIBLE_DEVICE",
    "NO_CONSENT", "OTHER", "FIXED_SCREENOUT", "DYNAMIC_SCREENOUT",
}  # fmt: skip
CODE_ACTIONS = {
    "AUTOMATICALLY_APPROVE", "MANUALLY_REVIEW", "ADD_TO_PARTICIPANT_GROUP",
    "REMOVE_FROM_PARTICIPANT_GROUP", "REQUEST_RETURN", "DYNAMIC_PAYMENT", "FIXED_SCREENOUT_PAYMENT",
}  # fmt: skip
STUDY_ACTIONS = {"PUBLISH": ("UNPUBLISHED",), "PAUSE": ("ACTIVE",), "START": ("PAUSED",),
                 "STOP": ("ACTIVE", "PAUSED")}  # fmt: skip
STUDY_AFTER = {"PUBLISH": "ACTIVE", "PAUSE": "PAUSED", "START": "ACTIVE", "STOP": "AWAITING REVIEW"}
PAGE = 2  # submissions per page, small so that paging is exercised


class Shape(Exception):
    """The request breaks the documented shape."""


def need(body: dict, key: str, kind, where: str = ""):
    if key not in body:
        raise Shape(f"{where}{key} is required")
    value = body[key]
    if (kind is int and isinstance(value, bool)) or not isinstance(value, kind):
        raise Shape(f"{where}{key} must be {getattr(kind, '__name__', kind)}, got {value!r}")
    return value


def need_list_of_str(body: dict, key: str) -> list[str]:
    value = need(body, key, list)
    if not value or not all(isinstance(v, str) and v for v in value):
        raise Shape(f"{key} must be a non-empty list of ids")
    return value


class FakeProlific:
    """The state of one Prolific account: studies, submissions, bulk bonuses, messages."""

    def __init__(self, study_id: str | None = None, submissions: list[dict] = ()):
        self.lock = threading.RLock()
        self.ids = count(1)
        self.studies: dict[str, dict] = {}
        if study_id:
            self.studies[study_id] = self._study({"name": "seeded"}, study_id, "ACTIVE")
        self.submissions: dict[str, dict] = {}
        for sub in submissions:
            self.submissions[sub["id"]] = {"study_id": study_id, **sub}
        self.bulk: dict[str, dict] = {}
        self.paid: list[tuple[str, float]] = []  # one entry per line of every pay call
        self.pay_calls: list[str] = []  # one entry per pay call
        self.messages: list[dict] = []
        self.calls: list[tuple[str, str]] = []
        self.shape_errors: list[str] = []
        self.failures: list[dict] = []
        self.slow_seconds = 1.0

    # -- test controls ----------------------------------------------------------------------

    def fail(self, method: str, pattern: str, mode: str = "500", after: bool = False, times=1):
        """Fail the next `times` requests matching: mode "500" answers a server error, "400" a
        refusal, "timeout" answers only after the client gave up; `after` does what was asked
        first (then the request took effect, but its answer is lost)."""
        self.failures.append(
            {"method": method, "pattern": re.compile(pattern), "mode": mode, "after": after,
             "times": times}
        )  # fmt: skip

    def seed(self, study_id: str, participant_id: str, status="AWAITING REVIEW", code=None) -> str:
        """A worker took part in the study on Prolific; returns the submission id."""
        with self.lock:
            sub_id = f"sub{next(self.ids):06d}"
            self.submissions[sub_id] = {
                "id": sub_id, "study_id": study_id, "participant_id": participant_id,
                "status": status, "study_code": code,
            }  # fmt: skip
            return sub_id

    def paid_per_worker(self) -> dict[str, Decimal]:
        out: dict[str, Decimal] = {}
        for worker, amount in self.paid:
            out[worker] = out.get(worker, Decimal(0)) + Decimal(str(amount))
        return out

    # -- the HTTP side ----------------------------------------------------------------------

    def respond(self, method: str, raw_path: str, body) -> tuple[int, object, float]:
        """(status, payload, seconds to wait before answering)."""
        with self.lock:
            self.calls.append((method, raw_path))
            failure = next(
                (f for f in self.failures
                 if f["method"] == method and f["pattern"].search(raw_path) and f["times"] > 0),
                None,
            )  # fmt: skip
            if failure is not None:
                failure["times"] -= 1
                if failure["after"]:
                    self.handle(method, raw_path, body)
                if failure["mode"] == "timeout":
                    return 200, {"late": True}, self.slow_seconds
                if failure["mode"] == "400":
                    return 400, {"error": "Refused by the stand-in"}, 0.0
                return 500, {"error": "Internal server error"}, 0.0
            return (*self.handle(method, raw_path, body), 0.0)

    def handle(self, method: str, raw_path: str, body) -> tuple[int, object]:
        with self.lock:
            try:
                return self._route(method, raw_path, body)
            except Shape as error:
                self.shape_errors.append(f"{method} {raw_path}: {error}")
                return 400, {"error": {"detail": str(error)}}

    def _route(self, method: str, raw_path: str, body) -> tuple[int, object]:
        parts = urlsplit(raw_path)
        path, query = parts.path, parse_qs(parts.query)
        if method == "POST" and not isinstance(body, dict):
            raise Shape("a JSON object body is required")
        if method == "POST" and path == "/api/v1/studies/":
            return self.create_study(body)
        if m := re.fullmatch(r"/api/v1/studies/([\w-]+)/", path):
            if method != "GET":
                return 405, {"error": "method not allowed"}
            study = self.studies.get(m[1])
            return (200, study) if study else (404, {"error": "Not found"})
        if method == "POST" and (m := re.fullmatch(r"/api/v1/studies/([\w-]+)/transition/", path)):
            return self.transition_study(m[1], body)
        if method == "GET" and path == "/api/v1/submissions/":
            return self.list_submissions(query)
        if method == "POST" and path == "/api/v1/submissions/bulk-approve/":
            return self.bulk_approve(body)
        if method == "POST" and (
            m := re.fullmatch(r"/api/v1/submissions/([\w-]+)/transition/", path)
        ):
            return self.transition_submission(m[1], body)
        if method == "POST" and path == "/api/v1/messages/":
            return self.message(body)
        if method == "POST" and path == "/api/v1/submissions/bonus-payments/":
            return self.set_up_bonuses(body)
        if method == "POST" and (
            m := re.fullmatch(r"/api/v1/bulk-bonus-payments/(\w+)/pay/", path)
        ):
            return self.pay(m[1])
        return 404, {"error": "Not found"}

    # -- studies ----------------------------------------------------------------------------

    def _study(self, body: dict, study_id: str, status: str) -> dict:
        return {**body, "id": study_id, "status": status, "places_taken": 0,
                "number_of_submissions": 0}  # fmt: skip

    def create_study(self, body: dict):
        need(body, "name", str)
        need(body, "description", str)
        url = need(body, "external_study_url", str)
        if not url.startswith(("https://", "http://")):
            raise Shape("external_study_url must be an address")
        option = need(body, "prolific_id_option", str)
        if option not in ("question", "url_parameters", "not_required"):
            raise Shape(f"prolific_id_option {option!r} is not allowed")
        if option == "url_parameters" and "{{%PROLIFIC_PID%}}" not in url:
            raise Shape("url_parameters needs {{%PROLIFIC_PID%}} in external_study_url")
        codes = need(body, "completion_codes", list)
        if not codes:
            raise Shape("completion_codes must have at least one code")
        seen = set()
        for i, code in enumerate(codes):
            where = f"completion_codes[{i}]."
            if not isinstance(code, dict):
                raise Shape(f"completion_codes[{i}] must be an object")
            value = need(code, "code", str, where)
            if value in seen:
                raise Shape(f"{where}code {value!r} is not unique")
            seen.add(value)
            if need(code, "code_type", str, where) not in CODE_TYPES:
                raise Shape(f"{where}code_type {code['code_type']!r} is unknown")
            actions = need(code, "actions", list, where)
            names = set()
            for action in actions:
                if not isinstance(action, dict) or action.get("action") not in CODE_ACTIONS:
                    raise Shape(f"{where}actions: {action!r} is not an action")
                names.add(action["action"])
            if {"AUTOMATICALLY_APPROVE", "MANUALLY_REVIEW"} <= names:
                raise Shape(f"{where}AUTOMATICALLY_APPROVE and MANUALLY_REVIEW cannot go together")
        if need(body, "estimated_completion_time", int) < 1:
            raise Shape("estimated_completion_time must be at least 1")
        if need(body, "reward", int) < 0:
            raise Shape("reward must not be negative")
        if need(body, "total_available_places", int) < 1:
            raise Shape("total_available_places must be at least 1")
        for device in body.get("device_compatibility", []):
            if device not in ("desktop", "tablet", "mobile"):
                raise Shape(f"device_compatibility: {device!r} is unknown")
        study_id = f"{next(self.ids):024x}"
        self.studies[study_id] = self._study(body, study_id, "UNPUBLISHED")
        return 201, self.studies[study_id]

    def transition_study(self, study_id: str, body: dict):
        action = need(body, "action", str)
        if action not in STUDY_ACTIONS:
            raise Shape(f"action {action!r} is unknown")
        study = self.studies.get(study_id)
        if study is None:
            return 404, {"error": "Not found"}
        if study["status"] not in STUDY_ACTIONS[action]:
            return 400, {"error": f"cannot {action} a study that is {study['status']}"}
        study["status"] = STUDY_AFTER[action]
        return 200, study

    # -- submissions ------------------------------------------------------------------------

    def _of_study(self, study_id: str) -> list[dict]:
        return [s for s in self.submissions.values() if s["study_id"] == study_id]

    def list_submissions(self, query: dict):
        if not query.get("study"):
            raise Shape("the study query parameter is required")
        study_id = query["study"][0]
        page = int(query.get("page", ["1"])[0])
        rows = self._of_study(study_id)
        chunk = rows[(page - 1) * PAGE : page * PAGE]
        following = (
            {"href": f"/api/v1/submissions/?study={study_id}&page={page + 1}"}
            if page * PAGE < len(rows)
            else {"href": None}
        )
        results = [
            {k: s.get(k) for k in ("id", "participant_id", "status", "study_code")} for s in chunk
        ]
        return 200, {
            "results": results,
            "_links": {"next": following},
            "meta": {"count": len(rows)},
        }

    def bulk_approve(self, body: dict):
        if "submission_ids" in body:
            ids = need_list_of_str(body, "submission_ids")
            subs = [self.submissions.get(i) for i in ids]
            if None in subs:
                return 400, {"error": "unknown submission"}
        else:
            study_id = need(body, "study_id", str)
            pids = need_list_of_str(body, "participant_ids")
            subs = [
                next((s for s in self._of_study(study_id) if s["participant_id"] == p), None)
                for p in pids
            ]
            if None in subs:
                return 400, {"error": "unknown participant"}
        if any(s["status"] != "AWAITING REVIEW" for s in subs):
            return 400, {"error": "only submissions awaiting review can be approved"}
        for s in subs:
            s["status"] = "APPROVED"
        return 200, "The request to bulk approve has been made successfully."

    def transition_submission(self, sub_id: str, body: dict):
        action = need(body, "action", str)
        if action not in ("APPROVE", "REJECT", "COMPLETE", "START_COMPLETION"):
            raise Shape(f"action {action!r} is unknown")
        if action == "REJECT":
            if need(body, "rejection_category", str) not in CATEGORIES:
                raise Shape("rejection_category is not one of Prolific's")
            if len(need(body, "message", str)) < 100:
                raise Shape("message must be at least 100 characters")
        sub = self.submissions.get(sub_id)
        if sub is None:
            return 404, {"error": "Not found"}
        target = {"APPROVE": "APPROVED", "REJECT": "REJECTED"}.get(action)
        if sub["status"] == target:
            return 200, sub  # documented as idempotent
        if sub["status"] != "AWAITING REVIEW":
            return 400, {"error": f"cannot {action} a submission that is {sub['status']}"}
        sub["status"] = target
        if action == "REJECT":
            sub["rejection"] = (body["rejection_category"], body["message"])
        return 200, sub

    # -- messages ---------------------------------------------------------------------------

    def message(self, body: dict):
        recipient = need(body, "recipient_id", str)
        text = need(body, "body", str)
        study_id = need(body, "study_id", str)
        if not text.strip():
            raise Shape("body must not be empty")
        if not any(s["participant_id"] == recipient for s in self._of_study(study_id)):
            return 400, {"error": "the recipient has no submission in this study"}
        self.messages.append({"recipient_id": recipient, "study_id": study_id, "body": text})
        return 200, None

    # -- bonuses ----------------------------------------------------------------------------

    def set_up_bonuses(self, body: dict):
        study_id = need(body, "study_id", str)
        csv_bonuses = need(body, "csv_bonuses", str)
        known = {s["participant_id"] for s in self._of_study(study_id)}
        lines = []
        for line in csv_bonuses.splitlines():
            if not line.strip():
                continue
            fields = line.split(",")
            if len(fields) != 2:
                raise Shape(f"csv_bonuses line {line!r} is not `id,amount`")
            pid, amount = fields[0].strip(), fields[1].strip()
            try:
                value = Decimal(amount)
            except InvalidOperation:
                raise Shape(f"csv_bonuses amount {amount!r} is not a number") from None
            if value <= 0 or value.as_tuple().exponent < -2:
                raise Shape(f"csv_bonuses amount {amount!r} must be positive, in pounds/dollars")
            if pid not in known:
                return 400, {"error": f"{pid} did not take part in this study"}
            lines.append((pid, float(value)))
        if not lines:
            raise Shape("csv_bonuses has no line")
        bulk_id = f"bulk{next(self.ids)}"
        self.bulk[bulk_id] = {"study_id": study_id, "lines": lines}
        cents = round(sum(a for _p, a in lines) * 100)
        return 201, {"id": bulk_id, "study": study_id, "amount": cents, "fees": 0,
                     "total_amount": cents}  # fmt: skip

    def pay(self, bulk_id: str):
        bulk = self.bulk.get(bulk_id)
        if bulk is None:
            return 404, {"error": "Not found"}
        self.paid += bulk["lines"]  # not idempotent, as documented: a second call pays again
        self.pay_calls.append(bulk_id)
        return 202, f"Bulk bonus payment with ID {bulk_id} is being processed asynchronously."


def serve(state: dict) -> ThreadingHTTPServer:
    """Serve `state["fake"]` (read per request, so a test may swap it) at `state["url"]`."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method):
            fake = state["fake"]
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            delay = 0.0
            if self.headers.get("Authorization") != f"Token {TOKEN}":
                status, payload = 401, {"error": "Invalid token"}
            elif raw and self.headers.get("Content-Type") != "application/json":
                status, payload = 415, {"error": "Content-Type must be application/json"}
            else:
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    status, payload = 400, {"error": "the body is not JSON"}
                else:
                    status, payload, delay = fake.respond(method, self.path, body)
            if delay:
                time.sleep(delay)
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up waiting

        def do_GET(self):
            self._answer("GET")

        def do_POST(self):
            self._answer("POST")

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_port}"
    return server
