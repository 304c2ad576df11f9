"""Crowd money exactly once: run numbers never given twice, a bonus ledger keyed by
(study, worker, reason) with states, void attention checks, and who made a decision.

Revision ID: 0010_crowd_ledger
Revises: 0009_indexed_pick
Create Date: 2026-11-25

Existing bonus rows become `issued` rows for the reason "score" (what verify wrote to bonus.csv),
and every run number already used gets a study_runs row, so later runs never reuse it.
"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0010_crowd_ledger'
down_revision = '0009_indexed_pick'
branch_labels = None
depends_on = None

LIVE = sa.text("state IN ('issued', 'requested', 'sent', 'paid')")


def upgrade():
    op.create_table('study_runs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('run', sa.Integer(), nullable=False),
    sa.Column('source', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('undone_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], name=op.f('fk_study_runs_study_id_studies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study_runs')),
    sa.UniqueConstraint('study_id', 'run', name=op.f('uq_study_runs_study_id_run'))
    )
    with op.batch_alter_table('study_bonuses', schema=None) as batch_op:
        batch_op.add_column(sa.Column('reason', sa.String(length=120), server_default='score', nullable=False))
        batch_op.add_column(sa.Column('state', sa.String(length=16), server_default='issued', nullable=False))
        batch_op.add_column(sa.Column('reverses_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('platform_ref', sa.Text(), nullable=True))
        batch_op.add_column(sa.Column('sent_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_study_bonuses_reverses_id_study_bonuses'), 'study_bonuses', ['reverses_id'], ['id'], ondelete='SET NULL')
    with op.batch_alter_table('participants', schema=None) as batch_op:
        batch_op.add_column(sa.Column('checks_void', sa.Integer(), server_default='0', nullable=False))
    with op.batch_alter_table('study_decisions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('source', sa.String(length=16), server_default='verify', nullable=False))

    # Rows written before this revision were one per worker and run; several runs could top a
    # worker up, so each old row gets its own reason to keep one live row per key.
    op.execute(
        "UPDATE study_bonuses SET reason = 'score (run ' || CAST(run AS VARCHAR(12)) || ')'"
    )
    op.create_index('uq_study_bonuses_live_key', 'study_bonuses',
                    ['study_id', 'participant_id', 'reason'], unique=True,
                    sqlite_where=LIVE, postgresql_where=LIVE)
    op.execute(
        "INSERT INTO study_runs (study_id, run, source, created_at) "
        "SELECT study_id, run, 'before 0010', MIN(created_at) FROM ("
        " SELECT study_id, run, created_at FROM study_decisions"
        " UNION ALL SELECT study_id, run, issued_at FROM study_bonuses) AS used "
        "GROUP BY study_id, run"
    )


def downgrade():
    op.drop_index('uq_study_bonuses_live_key', table_name='study_bonuses',
                  sqlite_where=LIVE, postgresql_where=LIVE)
    with op.batch_alter_table('study_decisions', schema=None) as batch_op:
        batch_op.drop_column('source')
    with op.batch_alter_table('participants', schema=None) as batch_op:
        batch_op.drop_column('checks_void')
    with op.batch_alter_table('study_bonuses', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_study_bonuses_reverses_id_study_bonuses'), type_='foreignkey')
        batch_op.drop_column('sent_at')
        batch_op.drop_column('platform_ref')
        batch_op.drop_column('reverses_id')
        batch_op.drop_column('state')
        batch_op.drop_column('reason')
    op.drop_table('study_runs')
