"""Reading a study file whole: its settings (app.crowd.config), then its [[conditions]]
(app.crowd.conditions) and its [preregistration] (app.crowd.preregistration) on top."""

from __future__ import annotations

import tomllib
from pathlib import Path

from app.crowd import conditions, preregistration
from app.crowd.config import StudyConfig, StudyConfigError, parse_settings


def parse_study(data: dict, source: str = "study") -> StudyConfig:
    """Validate a decoded study file; errors name the source and the key."""
    config = conditions.with_conditions(parse_settings(data, source), data, source)
    return preregistration.with_plan(config, data, source)


def load_study_file(path: Path) -> StudyConfig:
    """Read and validate a TOML study file; errors name the file (and line for syntax errors)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as error:
        raise StudyConfigError(str(path), "", f"cannot read file ({error.strerror})") from None
    try:
        data = tomllib.loads(raw)
    except tomllib.TOMLDecodeError as error:
        raise StudyConfigError(str(path), "", f"not valid TOML: {error}") from None
    return parse_study(data, str(path))
