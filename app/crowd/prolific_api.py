"""A thin client for Prolific's API, used only when the operator sets PROLIFIC_API_TOKEN.

Written against Prolific's documented API (https://docs.prolific.com/api-reference). Every
request carries `Authorization: Token <token>`; bodies are JSON. The shapes used here, as
documented:

- Create a draft study: POST /api/v1/studies/ with name, internal_name, description,
  external_study_url (Prolific fills in {{%PROLIFIC_PID%}}, {{%STUDY_ID%}}, {{%SESSION_ID%}}),
  prolific_id_option ("url_parameters"), completion_codes (a list of {code, code_type,
  actions: [{action}]}; AUTOMATICALLY_APPROVE and MANUALLY_REVIEW cannot go together),
  estimated_completion_time (minutes, integer), reward (the study currency's minor unit,
  integer), total_available_places (integer), device_compatibility. Answers the study, with id.
- Retrieve a study: GET /api/v1/studies/{id}/ (status, total_available_places, places_taken,
  number_of_submissions).
- Publish, pause, start again: POST /api/v1/studies/{id}/transition/ with {"action": "PUBLISH" |
  "PAUSE" | "START"}.
- List submissions: GET /api/v1/submissions/?study={id} (results with id, participant_id,
  status, study_code; pages follow `_links.next.href`).
- Bulk approve: POST /api/v1/submissions/bulk-approve/ with {"submission_ids": [...]} (what
  Prolific recommends) or {"study_id", "participant_ids"}.
- Approve or reject one: POST /api/v1/submissions/{id}/transition/ with {"action": "APPROVE"} or
  {"action": "REJECT", "rejection_category", "message" (at least 100 characters)}; documented
  as idempotent.
- Message a participant: POST /api/v1/messages/ with {recipient_id, body, study_id}.
- Bonuses in two steps: POST /api/v1/submissions/bonus-payments/ with {study_id, csv_bonuses:
  "<participant_id>,<amount>\\n..."} sets them up (amounts in the study currency, e.g. 1.50) and
  answers an `id`; POST /api/v1/bulk-bonus-payments/{id}/pay/ pays it. Paying is documented as
  NOT idempotent: every call pays again.

Requests that are safe to repeat (reads, transitions, set-ups, which pay nothing) are retried
after a server error or a timeout. Paying and messaging never are: a timeout leaves it unknown
whether they went through, and the error says so (`ProlificError.uncertain`).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import quote, urljoin

TIMEOUT = 30
RETRIES = 2  # further tries of a request that is safe to repeat
REJECTION_CATEGORIES = (
    "TOO_QUICKLY", "TOO_SLOWLY", "FAILED_INSTRUCTIONS", "INCOMP_LONGITUDINAL", "FAILED_CHECK",
    "LOW_EFFORT", "MALINGERING", "NO_CODE", "BAD_CODE", "NO_DATA", "UNSUPP_DEVICE", "OTHER",
)  # fmt: skip
MIN_REJECTION_MESSAGE = 100


class ProlificError(RuntimeError):
    """Prolific refused a request or could not be reached; the message says which and why.

    `status` is the HTTP status (None when no answer came). `uncertain` is True when the request
    may have taken effect all the same (a timeout, a lost connection, a server error): a refusal
    (4xx) is certain to have done nothing.
    """

    def __init__(self, message: str, status: int | None = None, uncertain: bool = False):
        super().__init__(message)
        self.status = status
        self.uncertain = uncertain


class ProlificClient:
    def __init__(
        self,
        token: str,
        base_url: str = "https://api.prolific.com",
        timeout: float = TIMEOUT,
        retries: int = RETRIES,
        pause: float = 0.5,
    ):
        if not token:
            raise ProlificError(
                "PROLIFIC_API_TOKEN is not set: export it in the environment of this command "
                "(never write it into a file of the repository)"
            )
        self.token = token
        self.base_url = base_url.rstrip("/") + "/"
        self.timeout = timeout
        self.retries = retries
        self.pause = pause

    # -- the one way out ------------------------------------------------------------------

    def _once(self, method: str, path: str, body: dict | None):
        url = urljoin(self.base_url, path.lstrip("/"))
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")[:300]
            raise ProlificError(
                f"{method} {path}: HTTP {error.code}: {detail}",
                status=error.code,
                uncertain=error.code >= 500,
            ) from None
        except TimeoutError:
            raise ProlificError(
                f"{method} {path}: no answer within {self.timeout:g} s", uncertain=True
            ) from None
        except urllib.error.URLError as error:
            timed_out = isinstance(error.reason, TimeoutError)
            raise ProlificError(
                f"{method} {path}: cannot reach Prolific ({error.reason})", uncertain=timed_out
            ) from None
        except (ConnectionError, OSError) as error:
            raise ProlificError(
                f"{method} {path}: the connection broke ({error})", uncertain=True
            ) from None
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _call(self, method: str, path: str, body: dict | None = None, repeatable: bool = True):
        """One request; one that is safe to repeat is tried again after an uncertain failure."""
        tries = 1 + (self.retries if repeatable else 0)
        for attempt in range(tries):
            try:
                return self._once(method, path, body)
            except ProlificError as error:
                if not error.uncertain or attempt == tries - 1:
                    raise
                time.sleep(self.pause * (attempt + 1))
        raise AssertionError("unreachable")

    # -- studies --------------------------------------------------------------------------

    def create_study(self, body: dict) -> dict:
        """Create a draft study (see `study_body`); returns Prolific's study, with its id. Not
        repeated on a timeout: a second try could leave two drafts."""
        answer = self._call("POST", "/api/v1/studies/", body, repeatable=False)
        if not isinstance(answer, dict) or not answer.get("id"):
            raise ProlificError(f"create study: Prolific gave no study id ({answer!r})")
        return answer

    def study(self, study_id: str) -> dict:
        return self._call("GET", f"/api/v1/studies/{quote(study_id)}/")

    def transition_study(self, study_id: str, action: str) -> dict:
        return self._call(
            "POST", f"/api/v1/studies/{quote(study_id)}/transition/", {"action": action}
        )

    # -- submissions ----------------------------------------------------------------------

    def submissions(self, study_id: str) -> Iterator[dict]:
        """Every submission of a study: id, participant_id, status, study_code (the code the
        participant entered), following the pages Prolific returns."""
        path = f"/api/v1/submissions/?study={quote(study_id)}"
        while path:
            page = self._call("GET", path)
            yield from page.get("results", [])
            following = ((page.get("_links") or {}).get("next") or {}).get("href")
            path = following or None

    def approve(self, study_id: str, participant_ids: list[str]) -> None:
        """Bulk approve by participant ids (the study's own variant of the call)."""
        if participant_ids:
            self._call(
                "POST",
                "/api/v1/submissions/bulk-approve/",
                {"study_id": study_id, "participant_ids": participant_ids},
            )

    def approve_submissions(self, submission_ids: list[str]) -> None:
        """Bulk approve by submission ids, the variant Prolific recommends."""
        if submission_ids:
            self._call(
                "POST", "/api/v1/submissions/bulk-approve/", {"submission_ids": submission_ids}
            )

    def reject(self, submission_id: str, category: str, message: str) -> dict:
        if category not in REJECTION_CATEGORIES:
            raise ProlificError(f"reject: {category!r} is not one of Prolific's categories")
        if len(message) < MIN_REJECTION_MESSAGE:
            raise ProlificError(
                f"reject: the message must be at least {MIN_REJECTION_MESSAGE} characters"
            )
        return self._call(
            "POST",
            f"/api/v1/submissions/{quote(submission_id)}/transition/",
            {"action": "REJECT", "rejection_category": category, "message": message},
        )

    # -- messages -------------------------------------------------------------------------

    def send_message(self, recipient_id: str, study_id: str, body: str):
        """Message one participant about a study. Never repeated: a lost answer may still
        have delivered it."""
        return self._call(
            "POST",
            "/api/v1/messages/",
            {"recipient_id": recipient_id, "body": body, "study_id": study_id},
            repeatable=False,
        )

    # -- bonuses --------------------------------------------------------------------------

    def set_up_bonuses(self, study_id: str, lines: list[tuple[str, str]]) -> dict:
        """Set up bonuses (participant id, amount in the study's currency); nothing is paid
        yet, so a repeated set-up costs nothing. Returns Prolific's answer, whose `id` is the
        bulk bonus payment to pay."""
        csv_bonuses = "".join(f"{pid},{amount}\n" for pid, amount in lines)
        answer = self._call(
            "POST",
            "/api/v1/submissions/bonus-payments/",
            {"study_id": study_id, "csv_bonuses": csv_bonuses},
        )
        if not isinstance(answer, dict) or not answer.get("id"):
            raise ProlificError(f"set-up of bonuses: Prolific gave no payment id ({answer!r})")
        return answer

    def pay_bulk_bonus(self, payment_id: str):
        """Pay a bulk bonus set up before. Not idempotent: every call pays again, so it is
        never retried here. Returns Prolific's answer."""
        return self._call(
            "POST", f"/api/v1/bulk-bonus-payments/{quote(payment_id)}/pay/", {}, repeatable=False
        )
