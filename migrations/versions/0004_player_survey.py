"""The optional player survey: one row of answers per player (RoFT's five questions).

Revision ID: 0004_player_survey
Revises: 0003_leaderboard_at_scale
Create Date: 2026-11-23

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0004_player_survey'
down_revision = '0003_leaderboard_at_scale'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('player_surveys',
    sa.Column('player_id', sa.Integer(), nullable=False),
    sa.Column('recipe_familiarity', sa.Integer(), nullable=True),
    sa.Column('news_familiarity', sa.Integer(), nullable=True),
    sa.Column('stories_familiarity', sa.Integer(), nullable=True),
    sa.Column('gen_familiarity', sa.Integer(), nullable=True),
    sa.Column('native_speaker', sa.Integer(), nullable=True),
    sa.Column('answered_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['player_id'], ['players.id'], name=op.f('fk_player_surveys_player_id_players'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('player_id', name=op.f('pk_player_surveys'))
    )


def downgrade():
    op.drop_table('player_surveys')
