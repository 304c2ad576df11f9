"""The game's tables as their columns, for the statements the round core builds once
(app/game/rounds.py, starts.py, reveals.py, answers.py): `ROUNDS.id`, `SETS.points`... Writes
through them go to the tables (no ORM bookkeeping); the services put the new values onto the
loaded objects themselves."""

from __future__ import annotations

from app.models import Category, Example, GameSet, Round

ROUNDS = Round.__table__.c
EXAMPLES = Example.__table__.c
SETS = GameSet.__table__.c
CATEGORIES = Category.__table__.c
