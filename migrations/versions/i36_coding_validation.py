"""Researchers' labels of a sample of players' comments, to validate the comment coder.

`coding_samples` holds the comments drawn for labelling (one sample per scope: a study's slug or
"site"), `coding_labels` each researcher's main class for an item.

Revision ID: i36_coding_validation
Revises: 0017_count_deltas
Create Date: 2026-11-28

"""
import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision = 'i36_coding_validation'
down_revision = '0017_count_deltas'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('coding_samples',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('scope', sa.String(length=64), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('stratum', sa.String(length=64), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('seed', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_coding_samples')),
    sa.UniqueConstraint('scope', 'position', name=op.f('uq_coding_samples_scope_position')),
    sa.UniqueConstraint('scope', 'text', name=op.f('uq_coding_samples_scope_text')),
    )
    with op.batch_alter_table('coding_samples', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_coding_samples_scope'), ['scope'], unique=False)
    op.create_table('coding_labels',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('sample_id', sa.Integer(), nullable=False),
    sa.Column('researcher_id', sa.Integer(), nullable=False),
    sa.Column('label', sa.String(length=32), nullable=False),
    sa.Column('labelled_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['researcher_id'], ['players.id'], name=op.f('fk_coding_labels_researcher_id_players'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['sample_id'], ['coding_samples.id'], name=op.f('fk_coding_labels_sample_id_coding_samples'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_coding_labels')),
    sa.UniqueConstraint('sample_id', 'researcher_id', name=op.f('uq_coding_labels_sample_id_researcher_id')),
    )
    with op.batch_alter_table('coding_labels', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_coding_labels_sample_id'), ['sample_id'], unique=False)


def downgrade():
    with op.batch_alter_table('coding_labels', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_coding_labels_sample_id'))
    op.drop_table('coding_labels')
    with op.batch_alter_table('coding_samples', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_coding_samples_scope'))
    op.drop_table('coding_samples')
