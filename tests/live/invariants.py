"""What must hold in the database after any traffic, however it ended (read with fresh sessions)."""

from __future__ import annotations

from collections import Counter, defaultdict

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.extensions import db
from app.game import scoring
from app.game.reasons import REASONS
from app.models import CategoryTotal, Example, Player, PlayerTotal, Round
from tests.live.player import PlayedRound

TOTAL_FIELDS = ("points", "rounds", "exact", "too_early", "distance_sum", "abs_distance_sum")


def _totals(rounds: list[Round]) -> dict[str, int]:
    distances = [r.guess - r.example.boundary for r in rounds]
    return {
        "points": sum(r.points for r in rounds),
        "rounds": len(rounds),
        "exact": sum(d == 0 for d in distances),
        "too_early": sum(d < 0 for d in distances),
        "distance_sum": sum(distances),
        "abs_distance_sum": sum(abs(d) for d in distances),
    }


def _row(total) -> dict[str, int]:
    return {name: getattr(total, name) for name in TOTAL_FIELDS}


def check_database(app) -> dict[int, Round]:
    """Assert the invariants below and return every round by id.

    - a round with a guess has its points (by the scoring rule), answered_at and one reveal per
      revealed sentence; a round without a guess has no points and no answered_at;
    - a player has at most one open round;
    - PlayerTotal and CategoryTotal equal the sums over the stored answered normal rounds that
      count (`uncounted` is empty);
    - Example.annotation_count equals the number of answered normal rounds of each example.
    """
    with app.app_context():
        db.session.remove()
        rounds = db.session.scalars(
            select(Round).options(selectinload(Round.reveals), selectinload(Round.example))
        ).all()
        open_per_player = Counter()
        answered_normal: list[Round] = []
        scored: list[Round] = []  # counted on the totals (app/leaderboard/integrity.py)
        for r in rounds:
            n = r.example.n_sentences
            assert [x.sentence_index for x in r.reveals] == list(range(r.revealed)), r.id
            assert 1 <= r.revealed <= n, r.id
            if r.guess is None:
                assert r.points is None and r.answered_at is None, f"round {r.id} half-written"
                open_per_player[r.player_id] += 1
                continue
            assert r.answered_at is not None and r.points is not None, f"round {r.id} half-written"
            assert r.guess == r.revealed - 1 or (r.guess == n and r.revealed == n), r.id
            if r.kind == "normal":
                assert r.points == scoring.points(r.guess, r.example.boundary), r.id
                answered_normal.append(r)
                if r.uncounted is None:
                    scored.append(r)
        assert all(count == 1 for count in open_per_player.values()), open_per_player

        by_player: dict[int, list[Round]] = defaultdict(list)
        by_category: dict[tuple[int, int], list[Round]] = defaultdict(list)
        for r in scored:
            by_player[r.player_id].append(r)
            by_category[(r.player_id, r.example.category_id)].append(r)
        player_totals = {t.player_id: _row(t) for t in db.session.scalars(select(PlayerTotal))}
        category_totals = {
            (t.player_id, t.category_id): _row(t) for t in db.session.scalars(select(CategoryTotal))
        }
        assert player_totals == {key: _totals(group) for key, group in by_player.items()}
        assert category_totals == {key: _totals(group) for key, group in by_category.items()}

        answered_per_example = Counter(r.example_id for r in answered_normal)
        counts = dict(db.session.execute(select(Example.id, Example.annotation_count)).all())
        assert counts == {eid: answered_per_example.get(eid, 0) for eid in counts}
        found = {r.id: r for r in rounds}
        db.session.remove()
    return found


def check_seen_rounds(stored: dict[int, Round], played: list[PlayedRound]) -> None:
    """Every round a client saw completed is stored once, as the client played it and saw it."""
    ids = [p.round_id for p in played]
    assert len(ids) == len(set(ids)), "a client finished the same round twice"
    answered = {rid for rid, r in stored.items() if r.guess is not None}
    assert answered == set(ids), "answered rounds differ from the rounds clients saw finished"
    for p in played:
        r = stored[p.round_id]
        assert (r.guess, r.revealed) == (p.guess, p.revealed), p
        assert r.points == p.points, (
            f"round {p.round_id}: page showed {p.points}, stored {r.points}"
        )
        assert r.points == scoring.points(p.guess, r.example.boundary)
        assert r.reasons == [key for key in REASONS if key in p.reasons], p
        assert r.explanation == p.explanation.strip(), p


def count_players(app) -> int:
    """Rows in the players table (guests included)."""
    with app.app_context():
        db.session.remove()
        found = db.session.query(Player).count()
        db.session.remove()
    return found
