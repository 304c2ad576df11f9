"""Fixtures of the crowd tests."""

from __future__ import annotations

import pytest

from app.crowd import admission, serving, slots, verdicts
from tests.factories import Clock, use_clock


@pytest.fixture
def clock(monkeypatch) -> Clock:
    """The game's and the study's clock, moved by hand: the workers read at a human pace."""
    return use_clock(monkeypatch, admission, serving, verdicts, slots)
