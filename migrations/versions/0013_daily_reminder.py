"""The opt-in daily reminder.

`players.daily_reminder` is true when the player asked for a browser notification when a new
daily challenge is out (shown only while a tab of the site is open; there is no push server).

Revision ID: 0013_daily_reminder
Revises: 0012_prolific_api
Create Date: 2026-11-25

"""
import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision = '0013_daily_reminder'
down_revision = '0012_prolific_api'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('players', schema=None) as batch_op:
        batch_op.add_column(
            sa.Column('daily_reminder', sa.Boolean(), server_default=sa.false(), nullable=False)
        )


def downgrade():
    with op.batch_alter_table('players', schema=None) as batch_op:
        batch_op.drop_column('daily_reminder')
