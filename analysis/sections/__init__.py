"""The report's sections. Each module runs one analysis and returns its tables, figures, Markdown
and summary.json entries (a `Section`); analysis.report only assembles them in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass
class Context:
    """What every section reads: the rows before and after cleaning, and the settings."""

    settings: Any  # analysis.report.ReportSettings
    out: Path
    frame: pd.DataFrame  # all rows of the selection
    filtered: pd.DataFrame  # after the cleaning filters, with integer cluster codes
    steps: pd.DataFrame  # the cleaning filters' table
    duplicates: dict
    info: dict  # the export's manifest (empty for roft.csv)
    provenance: dict
    shared: dict = field(default_factory=dict)  # results one section hands to a later one
    # Crowd workers the decisions step left out, and why (analysis.cleaning.decision_filter).
    left_out: pd.DataFrame = field(default_factory=pd.DataFrame)
    # The export's preregistration.json (analysis.load.read_preregistration), None without one.
    preregistration: dict | None = None

    @property
    def boot(self) -> int:
        return self.settings.bootstrap

    @property
    def seed(self) -> int:
        return self.settings.seed


@dataclass
class Section:
    markdown: list[str] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    figures: list[str] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
