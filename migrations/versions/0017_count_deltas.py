"""The leaderboard counts' pending changes, appended instead of updated in place.

`board_count_deltas` holds changes to `board_counts` (how many board rows have each value) that
are not added into it yet: every answer, sign-up, unlisting, restoring and deletion appends its
changes there, and a fold (after some answers, or `flask boards fold`) adds them into
`board_counts` and deletes them. A count is `board_counts.players` plus its key's deltas. The
upgrade starts with no deltas; the downgrade folds the pending ones back into `board_counts`
first, so no change is lost.

Revision ID: 0017_count_deltas
Revises: 0016_levels
Create Date: 2026-11-27

"""
import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision = '0017_count_deltas'
down_revision = '0016_levels'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('board_count_deltas',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('period', sa.String(length=12), nullable=False),
    sa.Column('scope', sa.Integer(), nullable=False),
    sa.Column('measure', sa.String(length=8), nullable=False),
    sa.Column('value', sa.Integer(), nullable=False),
    sa.Column('players', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_board_count_deltas'))
    )
    with op.batch_alter_table('board_count_deltas', schema=None) as batch_op:
        batch_op.create_index(
            'ix_board_count_deltas_key', ['period', 'scope', 'measure', 'value'], unique=False
        )


def downgrade():
    bind = op.get_bind()
    # `WHERE 1 = 1` keeps SQLite from reading ON CONFLICT as a join's ON.
    bind.execute(sa.text(
        "INSERT INTO board_counts (period, scope, measure, value, players) "
        "SELECT period, scope, measure, value, SUM(players) FROM board_count_deltas WHERE 1 = 1 "
        "GROUP BY period, scope, measure, value HAVING SUM(players) <> 0 "
        "ON CONFLICT (period, scope, measure, value) "
        "DO UPDATE SET players = board_counts.players + excluded.players"
    ))
    bind.execute(sa.text("DELETE FROM board_counts WHERE players = 0"))
    with op.batch_alter_table('board_count_deltas', schema=None) as batch_op:
        batch_op.drop_index('ix_board_count_deltas_key')

    op.drop_table('board_count_deltas')
