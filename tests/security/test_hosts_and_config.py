"""Trusted hosts (a forged Host header was echoed into redirects) and what production refuses to
start without: shared rate-limit storage (each worker counted alone) and its host names."""

from __future__ import annotations

import pytest

from app import create_app
from app.config import ConfigurationError


def test_a_forged_host_is_refused_not_echoed_into_a_redirect(client):
    forged = client.get("/research", headers={"Host": "evil.example"})
    assert forged.status_code == 400
    assert "evil.example" not in forged.headers.get("Location", "")
    assert "evil.example" not in forged.text
    # The site's own names still work, with a relative redirect.
    for host in ("localhost", "127.0.0.1:5000"):
        response = client.get("/research", headers={"Host": host})
        assert response.status_code == 308, host
        assert response.headers["Location"].endswith("/research/")


def test_trusted_hosts_come_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("TRUSTED_HOSTS", "roft.example.org, .roft.example.net")
    app = create_app({"TESTING": True, "SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"})
    client = app.test_client()
    assert client.get("/healthz", headers={"Host": "roft.example.org"}).status_code == 200
    assert client.get("/healthz", headers={"Host": "www.roft.example.net"}).status_code == 200
    assert client.get("/healthz", headers={"Host": "localhost"}).status_code == 400


@pytest.fixture
def production(monkeypatch, tmp_path):
    for name in ("REDIS_URL", "TRUSTED_HOSTS", "FLASK_ENV"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROFT_ENV", "production")
    return {"SQLALCHEMY_DATABASE_URI": f"sqlite:///{tmp_path}/x.db"}


def test_production_refuses_to_start_without_redis(production, monkeypatch):
    monkeypatch.setenv("TRUSTED_HOSTS", "roft.example.org")
    with pytest.raises(ConfigurationError, match="REDIS_URL"):
        create_app(production)


def test_production_refuses_to_start_without_trusted_hosts(production, monkeypatch):
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/9")
    with pytest.raises(ConfigurationError, match="TRUSTED_HOSTS"):
        create_app(production)


def test_production_starts_with_both_and_the_embedded_default_needs_neither(
    production, monkeypatch, tmp_path
):
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:6379/9")
    monkeypatch.setenv("TRUSTED_HOSTS", "roft.example.org")
    app = create_app(production)
    assert app.config["RATELIMIT_STORAGE_URI"] == "redis://127.0.0.1:6379/9"
    monkeypatch.delenv("ROFT_ENV")
    monkeypatch.delenv("REDIS_URL")
    monkeypatch.delenv("TRUSTED_HOSTS")
    default = create_app(production)  # what `make run` builds
    assert default.config["RATELIMIT_STORAGE_URI"] == "memory://"
    assert default.config["TRUSTED_HOSTS"] == ["localhost", "127.0.0.1"]
