"""Extensions, created once and bound to an app in `create_app` with `init_app`."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from flask import current_app
from flask_caching import Cache
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from sqlalchemy import MetaData
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import DeclarativeBase

# Named constraints let Alembic alter and drop them on every backend (SQLite batch mode too).
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()
limiter = Limiter(key_func=get_remote_address, default_limits=[])
cache = Cache()

T = TypeVar("T")


def add_or_theirs(row: T, theirs: Callable[[], T | None]) -> T | None:
    """Add `row` and commit. When a unique constraint says another request (a second tab, a
    double click) added the same row at the same moment, roll back and return theirs, looked up
    by `theirs()`."""
    db.session.add(row)
    try:
        db.session.commit()
    except IntegrityError:
        db.session.rollback()
        return theirs()
    return row


@contextmanager
def all_or_nothing() -> Iterator[None]:
    """Commit what the block wrote, or roll all of it back if anything in it fails."""
    try:
        yield
        db.session.commit()
    except Exception:
        db.session.rollback()
        raise


def commit_keeping(*keep: object) -> None:
    """Commit, keeping the loaded state of the objects in `keep`; every other object expires.

    A plain commit expires everything, so the page drawn next loads the player, the round and its
    text again. The caller must first bring what it changed with SQL statements up to date on the
    kept objects (`sqlalchemy.orm.attributes.set_committed_value`) or expire those attributes.
    A proxy (`current_user`) stands for the object behind it.
    """
    session = db.session()
    kept = {id(getattr(obj, "_get_current_object", lambda obj=obj: obj)()) for obj in keep}
    session.expire_on_commit = False
    try:
        session.commit()
    finally:
        session.expire_on_commit = True
    for obj in list(session.identity_map.values()):
        if id(obj) not in kept:
            session.expire(obj)


# PostgreSQL aborts a transaction it picked to break a deadlock (SQLSTATE 40P01), or one it could
# not serialise (40001); such a transaction is run again, at most this many times in all.
TRANSACTION_ATTEMPTS = 3
RETRYABLE_SQLSTATES = frozenset({"40P01", "40001"})


def retrying(work: Callable[[], T], what: str) -> T:
    """Run `work` (a transaction, committed inside it) and return its result; when PostgreSQL
    aborts it as a deadlock's victim or a serialization failure, roll back, log a warning naming
    `what`, and run it again (TRANSACTION_ATTEMPTS in all).

    `work` must be safe to repeat from its start after a rollback: everything it did before its
    commit is undone then, so it must not have sent mail, paid, or changed anything outside the
    database that a second run would do again.
    """
    for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
        try:
            return work()
        except OperationalError as error:
            sqlstate = getattr(error.orig, "sqlstate", None)
            if sqlstate not in RETRYABLE_SQLSTATES or attempt == TRANSACTION_ATTEMPTS:
                raise
            db.session.rollback()
            current_app.logger.warning(
                "%s retried (attempt %s failed with %s)", what, attempt, sqlstate
            )
    raise AssertionError("unreachable")
