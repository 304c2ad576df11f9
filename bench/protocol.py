"""The requests a browser sends while a player plays sets of texts, with or without the script.

`bench/web_load.py` plays with these, and `tests/e2e/test_bench_protocol.py` checks them against
the requests Chromium sends when it plays the same choices through `app/static/game.js`. Nothing
here touches the network: `play_sets` is a generator that yields each `Request` and is sent back
the `Reply`, so an asynchronous load client, the Flask test client or urllib can carry them.

What the browser does, read from the pages themselves (their forms and links):

- A form marked `data-enhance`, with the script, is posted by `fetch` with
  `new URLSearchParams(new FormData(form))`: an url-encoded body of the form's fields (the
  clicked button is not among them) and the header `X-Requested-With: fetch`; the answer is the
  round, swapped into the page without loading it.
- Any other form, or any form without the script, is submitted by the browser itself: an
  url-encoded body with the clicked button's name and value, a redirect (303/302) and a GET of the
  page it names.
- A link is a GET. With the script, "A machine wrote this one" opens the reasons without a request.

A set: the home page once, "Play a set of texts" (`POST /play`, then the round's page), every
round's reveals and answer, "Next text" (`POST /sets/<set>/next`) after each answer but the last,
the set's summary (`GET /sets/<set>`) after the last, and from there "Play another set".
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from urllib.parse import urlsplit

FETCH_HEADERS = {"X-Requested-With": "fetch"}
MULTIPART, URLENCODED = "multipart/form-data", "application/x-www-form-urlencoded"
ROUND_PATH = re.compile(r"^/play/round/(\d+)$")
SET_SUMMARY_PATH = re.compile(r"^/sets/(\d+)$")
REDIRECTS = (301, 302, 303, 307, 308)
CSRF_FIELD = re.compile(r'name="csrf_token" value="([^"]+)"')


@dataclass(frozen=True)
class Request:
    """One request as the browser sends it."""

    method: str
    path: str  # the path and query, without the fragment
    fields: tuple[tuple[str, str], ...] = ()  # the body's fields in order
    content_type: str | None = None  # MULTIPART, URLENCODED or None (no body)
    fetch: bool = False  # sent by the page's script (X-Requested-With: fetch)
    expect: int = 200  # the status a working site answers
    # What the request does in the game: "start" (a round begins with it), "answer" (a round
    # ends with it: its page, or the page it redirects to, shows the result), "redirect" (the
    # browser following a redirect, no action of the player's), or "" (anything else).
    step: str = ""

    @property
    def headers(self) -> dict[str, str]:
        return dict(FETCH_HEADERS) if self.fetch else {}

    def shape(self) -> tuple:
        """What a comparison with a browser's request looks at: method, the path with its
        numbers as <n>, the body's field names in order, the encoding and the script header."""
        return (
            self.method,
            re.sub(r"\d+", "<n>", self.path),
            tuple(name for name, _ in self.fields),
            self.content_type,
            self.fetch,
        )


@dataclass(frozen=True)
class Reply:
    """What came back: the status, where a redirect leads, the body, and the X-Round-URL header
    (the address of a round the script was given, for its history)."""

    status: int
    location: str | None
    text: str
    round_url: str | None = None


@dataclass(frozen=True)
class Choice:
    """A player's decision on the sentence they are reading."""

    action: str  # "reveal", "machine" or "human"
    reasons: tuple[str, ...] = ()
    explanation: str = ""


@dataclass(frozen=True)
class RoundView:
    """The round as its page shows it, for a player to decide on."""

    round_id: int
    revealed: int
    can_reveal: bool  # more sentences to come
    can_flag: bool  # a machine answer is offered (from sentence 2)


Decide = Callable[[RoundView], Choice]


@dataclass
class Control:
    tag: str  # input, button, textarea
    type: str
    name: str
    value: str
    checked: bool = False


@dataclass
class Form:
    action: str
    method: str
    enhance: str | None  # the data-enhance attribute: None when absent
    controls: list[Control] = field(default_factory=list)

    def fields(
        self, submitter: Control | None, checked: tuple[str, ...] = (), text: str | None = None
    ) -> tuple[tuple[str, str], ...]:
        """The form's data set in tree order: hidden and text inputs, the checkboxes whose
        values are in `checked`, textareas (`text` when given), and the submitter's button."""
        data = []
        for control in self.controls:
            if not control.name:
                continue
            if control.tag == "button" or control.type in ("submit", "button", "reset"):
                if control is submitter:
                    data.append((control.name, control.value))
            elif control.type in ("checkbox", "radio"):
                if control.value in checked:
                    data.append((control.name, control.value))
            elif control.tag == "textarea" and text is not None:
                data.append((control.name, text))
            else:
                data.append((control.name, control.value))
        return tuple(data)

    def button(self, name: str | None = None, value: str | None = None) -> Control | None:
        for control in self.controls:
            if (control.tag == "button" or control.type == "submit") and (
                (name is None or control.name == name) and (value is None or control.value == value)
            ):
                return control
        return None


# The tags a player acts on, found with one regular expression instead of a full HTML parser:
# the load client shares the machine's cores with the servers it measures, and html.parser cost
# it more CPU per round than some of the requests it timed. Comments, scripts and styles are
# skipped whole, as a browser skips them; an attribute's value may be quoted either way or not
# at all, and its character references are decoded (tests/test_bench_protocol_parse.py checks
# the result against html.parser's on the site's pages).
_TAGS = re.compile(
    r"<!--.*?-->"
    r"|<(script|style)\b[^>]*>.*?</\1\s*>"
    r"|<(/?)(form|a|input|button|textarea)(?=[\s/>])((?:[^>\"']|\"[^\"]*\"|'[^']*')*)>",
    re.DOTALL | re.IGNORECASE,
)
_ATTRIBUTE = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")


def _attributes(text: str) -> dict[str, str]:
    """A start tag's attributes, the first of a repeated name winning (as in a browser)."""
    found: dict[str, str] = {}
    for match in _ATTRIBUTE.finditer(text):
        name = match.group(1).lower()
        if name not in found:
            value = next((v for v in match.group(2, 3, 4) if v is not None), "")
            found[name] = html.unescape(value)
    return found


def _scan(page: str) -> tuple[list[Form], list[str]]:
    """The page's forms with their controls, and its links' addresses, in document order."""
    forms: list[Form] = []
    links: list[str] = []
    form: Form | None = None
    textarea: tuple[Control, int] | None = None
    for match in _TAGS.finditer(page):
        closing, tag = match.group(2, 3)
        if tag is None:
            continue  # a comment, a script or a style
        tag = tag.lower()
        if closing:
            if tag == "form":
                form = None
            elif tag == "textarea" and textarea is not None:
                control, begun = textarea
                control.value = html.unescape(page[begun : match.start()])
                textarea = None
            continue
        found = _attributes(match.group(4))
        if tag == "form":
            form = Form(
                found.get("action", ""),
                found.get("method", "get").upper(),
                found.get("data-enhance"),
            )
            forms.append(form)
        elif tag == "a" and "href" in found:
            links.append(found["href"])
        elif tag in ("input", "button", "textarea") and form is not None:
            default_type = {"button": "submit", "textarea": "textarea"}.get(tag, "text")
            control = Control(
                tag,
                found.get("type", default_type).lower(),
                found.get("name", ""),
                found.get("value", ""),
                "checked" in found,
            )
            form.controls.append(control)
            if tag == "textarea":
                textarea = (control, match.end())
    return forms, links


@dataclass
class Page:
    """The forms and links of an HTML page or of the round the script swapped in."""

    forms: list[Form]
    links: list[str]

    @classmethod
    def parse(cls, html: str) -> Page:
        return cls(*_scan(html))

    def form(self, action: re.Pattern | str) -> Form | None:
        pattern = re.compile(action) if isinstance(action, str) else action
        return next((form for form in self.forms if pattern.fullmatch(form.action)), None)

    def link(self, pattern: str) -> str | None:
        return next((href for href in self.links if re.fullmatch(pattern, href)), None)


class ProtocolError(Exception):
    """The site answered with a page the player cannot continue from."""


def path_of(url: str) -> str:
    """The path and query of a URL or a Location header, without the fragment."""
    parts = urlsplit(url)
    return parts.path + (f"?{parts.query}" if parts.query else "")


def typing_fields(text: str) -> tuple[tuple[str, str], ...]:
    """What typing.js adds to the reason form on submit once the explanation box was used
    (app/game/typing_signals.py): nothing pasted, `text` typed at five characters a second."""
    if not text:
        return ()
    return (
        ("typing_pasted", "0"),
        ("typing_chars", str(len(text))),
        ("typing_ms", str(200 * len(text))),
    )


def submit(
    form: Form,
    *,
    script: bool,
    submitter: Control | None = None,
    checked: tuple[str, ...] = (),
    text: str | None = None,
    step: str = "",
) -> Request:
    """The request a browser sends for `form`, by the page's script or by itself."""
    if script and form.enhance == "":
        # game.js: fetch(form.action, {method: "POST",
        #                              body: new URLSearchParams(new FormData(form)), ...})
        fields = form.fields(None, checked, text)
        if any(control.name == "explanation" for control in form.controls):
            fields += typing_fields(text or "")
        return Request("POST", path_of(form.action), fields, URLENCODED, True, 200, step)
    fields = form.fields(submitter, checked, text)
    if form.method == "GET":
        raise ProtocolError(f"a GET form is not part of a round: {form.action}")
    return Request("POST", path_of(form.action), fields, URLENCODED, False, 302, step)


def _round_view(page: Page, round_id: int) -> RoundView:
    reveal = page.form(rf"/play/round/{round_id}/next")
    answer = page.form(rf"/play/round/{round_id}/answer")
    if answer is None and reveal is None:
        raise ProtocolError(f"round {round_id}: neither a reveal nor an answer form")
    seen = next(
        (c.value for form in (reveal, answer) if form for c in form.controls if c.name == "seen"),
        "0",
    )
    flaggable = any(
        form.action == f"/play/round/{round_id}/answer"
        and any(c.name == "choice" and c.value == "machine" for c in form.controls)
        for form in page.forms
    )
    return RoundView(round_id, int(seen), reveal is not None, flaggable)


def _expect(reply: Reply, request: Request) -> None:
    if reply.status != request.expect:
        raise ProtocolError(
            f"{request.method} {request.path} answered {reply.status}, not {request.expect}"
        )


def play_sets(
    decide: Decide, *, script: bool, sets: int | None = None, start: str = "random"
) -> Generator[Request, Reply, None]:
    """Yield the requests of a player who opens the home page and plays `sets` sets (forever
    when None), choosing with `decide`; send each request's reply back in."""

    def navigate(request: Request) -> Generator[Request, Reply, tuple[str, Reply]]:
        """A request the browser sends itself, and the GET of the page a redirect names."""
        reply = yield request
        _expect(reply, request)
        if reply.status not in REDIRECTS:
            return request.path, reply
        path = path_of(reply.location or "")
        page = Request("GET", path, step="redirect")
        reply = yield page
        _expect(reply, page)
        return path, reply

    home = Request("GET", "/")
    reply = yield home
    _expect(reply, home)
    form = Page.parse(reply.text).form("/play")
    if form is None:
        raise ProtocolError("the home page has no form to start playing")
    played = 0
    while sets is None or played < sets:
        button = form.button("category", start) or form.button("category")
        if button is None:
            raise ProtocolError("no button starts a set (a first visit goes to the tutorial)")
        path, reply = yield from navigate(
            submit(form, script=script, submitter=button, step="start")
        )
        while True:  # the rounds of one set
            found = ROUND_PATH.match(path)
            if not found:
                raise ProtocolError(f"expected a round, got {path}")
            round_id = int(found.group(1))
            page = Page.parse(reply.text)
            while True:  # the sentences of one round
                view = _round_view(page, round_id)
                choice = decide(view)
                if choice.action == "reveal":
                    reveal = submit(page.form(rf"/play/round/{round_id}/next"), script=script)
                    path, reply = yield from navigate(reveal)
                    page = Page.parse(reply.text)
                    continue
                if choice.action == "machine":
                    if not view.can_flag:
                        raise ProtocolError(f"round {round_id}: no machine answer yet")
                    if not script:
                        # Without the script the reasons are a page of their own (?flag=1).
                        flag_link = page.link(rf"/play/round/{round_id}\?flag=1(#why)?")
                        path, reply = yield from navigate(Request("GET", path_of(flag_link)))
                        page = Page.parse(reply.text)
                    why = next(
                        f
                        for f in page.forms
                        if f.action == f"/play/round/{round_id}/answer"
                        and f.button() is not None
                        and any(c.value == "machine" for c in f.controls)
                    )
                    answer = submit(
                        why,
                        script=script,
                        submitter=why.button(),
                        checked=choice.reasons,
                        text=choice.explanation,
                        step="answer",
                    )
                else:
                    human = next(
                        f
                        for f in page.forms
                        if f.action == f"/play/round/{round_id}/answer"
                        and any(c.name == "choice" and c.value == "human" for c in f.controls)
                    )
                    answer = submit(human, script=script, submitter=human.button(), step="answer")
                path, reply = yield from navigate(answer)
                break
            page = Page.parse(reply.text)
            following = page.form(r"/sets/\d+/next")
            if following is not None:
                request = submit(
                    following, script=script, submitter=following.button(), step="start"
                )
                if script:
                    reply = yield request
                    _expect(reply, request)
                    path = path_of(reply.round_url or "")
                else:
                    path, reply = yield from navigate(request)
                continue
            summary = page.link(r"/sets/\d+")
            if summary is None:
                raise ProtocolError(f"round {round_id}: neither a next text nor a summary")
            path, reply = yield from navigate(Request("GET", summary))
            played += 1
            form = Page.parse(reply.text).form("/play")
            if form is None:
                raise ProtocolError("the set summary has no form to play another set")
            break


def log_in_test_client(client, username: str, password: str) -> None:
    """Sign a bench player in through a Flask test client, as the log-in form does (the in-process
    benchmark, bench/round_cpu.py); exit when the site refuses."""
    page = client.get("/login").get_data(as_text=True)
    reply = client.post(
        "/login",
        data={
            "csrf_token": CSRF_FIELD.search(page).group(1),
            "username": username,
            "password": password,
        },
    )
    if reply.status_code != 302:
        raise SystemExit(f"log-in of {username} answered {reply.status_code}")
