"""Many players at once through gunicorn (3 workers): every answer is stored once and adds up."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

from tests.live.invariants import check_database, check_seen_rounds, count_players
from tests.live.player import PlayedRound, Player

PLAYERS = 12
ROUNDS_EACH = 3
REASONS = ["grammar", "repetition", "irrelevant", "generic", "common_sense"]


def plan(rng: random.Random) -> dict:
    """A round as one player might play it: read k sentences, then decide."""
    reveal_to = rng.randint(1, 10)
    choice = "human" if reveal_to == 10 and rng.random() < 0.5 else "machine"
    return {
        "reveal_to": reveal_to,
        "choice": choice,
        "reasons": rng.sample(REASONS, rng.randint(1, 2)),
        "explanation": rng.choice(["", "Feels off.", "  The tone changes.  "]),
    }


def test_concurrent_players_store_every_round_once_and_totals_add_up(app, gunicorn):
    start_together = threading.Barrier(PLAYERS)

    def play(index: int) -> list[PlayedRound]:
        rng = random.Random(index)
        player = Player(gunicorn.url)
        player.get("/")
        start_together.wait(timeout=30)
        return [player.play_round(**plan(rng)) for _ in range(ROUNDS_EACH)]

    with ThreadPoolExecutor(PLAYERS) as pool:
        per_player = list(pool.map(play, range(PLAYERS)))

    played = [r for rounds in per_player for r in rounds]
    assert len(played) == PLAYERS * ROUNDS_EACH
    stored = check_database(app)
    check_seen_rounds(stored, played)
    # Each client is its own guest, and all of one client's rounds belong to that guest.
    owners = [{stored[r.round_id].player_id for r in rounds} for rounds in per_player]
    assert all(len(owner) == 1 for owner in owners)
    assert len(set.union(*owners)) == PLAYERS == count_players(app)
    # No open round is left behind: every round started was finished.
    assert all(r.guess is not None for r in stored.values())


def test_same_round_answered_from_two_tabs_at_once_stores_one_answer(app, serve):
    # Two workers: the two answers are handled at the same time by different processes.
    server = serve(workers=2)
    player = Player(server.url)
    for attempt in range(6):
        page = player.start()
        while page.revealed < 3:
            page = player.reveal(page)
        tabs = {"grammar": player.clone(), "generic": player.clone()}
        together = threading.Barrier(len(tabs))

        def answer(reason: str, page=page, together=together, tabs=tabs):
            tab = tabs[reason]
            together.wait(timeout=30)
            return reason, tab.answer(page, "machine", [reason], open_form=False)

        with ThreadPoolExecutor(len(tabs)) as pool:
            outcomes = dict(pool.map(answer, tabs))

        statuses = sorted(response.first_status for response in outcomes.values())
        assert statuses == [302, 409], (attempt, statuses)
        winner = next(reason for reason, got in outcomes.items() if got.first_status == 302)
        loser = next(got for got in outcomes.values() if got.first_status == 409)
        assert "You already answered this round" in loser.text
        stored = check_database(app)[page.round_id]
        assert stored.guess == 2 and stored.reasons == [winner]
        # Both tabs now show the same stored result.
        shown = {tab.show(page.round_id).points for tab in tabs.values()}
        assert shown == {stored.points}
    assert sum(r.guess is not None for r in check_database(app).values()) == 6
