"""A scripted player for the live tests: plays through HTTP the way a browser does.

It keeps a cookie jar, reads the CSRF token from each page (`name="csrf_token" value="..."`),
follows redirects itself (so it sees each hop), and opens a new TCP connection for every request,
as gunicorn's sync workers close each one anyway. Only the standard library is used.
"""

from __future__ import annotations

import copy
import http.client
import re
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from http.cookiejar import CookieJar
from urllib.parse import urlencode, urljoin, urlsplit

CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')
ROUND_PATH_RE = re.compile(r"^/play/round/(\d+)$")
PROGRESS_RE = re.compile(r"Sentence (\d+) of (\d+)")
POINTS_RE = re.compile(r'<span class="points-badge">(\d+)</span>')
# The answered round's guess (the flagged sentence's index; N: all human), as the page marks it.
GUESS_RE = re.compile(r'<section class="result"[^>]* data-guess="(\d+)"')
REDIRECTS = (301, 302, 303, 307, 308)


class ConnectionLost(Exception):
    """The connection broke before a whole response arrived (reset, closed, refused)."""

    def __init__(self, method: str, path: str, error: BaseException, started: float, ended: float):
        super().__init__(f"{method} {path}: {error!r}")
        self.method = method
        self.path = path
        self.error = error
        self.started = started
        self.ended = ended


class UnexpectedPage(AssertionError):
    """The site answered, but not with what a player could continue from."""


@dataclass
class Response:
    status: int
    url: str
    headers: object
    text: str
    # (status, url) of each redirect followed on the way here.
    history: list[tuple[int, str]] = field(default_factory=list)

    @property
    def path(self) -> str:
        return urlsplit(self.url).path

    @property
    def first_status(self) -> int:
        """The status of the request itself, before any redirect was followed."""
        return self.history[0][0] if self.history else self.status


@dataclass
class RoundPage:
    """What a round page shows: its id, how far it is read, and the result once answered."""

    response: Response
    round_id: int
    n: int
    revealed: int | None
    answered: bool
    points: int | None
    guess: int | None

    @property
    def status(self) -> int:
        return self.response.status

    @classmethod
    def parse(cls, response: Response) -> RoundPage:
        found = ROUND_PATH_RE.match(response.path)
        if not found:
            raise UnexpectedPage(
                f"expected a round page, got {response.status} {response.url}: "
                f"{response.text[:300]}"
            )
        text = response.text
        answered = 'class="result"' in text
        progress = PROGRESS_RE.search(text)
        if answered:
            n = text.count('<li class="sentence ')
            marked = GUESS_RE.search(text)
            guess = int(marked.group(1)) if marked else None
            points = POINTS_RE.search(text)
            return cls(response, int(found.group(1)), n, None, True, int(points.group(1)), guess)
        if progress is None:
            raise UnexpectedPage(f"a round page without progress: {text[:300]}")
        revealed, n = int(progress.group(1)), int(progress.group(2))
        return cls(response, int(found.group(1)), n, revealed, False, None, None)


@dataclass
class PlayedRound:
    """One round a player finished and the result page they were shown."""

    round_id: int
    revealed: int
    choice: str
    guess: int
    points: int
    reasons: list[str]
    explanation: str


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


class Player:
    """One browser: `Player(url).play_round(reveal_to=4, choice="machine")`."""

    def __init__(self, base_url: str, *, forwarded_for: str | None = None, timeout: float = 30.0):
        self.base_url = base_url.rstrip("/")
        self.forwarded_for = forwarded_for
        self.timeout = timeout
        self.jar = CookieJar()
        self.opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(self.jar), _NoRedirect
        )
        self.token: str | None = None
        # Requests whose connection broke while `play_round(retry=True)` carried on.
        self.errors: list[ConnectionLost] = []
        # (round id, where GET /play/continue led) each time a broken round was resumed.
        self.resumed: list[tuple[int, str]] = []

    def clone(self) -> Player:
        """A second tab or device with the same cookies."""
        other = Player(self.base_url, forwarded_for=self.forwarded_for, timeout=self.timeout)
        for cookie in self.jar:
            other.jar.set_cookie(copy.copy(cookie))
        other.token = self.token
        return other

    # HTTP

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": "roft-live-test"}
        if self.forwarded_for:
            headers["X-Forwarded-For"] = self.forwarded_for
        return headers

    def _send(self, method: str, url: str, data) -> Response:
        body = urlencode(data, doseq=True).encode() if data is not None else None
        request = urllib.request.Request(url, data=body, method=method, headers=self._headers())
        if body is not None:
            request.add_header("Content-Type", "application/x-www-form-urlencoded")
        started = time.monotonic()
        try:
            try:
                with self.opener.open(request, timeout=self.timeout) as reply:
                    return Response(reply.status, url, reply.headers, reply.read().decode())
            except urllib.error.HTTPError as status:
                with status:
                    return Response(status.code, url, status.headers, status.read().decode())
        except (OSError, http.client.HTTPException) as error:
            path = urlsplit(url).path
            raise ConnectionLost(method, path, error, started, time.monotonic()) from error

    def request(self, method: str, path: str, data=None, *, follow: bool = True) -> Response:
        url = urljoin(self.base_url + "/", path)
        history: list[tuple[int, str]] = []
        while True:
            response = self._send(method, url, data)
            if not (follow and response.status in REDIRECTS):
                break
            history.append((response.status, url))
            url = urljoin(url, response.headers["Location"])
            method, data = "GET", None
        response.history = history
        if found := CSRF_RE.search(response.text):
            self.token = found.group(1)
        return response

    def get(self, path: str, **kwargs) -> Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, data: dict | None = None, *, token: bool = True, **kwargs):
        """POST a form; with the CSRF token the last page carried unless `token=False`."""
        form = dict(data or {})
        if token:
            if self.token is None:
                self.get("/")
            form["csrf_token"] = self.token
        return self.request("POST", path, form, **kwargs)

    def send_partial(self, path: str, data: dict) -> socket.socket:
        """Start a form POST and hold back its last byte: a request that stays in flight.

        The returned socket is connected to the worker that accepted it; close it when done.
        """
        form = {**data, "csrf_token": self.token}
        body = urlencode(form, doseq=True).encode()
        url = self.base_url + path
        probe = urllib.request.Request(url, method="POST")
        self.jar.add_cookie_header(probe)
        parts = urlsplit(url)
        lines = [
            f"POST {path} HTTP/1.1",
            f"Host: {parts.netloc}",
            "Content-Type: application/x-www-form-urlencoded",
            f"Content-Length: {len(body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in self._headers().items()),
        ]
        if cookie := probe.get_header("Cookie") or probe.unredirected_hdrs.get("Cookie"):
            lines.append(f"Cookie: {cookie}")
        head = ("\r\n".join(lines) + "\r\n\r\n").encode()
        sock = socket.create_connection((parts.hostname, parts.port), timeout=self.timeout)
        sock.sendall(head + body[:-1])
        return sock

    # The game

    def start(self, category: str = "random", consent: bool = True) -> RoundPage:
        form = {"category": category}
        if consent:
            form["consent"] = "yes"
        response = self.post("/play", form)
        return RoundPage.parse(response)

    def show(self, round_id: int) -> RoundPage:
        return RoundPage.parse(self.get(f"/play/round/{round_id}"))

    def reveal(self, page: RoundPage) -> RoundPage:
        """ "Still human: next sentence" (a stale page gets 409 and the round as it stands)."""
        response = self.post(f"/play/round/{page.round_id}/next", {"seen": page.revealed})
        if response.first_status not in (302, 409):
            raise UnexpectedPage(f"reveal answered {response.status}: {response.text[:300]}")
        return RoundPage.parse(response)

    def answer(
        self,
        page: RoundPage,
        choice: str,
        reasons: list[str] | tuple[str, ...] = ("repetition",),
        explanation: str = "",
        *,
        open_form: bool = True,
    ) -> Response:
        """Say "machine" (about the latest sentence, with reasons) or "human" (the whole text)."""
        if choice == "machine" and open_form:
            self.get(f"/play/round/{page.round_id}?flag=1")
        form = {"seen": page.revealed, "choice": choice, "explanation": explanation}
        if choice == "machine":
            form["reasons"] = list(reasons)
        return self.post(f"/play/round/{page.round_id}/answer", form)

    def resume(self, round_id: int | None) -> RoundPage | None:
        """After a broken request: GET /play/continue, or the round itself once it is answered."""
        landed = self.get("/play/continue")
        if round_id is None:
            return RoundPage.parse(landed) if ROUND_PATH_RE.match(landed.path) else None
        self.resumed.append((round_id, landed.path))
        if landed.path == f"/play/round/{round_id}":
            return RoundPage.parse(landed)
        return self.show(round_id)

    def play_round(
        self,
        reveal_to: int,
        choice: str,
        reasons: list[str] | tuple[str, ...] = ("repetition",),
        explanation: str = "",
        *,
        category: str = "random",
        retry: bool = False,
        max_errors: int = 5,
    ) -> PlayedRound:
        """Start (or resume) a round, reveal up to `reveal_to` sentences, answer, read the result.

        With `retry`, a broken connection is recorded in `errors` and the round resumed from what
        the server has, as a person would after reloading the page.
        """
        round_id: int | None = None
        page: RoundPage | None = None
        while True:
            try:
                if page is None:
                    page = self.resume(round_id) if round_id is not None else None
                if page is None:
                    page = self.start(category)
                round_id = page.round_id
                if page.answered:
                    said = "human" if page.guess == page.n else "machine"
                    return PlayedRound(
                        round_id,
                        self._revealed_at(page),
                        said,
                        page.guess,
                        page.points,
                        list(reasons) if said == "machine" else [],
                        explanation,
                    )
                # The first sentence is always human: a "machine" call needs a second one.
                target = max(min(reveal_to, page.n), 2)
                if page.revealed < target:
                    page = self.reveal(page)
                    continue
                said = choice if page.revealed == page.n else "machine"
                response = self.answer(page, said, reasons, explanation)
                if response.first_status not in (302, 409):
                    raise UnexpectedPage(f"answer got {response.status}: {response.text[:300]}")
                page = RoundPage.parse(response)
            except ConnectionLost as lost:
                if not retry or len(self.errors) >= max_errors:
                    raise
                self.errors.append(lost)
                page = None

    @staticmethod
    def _revealed_at(page: RoundPage) -> int:
        """How far the round was read: the flagged sentence, or all of it for "all human"."""
        return page.n if page.guess == page.n else page.guess + 1
