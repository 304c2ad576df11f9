"""A game people come back to: sets, the daily challenge, passages, votes.

- `game_sets`: a player's sets of texts (normal, or one daily challenge per UTC day) with running
  figures; `rounds.set_id` ties a round to its set.
- `daily_challenges`: the texts of each day's challenge, drawn from examples of kind "daily".
- `passages`, `example_passages`, `passage_reads`: the human source passages behind each example,
  so that a player is never served another variant of a passage they have read. Existing examples
  and rounds are backfilled here (keys as in app/catalog/passages.py, frozen in this file).
- `explanation_votes`, `rounds.upvotes`, `rounds.explanation_hidden_at`: votes on explanations and
  a researcher's hiding of one.

Revision ID: 0005_game_people_return
Revises: 0004_player_survey
Create Date: 2026-11-22

"""
import hashlib
import json

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '0005_game_people_return'
down_revision = '0004_player_survey'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table('daily_challenges',
    sa.Column('day', sa.Date(), nullable=False),
    sa.Column('example_ids', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('day', name=op.f('pk_daily_challenges'))
    )
    op.create_table('passages',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('key', sa.String(length=400), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_passages')),
    sa.UniqueConstraint('key', name=op.f('uq_passages_key'))
    )
    op.create_table('game_sets',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('player_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('size', sa.Integer(), nullable=False),
    sa.Column('day', sa.Date(), nullable=True),
    sa.Column('answered', sa.Integer(), nullable=False),
    sa.Column('points', sa.Integer(), nullable=False),
    sa.Column('exact', sa.Integer(), nullable=False),
    sa.Column('share_token', sa.String(length=32), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['player_id'], ['players.id'], name=op.f('fk_game_sets_player_id_players'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_game_sets')),
    sa.UniqueConstraint('player_id', 'day', name=op.f('uq_game_sets_player_id_day')),
    sa.UniqueConstraint('share_token', name=op.f('uq_game_sets_share_token'))
    )
    with op.batch_alter_table('game_sets', schema=None) as batch_op:
        batch_op.create_index('ix_game_sets_day_finished', ['day', 'finished_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_game_sets_player_id'), ['player_id'], unique=False)
        batch_op.create_index('uq_game_sets_one_open_per_player', ['player_id'], unique=True, sqlite_where=sa.text("finished_at IS NULL AND kind = 'normal'"), postgresql_where=sa.text("finished_at IS NULL AND kind = 'normal'"))

    op.create_table('passage_reads',
    sa.Column('player_id', sa.Integer(), nullable=False),
    sa.Column('passage_id', sa.Integer(), nullable=False),
    sa.Column('read_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['passage_id'], ['passages.id'], name=op.f('fk_passage_reads_passage_id_passages')),
    sa.ForeignKeyConstraint(['player_id'], ['players.id'], name=op.f('fk_passage_reads_player_id_players'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('player_id', 'passage_id', name=op.f('pk_passage_reads'))
    )
    op.create_table('example_passages',
    sa.Column('example_id', sa.Integer(), nullable=False),
    sa.Column('passage_id', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['example_id'], ['examples.id'], name=op.f('fk_example_passages_example_id_examples'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['passage_id'], ['passages.id'], name=op.f('fk_example_passages_passage_id_passages')),
    sa.PrimaryKeyConstraint('example_id', 'passage_id', name=op.f('pk_example_passages'))
    )
    with op.batch_alter_table('example_passages', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_example_passages_passage_id'), ['passage_id'], unique=False)

    op.create_table('explanation_votes',
    sa.Column('round_id', sa.Integer(), nullable=False),
    sa.Column('voter_id', sa.Integer(), nullable=False),
    sa.Column('voted_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_explanation_votes_round_id_rounds'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['voter_id'], ['players.id'], name=op.f('fk_explanation_votes_voter_id_players'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('round_id', 'voter_id', name=op.f('pk_explanation_votes'))
    )
    with op.batch_alter_table('explanation_votes', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_explanation_votes_voter_id'), ['voter_id'], unique=False)

    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.add_column(sa.Column('set_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('upvotes', sa.Integer(), server_default='0', nullable=False))
        batch_op.add_column(sa.Column('explanation_hidden_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f('ix_rounds_set_id'), ['set_id'], unique=False)
        batch_op.create_foreign_key(batch_op.f('fk_rounds_set_id_game_sets'), 'game_sets', ['set_id'], ['id'], ondelete='SET NULL')

    _backfill_passages()


MAX_KEY = 400


def _key(text):
    return text if len(text) <= MAX_KEY else "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def _passage_keys(source, external_id):
    """Frozen copy of app.catalog.passages.passage_keys as of this revision."""
    if isinstance(source, str):
        source = json.loads(source or "{}")
    source = source or {}
    dataset = str(source.get("dataset") or "").strip()
    doc = source.get("doc_id")
    keys = [_key(f"{dataset}/{doc}" if doc not in (None, "") else f"example/{external_id}")]
    splice = source.get("splice_doc_id")
    if splice not in (None, ""):
        spliced = _key(f"{dataset}/{splice}")
        if spliced not in keys:
            keys.append(spliced)
    return keys


def _backfill_passages():
    conn = op.get_bind()
    examples = sa.table("examples", sa.column("id"), sa.column("external_id"), sa.column("source"))
    passages = sa.table("passages", sa.column("id"), sa.column("key"))
    links = sa.table("example_passages", sa.column("example_id"), sa.column("passage_id"))
    ids = {}
    pairs = []
    for example_id, external_id, source in conn.execute(
        sa.select(examples.c.id, examples.c.external_id, examples.c.source)
    ):
        for key in _passage_keys(source, external_id):
            if key not in ids:
                ids[key] = len(ids) + 1
            pairs.append({"example_id": example_id, "passage_id": ids[key]})
    if not ids:
        return
    op.bulk_insert(passages, [{"id": i, "key": k} for k, i in ids.items()])
    op.bulk_insert(links, pairs)
    if conn.dialect.name == "postgresql":
        op.execute("SELECT setval('passages_id_seq', (SELECT MAX(id) FROM passages))")
    op.execute(
        "INSERT INTO passage_reads (player_id, passage_id, read_at) "
        "SELECT r.player_id, ep.passage_id, MIN(r.started_at) FROM rounds r "
        "JOIN example_passages ep ON ep.example_id = r.example_id "
        "GROUP BY r.player_id, ep.passage_id"
    )


def downgrade():
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_rounds_set_id_game_sets'), type_='foreignkey')
        batch_op.drop_index(batch_op.f('ix_rounds_set_id'))
        batch_op.drop_column('explanation_hidden_at')
        batch_op.drop_column('upvotes')
        batch_op.drop_column('set_id')

    with op.batch_alter_table('explanation_votes', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_explanation_votes_voter_id'))

    op.drop_table('explanation_votes')
    with op.batch_alter_table('example_passages', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_example_passages_passage_id'))

    op.drop_table('example_passages')
    op.drop_table('passage_reads')
    with op.batch_alter_table('game_sets', schema=None) as batch_op:
        batch_op.drop_index('uq_game_sets_one_open_per_player', sqlite_where=sa.text("finished_at IS NULL AND kind = 'normal'"), postgresql_where=sa.text("finished_at IS NULL AND kind = 'normal'"))
        batch_op.drop_index(batch_op.f('ix_game_sets_player_id'))
        batch_op.drop_index('ix_game_sets_day_finished')

    op.drop_table('game_sets')
    op.drop_table('passages')
    op.drop_table('daily_challenges')
