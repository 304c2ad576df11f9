"""Pages, CSS and JS are sent compressed to browsers that accept it; static files are cached by
anyone (no `Vary: Cookie`)."""

from __future__ import annotations

import gzip
import re

import brotli
import pytest


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
