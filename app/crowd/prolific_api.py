"""A thin client for Prolific's API, used only when the operator sets PROLIFIC_API_TOKEN.

Written against Prolific's documented API (https://docs.prolific.com/api-reference): token
authentication (`Authorization: Token …`), the study's submissions, bulk approval, rejection
with a category and a message, and bonuses in two steps (set up, then pay). Paying is not
idempotent on Prolific's side, so the caller records bonuses in its ledger before paying.
The CSV files of `flask study verify` remain the default way to act on decisions.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urljoin

TIMEOUT = 30


class ProlificError(RuntimeError):
    """Prolific refused a request or could not be reached; the message says which and why."""


class ProlificClient:
    def __init__(self, token: str, base_url: str = "https://api.prolific.com"):
        if not token:
            raise ProlificError("PROLIFIC_API_TOKEN is not set")
        self.token = token
        self.base_url = base_url.rstrip("/") + "/"

    def _call(self, method: str, path: str, body: dict | None = None):
        url = urljoin(self.base_url, path.lstrip("/"))
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Authorization", f"Token {self.token}")
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read().decode("utf-8", "replace")[:300]
            raise ProlificError(f"{method} {path}: HTTP {error.code}: {detail}") from None
        except urllib.error.URLError as error:
            raise ProlificError(
                f"{method} {path}: cannot reach Prolific ({error.reason})"
            ) from None
        return json.loads(raw) if raw else None

    def submissions(self, study_id: str) -> Iterator[dict]:
        """Every submission of a study: id, participant_id, status, study_code (the code the
        participant entered), following the pages Prolific returns."""
        path = f"/api/v1/studies/{study_id}/submissions/"
        while path:
            page = self._call("GET", path)
            yield from page.get("results", [])
            following = ((page.get("_links") or {}).get("next") or {}).get("href")
            path = following or None

    def approve(self, study_id: str, participant_ids: list[str]) -> None:
        if participant_ids:
            self._call(
                "POST",
                "/api/v1/submissions/bulk-approve/",
                {"study_id": study_id, "participant_ids": participant_ids},
            )

    def reject(self, submission_id: str, category: str, message: str) -> None:
        self._call(
            "POST",
            f"/api/v1/submissions/{submission_id}/transition/",
            {"action": "REJECT", "rejection_category": category, "message": message},
        )

    def set_up_bonuses(self, study_id: str, lines: list[tuple[str, str]]) -> dict:
        """Set up bonuses (participant id, amount in the study's currency); nothing is paid
        yet. Returns Prolific's answer, whose `id` is the bulk bonus payment to pay."""
        csv_bonuses = "\n".join(f"{pid},{amount}" for pid, amount in lines)
        answer = self._call(
            "POST",
            "/api/v1/submissions/bonus-payments/",
            {"study_id": study_id, "csv_bonuses": csv_bonuses},
        )
        if not isinstance(answer, dict) or not answer.get("id"):
            raise ProlificError(f"set-up of bonuses: Prolific gave no payment id ({answer!r})")
        return answer

    def pay_bulk_bonus(self, payment_id: str):
        """Pay a bulk bonus set up before. Not idempotent: every call pays again. Returns
        Prolific's answer."""
        return self._call("POST", f"/api/v1/bulk-bonus-payments/{payment_id}/pay/", {})
