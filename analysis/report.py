"""The full report: tables (CSV), figures (PNG), summary.json, report.md and the HEDS datasheet.

`build_report(input, out)` loads and cleans the rows, then runs the sections of
`analysis.sections` in order (each one analysis with its tables, figure and caveats) and only
assembles what they return. The first is the preregistered analysis when the export has a plan
(preregistration.json); everything after it is exploratory. Every estimate has a 95% interval
(bootstrap over annotators, or over texts for agreement), every figure panel says its n, and
baselines (random guessing, always "all human", chance agreement) are drawn where they apply.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import pandas as pd

import analysis
from analysis import cleaning, inference
from analysis.load import (
    LoadError,
    apply_selection,
    load,
    read_export_info,
    read_preregistration,
    resolve_input,
    sha256_of,
)
from analysis.render import clean_json
from analysis.sections import (
    Context,
    agreement,
    confirmatory,
    datasheet,
    detector,
    distance,
    factors,
    hint,
    learning,
    reasons,
    sizes,
    skill,
)
from analysis.sections.sizes import headline  # noqa: F401 (re-exported: tests and exports use it)
from roftcore.boundary import CONVENTION
from roftcore.spreadsheet import neutralise_frame
from roftcore.version import code_version

SECTIONS = (
    ("confirmatory", confirmatory),
    ("sizes", sizes),
    ("boundary", distance),
    ("factors", factors),
    ("learning", learning),
    ("skill", skill),
    ("agreement", agreement),
    ("comments", reasons),
    ("heds", datasheet),
    ("detector", detector),
    ("detector_hint", hint),
)


@dataclass
class ReportSettings:
    min_median_seconds: float = 5.0
    straight_line_k: int = 10
    double_submit_seconds: float = 30.0
    min_rounds: int | None = None  # None: 10, or fewer for a crowd study's fewer rounds
    session_length: int = 10
    bootstrap: int = 1000
    seed: int = 0
    max_comments: int = 20_000
    clusters: int = 8
    categories: list[str] = field(default_factory=list)
    systems: list[str] = field(default_factory=list)
    since: str | None = None
    detections: str | None = None  # detections.csv from `python -m analysis detect`
    all_workers: bool = False  # crowd studies: keep every worker, not only the approved
    coder_labels: str | None = None  # researchers' labels of a sample of the comments (CSV)


def _levels(frame: pd.DataFrame, column: str, limit: int = 12) -> str:
    values = sorted(frame[column].dropna().astype(str).unique())
    shown = ", ".join(values[:limit]) + (
        f", … ({len(values)} in all)" if len(values) > limit else ""
    )
    return shown or "none"


def select(frame: pd.DataFrame, settings: ReportSettings) -> pd.DataFrame:
    """The rows the selection options keep; a LoadError naming the option when none are left."""
    if frame.empty:
        raise LoadError("the input has no annotations")
    checks = [
        ("--category", settings.categories, lambda: apply_selection(frame, settings.categories)),
        ("--system", settings.systems, lambda: apply_selection(frame, None, settings.systems)),
        ("--since", settings.since, lambda: apply_selection(frame, None, None, settings.since)),
    ]
    for option, value, kept in checks:
        if value and kept().empty:
            if option == "--since":
                latest = frame["date"].max()
                where = (
                    f"the latest answer is {latest:%Y-%m-%d}"
                    if pd.notna(latest)
                    else ("the input has no dates")
                )
                raise LoadError(f"--since {value} matches no annotations ({where})")
            column = "category" if option == "--category" else "system"
            raise LoadError(
                f"{option} {', '.join(value)} matches no annotations "
                f"({column} values in the input: {_levels(frame, column)})"
            )
    selected = apply_selection(frame, settings.categories, settings.systems, settings.since)
    if selected.empty:
        used = [
            f"{option} {value if isinstance(value, str) else ', '.join(value)}"
            for option, value, _ in checks
            if value
        ]
        raise LoadError(f"{' with '.join(used)} match no annotation together")
    return selected


def build_report(
    input_path: str | Path, out: str | Path, settings: ReportSettings | None = None
) -> dict:
    """Run every section and write the report folder; returns the summary dictionary."""
    settings = settings or ReportSettings()
    out = Path(out)
    timings: dict[str, float] = {}
    clock = time.perf_counter()

    def tick(name: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[name] = round(now - clock, 3)
        clock = now

    source_file = resolve_input(input_path)
    provenance = {
        "code_version": code_version("analysis", analysis.__version__),
        "input": str(input_path),
        "input_file": source_file.name,
        "input_sha256": sha256_of(source_file),
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }
    frame = select(load(input_path), settings)
    info = read_export_info(input_path)
    preregistration = read_preregistration(input_path)
    tick("load")
    cleaned = cleaning.clean(
        frame,
        cleaning.FilterSettings(
            settings.min_median_seconds,
            settings.straight_line_k,
            settings.double_submit_seconds,
            approved_only=not settings.all_workers,
        ),
    )
    if cleaned.frame.empty:
        last = cleaned.steps[cleaned.steps["rows_removed"] > 0].tail(1)
        step = last["step"].iloc[0] if len(last) else "the cleaning filters"
        if step == "decisions":
            raise LoadError(
                "no crowd worker is approved yet, so no annotation is left (left out: "
                f"{cleaning.left_out_reasons(cleaned.left_out)}); decide the workers with "
                "`flask study verify --apply` and `flask study review`, export again, or pass "
                "--all-workers"
            )
        raise LoadError(
            f"the cleaning filters leave no annotations (the last rows went at '{step}'; "
            "see --min-median-seconds, --straight-line and --double-submit-seconds)"
        )
    if settings.min_rounds is None:
        settings = replace(settings, min_rounds=cleaning.default_min_rounds(cleaned.frame))
    out.mkdir(parents=True, exist_ok=True)
    ctx = Context(
        settings=settings,
        out=out,
        frame=frame,
        filtered=inference.with_codes(cleaned.frame),
        steps=cleaned.steps,
        duplicates=cleaned.duplicates,
        info=info,
        provenance=provenance,
        left_out=cleaned.left_out,
        preregistration=preregistration,
    )
    tick("cleaning")
    sections = []
    for name, module in SECTIONS:
        sections.append(module.run(ctx))
        tick(name)
    tables = {k: v for s in sections for k, v in s.tables.items()}
    for name, table in tables.items():
        neutralise_frame(table).to_csv(out / f"{name}.csv", index=False)
    summary = {
        "provenance": provenance,
        "input": str(input_path),
        "source": frame["source"].iloc[0],
        "settings": asdict(settings),
    }
    for s in sections:
        summary.update(s.summary)
    summary["figures"] = [f for s in sections for f in s.figures]
    summary["timings_seconds"] = timings
    summary = clean_json(summary)
    header = [
        "# RoFT analysis report",
        "",
        f"Input: `{summary['input']}` ({summary['source']}); file `{provenance['input_file']}`, "
        f"SHA-256 `{provenance['input_sha256']}`. Made {provenance['date']} by "
        f"{provenance['code_version']}.",
        "",
        f"Positions: {CONVENTION}.",
    ]
    if info.get("private"):
        header += ["", "**This export is PRIVATE: it contains usernames.**"]
    body = [line for s in sections for line in s.markdown]
    (out / "report.md").write_text("\n".join([*header, "", *body]))
    tick("report")
    summary["timings_seconds"] = timings
    (out / "summary.json").write_text(json.dumps(clean_json(summary), indent=2))
    return summary
