"""Prolific through its API: the Prolific study id on a study, and the messages sent to workers
(recorded before sending, so a message goes out once).

Revision ID: 0012_prolific_api
Revises: 0011_game_confidence
Create Date: 2026-11-25

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0012_prolific_api'
down_revision = '0011_game_confidence'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('studies', schema=None) as batch_op:
        batch_op.add_column(sa.Column('prolific_study_id', sa.String(length=64), nullable=True))
    op.create_table('study_messages',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('worker_id', sa.String(length=128), nullable=False),
    sa.Column('body_hash', sa.String(length=64), nullable=False),
    sa.Column('body', sa.Text(), nullable=False),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('platform_ref', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], name=op.f('fk_study_messages_study_id_studies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study_messages')),
    sa.UniqueConstraint('study_id', 'worker_id', 'body_hash', name=op.f('uq_study_messages_study_id_worker_id_body_hash'))
    )


def downgrade():
    op.drop_table('study_messages')
    with op.batch_alter_table('studies', schema=None) as batch_op:
        batch_op.drop_column('prolific_study_id')
