"""Randomised conditions in crowd studies and their frozen analysis plans.

`condition_slots` is each study's allocation sequence (balanced blocks, one place per condition,
in a seeded order); `participants.condition` and `rounds.condition` keep the condition a worker
was given and played each round under; `rounds.detector_hints` keeps the detector hint each
sentence showed, in a condition that shows one; `study_plans` holds every frozen version of a
study's [preregistration], with its SHA-256. Existing studies have no conditions: the new
columns stay empty for them.

Revision ID: i34app_conditions_plans
Revises: i36_coding_validation
Create Date: 2026-11-28

"""
import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision = 'i34app_conditions_plans'
down_revision = 'i36_coding_validation'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('condition_slots',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('condition', sa.String(length=32), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['participant_id'], ['participants.id'], name=op.f('fk_condition_slots_participant_id_participants'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], name=op.f('fk_condition_slots_study_id_studies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_condition_slots')),
    sa.UniqueConstraint('study_id', 'seq', name=op.f('uq_condition_slots_study_id_seq'))
    )
    with op.batch_alter_table('condition_slots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_condition_slots_participant_id'), ['participant_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_condition_slots_study_id'), ['study_id'], unique=False)

    op.create_table('study_plans',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('plan', sa.JSON(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('frozen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('participants_then', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], name=op.f('fk_study_plans_study_id_studies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study_plans')),
    sa.UniqueConstraint('study_id', 'version', name=op.f('uq_study_plans_study_id_version'))
    )
    with op.batch_alter_table('study_plans', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_study_plans_study_id'), ['study_id'], unique=False)

    with op.batch_alter_table('participants', schema=None) as batch_op:
        batch_op.add_column(sa.Column('condition', sa.String(length=32), nullable=True))
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('condition', sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column('detector_hints', sa.JSON(), nullable=True))


def downgrade():
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_column('detector_hints')
        batch_op.drop_column('condition')
    with op.batch_alter_table('participants', schema=None) as batch_op:
        batch_op.drop_column('condition')
    with op.batch_alter_table('study_plans', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_study_plans_study_id'))
    op.drop_table('study_plans')
    with op.batch_alter_table('condition_slots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_condition_slots_study_id'))
        batch_op.drop_index(batch_op.f('ix_condition_slots_participant_id'))
    op.drop_table('condition_slots')
