"""Rate limits under gunicorn with 3 workers: they hold across workers with Redis, and bound guests.

`server.only_worker(pid)` keeps the other workers busy so that the next request is served by
worker `pid`; the access log (`server.served()`) confirms which worker answered each request.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import cycle

from tests.gunicorn_server import SYNC_WORKERS, wait_until
from tests.live.invariants import count_players
from tests.live.player import Player

BAD_LOGIN = {"username": "nobody-here", "password": "not-the-password"}
TOO_MANY = "Too many attempts"


def one_per_worker_in_turn(server, count: int, send) -> list[int]:
    """Call `send(attempt)` `count` times, each served by the next worker in turn; the statuses."""
    statuses = []
    for attempt, pid in zip(range(count), cycle(server.worker_pids()), strict=False):
        with server.only_worker(pid):
            statuses.append(send(attempt))
    return statuses


def refusing_workers(server, prefix: str, sent: int) -> set[int]:
    """The workers that answered 429 to the `sent` POSTs whose target starts with `prefix`."""

    def logged():
        lines = [
            line
            for line in server.served()
            if line.method == "POST" and line.target.startswith(prefix)
        ]
        # A worker logs a request just after answering it: wait for the last lines.
        return lines if len(lines) >= sent else None

    lines = wait_until(logged, 10, f"fewer than {sent} {prefix} requests in the access log")
    return {line.pid for line in lines if line.status == 429}


def test_login_and_guest_limits_hold_across_workers_with_redis(app, serve, redis_url):
    server = serve(
        workers=3,
        env={
            **SYNC_WORKERS,
            "REDIS_URL": redis_url,
            "LOGIN_RATE_LIMIT": "5 per minute",
            "GUEST_RATE_LIMIT": "5 per minute",
        },
    )
    account = Player(server.url)
    form = {"username": "ada", "password": "correct-horse", "consent": "yes"}
    assert account.post("/signup", form).first_status == 302

    # Logins: five wrong passwords get the normal answer; then every worker refuses, as they
    # share the count in Redis; even the right password, until the minute is over.
    bot = Player(server.url)
    bot.get("/login")
    statuses = one_per_worker_in_turn(
        server, 9, lambda attempt: bot.post(f"/login?attempt={attempt}", BAD_LOGIN).status
    )
    assert statuses == [401] * 5 + [429] * 4
    assert refusing_workers(server, "/login?attempt=", 9) == set(server.worker_pids())
    right = bot.post("/login", {"username": "ada", "password": "correct-horse"})
    assert right.status == 429 and TOO_MANY in right.text

    # Guests are made only by a POST carrying the token of the visitor's own session...
    other = Player(server.url)
    other.get("/")
    bot.get("/")
    assert bot.get("/play").status == 405
    for _ in range(3):
        refused = bot.post("/play", {"category": "random"}, token=False)
        assert refused.status == 400 and "This form had expired" in refused.text
    for forged in ("not-a-token", other.token):
        assert bot.request("POST", "/play", {"csrf_token": forged}).status == 400
    assert count_players(app) == 1  # ada

    # ...and refused forms used none of the address's allowance: five guests are made, then
    # every worker refuses.
    def new_guest(attempt: int) -> int:
        newcomer = Player(server.url)
        return newcomer.post(f"/play?attempt={attempt}", {"category": "random"}).first_status

    assert one_per_worker_in_turn(server, 9, new_guest) == [302] * 5 + [429] * 4
    assert count_players(app) == 1 + 5
    assert refusing_workers(server, "/play?attempt=", 9) == set(server.worker_pids())


def test_without_redis_each_worker_counts_logins_alone(serve):
    """The contrast: with counters in each worker's memory, 3 workers allow 3 times the limit.

    This is why production sets REDIS_URL.
    """
    server = serve(workers=3, env={**SYNC_WORKERS, "LOGIN_RATE_LIMIT": "3 per minute"})
    # gunicorn.conf.py says so at start-up.
    assert "3 workers without REDIS_URL" in server.log_tail(200)
    bot = Player(server.url)
    bot.get("/login")
    per_worker = {}
    for pid in server.worker_pids():
        with server.only_worker(pid):
            per_worker[pid] = [
                bot.post(f"/login?worker={pid}&attempt={i}", BAD_LOGIN).status for i in range(4)
            ]
    assert all(statuses == [401, 401, 401, 429] for statuses in per_worker.values()), per_worker
    assert sum(statuses.count(401) for statuses in per_worker.values()) == 9


def test_site_wide_cap_bounds_guests_from_many_addresses(app, serve, redis_url):
    server = serve(
        workers=3,
        env={
            "REDIS_URL": redis_url,
            "PROXY_FIX": "1",
            "GUEST_RATE_LIMIT": "3 per minute",
            "GUEST_GLOBAL_RATE_LIMIT": "8 per minute",
        },
    )
    outcomes = defaultdict(list)
    first = {}

    def new_guest(address: str) -> int:
        newcomer = Player(server.url, forwarded_for=address)
        response = newcomer.post("/play", {"category": "random"})
        outcomes[address].append(response.first_status)
        if response.first_status == 429:
            assert TOO_MANY in response.text
        first.setdefault(address, newcomer)
        return response.first_status

    # One address is held to its own limit; its refused attempts leave the site-wide cap alone.
    for _ in range(6):
        new_guest("203.0.113.1")
    assert outcomes["203.0.113.1"] == [302] * 3 + [429] * 3
    # Other addresses each have their own allowance...
    for _ in range(3):
        new_guest("203.0.113.2")
    assert outcomes["203.0.113.2"] == [302] * 3
    # ...until the site-wide cap (8) stops every address, new ones included.
    for _ in range(3):
        new_guest("198.51.100.7")
    assert outcomes["198.51.100.7"] == [302, 302, 429]
    for address in ("192.0.2.10", "192.0.2.11", "2001:db8::1"):
        assert new_guest(address) == 429
    assert count_players(app) == 8

    # Players who already have a session are not new guests: the cap does not stop them.
    player = first["203.0.113.1"]
    played = player.play_round(2, "machine", ["generic"], "", category="random")
    assert player.start().round_id != played.round_id
    assert count_players(app) == 8


def test_without_redis_the_per_name_lock_still_holds_across_workers(app, serve):
    """Each worker's in-memory limiter counts alone (the first 429 came at attempt 41 with 5
    workers); the per-name lock lives in the database, so the tenth failure locks the name on
    every worker."""
    server = serve(workers=3, env=SYNC_WORKERS)  # generous per-address limits, no Redis
    account = Player(server.url)
    form = {"username": "ada", "password": "correct-horse", "consent": "yes"}
    assert account.post("/signup", form).first_status == 302
    bot = Player(server.url)
    bot.get("/login")
    wrong = {"username": "ada", "password": "not-the-password"}
    statuses = one_per_worker_in_turn(
        server, 12, lambda attempt: bot.post(f"/login?attempt={attempt}", wrong).status
    )
    assert statuses == [401] * 9 + [429] * 3
    assert refusing_workers(server, "/login?attempt=", 12) == set(server.worker_pids())
    right = bot.post("/login", {"username": "ada", "password": "correct-horse"})
    assert right.status == 429 and "Too many failed logins for this name" in right.text
