"""Extensions, created once and bound to an app in `create_app` with `init_app`."""

import functools
import hmac
import threading
from collections.abc import Callable
from typing import TypeVar

from cachetools import FIFOCache
from flask import Flask, current_app, g, request, session
from flask.globals import request_ctx
from flask_caching import Cache
from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf import CSRFProtect
from flask_wtf.csrf import logger as csrf_logger
from flask_wtf.csrf import same_origin, validate_csrf
from sqlalchemy import MetaData
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import DeclarativeBase
from wtforms import ValidationError

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


class SharedFIFOCache(FIFOCache):
    """cachetools' FIFOCache (the oldest entry goes once `maxsize` are kept), shared by a
    worker's threads: cachetools' caches are not thread-safe (a read racing an eviction raises
    KeyError), so each read and write holds the cache's lock."""

    def __init__(self, maxsize: int) -> None:
        super().__init__(maxsize)
        self._lock = threading.Lock()

    def get(self, key, default=None):
        with self._lock:
            return super().get(key, default)

    def __setitem__(self, key, value) -> None:
        with self._lock:
            super().__setitem__(key, value)


class CheckedTokensCSRF(CSRFProtect):
    """Flask-WTF's CSRF check, which checks the signature of a token once, not on every post.

    The page's script posts the same signed token with every reveal, answer and "Next text"
    (`_register_csrf_reuse` in `app/__init__.py`), and checking its signature (itsdangerous:
    a serializer built, base64, an HMAC and JSON) was the larger part of the check. Without a
    time limit on tokens (`WTF_CSRF_TIME_LIMIT` None, this site's setting) whether a token's
    signature is good depends on nothing but the token and the secret key: so the tokens whose
    signature was checked are kept (at most `CHECKED_TOKENS`) with what they carry, by key and
    token, and a token seen before is only compared with the session's secret, as
    `validate_csrf` compares it. Everything else is Flask-WTF's own check
    (`CSRFProtect.protect`): the same refusals with the same reasons, the same referrer check
    over HTTPS; with a time limit, every token is checked in full.
    """

    CHECKED_TOKENS = 4096

    def __init__(self, app=None) -> None:
        # (secret key, signed token) -> the session secret it carries, for good signatures only.
        self._checked = SharedFIFOCache(self.CHECKED_TOKENS)
        super().__init__(app)

    def _validate(self, data: str | None) -> None:
        config = current_app.config
        secret_key = config.get("WTF_CSRF_SECRET_KEY", current_app.secret_key)
        field = config.get("WTF_CSRF_FIELD_NAME", "csrf_token")
        if (
            config.get("WTF_CSRF_TIME_LIMIT", 3600) is not None
            or not data
            or not secret_key
            or not field
            or field not in session
        ):
            validate_csrf(data)  # refuses each of these as before, or checks a timed token
            return
        carried = self._checked.get((secret_key, data))
        if carried is None:
            validate_csrf(data)
            # The signature is good and what it carries is the session's secret.
            self._checked[secret_key, data] = session[field]
        elif not hmac.compare_digest(session[field], carried):
            raise ValidationError("The CSRF tokens do not match.")

    def protect(self, apply_exemptions: bool = False) -> None:
        """`CSRFProtect.protect` (Flask-WTF 1.3), with `_validate` for `validate_csrf`."""
        if apply_exemptions:
            if not request.endpoint:
                return
            if self._is_exempt():
                return
        if request.method not in current_app.config["WTF_CSRF_METHODS"]:
            return
        try:
            self._validate(self._get_csrf_token())
        except ValidationError as e:
            csrf_logger.info(e.args[0])
            self._error_response(e.args[0])
        if request.is_secure and current_app.config["WTF_CSRF_SSL_STRICT"]:
            if not request.referrer:
                self._error_response("The referrer header is missing.")
            good_referrer = f"https://{request.host}/"
            if not same_origin(request.referrer, good_referrer):
                self._error_response("The referrer does not match the host.")
        g.csrf_valid = True  # mark this request as CSRF valid


class RouteLimiter(Limiter):
    """Flask-Limiter, without its before-request check on requests it would find nothing for.

    Flask-Limiter checks every request before its view for limits that apply app-wide
    (`RATELIMIT_APPLICATION`, default limits, meta limits, a blueprint's limits) and, while its
    storage is unreachable, whether it is back. This site has none of them: its limits are on
    views (`@limiter.limit`), and the decorated view checks those itself when it is called. So
    the check is skipped while there is nothing app-wide to check and the storage is healthy,
    which saved the hot routes, none of them limited, a twentieth of a reveal's CPU. Any
    app-wide limit, or a storage outage, brings the check back on every request as before
    (`tests/test_request_stack.py`).
    """

    def _app_wide_check_needed(self) -> bool:
        # Flask-Limiter's own fields (4.1); one a later version lacks counts as needing the check.
        manager = self.limit_manager
        return bool(
            getattr(manager, "_application_limits", True)
            or getattr(manager, "_default_limits", True)
            or getattr(manager, "_blueprint_limits", True)
            or getattr(self, "_meta_limits", True)
            or getattr(self, "_in_memory_fallback", True)
            or getattr(self, "_storage_dead", True)
        )

    def _check_request_limit(
        self, callable_name: str | None = None, in_middleware: bool = True
    ) -> None:
        if in_middleware and callable_name is None and not self._app_wide_check_needed():
            return
        super()._check_request_limit(callable_name=callable_name, in_middleware=in_middleware)

    def init_app(self, app: Flask) -> None:
        """Flask-Limiter's after-request and teardown hooks run only for a request that checked
        a limit: they read and reset what the check left in the request's context (a limit to
        deduct on some responses, the limit for X-RateLimit headers), and a request that checked
        none has none; they would make that context only to find it empty."""
        super().init_app(app)
        if _LIMITER_MARK not in Limiter.context.fget.__code__.co_names:
            return  # not the Flask-Limiter this was written for: its hooks stay as they are
        inject = getattr(Limiter, "_Limiter__inject_headers", None)
        release = getattr(Limiter, "_Limiter__release_context", None)
        after = app.after_request_funcs.get(None, [])
        for position, hook in enumerate(after):
            if inject is not None and getattr(hook, "func", None) is inject:
                after[position] = _only_after_a_check(hook, lambda response: response)
        teardown = app.teardown_request_funcs.get(None, [])
        for position, hook in enumerate(teardown):
            if release is not None and getattr(hook, "__func__", None) is release:
                teardown[position] = _only_after_a_check(hook, lambda error=None: None)


# What Flask-Limiter (4.1) sets on a request's context when it first keeps anything for it.
_LIMITER_MARK = "_limiter_request_context"


def _only_after_a_check(hook: Callable, otherwise: Callable) -> Callable:
    @functools.wraps(hook)
    def run(*args):
        if hasattr(request_ctx, _LIMITER_MARK):
            return hook(*args)
        return otherwise(*args)

    return run


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CheckedTokensCSRF()
limiter = RouteLimiter(key_func=get_remote_address, default_limits=[])
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
