"""Leaderboards at scale: `listed` totals, board indexes that lead with it, points_counts.

A rank was a count of every totals row above the player's, joined to `players` to skip guests; it is
now a sum over `points_counts` (listed rows per board and number of points). A top list walks
`ix_*_totals_board`. Existing rows are listed when their player has a username, and counted.

Revision ID: 0003_leaderboard_at_scale
Revises: 0002_crowd_studies
Create Date: 2026-11-22

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0003_leaderboard_at_scale'
down_revision = '0002_crowd_studies'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('points_counts',
    sa.Column('board', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('points', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('players', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('board', 'points', name=op.f('pk_points_counts'))
    )
    with op.batch_alter_table('category_totals', schema=None) as batch_op:
        batch_op.add_column(sa.Column('listed', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.drop_index('ix_category_totals_rank')
        batch_op.create_index('ix_category_totals_board', ['category_id', 'listed', 'points', 'rounds'], unique=False)

    with op.batch_alter_table('player_totals', schema=None) as batch_op:
        batch_op.add_column(sa.Column('listed', sa.Boolean(), server_default=sa.false(), nullable=False))
        batch_op.drop_index('ix_player_totals_rank')
        batch_op.create_index('ix_player_totals_board', ['listed', 'points', 'rounds'], unique=False)

    for table in ('player_totals', 'category_totals'):
        op.execute(
            f"UPDATE {table} SET listed = TRUE "
            "WHERE player_id IN (SELECT id FROM players WHERE username IS NOT NULL)"
        )
    # Board 0 is all categories; a category's board is its id.
    op.execute(
        "INSERT INTO points_counts (board, points, players) "
        "SELECT 0, points, COUNT(*) FROM player_totals WHERE listed GROUP BY points "
        "UNION ALL "
        "SELECT category_id, points, COUNT(*) FROM category_totals WHERE listed "
        "GROUP BY category_id, points"
    )


def downgrade():
    with op.batch_alter_table('player_totals', schema=None) as batch_op:
        batch_op.drop_index('ix_player_totals_board')
        batch_op.create_index('ix_player_totals_rank', ['points', 'rounds'], unique=False)
        batch_op.drop_column('listed')

    with op.batch_alter_table('category_totals', schema=None) as batch_op:
        batch_op.drop_index('ix_category_totals_board')
        batch_op.create_index('ix_category_totals_rank', ['category_id', 'points', 'rounds'], unique=False)
        batch_op.drop_column('listed')

    op.drop_table('points_counts')
