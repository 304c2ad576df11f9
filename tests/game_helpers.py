"""Playing through the game service (other players' answers on a text) and over HTTP."""

from __future__ import annotations

import re
from collections.abc import Callable

from werkzeug.datastructures import MultiDict

from app.extensions import db
from app.game import answers, insights, reveals
from app.models import Example, Player, Round
from bench.protocol import Reply, Request
from tests import factories


def answer(
    player: Player,
    example: Example,
    flag_at: int | None,
    explanation: str = "",
    reasons: tuple[str, ...] = ("generic",),
) -> Round:
    """`player` reads `example` and flags sentence index `flag_at` (None: says all human)."""
    round_ = factories.round_of(player, example, example.category.slug)
    return finish(player, round_, flag_at, explanation, reasons)


def finish(
    player: Player,
    round_: Round,
    flag_at: int | None,
    explanation: str = "",
    reasons: tuple[str, ...] = ("generic",),
) -> Round:
    """Read an open round on to sentence index `flag_at` and flag it (None or N: all human)."""
    if flag_at is not None and flag_at >= round_.example.n_sentences:
        flag_at = None
    target = round_.example.n_sentences if flag_at is None else flag_at + 1
    while round_.revealed < target:
        reveals.reveal_next(player, round_.id, round_.revealed)
    if flag_at is None:
        parsed = answers.parse_answer("human", round_.revealed, [], "")
    else:
        parsed = answers.parse_answer("machine", round_.revealed, list(reasons), explanation)
    answers.submit_answer(player, round_.id, parsed)
    return db.session.get(Round, round_.id)


def teaching(round_: Round) -> tuple[insights.Spread | None, list[insights.Explanation]]:
    """What the reveal of an answered round shows of other players (`insights.teaching`)."""
    example = round_.example
    return insights.teaching(
        example.id, round_.player_id, example.n_sentences, example.boundary, round_.guess
    )


def others_answer(example: Example, flags: list[int | None], explanation: str = "") -> list[Round]:
    """A new player per entry of `flags` answers the example (their explanation numbered)."""
    done = []
    for number, flag_at in enumerate(flags, start=1):
        player = factories.player()
        text = f"{explanation} ({number})" if explanation and flag_at is not None else ""
        done.append(answer(player, example, flag_at, text))
    db.session.expire_all()
    return done


FETCH = {"X-Requested-With": "fetch"}  # the page's script asks for the round's HTML alone
ROUND_RE = re.compile(r"/play/round/(\d+)")


def round_id_of(response) -> int:
    """The id of the round a start leads to (its redirect, or the script's X-Round-URL)."""
    where = response.headers.get("X-Round-URL") or response.headers.get("Location", "")
    found = ROUND_RE.search(where)
    assert found, (response.status_code, where)
    return int(found.group(1))


TOKEN_RE = re.compile(r'name="csrf_token" value="[^"]+"')


def same_but_token(page: str) -> str:
    """The page with its forms' CSRF tokens blanked: a GET signs a new token for its forms, a post
    reuses the one it checked; both are valid."""
    return TOKEN_RE.sub('name="csrf_token" value="-"', page)


def as_its_page_draws_it(client, round_id: int, query: str = "") -> str:
    """The round's HTML as the page's script asks for it (`same_but_token`)."""
    page = client.get(f"/play/round/{round_id}{query}", headers=FETCH)
    assert page.status_code == 200
    return same_but_token(page.get_data(as_text=True))


def start_http(
    client, token: str, category: str = "news", path: str = "/play", fetch=False, **more
):
    """Post "Play" (or another start: `path`) for `category`, as a browser does."""
    data = {"csrf_token": token, "category": category, **more}
    return client.post(path, data=data, headers=FETCH if fetch else None)


def reveal_http(client, token: str, round_id: int, seen, fetch: bool = False):
    """Post "Next sentence" on a round whose page showed `seen` sentences."""
    data = {"csrf_token": token, "seen": str(seen)}
    return client.post(f"/play/round/{round_id}/next", data=data, headers=FETCH if fetch else None)


def answer_http(client, token: str, round_id: int, seen, choice="machine", fetch=False, **more):
    """Post an answer after `seen` sentences; `more`: reasons, explanation, other fields."""
    data = {"csrf_token": token, "seen": str(seen), "choice": choice, **more}
    url = f"/play/round/{round_id}/answer"
    return client.post(url, data=data, headers=FETCH if fetch else None)


def flag_http(client, token: str, round_id: int, flag_at: int, **more):
    """Read an open round on to sentence index `flag_at` and flag it (`more`: the answer's
    fields; reasons "hunch" unless given); the answer's response."""
    for seen in range(1, flag_at + 1):
        reveal_http(client, token, round_id, seen)
    return answer_http(client, token, round_id, flag_at + 1, **{"reasons": "hunch", **more})


def play_over_http(
    client,
    token: str,
    flag_at: int = 2,
    start: str = "/play",
    explanation: str = "",
    reasons: str = "hunch",
) -> int:
    """Start a text by posting to `start` (category news), read on to sentence index `flag_at`
    and flag it, as a browser without JavaScript does; returns the round's id."""
    started = start_http(client, token, path=start)
    assert started.status_code == 302, started.get_data(as_text=True)[-600:]
    round_id = round_id_of(started)
    answered = flag_http(client, token, round_id, flag_at, reasons=reasons, explanation=explanation)
    assert answered.status_code == 302, answered.get_data(as_text=True)[-600:]
    return round_id


def play_through_set(client, token: str, started, play_round, **more) -> tuple[list[int], str]:
    """From `started` (the redirect of a set's start), play each text with
    `play_round(round_id)` and go on by "Next text" (posting `more` too) to the set's end: the
    rounds played and the last round's page."""
    played, page = [], ""
    while (found := ROUND_RE.search(started.headers.get("Location", ""))) is not None:
        played.append(int(found.group(1)))
        play_round(played[-1])
        page = client.get(f"/play/round/{played[-1]}").get_data(as_text=True)
        onward = re.search(r'action="(/sets/\d+/next)"', page)
        if onward is None:
            break
        started = client.post(onward.group(1), data={"csrf_token": token, **more})
    return played, page


def play_protocol(client, player, each: Callable | None = None) -> None:
    """Send every request a `bench.protocol.play_sets` player makes to `client`, check its status
    and hand the reply back. `each(request, send)`, when given, sends it by calling `send()` and
    returns the response (to count or read around it)."""
    request: Request = next(player)
    while True:

        def send(request: Request = request):
            kwargs: dict = {"headers": request.headers}
            if request.method == "POST":
                kwargs.update(data=MultiDict(request.fields), content_type=request.content_type)
            return client.open(request.path, method=request.method, **kwargs)

        response = each(request, send) if each else send()
        assert response.status_code == request.expect, (request, response.status_code)
        body, headers = response.get_data(as_text=True), response.headers
        reply = Reply(
            response.status_code, headers.get("Location"), body, headers.get("X-Round-URL")
        )
        try:
            request = player.send(reply)
        except StopIteration:
            return
