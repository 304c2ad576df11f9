"""The real site plus one baseline route for `bench/web_load.py`; gunicorn serves it the same way.

`POST /bench/write` inserts one row and commits: the least a request that stores something can
cost on this stack (gunicorn, Flask with every hook the site installs, SQLAlchemy, the database).
Never deploy this module.
"""

from __future__ import annotations

from sqlalchemy import text

from app import create_app
from app.extensions import csrf, db

BASELINE_TABLE = "bench_writes"

app = create_app()


@app.post("/bench/write")
@csrf.exempt
def write_one_row():
    db.session.execute(text(f"INSERT INTO {BASELINE_TABLE} (note) VALUES (:note)"), {"note": "w"})
    db.session.commit()
    return "", 204
