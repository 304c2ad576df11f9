"""How an explanation was entered: pasted or typed, and how fast (crowd fraud signals).

`rounds.explanation_pasted` (text was pasted or dropped into the explanation box), `typing_ms`
(first keystroke in the box to the answer) and `typed_chars` (characters typed in that time), as
the page's script reports them, clamped by the server; null where not reported. Existing rounds
stay null: nothing was recorded for them.

Revision ID: 0014_typing_signals
Revises: 0013_daily_reminder
Create Date: 2026-11-25

"""
import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision = '0014_typing_signals'
down_revision = '0013_daily_reminder'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('explanation_pasted', sa.Boolean(), nullable=True))
        batch_op.add_column(sa.Column('typing_ms', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('typed_chars', sa.Integer(), nullable=True))


def downgrade():
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_column('typed_chars')
        batch_op.drop_column('typing_ms')
        batch_op.drop_column('explanation_pasted')
