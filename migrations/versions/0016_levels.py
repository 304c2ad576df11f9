"""Difficulty levels of texts, and challenge-a-friend links.

`examples.difficulty` and `examples.level` hold a text's estimated difficulty and its level
("easy", "medium", "hard"; null until rated), written by `flask difficulty refresh`;
`game_sets.level` is the level a normal set's next texts are drawn from (null: any).
`game_sets.challenge_token` is the unguessable link of a finished set a player challenges a
friend with; a friend's run of those texts is a set of kind "challenge" whose `challenge_of_id`
names the challenger's set (one per friend).

Revision ID: 0016_levels
Revises: 0015_study_slots
Create Date: 2026-11-25

"""
import sqlalchemy as sa
from alembic import op


# revision identifiers, used by Alembic.
revision = '0016_levels'
down_revision = '0015_study_slots'
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table('examples', schema=None) as batch_op:
        batch_op.add_column(sa.Column('difficulty', sa.Float(), nullable=True))
        batch_op.add_column(sa.Column('level', sa.String(length=8), nullable=True))

    with op.batch_alter_table('game_sets', schema=None) as batch_op:
        batch_op.add_column(sa.Column('challenge_token', sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column('challenge_of_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('level', sa.String(length=8), nullable=True))
        batch_op.create_unique_constraint(
            'uq_game_sets_challenge_token', ['challenge_token']
        )
        batch_op.create_unique_constraint(
            'uq_game_sets_player_id_challenge_of_id', ['player_id', 'challenge_of_id']
        )
        batch_op.create_index(
            'ix_game_sets_challenge_of_id', ['challenge_of_id'], unique=False
        )
        batch_op.create_foreign_key(
            'fk_game_sets_challenge_of_id_game_sets',
            'game_sets',
            ['challenge_of_id'],
            ['id'],
            ondelete='CASCADE',
        )


def downgrade():
    with op.batch_alter_table('game_sets', schema=None) as batch_op:
        batch_op.drop_constraint('fk_game_sets_challenge_of_id_game_sets', type_='foreignkey')
        batch_op.drop_index('ix_game_sets_challenge_of_id')
        batch_op.drop_constraint('uq_game_sets_player_id_challenge_of_id', type_='unique')
        batch_op.drop_constraint('uq_game_sets_challenge_token', type_='unique')
        batch_op.drop_column('level')
        batch_op.drop_column('challenge_of_id')
        batch_op.drop_column('challenge_token')

    with op.batch_alter_table('examples', schema=None) as batch_op:
        batch_op.drop_column('level')
        batch_op.drop_column('difficulty')
