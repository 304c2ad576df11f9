"""Fair boards and safe accounts: skill and points boards per period, integrity, login failures.

- `board_totals` / `board_counts` replace the `listed` flag of the statistics tables and
  `points_counts`: one row per player and board (period "all", "w<monday>" or "m<yyyy-mm>";
  scope 0 or a category id) with points and the shrunk skill, and per board and measure the
  number of rows at each value. They are filled from the answered rounds for all time, this week
  and this month (UTC, at the time of the upgrade).
- `players.unlisted_at/unlisted_reason/restored_at`, `rounds.uncounted`, `truth_views`,
  `player_totals.fast_rounds` (0 for rounds played before: their speed is not judged) and
  `login_failures`.

Revision ID: 0006_fair_accounts
Revises: 0005_game_people_return
Create Date: 2026-11-22

"""
from datetime import datetime, timedelta, timezone

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0006_fair_accounts'
down_revision = '0005_game_people_return'
branch_labels = None
depends_on = None

# The skill rule of app/leaderboard/skill.py at the time of this migration.
MIN_ROUNDS = 10
PRIOR_ROUNDS = 10
EXCESS = (
    "(r.points - CASE WHEN 5 - (e.n_sentences - e.boundary) > 0 "
    "THEN 5 - (e.n_sentences - e.boundary) ELSE 0 END)"
)


def upgrade():
    with op.batch_alter_table('players', schema=None) as batch_op:
        batch_op.add_column(sa.Column('unlisted_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('unlisted_reason', sa.String(length=255), nullable=True))
        batch_op.add_column(sa.Column('restored_at', sa.DateTime(timezone=True), nullable=True))

    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('uncounted', sa.String(length=32), nullable=True))

    with op.batch_alter_table('player_totals', schema=None) as batch_op:
        batch_op.drop_index('ix_player_totals_board')
        batch_op.drop_column('listed')
        batch_op.add_column(sa.Column('fast_rounds', sa.Integer(), server_default='0', nullable=False))

    with op.batch_alter_table('category_totals', schema=None) as batch_op:
        batch_op.drop_index('ix_category_totals_board')
        batch_op.drop_column('listed')

    op.drop_table('points_counts')

    op.create_table('board_totals',
    sa.Column('period', sa.String(length=12), nullable=False),
    sa.Column('scope', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('player_id', sa.Integer(), nullable=False),
    sa.Column('points', sa.Integer(), nullable=False),
    sa.Column('rounds', sa.Integer(), nullable=False),
    sa.Column('exact', sa.Integer(), nullable=False),
    sa.Column('excess', sa.Integer(), nullable=False),
    sa.Column('skill', sa.Integer(), nullable=False),
    sa.Column('listed', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.Column('ranked', sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.ForeignKeyConstraint(['player_id'], ['players.id'], name=op.f('fk_board_totals_player_id_players'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('period', 'scope', 'player_id', name=op.f('pk_board_totals'))
    )
    with op.batch_alter_table('board_totals', schema=None) as batch_op:
        batch_op.create_index('ix_board_totals_player', ['player_id'], unique=False)
        batch_op.create_index('ix_board_totals_points', ['period', 'scope', 'listed', 'points', 'rounds'], unique=False)
        batch_op.create_index('ix_board_totals_skill', ['period', 'scope', 'ranked', 'skill', 'rounds'], unique=False)

    op.create_table('board_counts',
    sa.Column('period', sa.String(length=12), nullable=False),
    sa.Column('scope', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('measure', sa.String(length=8), nullable=False),
    sa.Column('value', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('players', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('period', 'scope', 'measure', 'value', name=op.f('pk_board_counts'))
    )

    op.create_table('truth_views',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('example_id', sa.Integer(), nullable=False),
    sa.Column('player_id', sa.Integer(), nullable=True),
    sa.Column('device', sa.String(length=32), nullable=True),
    sa.Column('address', sa.String(length=32), nullable=True),
    sa.Column('shown_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['example_id'], ['examples.id'], name=op.f('fk_truth_views_example_id_examples'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['player_id'], ['players.id'], name=op.f('fk_truth_views_player_id_players'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_truth_views'))
    )
    with op.batch_alter_table('truth_views', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_truth_views_example_id'), ['example_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_truth_views_player_id'), ['player_id'], unique=False)

    op.create_table('login_failures',
    sa.Column('name_key', sa.String(length=64), nullable=False),
    sa.Column('failures', sa.Integer(), nullable=False),
    sa.Column('first_failed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('locked_until', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('name_key', name=op.f('pk_login_failures'))
    )

    _fill_boards()


def _fill_boards():
    now = datetime.now(timezone.utc)
    monday = (now - timedelta(days=now.weekday())).replace(
        hour=0, minute=0, second=0, microsecond=0
    )
    first = now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    periods = [
        ("all", None),
        (f"w{monday:%Y-%m-%d}", monday),
        (f"m{now:%Y-%m}", first),
    ]
    for period, since in periods:
        for scope, group in (("0", ""), ("e.category_id", ", e.category_id")):
            statement = sa.text(
                "INSERT INTO board_totals (period, scope, player_id, points, rounds, exact, "
                "excess, skill, listed, ranked) "
                f"SELECT :period, {scope}, r.player_id, SUM(r.points), COUNT(*), "
                "SUM(CASE WHEN r.guess = e.boundary THEN 1 ELSE 0 END), "
                f"SUM({EXCESS}), (100 * SUM({EXCESS})) / (COUNT(*) + {PRIOR_ROUNDS}), "
                "p.username IS NOT NULL, "
                f"p.username IS NOT NULL AND COUNT(*) >= {MIN_ROUNDS} "
                "FROM rounds r JOIN examples e ON e.id = r.example_id "
                "JOIN players p ON p.id = r.player_id "
                "WHERE r.kind = 'normal' AND r.guess IS NOT NULL"
                + (" AND r.answered_at >= :since" if since else "")
                + f" GROUP BY r.player_id, p.username{group}"
            )
            params = [sa.bindparam("period", period)]
            if since:
                params.append(sa.bindparam("since", since, type_=sa.DateTime(timezone=True)))
            op.execute(statement.bindparams(*params))
    op.execute(
        "INSERT INTO board_counts (period, scope, measure, value, players) "
        "SELECT period, scope, 'points', points, COUNT(*) FROM board_totals WHERE listed "
        "GROUP BY period, scope, points "
        "UNION ALL "
        "SELECT period, scope, 'skill', skill, COUNT(*) FROM board_totals WHERE ranked "
        "GROUP BY period, scope, skill"
    )


def downgrade():
    op.drop_table('login_failures')
    with op.batch_alter_table('truth_views', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_truth_views_player_id'))
        batch_op.drop_index(batch_op.f('ix_truth_views_example_id'))
    op.drop_table('truth_views')
    op.drop_table('board_counts')
    with op.batch_alter_table('board_totals', schema=None) as batch_op:
        batch_op.drop_index('ix_board_totals_skill')
        batch_op.drop_index('ix_board_totals_points')
        batch_op.drop_index('ix_board_totals_player')
    op.drop_table('board_totals')

    op.create_table('points_counts',
    sa.Column('board', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('points', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('players', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('board', 'points', name=op.f('pk_points_counts'))
    )
    with op.batch_alter_table('category_totals', schema=None) as batch_op:
        batch_op.add_column(sa.Column('listed', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.create_index('ix_category_totals_board', ['category_id', 'listed', 'points', 'rounds'], unique=False)
    with op.batch_alter_table('player_totals', schema=None) as batch_op:
        batch_op.drop_column('fast_rounds')
        batch_op.add_column(sa.Column('listed', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.create_index('ix_player_totals_board', ['listed', 'points', 'rounds'], unique=False)
    for table in ('player_totals', 'category_totals'):
        op.execute(
            f"UPDATE {table} SET listed = TRUE "
            "WHERE player_id IN (SELECT id FROM players WHERE username IS NOT NULL)"
        )
    op.execute(
        "INSERT INTO points_counts (board, points, players) "
        "SELECT 0, points, COUNT(*) FROM player_totals WHERE listed GROUP BY points "
        "UNION ALL "
        "SELECT category_id, points, COUNT(*) FROM category_totals WHERE listed "
        "GROUP BY category_id, points"
    )

    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_column('uncounted')

    with op.batch_alter_table('players', schema=None) as batch_op:
        batch_op.drop_column('restored_at')
        batch_op.drop_column('unlisted_reason')
        batch_op.drop_column('unlisted_at')
