"""Pages, CSS and JS are sent compressed to browsers that accept it; static files are cached by
anyone (no `Vary: Cookie`)."""

from __future__ import annotations

import gzip
import re

import brotli
import pytest

from tests import factories
from tests.conftest import csrf_token

SENTENCE_RE = re.compile(r'<li class="sentence[^"]*"[^>]*>([^<]+)</li>')


@pytest.mark.parametrize("encoding, decode", [("br", brotli.decompress), ("gzip", gzip.decompress)])
def test_pages_are_compressed(client, encoding, decode):
    plain = client.get("/").data
    packed = client.get("/", headers={"Accept-Encoding": encoding})
    assert packed.headers["Content-Encoding"] == encoding
    assert "Accept-Encoding" in packed.headers["Vary"]
    assert decode(packed.data) == plain and len(packed.data) < len(plain) / 2


def test_static_files_are_compressed_and_cached_without_vary_cookie(client):
    page = client.get("/").get_data(as_text=True)
    paths = re.findall(r"(/static/[\w.-]+\.(?:css|js)\?v=\w+)", page)
    assert len(paths) >= 2  # the stylesheet and the game's script
    for path in paths:
        plain = client.get(path)
        assert "Cookie" not in plain.headers.get("Vary", "") and "Set-Cookie" not in plain.headers
        assert "immutable" in plain.headers["Cache-Control"]
        packed = client.get(path, headers={"Accept-Encoding": "br"})
        assert packed.headers["Content-Encoding"] == "br"
        assert brotli.decompress(packed.data) == plain.data
        assert "Cookie" not in packed.headers["Vary"]
    # Pages still vary with the session.
    assert "Cookie" in client.get("/").headers["Vary"]


def test_nothing_is_compressed_without_accept_encoding(client):
    page = client.get("/")
    assert "Content-Encoding" not in page.headers and b"<html" in page.data
    for path in re.findall(r"(/static/[\w.-]+\.(?:css|js)\?v=\w+)", page.get_data(as_text=True)):
        static = client.get(path)
        assert "Content-Encoding" not in static.headers and len(static.data) > 500


def test_tiny_responses_and_png_images_are_sent_as_they_are(app):
    png = b"\x89PNG\r\n\x1a\n" + bytes(4000)  # compresses very well, yet must go out as is

    @app.get("/test-only/image.png")
    def image():
        return app.response_class(png, mimetype="image/png")

    client = app.test_client()
    sent = client.get("/test-only/image.png", headers={"Accept-Encoding": "br, gzip"})
    assert "Content-Encoding" not in sent.headers and sent.data == png
    tiny = client.get("/healthz", headers={"Accept-Encoding": "br, gzip"})
    assert tiny.status_code == 200 and len(tiny.data) < 500
    assert "Content-Encoding" not in tiny.headers


def test_round_fragments_for_the_page_script_are_compressed_and_whole(app):
    with app.app_context():
        factories.example(boundary=3, n=8)
    client = app.test_client()
    token = csrf_token(client)
    headers = {"X-Requested-With": "fetch", "Accept-Encoding": "br"}
    data = {"csrf_token": token, "category": "news"}
    started = client.post("/play", data=data, headers=headers)
    assert started.status_code == 200 and started.headers["Content-Encoding"] == "br"
    url = started.headers["X-Round-URL"]
    assert re.fullmatch(r"/play/round/\d+", url)
    first = brotli.decompress(started.data).decode()
    assert "<html" not in first and len(SENTENCE_RE.findall(first)) == 1
    revealed = client.post(f"{url}/next", data={**data, "seen": "1"}, headers=headers)
    assert revealed.headers["Content-Encoding"] == "br"
    assert revealed.headers["Cache-Control"] == "no-store"
    shown = SENTENCE_RE.findall(brotli.decompress(revealed.data).decode())
    # The same round as a whole page, uncompressed, shows the same two sentences.
    assert len(shown) == 2 and shown == SENTENCE_RE.findall(client.get(url).get_data(as_text=True))


def test_the_csrf_token_in_compressed_pages_changes_every_second(client, monkeypatch):
    """No secret stays the same across the requests a compression-length attack (BREACH)
    needs: the form token's signature covers the second it was made in (docs/security.md)."""
    import itsdangerous.timed

    now = [1_800_000_000]
    monkeypatch.setattr(itsdangerous.timed.TimestampSigner, "get_timestamp", lambda _: now[0])
    tokens = []
    for _ in range(3):
        tokens.append(csrf_token(client))
        now[0] += 1
    signatures = [token.rsplit(".", 1)[1] for token in tokens]
    assert len(set(tokens)) == 3 and len(set(signatures)) == 3
    assert all(len(signature) >= 27 for signature in signatures)


def test_compress_0_in_the_environment_turns_compression_off(make_app, monkeypatch):
    monkeypatch.setenv("COMPRESS", "0")
    app = make_app()
    page = app.test_client().get("/help", headers={"Accept-Encoding": "br, gzip"})
    assert page.status_code == 200 and "Content-Encoding" not in page.headers
    assert b"<html" in page.data and len(page.data) > 500
