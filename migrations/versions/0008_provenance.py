"""Provenance of each example (model, weights hash, settings, code version) and a display label.

Revision ID: 0008_provenance
Revises: 0007_study_trust
Create Date: 2026-11-22

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0008_provenance'
down_revision = '0007_study_trust'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('examples', schema=None) as batch_op:
        batch_op.add_column(sa.Column('system_label', sa.String(length=100), nullable=True))
        batch_op.add_column(sa.Column('provenance', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('examples', schema=None) as batch_op:
        batch_op.drop_column('provenance')
        batch_op.drop_column('system_label')
