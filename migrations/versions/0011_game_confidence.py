"""Skill that means detection, and the confidence of a guess.

`rounds.confidence` holds how sure the player said they were (50, 70 or 90 percent; null when
they did not say).

`board_totals` gains machine_rounds, machine_credit, human_rounds and human_right (see
app/leaderboard/skill.py); every existing row is filled from its player's counted rounds and its
skill recomputed as the shrunk detection rate, and the skill counts of `board_counts` are rebuilt.
The downgrade ranks by the shrunk excess again.

Revision ID: 0011_game_confidence
Revises: 0010_crowd_ledger
Create Date: 2026-11-25

"""
from collections import defaultdict
from datetime import date, datetime, timedelta

import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision = '0011_game_confidence'
down_revision = '0010_crowd_ledger'
branch_labels = None
depends_on = None

COLUMNS = ('machine_rounds', 'machine_credit', 'human_rounds', 'human_right')
# The rules of app/leaderboard/skill.py at the time of this migration.
PRIOR_ROUNDS = 10
SCALE = 100


def _points(guess, boundary):
    return 0 if guess < boundary else max(5 - (guess - boundary), 0)


def _skill(machine, credit, human, right):
    no_machine, no_human = int(machine == 0), int(human == 0)
    m, h, r, n = machine + no_machine, human + no_human, right + no_human, machine + human
    numerator = SCALE * (credit * h + 5 * r * m - 5 * m * h) * n
    quotient = abs(numerator) // (5 * m * h * (n + PRIOR_ROUNDS))
    return quotient if numerator >= 0 else -quotient


def _periods(when):
    if isinstance(when, str):
        when = datetime.fromisoformat(when)
    day = when.date() if isinstance(when, datetime) else date.fromisoformat(str(when)[:10])
    return (f"w{(day - timedelta(days=day.weekday())).isoformat()}", f"m{day:%Y-%m}", "all")


def _rebuild_skill_counts(bind):
    bind.execute(sa.text("DELETE FROM board_counts WHERE measure = 'skill'"))
    bind.execute(sa.text(
        "INSERT INTO board_counts (period, scope, measure, value, players) "
        "SELECT period, scope, 'skill', skill, COUNT(*) FROM board_totals WHERE ranked "
        "GROUP BY period, scope, skill"
    ))


def upgrade():
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('confidence', sa.Integer(), nullable=True))

    with op.batch_alter_table('board_totals', schema=None) as batch_op:
        for name in COLUMNS:
            batch_op.add_column(sa.Column(name, sa.Integer(), server_default='0', nullable=False))

    bind = op.get_bind()
    counts = defaultdict(lambda: [0, 0, 0, 0])
    rows = bind.execute(sa.text(
        "SELECT r.player_id, e.category_id, r.answered_at, r.guess, e.boundary, e.n_sentences "
        "FROM rounds r JOIN examples e ON e.id = r.example_id "
        "WHERE r.kind = 'normal' AND r.uncounted IS NULL AND r.guess IS NOT NULL"
    ))
    for player_id, category_id, answered_at, guess, boundary, n in rows:
        if boundary >= n:
            add = (0, 0, 1, int(guess >= n))
        else:
            add = (1, _points(guess, boundary) if guess < n else 0, 0, 0)
        for period in _periods(answered_at):
            for scope in (0, category_id):
                total = counts[period, scope, player_id]
                for i, value in enumerate(add):
                    total[i] += value
    totals = bind.execute(sa.text("SELECT period, scope, player_id FROM board_totals")).all()
    updates = []
    for period, scope, player_id in totals:
        machine, credit, human, right = counts.get((period, scope, player_id), (0, 0, 0, 0))
        updates.append({
            'period': period, 'scope': scope, 'player_id': player_id, 'machine': machine,
            'credit': credit, 'human': human, 'right_': right,
            'skill': _skill(machine, credit, human, right),
        })
    if updates:
        bind.execute(sa.text(
            "UPDATE board_totals SET machine_rounds = :machine, machine_credit = :credit, "
            "human_rounds = :human, human_right = :right_, skill = :skill "
            "WHERE period = :period AND scope = :scope AND player_id = :player_id"
        ), updates)
    _rebuild_skill_counts(bind)


def downgrade():
    bind = op.get_bind()
    bind.execute(sa.text(
        f"UPDATE board_totals SET skill = ({SCALE} * excess) / (rounds + {PRIOR_ROUNDS})"
    ))
    _rebuild_skill_counts(bind)
    with op.batch_alter_table('board_totals', schema=None) as batch_op:
        for name in reversed(COLUMNS):
            batch_op.drop_column(name)
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_column('confidence')
