"""Links that leave the site, printed by the CLI or shown to researchers.

They start with PUBLIC_URL (the site's address as workers reach it), or SERVER_NAME with
PREFERRED_URL_SCHEME when only that is set: never with the address of the request or of the
machine that runs the command, which behind a proxy or in a terminal is not the public one.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from flask import current_app

# What each platform appends to the study URL (Prolific fills in its {{%…%}} placeholders).
ENTRY_QUERY = {
    "prolific": (
        "PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"
    ),
    "mturk": "",  # MTurk adds workerId, assignmentId, hitId and turkSubmitTo itself
    "generic": "pid=WORKER_ID",
}


def public_base() -> str | None:
    config = current_app.config
    if config.get("PUBLIC_URL"):
        return config["PUBLIC_URL"].rstrip("/")
    if config.get("SERVER_NAME"):
        root = (config.get("APPLICATION_ROOT") or "/").rstrip("/")
        return f"{config.get('PREFERRED_URL_SCHEME') or 'https'}://{config['SERVER_NAME']}{root}"
    return None


def public_url(endpoint: str, **values) -> str | None:
    """The public address of an endpoint; None when the site does not know it."""
    base = public_base()
    if base is None:
        return None
    # Built from the URL map itself, not in a made-up request (which TRUSTED_HOSTS would refuse).
    parts = urlsplit(base)
    adapter = current_app.url_map.bind(
        parts.netloc, script_name=parts.path or "/", url_scheme=parts.scheme
    )
    return adapter.build(endpoint, values, force_external=True)


def entry_link(study) -> str | None:
    """The study URL to paste into the platform, with the platform's parameters."""
    base = public_url("crowd.landing", slug=study.slug)
    if base is None:
        return None
    query = ENTRY_QUERY[study.platform]
    return f"{base}?{query}" if query else base
