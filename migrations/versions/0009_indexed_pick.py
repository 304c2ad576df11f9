"""Pick a text with two index lookups: (kind, annotation_count, id), per category too.

Revision ID: 0009_indexed_pick
Revises: 0008_provenance
Create Date: 2026-11-22

"""
from alembic import op


# revision identifiers, used by Alembic.
revision = '0009_indexed_pick'
down_revision = '0008_provenance'
branch_labels = None
depends_on = None


def upgrade():
    op.create_index('ix_examples_pick', 'examples', ['kind', 'annotation_count', 'id'])
    op.create_index(
        'ix_examples_pick_category', 'examples', ['category_id', 'kind', 'annotation_count', 'id']
    )
    op.drop_index('ix_examples_category_annotations', table_name='examples')


def downgrade():
    op.create_index(
        'ix_examples_category_annotations', 'examples', ['category_id', 'annotation_count']
    )
    op.drop_index('ix_examples_pick_category', table_name='examples')
    op.drop_index('ix_examples_pick', table_name='examples')
