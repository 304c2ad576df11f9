"""Each crowd worker's schedule, stored: which text in which round, fixed when they enter.

Revision ID: 0015_study_slots
Revises: 0014_typing_signals
Create Date: 2026-11-25

Workers who entered before this revision have no rows; their schedule is computed and stored on
their next round, keeping the texts they have already played (app/crowd/slots.py).
"""
import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision = '0015_study_slots'
down_revision = '0014_typing_signals'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('study_slots',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=24), nullable=False),
    sa.Column('example_id', sa.Integer(), nullable=True),
    sa.Column('optional', sa.Boolean(), nullable=False),
    sa.ForeignKeyConstraint(['example_id'], ['examples.id'], name=op.f('fk_study_slots_example_id_examples'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['participant_id'], ['participants.id'], name=op.f('fk_study_slots_participant_id_participants'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study_slots')),
    sa.UniqueConstraint('participant_id', 'position', name=op.f('uq_study_slots_participant_id_position'))
    )


def downgrade():
    op.drop_table('study_slots')
