"""The RoFT scoring rule and boundary distance: re-exported from `roftcore.boundary`, the one
definition shared by the site, generation and analysis."""

from __future__ import annotations

from roftcore.boundary import (
    MAX_POINTS,
    Verdict,
    distance,
    points,
    validate_boundary,
    verdict,
)

__all__ = ["MAX_POINTS", "Verdict", "distance", "points", "validate_boundary", "verdict"]
