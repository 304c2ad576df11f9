"""Page numbers and cursors from the query string: a clear 400 for what is not one, never a 500.

A page past the last one shows the last page (a bookmark outlives the rows it pointed at).
"""

from __future__ import annotations

from app.errors import BadRequest

# Ids are 32-bit integers in PostgreSQL (a larger bound does not fit the column's type); a cursor
# beyond every id pages from the newest row.
MAX_CURSOR = 2**31 - 1


def page_number(raw: str | None, rows: int, per_page: int) -> int:
    """The 1-based page `raw` asks for among `rows` rows, at most the last page (1 with none).

    Raises BadRequest for anything but a whole number of at least 1 written in digits.
    """
    if raw is None:
        return 1
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12 or int(raw) < 1:
        raise BadRequest("The page number must be a whole number from 1.")
    last = max(-(-rows // per_page), 1)
    return min(int(raw), last)


def cursor(raw: str | None) -> int | None:
    """An id to page before (None: from the newest); BadRequest for anything else."""
    if raw is None:
        return None
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 12 or int(raw) < 1:
        raise BadRequest("“before” must be a row id, a whole number from 1.")
    return min(int(raw), MAX_CURSOR)
