"""The next text of a set, whatever its kind: a normal set's next round, or the next text of a
daily challenge, a practice of a past one, or a friend's challenge. Above the services of each
kind (app/game/sets.py, daily.py, practice.py, challenge.py), which build on the sets service, so
that none of them imports another back.
"""

from __future__ import annotations

from sqlalchemy import bindparam, select

from app.extensions import db
from app.game import challenge, daily, practice, reveals, sets, starts
from app.models import Player, Round
from app.models.sets import CHALLENGE_SET, DAILY_SET, NORMAL_SET, PRACTICE_SET

# `sets.OPEN_ROUND_ID` and the category the player last chose in the set (None: no round yet).
_OPEN_ROUND_AND_LAST_CHOICE = select(
    sets.OPEN_ROUND_ID,
    select(Round.chosen_category)
    .where(Round.set_id == bindparam("set_id"))
    .order_by(Round.id.desc())
    .limit(1)
    .scalar_subquery(),
)


def next_round(player: Player, set_id: int) -> reveals.RevealView:
    """The round to show when the player asks for the next text of a set.

    The round, open or new, comes as the `reveals.RevealView` its page is drawn from.
    Raises `sets.SetFinished` for a finished set (the caller shows its summary).
    """
    game_set = sets.get_own(player, set_id)
    if game_set.kind == NORMAL_SET and not game_set.finished:
        # The usual "Next text": whether a round is open and the set's last choice, one statement.
        open_id, chosen = db.session.execute(
            _OPEN_ROUND_AND_LAST_CHOICE, {"player_id": player.id, "set_id": game_set.id}
        ).one()
        if open_id is not None and (current := reveals.open_round(player)) is not None:
            return current
        return starts.start_round(
            player, chosen or starts.RANDOM, game_set, level=game_set.level, looked_up=True
        )
    current = reveals.open_round(player)
    if current is not None:
        return current
    if game_set.finished:
        raise sets.SetFinished(game_set)
    if game_set.kind == DAILY_SET:
        if game_set.day != daily.today():
            # A day's challenge is played on its day: finished later (perhaps with its answers
            # learned meanwhile) it would count. Its results page says where things stand.
            raise sets.DayOver(game_set)
        return daily.next_round(player, game_set)
    if game_set.kind == PRACTICE_SET:
        return practice.next_round(player, game_set)
    if game_set.kind == CHALLENGE_SET:
        return challenge.next_round(player, game_set)
    return starts.start_round(
        player,
        sets.last_category(game_set),
        game_set=game_set,
        level=game_set.level,
        looked_up=True,
    )
