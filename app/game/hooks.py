"""Points where another package joins the game without the game knowing it.

The game calls a hook at a fixed moment; a package that cares (the crowd studies) connects its
handlers when the app is made (app/__init__.py). The game imports nothing of theirs, so it can
be read, tested and changed on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Hook:
    """A named moment in the game with the handlers connected to it, called in order.

    Kept rather than a blinker signal: blinker passes one sender and keyword arguments, holds
    handlers weakly, calls them in no set order and returns (handler, result) pairs; the game's
    callers (app/game/answers.py, routes.py) pass the moment's values in order and use results.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._handlers: list[Callable[..., Any]] = []

    def connect(self, handler: Callable[..., Any]) -> Callable[..., Any]:
        """Call `handler` at this moment from now on (connecting it again changes nothing)."""
        if handler not in self._handlers:
            self._handlers.append(handler)
        return handler

    def send(self, *args: Any) -> list[Any]:
        """Each handler's result, in the order they were connected."""
        return [handler(*args) for handler in self._handlers]


# (round, passed) inside the transaction that stores an answer, before it commits; `passed` says
# whether the guess is the text's boundary. A handler that raises a ServiceError undoes the
# answer, and the player is shown its message. The round is its state as the answer read it
# (app/game/answers.py: `AnswerView`, with the round's column names: id, kind, participant_id...).
answer_stored = Hook("answer_stored")

# (round, form, flagged) before an answer is stored: a handler may refuse the form (BadRequest)
# or return a function to call once the answer is stored (None: nothing to do). A study's round
# (participant_id set) comes as its `Round`; any other as its `AnswerView`.
answer_form = Hook("answer_form")

# (round) when a study's round (participant_id set) is drawn, as its `Round`: each handler
# returns a dict to add to the page's context (a "template" key replaces the page's template).
round_page = Hook("round_page")

# (player) before a sentence is revealed to them: a handler may refuse the reveal by returning
# the page to show instead, as its context with a "template" key (sent with status 409); None
# lets the reveal go on.
reveal_asked = Hook("reveal_asked")
