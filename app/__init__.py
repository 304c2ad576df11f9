"""The RoFT site: `create_app()` builds a configured Flask app with no database side effects."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flask import Flask, abort, g, redirect, render_template, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from flask_limiter import RateLimitExceeded
from flask_wtf.csrf import CSRFError
from itsdangerous import URLSafeTimedSerializer
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import SecurityError
from werkzeug.middleware.proxy_fix import ProxyFix

from app.config import PROJECT_ROOT, build_config, check_production
from app.crowd.platforms import MTURK_SUBMIT_ORIGINS
from app.database import begin_only_for_writes, ping_after_idle
from app.errors import ServiceError
from app.extensions import cache, csrf, db, limiter, login_manager, migrate
from app.logs import configure_logging


@event.listens_for(Engine, "connect")
def _sqlite_pragmas(dbapi_connection, connection_record):
    """WAL, a busy timeout and enforced foreign keys for every SQLite connection."""
    module = type(dbapi_connection).__module__
    if not module.startswith("sqlite3"):
        return
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


class FramedSessionInterface(SecureCookieSessionInterface):
    """A framed MTurk task only keeps its cookie when it is SameSite=None; Secure (HTTPS)."""

    # SHA-1 as Flask signs with it (`_lazy_sha1` calls it), given as OpenSSL's function itself,
    # which `hmac` runs in C: a Python function as the digest sends each HMAC through its
    # pure-Python fallback. The same signatures, made and checked in less time.
    digest_method = staticmethod(hashlib.sha1)

    # The keys and the serializer built with them (replaced as a whole: threads share it).
    _signing: tuple[tuple, URLSafeTimedSerializer | None] | None = None

    def get_signing_serializer(self, app: Flask) -> URLSafeTimedSerializer | None:
        """Flask's serializer, built once per secret key and fallbacks rather than for every
        request: building one serializes a test value (itsdangerous checks that its serializer
        writes text), a quarter of reading the cookie. A change of the keys builds a new one,
        so a cookie signed with a dropped key is refused as before."""
        keys = (app.secret_key, tuple(app.config["SECRET_KEY_FALLBACKS"] or ()))
        signing = self._signing
        if signing is None or signing[0] != keys:
            signing = (keys, super().get_signing_serializer(app))
            self._signing = signing
        return signing[1]

    def _framed(self) -> bool:
        return request.is_secure and (
            request.path.startswith("/study/") or bool(session.get("frame_mturk"))
        )

    def get_cookie_samesite(self, app: Flask) -> str | None:
        return "None" if self._framed() else super().get_cookie_samesite(app)

    def get_cookie_secure(self, app: Flask) -> bool:
        return True if self._framed() else super().get_cookie_secure(app)

    def save_session(self, app: Flask, session, response) -> None:
        # A static file is the same for everyone: no cookie and no `Vary: Cookie`, so that
        # shared caches may keep it (Flask-Login reads the session on every response).
        if request.endpoint == "static" and not session.modified:
            return
        # A session kept as it was (most requests): Flask works out the cookie's attributes and
        # only adds `Vary: Cookie` if the session was read. So does this, without the attributes;
        # whether the page is framed is still asked first, as Flask asks it (it may read the
        # session), and before `should_set_cookie` reads `permanent`, which counts as a read.
        self._framed()
        accessed = session.accessed
        if not self.should_set_cookie(app, session):
            if accessed:
                response.vary.add("Cookie")
            return
        super().save_session(app, session, response)


class Site(Flask):
    """Flask, remembering which hooks and views are plain functions.

    Flask asks of every hook and view, on every request, whether it is a coroutine function
    (`ensure_sync`, through `inspect`): some twenty questions a request, with the same answers.
    A function found plain is remembered (the object itself, so that no other can take its
    place; at most `PLAIN_KEPT`, then they are found again); anything else goes to Flask as
    before.
    """

    PLAIN_KEPT = 1024

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        plain = self.__dict__.get("_plain")
        if plain is None:
            plain = self._plain = set()
        try:
            if func in plain:
                return func
        except TypeError:  # an unhashable callable
            return super().ensure_sync(func)
        synced = super().ensure_sync(func)
        if synced is func:
            if len(plain) >= self.PLAIN_KEPT:
                plain.clear()  # per-request functions (`after_this_request`) pile up
            plain.add(func)
        return synced


def create_app(overrides: dict | None = None) -> Flask:
    app = Site(__name__, instance_path=str(PROJECT_ROOT / "instance"))
    app.jinja_env.trim_blocks = True
    app.jinja_env.lstrip_blocks = True
    app.config.update(build_config(Path(app.instance_path)))
    if overrides:
        app.config.update(overrides)
    check_production(app.config)

    app.session_interface = FramedSessionInterface()
    if app.config.get("PROXY_FIX"):
        # Behind one reverse proxy: trust its X-Forwarded-For/Proto/Host for client address,
        # HTTPS detection (Secure cookies) and URLs.
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1)
    db.init_app(app)
    with app.app_context():
        for engine in db.engines.values():
            ping_after_idle(engine, app.config["DATABASE_PING_AFTER_IDLE_S"])
            begin_only_for_writes(engine)
    migrate.init_app(app, db, directory=str(PROJECT_ROOT / "migrations"))
    login_manager.init_app(app)
    _register_form_check(app)  # before Flask-WTF's check, which reads the form
    csrf.init_app(app)
    _register_csrf_reuse(app)
    limiter.init_app(app)
    cache.init_app(app)

    from app import models  # noqa: F401  (registers the tables)
    from app.accounts.routes import bp as accounts_bp
    from app.crowd.routes import bp as crowd_bp

    # The game's views in modules of their own add themselves to its blueprint.
    from app.game import challenge_views, daily_views  # noqa: F401
    from app.game.routes import bp as game_bp
    from app.health import bp as health_bp
    from app.leaderboard.routes import bp as leaderboard_bp
    from app.pages import bp as pages_bp
    from app.research.routes import bp as research_bp

    blueprints = (pages_bp, game_bp, accounts_bp, leaderboard_bp, research_bp, crowd_bp, health_bp)
    _load_commands()  # first: register_blueprint copies each blueprint's commands onto app.cli
    for blueprint in blueprints:
        app.register_blueprint(blueprint)
    from app.crowd import hooks as crowd_hooks

    crowd_hooks.connect()  # the studies' part in the game's rounds

    from app.cli import register_cli
    from app.leaderboard import integrity

    register_cli(app)
    integrity.init_app(app)
    configure_logging(app)
    _register_error_pages(app)
    _register_security_headers(app)
    _register_static_versions(app)
    _register_links(app)
    _register_compression(app)
    return app


def _load_commands() -> None:
    """Import each package's command-line modules; each adds its commands to its blueprint's
    `cli` when imported (once, whatever the number of apps). The blueprints have `cli_group=None`,
    so their commands sit at the top of `flask` (`flask study`, `flask export`...); the crowd's
    `*_cli` modules add theirs to the one `study` group of app/crowd/cli.py."""
    from app.accounts import cli as accounts_cli  # noqa: F401
    from app.crowd import cli as crowd_cli  # noqa: F401
    from app.crowd import fraud_cli, plan_cli, prolific_cli, verify_cli  # noqa: F401
    from app.game import cli as game_cli  # noqa: F401
    from app.leaderboard import cli as leaderboard_cli  # noqa: F401
    from app.research import cli as research_cli  # noqa: F401
    from app.research import validation_cli  # noqa: F401


def _register_form_check(app: Flask) -> None:
    """A form part whose name cannot be read (a multipart header with a line break in it) gets
    a 400 that says so, before anything reads the form: Flask-WTF's token check would stop on
    the nameless field with an error (a 500)."""

    @app.before_request
    def refuse_nameless_form_fields() -> None:
        if request.method in ("POST", "PUT", "PATCH", "DELETE") and None in request.form:
            abort(400, description="The form has a field without a readable name.")


def _register_csrf_reuse(app: Flask) -> None:
    """A post whose CSRF token was just checked answers with that same token in its forms.

    Flask-WTF signs a new token for every response that shows a form; the page's script posts a
    token and gets a form back on every reveal, answer and "Next text". The token it sent was
    checked against this session's secret a moment ago (`csrf_protect` runs first), and with no
    time limit on tokens (`WTF_CSRF_TIME_LIMIT`, None by default) a new one would be worth
    exactly as much: the same secret, no expiry. So it is reused, and no token is signed. With a
    time limit, each response gets a fresh token as before. A rotation of the secret during the
    request (a login, a study join: `app/accounts/sessions.rotate_csrf`) drops the reused token
    with the secret, and the page gets a new one.
    """

    @app.before_request
    def reuse_checked_csrf_token() -> None:
        if not g.get("csrf_valid") or app.config.get("WTF_CSRF_TIME_LIMIT") is not None:
            return
        field = app.config.get("WTF_CSRF_FIELD_NAME", "csrf_token")
        if field in g:
            return
        if token := _checked_csrf_token(field, app.config.get("WTF_CSRF_HEADERS", ())):
            setattr(g, field, token)


def _checked_csrf_token(field: str, headers) -> str | None:
    """The token `csrf_protect` checked, found where Flask-WTF looks for it, in its order: the
    form's field, a field ending in its name (a prefixed form), then the headers."""
    if token := request.form.get(field):
        return token
    for key in request.form:
        if key.endswith(field) and (token := request.form[key]):
            return token
    for header in headers:
        if token := request.headers.get(header):
            return token
    return None


def _register_compression(app: Flask) -> None:
    """Pages, CSS and JS go out compressed (brotli, else gzip) to browsers that accept it."""
    from flask_compress import Compress

    app.config.setdefault("COMPRESS_ALGORITHM", ["br", "gzip"])
    app.config.setdefault("COMPRESS_ALGORITHM_STREAMING", ["br", "deflate"])
    Compress(app)


def _register_links(app: Flask) -> None:
    """`link('game.home')` in templates: the address of a page without parameters, built once
    per app root instead of on every page (the layout links to a dozen pages)."""
    built: dict[tuple[str, str], str] = {}

    def link(endpoint: str) -> str:
        key = (request.script_root, endpoint)
        if key not in built:
            built[key] = url_for(endpoint)
        return built[key]

    app.jinja_env.globals["link"] = link


STATIC_MAX_AGE = 365 * 24 * 3600


def _register_static_versions(app: Flask) -> None:
    """Static URLs carry a hash of the file's content (`?v=…`), so browsers may keep them for a
    year: a changed file gets a new URL."""
    digests: dict[tuple[str, float], str] = {}

    def digest(filename: str) -> str:
        path = Path(app.static_folder or "") / filename
        try:
            key = (filename, path.stat().st_mtime)
        except OSError:
            return ""
        if key not in digests:
            digests[key] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
        return digests[key]

    @app.url_defaults
    def versioned(endpoint: str, values: dict) -> None:
        if endpoint == "static" and "filename" in values and "v" not in values:
            version = digest(values["filename"])
            if version:
                values["v"] = version

    @app.after_request
    def cache_static(response):
        if request.endpoint == "static" and response.status_code == 200:
            filename = (request.view_args or {}).get("filename", "")
            if request.args.get("v") and request.args.get("v") == digest(filename):
                response.headers["Cache-Control"] = f"public, max-age={STATIC_MAX_AGE}, immutable"
            else:
                response.headers["Cache-Control"] = "no-cache"
        return response

    @app.get("/favicon.ico")
    def favicon():
        return redirect(url_for("static", filename="favicon.svg"), 301)


def _forget_failed_work() -> None:
    """Roll back, and render the error page as for a visitor: loading the signed-in player (or
    reading the one the rollback just expired) would query a failing database again."""
    db.session.rollback()
    g._login_user = login_manager.anonymous_user()


def _register_error_pages(app: Flask) -> None:
    def page(title: str, message: str, status: int):
        return render_template("errors/message.html", title=title, message=message), status

    @app.errorhandler(ServiceError)
    def service_error(error: ServiceError):
        return page("Sorry", error.message, error.status)

    @app.errorhandler(SecurityError)
    def untrusted_host(error: SecurityError):
        # No page template: links cannot be built for a host the site does not answer to.
        return (
            "Bad request: this site does not answer to that host name.\n",
            400,
            {"Content-Type": "text/plain; charset=utf-8"},
        )

    @app.errorhandler(CSRFError)
    def csrf_error(error: CSRFError):
        return page(
            "Please try again",
            "This form had expired or came from another site. Reload the page and try again.",
            400,
        )

    @app.errorhandler(400)
    def bad_request(error):
        return page("Bad request", getattr(error, "description", "Bad request."), 400)

    for status, title, message in (
        (403, "Not allowed", "You do not have access to this page."),
        (404, "Not found", "There is nothing at this address."),
        (405, "Not allowed", "This address does not accept that kind of request."),
    ):
        app.register_error_handler(
            status, lambda error, t=title, m=message, s=status: page(t, m, s)
        )

    @app.errorhandler(429)
    def too_many(error):
        body, status = page(
            "Slow down", "Too many attempts. Please wait a minute and try again.", 429
        )
        # The limit that refused the request: when its window ends (one storage read, only on
        # a refusal; the limiter's own headers are off).
        refused = limiter.current_limit if isinstance(error, RateLimitExceeded) else None
        if refused is None:
            return body, status
        wait = max(1, int(refused.reset_at - time.time()))
        return body, status, {"Retry-After": str(wait)}

    @app.errorhandler(OperationalError)
    def database_unavailable(error):
        _forget_failed_work()
        app.logger.warning("database unavailable: %s", error.orig)
        response = page(
            "Back in a moment",
            "The site cannot reach its database right now. Please try again in a minute; "
            "nothing you did was lost.",
            503,
        )
        return response[0], 503, {"Retry-After": "30"}

    @app.errorhandler(500)
    def server_error(error):
        _forget_failed_work()
        return page("Something went wrong", "Our fault, not yours. Please try again.", 500)


CSP = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
    "form-action 'self'{forms}; base-uri 'none'; frame-ancestors {frames}"
)


def _mturk_frame_allowed() -> bool:
    """MTurk frames study pages and the rounds of an MTurk worker; nothing else is framed."""
    if request.blueprint == "crowd":
        return bool(g.get("allow_mturk_frame"))
    return request.blueprint == "game" and bool(session.get("frame_mturk"))


# The policy of every page MTurk does not frame (built once).
_UNFRAMED_CSP = CSP.format(forms="", frames="'none'")


def _register_security_headers(app: Flask) -> None:
    @app.after_request
    def headers(response):
        # Each header is added unless the view set it; the names it has are read in one pass
        # (Werkzeug's `setdefault` looks through all of them for each header).
        present = {key.lower() for key, _ in response.headers}
        if _mturk_frame_allowed():
            csp = CSP.format(
                forms=" " + MTURK_SUBMIT_ORIGINS, frames=app.config["MTURK_FRAME_ANCESTORS"]
            )
        else:
            csp = _UNFRAMED_CSP
            if "x-frame-options" not in present:
                response.headers.add("X-Frame-Options", "DENY")
        if "content-security-policy" not in present:
            response.headers.add("Content-Security-Policy", csp)
        if "x-content-type-options" not in present:
            response.headers.add("X-Content-Type-Options", "nosniff")
        if "referrer-policy" not in present:
            response.headers.add("Referrer-Policy", "same-origin")
        if request.endpoint and request.endpoint.startswith("game."):
            # Round pages change with every reveal; never serve them from a cache.
            response.headers["Cache-Control"] = "no-store"
        return response

    def cookie_attributes(response):
        """Every cookie set or cleared is HttpOnly and SameSite (Flask-Login clears its remember
        cookie without them)."""
        cookies = response.headers.getlist("Set-Cookie")
        hardened = []
        for cookie in cookies:
            attributes = {part.split("=")[0].strip().lower() for part in cookie.split(";")[1:]}
            if "httponly" not in attributes:
                cookie += "; HttpOnly"
            if "samesite" not in attributes:
                cookie += f"; SameSite={app.config.get('REMEMBER_COOKIE_SAMESITE') or 'Lax'}"
            hardened.append(cookie)
        if hardened != cookies:
            response.headers.setlist("Set-Cookie", hardened)
        return response

    # After-request functions run last-registered first: at the head of the list, this one runs
    # after all the others, Flask-Login's included.
    app.after_request_funcs.setdefault(None, []).insert(0, cookie_attributes)
