"""How long until the next daily challenge: a new one starts at each UTC midnight (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta


@dataclass(frozen=True)
class Countdown:
    # When the next challenge starts (the next UTC midnight).
    next_at: datetime
    # Whole minutes left, rounded up (1 to 1440).
    minutes: int

    @property
    def words(self) -> str:
        """The time left as a person says it: "5 h 12 min", "12 min", "less than a minute"."""
        return describe(self.minutes)

    @property
    def iso_duration(self) -> str:
        """The time left as an ISO 8601 duration, for <time datetime=…>."""
        hours, minutes = divmod(self.minutes, 60)
        return f"PT{hours}H{minutes}M"

    @property
    def next_iso(self) -> str:
        return self.next_at.strftime("%Y-%m-%dT%H:%M:%SZ")


def next_start(now: datetime) -> datetime:
    """When the next challenge starts: the first UTC midnight after `now` (timezone-aware)."""
    day = now.astimezone(UTC).date()
    return datetime.combine(day + timedelta(days=1), time(0), tzinfo=UTC)


def countdown(now: datetime) -> Countdown:
    """The countdown from `now` to the next challenge, in whole minutes rounded up."""
    start = next_start(now)
    seconds = (start - now).total_seconds()
    return Countdown(start, int(-(-seconds // 60)))


def describe(minutes: int) -> str:
    if minutes <= 1:
        return "less than a minute"
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h {rest} min" if rest else f"{hours} h"
