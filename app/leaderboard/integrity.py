"""Fair play: answers that must not count, and records that must not be listed.

The game service calls two functions, both inside the transaction that stores an answer:

- `answer_seen(player_id, example_id, judge)` records that the text's truth is now shown to this
  browser and address (the answer page shows it), and says why the answer must not count if its
  truth was already shown to *another* player from the same browser (a long-lived device cookie)
  within DEVICE_WINDOW, or from the same public address within ADDRESS_WINDOW. Such rounds are
  stored with that reason in `rounds.uncounted` and left out of every total and board.
- `count(player, ...)` adds a counted answer to the totals and boards, then unlists the player
  from every board if their record has become implausible for a human (app/leaderboard/fairness.py),
  with the reason. A researcher can restore them (`restore`); they are not unlisted automatically
  again.

The browser and address are stored as keyed hashes (HMAC with SECRET_KEY), never as such.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from flask import Flask, current_app, g, has_request_context, request
from sqlalchemy import Select, bindparam, func, insert, or_, select

from app.errors import NotFound
from app.extensions import cache, db
from app.leaderboard import fairness, recording, standings
from app.leaderboard import skill as skill_rule
from app.models import Example, Player, PlayerTotal, TruthView
from app.models.base import utcnow
from roftcore.boundary import Verdict

DEVICE_COOKIE = "roft_device"
DEVICE_COOKIE_DAYS = 400  # browsers cap cookie lifetimes at 400 days
DEVICE_WINDOW = timedelta(days=365)
ADDRESS_WINDOW = timedelta(hours=24)
SEEN_ON_DEVICE = "truth_seen_device"
SEEN_FROM_ADDRESS = "truth_seen_address"
# A challenge's text built from a passage the player had already read (app/game/challenge.py).
READ_BEFORE = "passage_read_before"
REASONS = {
    SEEN_ON_DEVICE: "its answer had been shown to another player in this browser",
    SEEN_FROM_ADDRESS: "its answer had been shown to another player from this address today",
    READ_BEFORE: "you had already read its passage in another text",
}
# (rate, time.time() it expires): a float under the old key "integrity:site-rate".
SITE_RATE_CACHE_KEY = "integrity:site-rate-until"
SITE_RATE_SECONDS = 600


@dataclass(frozen=True)
class Client:
    device: str | None
    address: str | None


def _digest(kind: str, value: str) -> str:
    key = str(current_app.config["SECRET_KEY"]).encode()
    return hmac.new(key, f"roft-{kind}:{value}".encode(), hashlib.sha256).hexdigest()[:32]


def _device_token() -> str:
    """This browser's device token; a new one (set on the response) if it has none."""
    token = request.cookies.get(DEVICE_COOKIE, "")
    if not (16 <= len(token) <= 64 and token.isalnum()):
        token = g.get("new_device") or secrets.token_hex(16)
        g.new_device = token
    return token


def client() -> Client:
    """The current request's browser and address as hashes; nothing outside a request (CLI)."""
    if not has_request_context():
        return Client(None, None)
    address = fairness.address_identity(request.remote_addr)
    return Client(
        _digest("device", _device_token()),
        _digest("address", address) if address else None,
    )


def init_app(app: Flask) -> None:
    """Give a browser its device cookie on the response that first needed it, and let pages say
    why a round did not count (`round.uncounted|uncounted_reason`)."""
    app.add_template_filter(explain, "uncounted_reason")

    @app.after_request
    def set_device_cookie(response):
        token = g.get("new_device")
        if token:
            response.set_cookie(
                DEVICE_COOKIE,
                token,
                max_age=DEVICE_COOKIE_DAYS * 24 * 3600,
                httponly=True,
                secure=app.config.get("SESSION_COOKIE_SECURE", False),
                samesite="Lax",
            )
        return response


_ADD_VIEW = insert(TruthView.__table__)


@functools.cache
def _earlier_view(by_device: bool, by_address: bool) -> Select:
    """Another identity's view of the text's truth from this browser or address, the browser's
    first; built once per kind of client."""
    views = TruthView.__table__.c
    same_device = views.device == bindparam("device")
    others = []
    if by_device:
        others.append(same_device & (views.shown_at > bindparam("device_since")))
    if by_address:
        others.append(
            (views.address == bindparam("address")) & (views.shown_at > bindparam("address_since"))
        )
    return (
        select(same_device.label("same_device"))
        .where(
            views.example_id == bindparam("example_id"),
            or_(views.player_id.is_(None), views.player_id != bindparam("player_id")),
            or_(*others),
        )
        .order_by(same_device.desc())
        .limit(1)
    )


@functools.cache
def _earlier_view_recording(by_device: bool, by_address: bool) -> Select:
    """On PostgreSQL, `_earlier_view` and the new view's row as one statement (one round trip
    instead of two). The row is a data-modifying WITH, which PostgreSQL runs whether or not the
    query reads it, and the query's snapshot is taken before it, so the new row is never its own
    earlier view. Built once per kind of client."""
    views = TruthView.__table__.c
    added = (
        insert(TruthView.__table__)
        .values(
            {
                name: bindparam(name, type_=views[name].type)
                for name in ("example_id", "player_id", "device", "address")
            }
            | {"shown_at": bindparam("shown_at", type_=views.shown_at.type)}
        )
        .cte("added")
    )
    earlier = _earlier_view(by_device, by_address).cte("earlier")
    return select(earlier.c.same_device).add_cte(added)


def answer_seen(player_id: int, example_id: int, judge: bool, now: datetime) -> str | None:
    """Record that this text's truth is shown to this browser and address; return why the
    answer must not count (another player saw the truth here first), or None (no commit)."""
    seen = client()
    reason = None
    view = {
        "example_id": example_id,
        "player_id": player_id,
        "device": seen.device,
        "address": seen.address,
    }
    if judge and (seen.device or seen.address):
        since = {"device_since": now - DEVICE_WINDOW, "address_since": now - ADDRESS_WINDOW}
        by = (bool(seen.device), bool(seen.address))
        if db.session.get_bind().dialect.name == "postgresql":
            earlier = db.session.execute(
                _earlier_view_recording(*by), {**view, **since, "shown_at": now}
            ).first()
            return None if earlier is None else _why(earlier[0])
        earlier = db.session.execute(_earlier_view(*by), {**view, **since}).first()
        if earlier is not None:
            reason = _why(earlier[0])
    db.session.execute(_ADD_VIEW, {**view, "shown_at": now})
    return reason


def _why(same_device: bool) -> str:
    return SEEN_ON_DEVICE if same_device else SEEN_FROM_ADDRESS


def same_client(other_player_id: int) -> bool:
    """Whether `other_player_id` was shown a truth from this browser (within DEVICE_WINDOW) or
    this address (within ADDRESS_WINDOW): probably another identity of the current player."""
    seen = client()
    if not (seen.device or seen.address):
        return False
    now = utcnow()
    views = TruthView.__table__.c
    here = []
    if seen.device:
        here.append((views.device == seen.device) & (views.shown_at > now - DEVICE_WINDOW))
    if seen.address:
        here.append((views.address == seen.address) & (views.shown_at > now - ADDRESS_WINDOW))
    return (
        db.session.execute(
            select(views.id).where(views.player_id == other_player_id, or_(*here)).limit(1)
        ).first()
        is not None
    )


def count(
    player: Player,
    example: Example,
    guess: int,
    verdict: Verdict,
    started_at: datetime,
    revealed: int,
    now: datetime,
) -> None:
    """Add a counted answer to the totals and boards, and review the player's record in the same
    step (the boards' counts move once per transaction: see `recording.record_answer`)."""
    judged = player.unlisted_at is not None or player.restored_at is not None
    reasons: list[str] = []

    def review(stats: recording.PlayerStats) -> bool:
        if judged or stats.rounds < fairness.JUDGE_AFTER:
            return False
        reason = fairness.implausible(stats.rounds, stats.exact, stats.fast_rounds, site_rate())
        if reason is not None:
            reasons.append(reason)
        return reason is not None

    recording.record_answer(
        player.id,
        example.category_id,
        verdict,
        excess=skill_rule.excess(guess, example.boundary, example.n_sentences),
        fast=fairness.is_fast((now - started_at).total_seconds(), revealed),
        when=now,
        detection=skill_rule.detection(guess, example.boundary, example.n_sentences),
        review=review,
    )
    if reasons:
        player.unlisted_at = now
        player.unlisted_reason = reasons[0]
        # The rows and counts are already off the boards; the Player event finds nothing to move.
        db.session.flush()
        standings.forget_boards_of(player.id)


def site_rate() -> float:
    """The share of exact hits over every counted round, recomputed every 10 minutes.

    The shared cache holds the rate with the time it expires; each process keeps what it read
    until then (no cache round trip per answer), so a decision never uses a rate older than
    SITE_RATE_SECONDS, as before."""
    memo = current_app.extensions.get(SITE_RATE_CACHE_KEY)
    now = time.time()
    if memo is not None and now < memo[1]:
        return memo[0]
    cached = cache.get(SITE_RATE_CACHE_KEY)
    if cached is None or now >= cached[1]:
        exact, rounds = db.session.execute(
            select(
                func.coalesce(func.sum(PlayerTotal.exact), 0),
                func.coalesce(func.sum(PlayerTotal.rounds), 0),
            )
        ).one()
        cached = (fairness.site_rate(int(exact), int(rounds)), now + SITE_RATE_SECONDS)
        cache.set(SITE_RATE_CACHE_KEY, cached, timeout=SITE_RATE_SECONDS)
    current_app.extensions[SITE_RATE_CACHE_KEY] = cached
    return cached[0]


def unlisted_players() -> list[Player]:
    """Players unlisted for an implausible record, newest first (for /research)."""
    return list(
        db.session.scalars(
            select(Player)
            .where(Player.unlisted_at.is_not(None))
            .order_by(Player.unlisted_at.desc())
        )
    )


def restore(player_id: int) -> Player:
    """A researcher vouches for a player: back on the boards, never unlisted automatically again."""
    player = db.session.get(Player, player_id)
    if player is None or player.unlisted_at is None:
        raise NotFound("That player is not unlisted.")
    player.unlisted_at = None
    player.restored_at = utcnow()
    db.session.commit()
    standings.forget_boards_of(player.id)
    return player


def explain(uncounted: str | None) -> str | None:
    """A sentence for the player on why a round did not count."""
    return REASONS.get(uncounted) if uncounted else None
