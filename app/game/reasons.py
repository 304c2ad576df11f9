"""RoFT's eight reasons: re-exported from `roftcore.reasons`, the one definition."""

from __future__ import annotations

from roftcore.reasons import MAX_EXPLANATION_CHARS, REASONS, clean_reasons

__all__ = ["MAX_EXPLANATION_CHARS", "REASONS", "clean_reasons"]
