"""The load client's page reader (bench/protocol.py) finds what html.parser finds.

The client reads forms and links with one regular expression, to spend less of the shared
machine's CPU than a full parser; here it must agree, form by form, control by control and link
by link, with a reader built on the standard library's html.parser, on every page and fragment
the site serves while sets are played with and without the script, and on markup the site does
not write today (comments, scripts, entities, either quote, no quotes, capitals).
"""

from __future__ import annotations

import itertools
from html.parser import HTMLParser

import pytest

from bench.protocol import Choice, Control, Form, Page, play_sets
from tests import factories
from tests.conftest import csrf_token
from tests.game_helpers import others_answer, play_protocol


class _Reference(HTMLParser):
    """What a player acts on, read by html.parser: forms with their controls, and links."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[Form] = []
        self.links: list[str] = []
        self._form: Form | None = None
        self._textarea: Control | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found: dict[str, str] = {}
        for key, value in attrs:
            found.setdefault(key, value or "")
        if tag == "form":
            self._form = Form(
                found.get("action", ""),
                found.get("method", "get").upper(),
                found.get("data-enhance"),
            )
            self.forms.append(self._form)
        elif tag == "a" and "href" in found:
            self.links.append(found["href"])
        elif tag in ("input", "button", "textarea") and self._form is not None:
            kind = found.get("type", {"button": "submit", "textarea": "textarea"}.get(tag, "text"))
            control = Control(
                tag, kind.lower(), found.get("name", ""), found.get("value", ""), "checked" in found
            )
            self._form.controls.append(control)
            if tag == "textarea":
                self._textarea = control

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._textarea.value += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._form = None
        elif tag == "textarea":
            self._textarea = None


def reference(html: str) -> Page:
    reader = _Reference()
    reader.feed(html)
    reader.close()
    return Page(reader.forms, reader.links)


def _decisions():
    """Read on twice, flag with a reason and words; read a text to its end and call it human."""
    plan = itertools.cycle(
        [
            Choice("reveal"),
            Choice("reveal"),
            Choice("machine", ("grammar", "generic"), "It drifts & repeats <itself>."),
        ]
    )
    return lambda view: next(plan) if view.can_reveal or not view.can_flag else Choice("human")


@pytest.mark.parametrize("script", [True, False], ids=["script", "no-script"])
def test_every_page_of_a_played_set_reads_as_html_parser_reads_it(app, script):
    app.config["SET_SIZE"] = 3
    with app.app_context():
        for number, boundary in enumerate((2, 3, 4, 5, 2, 3, 4, 5)):
            example = factories.example(boundary=boundary, passage=f"p{number}")
            others_answer(example, [2, None], "Too smooth, & odd")
        factories.player("reader", "reader-password")
    client = app.test_client()
    token = csrf_token(client)
    login = {"csrf_token": token, "username": "reader", "password": "reader-password"}
    assert client.post("/login", data=login).status_code == 302
    pages = 0

    def check(request, send):
        nonlocal pages
        response = send()
        body = response.get_data(as_text=True)
        assert Page.parse(body) == reference(body), (request, body[:400])
        pages += 1
        return response

    play_protocol(client, play_sets(_decisions(), script=script, sets=2), check)
    assert pages > 10


MARKUP = [
    # Comments, scripts and styles hide what they contain.
    '<!-- <form action="/x"><input name="a"></form> --><a href="/seen">x</a>',
    '<script>if (a<b) { x = "<a href=\'/no\'>"; }</script><a href="/yes">y</a>',
    '<style>a[href="/no"] { color: red }</style><A HREF="/caps">z</A>',
    # Attributes: either quote, none, entities, a repeated name, a bare flag, capitals.
    '<form action="/play?x=1&amp;y=2" method=post data-enhance>'
    "<input type=hidden name='csrf_token' value='a&quot;b'>"
    '<INPUT TYPE="Checkbox" name="reasons" value="grammar" checked>'
    '<input name="seen" value="3" value="4">'
    '<button name="choice" value="machine" type=submit>Go</button>'
    "<textarea name=explanation>It&#39;s &lt;odd&gt;\nand long</textarea>"
    "<button>plain</button></form>",
    # A control outside any form is no form's; a form closed early loses what follows.
    '<input name="stray"><form action="/a"></form><input name="after">',
    # A `>` inside a quoted value does not end the tag.
    '<form action="/b" data-note="1 > 0"><input name="n" value="x>y"></form>',
    # An anchor without href, and names that merely begin like a wanted tag.
    '<a name="top">t</a><abbr title="x">x</abbr><input-like name="no"><address>a</address>',
]


@pytest.mark.parametrize("markup", MARKUP)
def test_odd_markup_reads_as_html_parser_reads_it(markup):
    assert Page.parse(markup) == reference(markup)
