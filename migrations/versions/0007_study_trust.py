"""Crowd studies a runner can trust: decisions apart from the evidence, a bonus ledger,
comprehension tries, and the time a worker left.

Revision ID: 0007_study_trust
Revises: 0006_fair_accounts
Create Date: 2026-11-22

Participants that earlier code marked approved / rejected get their outcome back as their status,
and the decision moves to study_decisions (run 1), with the old note as its reason.
"""
from datetime import datetime, timezone

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0007_study_trust'
down_revision = '0006_fair_accounts'
branch_labels = None
depends_on = None


participants = sa.table(
    'participants',
    sa.column('id', sa.Integer),
    sa.column('study_id', sa.Integer),
    sa.column('status', sa.String),
    sa.column('outcome', sa.String),
    sa.column('decision_note', sa.Text),
)
decisions = sa.table(
    'study_decisions',
    sa.column('id', sa.Integer),
    sa.column('study_id', sa.Integer),
    sa.column('participant_id', sa.Integer),
    sa.column('run', sa.Integer),
    sa.column('decision', sa.String),
    sa.column('reasons', sa.JSON),
    sa.column('message', sa.Text),
    sa.column('created_at', sa.DateTime(timezone=True)),
)


def upgrade():
    op.create_table('study_decisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('run', sa.Integer(), nullable=False),
    sa.Column('decision', sa.String(length=16), nullable=False),
    sa.Column('reasons', sa.JSON(), nullable=False),
    sa.Column('rejection_category', sa.String(length=32), nullable=True),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('platform_status', sa.String(length=32), nullable=True),
    sa.Column('previous_status', sa.String(length=16), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['participant_id'], ['participants.id'], name=op.f('fk_study_decisions_participant_id_participants'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], name=op.f('fk_study_decisions_study_id_studies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study_decisions'))
    )
    with op.batch_alter_table('study_decisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_study_decisions_participant_id'), ['participant_id'], unique=False)
        batch_op.create_index('ix_study_decisions_study_run', ['study_id', 'run'], unique=False)

    op.create_table('study_bonuses',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('study_id', sa.Integer(), nullable=False),
    sa.Column('participant_id', sa.Integer(), nullable=False),
    sa.Column('run', sa.Integer(), nullable=False),
    sa.Column('amount_minor', sa.Integer(), nullable=False),
    sa.Column('issued_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['participant_id'], ['participants.id'], name=op.f('fk_study_bonuses_participant_id_participants'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['study_id'], ['studies.id'], name=op.f('fk_study_bonuses_study_id_studies'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_study_bonuses'))
    )
    with op.batch_alter_table('study_bonuses', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_study_bonuses_participant_id'), ['participant_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_study_bonuses_study_id'), ['study_id'], unique=False)

    # Plain ALTER TABLE, also on SQLite (3.35+ drops columns): a batch copy of participants would
    # drop the table, and with foreign keys on that deletes or blocks the rows that refer to it.
    op.add_column('participants', sa.Column('comprehension_failures', sa.Integer(), server_default='0', nullable=False))
    op.add_column('participants', sa.Column('left_at', sa.DateTime(timezone=True), nullable=True))

    conn = op.get_bind()
    decided = conn.execute(
        sa.select(participants).where(participants.c.status.in_(['approved', 'rejected']))
    ).all()
    now = datetime.now(timezone.utc)
    for row in decided:
        conn.execute(decisions.insert().values(
            study_id=row.study_id, participant_id=row.id, run=1,
            decision='approve' if row.status == 'approved' else 'reject',
            reasons=[row.decision_note] if row.decision_note else [], message='', created_at=now,
        ))
        conn.execute(participants.update().where(participants.c.id == row.id).values(
            status=row.outcome or 'completed'
        ))

    op.drop_column('participants', 'decision_note')


def downgrade():
    op.add_column('participants', sa.Column('decision_note', sa.Text(), server_default='', nullable=False))

    conn = op.get_bind()
    # The older code knows neither timed_out nor decisions kept apart.
    conn.execute(participants.update().where(participants.c.status == 'timed_out').values(
        status='returned'
    ))
    latest = conn.execute(
        sa.select(decisions.c.participant_id, decisions.c.decision, decisions.c.reasons)
        .order_by(decisions.c.id)
    ).all()
    final = {row.participant_id: row for row in latest}
    for participant_id, row in final.items():
        if row.decision in ('approve', 'reject'):
            conn.execute(participants.update().where(participants.c.id == participant_id).values(
                status='approved' if row.decision == 'approve' else 'rejected',
                decision_note='; '.join(row.reasons or []),
            ))

    op.drop_column('participants', 'left_at')
    op.drop_column('participants', 'comprehension_failures')

    with op.batch_alter_table('study_bonuses', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_study_bonuses_study_id'))
        batch_op.drop_index(batch_op.f('ix_study_bonuses_participant_id'))

    op.drop_table('study_bonuses')
    with op.batch_alter_table('study_decisions', schema=None) as batch_op:
        batch_op.drop_index('ix_study_decisions_study_run')
        batch_op.drop_index(batch_op.f('ix_study_decisions_participant_id'))

    op.drop_table('study_decisions')
