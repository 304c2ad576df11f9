"""Two app servers (separate gunicorn masters on different ports) behind a round-robin balancer,
sharing one database and one Redis, as in docker-compose.scale.yml and docs/scaling.md.

Every new connection goes to the other server, and the test player opens one per request, so
each round is played across both: no round may be lost or stored twice, a player's session and
CSRF token hold on either, the rate limits count on both together, and both show the same board.
"""

from __future__ import annotations

import itertools
import random
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.live.invariants import check_database, check_seen_rounds, count_players
from tests.live.player import PlayedRound, Player
from tests.live.test_abuse import BAD_LOGIN, TOO_MANY
from tests.live.test_faults import Forwarder
from tests.live.test_load_consistency import plan

PLAYERS = 6
ROUNDS_EACH = 3


class RoundRobin(Forwarder):
    """A TCP balancer: each new connection goes to the next of `targets` in turn."""

    def __init__(self, targets: list[tuple[str, int]]):
        self._turns = itertools.cycle(targets)
        self._turn_lock = threading.Lock()
        super().__init__(targets[0])

    def _upstream(self) -> tuple[str, int]:
        with self._turn_lock:
            return next(self._turns)


def address(server) -> tuple[str, int]:
    return ("127.0.0.1", server.port)


@pytest.fixture
def two_servers(serve, redis_url):
    env = {"REDIS_URL": redis_url, "LOGIN_RATE_LIMIT": "5 per minute"}
    first, second = serve(workers=2, env=env), serve(workers=2, env=env)
    balancer = RoundRobin([address(first), address(second)])
    try:
        yield first, second, f"http://127.0.0.1:{balancer.port}"
    finally:
        balancer.close()


def board_rows(player: Player) -> list[str]:
    page = player.get("/leaderboard")
    assert page.status == 200
    return re.findall(r"<tr>.*?</tr>", page.text, re.S)


def test_rounds_played_across_two_servers_are_stored_once_and_boards_agree(app, two_servers):
    first, second, url = two_servers
    start_together = threading.Barrier(PLAYERS)

    def play(index: int) -> tuple[Player, list[PlayedRound]]:
        rng = random.Random(index)
        player = Player(url)
        player.get("/")
        start_together.wait(timeout=30)
        return player, [player.play_round(**plan(rng)) for _ in range(ROUNDS_EACH)]

    with ThreadPoolExecutor(PLAYERS) as pool:
        played_by = list(pool.map(play, range(PLAYERS)))

    played = [r for _, rounds in played_by for r in rounds]
    stored = check_database(app)
    check_seen_rounds(stored, played)
    assert all(r.guess is not None for r in stored.values())
    # One guest per browser, whichever server made it or served its rounds: the session cookie
    # and its CSRF token are good on both.
    owners = [{stored[r.round_id].player_id for r in rounds} for _, rounds in played_by]
    assert all(len(owner) == 1 for owner in owners)
    assert len(set.union(*owners)) == PLAYERS == count_players(app)
    # Both servers served reveals and answers.
    for server in (first, second):
        actions = [s for s in server.served() if s.method == "POST" and "/play/round/" in s.target]
        assert any(s.target.endswith("/answer") for s in actions), server.url
        assert any(s.target.endswith("/next") for s in actions), server.url
        assert all(s.status < 500 for s in server.served()), server.log_tail()

    # Both servers show the same board (the test's rounds are too fast to be listed, so this
    # only shows that neither server has a board of its own).
    rows = [board_rows(Player(server.url)) for server in (first, second)]
    assert rows[0] == rows[1]


def test_rate_limits_count_on_both_servers_together(two_servers):
    first, second, _ = two_servers
    bot = Player(first.url)
    bot.get("/login")
    statuses = []
    for attempt, server in zip(range(9), itertools.cycle((first, second)), strict=False):
        bot.base_url = server.url  # the same browser, sent to either server in turn
        statuses.append(bot.post(f"/login?attempt={attempt}", BAD_LOGIN).status)
    # Five wrong passwords in a minute, counted across both servers; then both refuse.
    assert statuses == [401] * 5 + [429] * 4
    for server in (first, second):
        bot.base_url = server.url
        refused = bot.post("/login", BAD_LOGIN)
        assert refused.status == 429 and TOO_MANY in refused.text
