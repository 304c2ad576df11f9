"""Errors shared by the planning modules (a leaf module: it imports nothing from the package)."""


class PlanError(ValueError):
    """Settings that cannot make a plan (N < 2, a p outside [0, 1], a bad share)."""
