"""A prefilled Human Evaluation Datasheet (HEDS) for a boundary-detection study.

Only what the input establishes is filled in. For our own exports (`flask export`, whose
manifest says "roft-site") that is a good deal: how texts were chosen, how answers were collected,
the instructions, consent, pseudonyms, who took part (public players, crowd workers). For any other
input, such as the public `roft.csv`, most of the study cannot be read from the rows: those fields
say UNKNOWN ("unknown — fill in") and are listed under `to_fill`, so nobody mistakes a default for
a fact. Sections follow HEDS: systems and outputs, sample, evaluators, design, criterion, ethics.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

UNKNOWN = "unknown — fill in"

TASK_INSTRUCTION = (
    "Sentences of a text are revealed one at a time. The first is always written by a person. "
    "When you think the latest sentence was written by a machine, say so and tell us why; "
    "if you reach the end and think it is all human, say that."
)


def _unknown(what: str) -> str:
    return f"{UNKNOWN} ({what})"


def _study_sheet(study: dict, evaluators: dict, design: dict) -> tuple[dict, dict]:
    """A study export's facts (its manifest's "study", from the study itself) in place of what
    the site in general can say: who was paid what, how they were recruited, the time limit."""
    money = f"{study['reward']:.2f} {study['currency']}"
    paid = f"yes: {money} for about {study['expected_minutes']:g} minutes"
    if study.get("hourly_reward"):
        paid += f" ({study['hourly_reward']:.2f} {study['currency']} an hour)"
    if study.get("bonus"):
        paid += f"; bonus: {study['bonus']}"
    if study.get("screened_out_pay") is not None:
        paid += f"; screened-out workers: {study['screened_out_pay']:.2f} {study['currency']}"
    recruitment = f"{study['platform']} workers through the study's link"
    if study.get("screening"):
        recruitment += f"; screening question: {study['screening']}"
    training = f"the study's instructions and {study['practice_texts']} practice text(s)"
    if study.get("comprehension"):
        training += f"; {len(study['comprehension'])} comprehension question(s), two tries"
    limit = study.get("time_limit_minutes")
    given = study.get("demographics")
    demographics = (
        f"in the workers table ({', '.join(given['columns'])}) for {given['workers_matched']} of "
        f"{given['workers']} workers, from the platform's export"
        if given
        else _unknown("not collected by the site; the platform's export was not joined")
    )
    return (
        {**evaluators, "type": f"crowd workers ({study['platform']})", "paid": paid,
         "recruitment": recruitment, "training": training, "demographics": demographics},
        {**design, "time_limits": f"{limit:g} minutes from consent to the last answer"
         if limit else "none (the study set no time limit)"},
    )  # fmt: skip


def datasheet(
    all_rows: pd.DataFrame,
    filtered: pd.DataFrame,
    steps: pd.DataFrame,
    agreement: dict,
    export_info: dict | None = None,
    provenance: dict | None = None,
) -> dict:
    """The datasheet as nested dictionaries (sections -> fields -> values), with `to_fill`."""
    info = export_info or {}
    site = info.get("source") == "roft-site"
    per_system = all_rows.groupby("system")["example"].nunique().sort_index().astype(int).to_dict()
    kinds = sorted(all_rows["participant_kind"].dropna().unique().tolist())
    crowd = "crowd" in kinds
    public = "public" in kinds
    excluded = {
        row.step: row.why
        if not row.applicable
        else {"rows": int(row.rows_removed), "annotators": int(row.annotators_removed)}
        for row in steps.itertuples()
    }
    n_max = int(all_rows["n_sentences"].max()) if len(all_rows) else 10
    if site:
        who = " and ".join(
            [
                k
                for k, present in (("public players of the site", public), ("crowd workers", crowd))
                if present
            ]
        )
        evaluators = {
            "type": who or "none",
            "paid": (
                f"crowd workers: yes (the rate is in the study settings: {UNKNOWN})"
                if crowd
                else ""
            )
            + ("; " if crowd and public else "")
            + ("public players: no" if public else ""),
            "recruitment": "; ".join(
                part
                for part in (
                    "public players came to the site and consented to research use"
                    if public
                    else "",
                    f"crowd workers through a study link ({UNKNOWN}: platform and screening)"
                    if crowd
                    else "",
                )
                if part
            ),
            "training": "the site's help page; crowd studies show instructions and practice "
            "rounds before the task",
        }
        design = {
            "collection": "web game; one sentence revealed per request, timestamped by the "
            "server; points computed on the server",
            "time_limits": "none (the site sets no time limit per round)",
            "interface": "the Real or Fake Text site (see docs/players.md and docs/screenshots)",
            "item_selection": "each round shows a text the player has not read, preferring the "
            "texts with the fewest answers so far, within the category the player chose",
        }
        if study := info.get("study"):
            evaluators, design = _study_sheet(study, evaluators, design)
        ethics = {
            "consent": "only rounds of players who consented to research use are exported"
            if not info.get("include_unconsented")
            else "the export includes players who did not consent (--include-unconsented)",
            "pseudonymised": not info.get("private", False),
        }
    else:
        evaluators = {
            "type": _unknown("who the annotators were"),
            "paid": _unknown("whether and how much they were paid"),
            "recruitment": _unknown("how they were recruited and screened"),
            "training": _unknown("guide or practice before the task"),
        }
        design = {
            "collection": _unknown("how answers were collected"),
            "time_limits": _unknown("time limits per item or session"),
            "interface": _unknown("the interface annotators used"),
            "item_selection": _unknown("how the texts shown were selected"),
        }
        ethics = {
            "consent": _unknown("how consent was obtained"),
            "pseudonymised": _unknown("whether annotator ids are pseudonyms"),
        }
    sheet = {
        "provenance": provenance or {},
        "systems_and_outputs": {
            "systems": sorted(per_system),
            "items_per_system": per_system,
            "output_language": _unknown("language of the texts"),
        },
        "sample": {
            "annotations_before_exclusions": len(all_rows),
            "annotations_after_exclusions": len(filtered),
            "items": int(all_rows["example"].nunique()),
            "items_after_exclusions": int(filtered["example"].nunique()),
            "annotations_per_item_median": float(
                filtered.groupby("example").size().median() if len(filtered) else 0
            ),
        },
        "evaluators": {
            "number_before_exclusions": int(all_rows["annotator"].nunique()),
            "number_after_exclusions": int(filtered["annotator"].nunique()),
            **evaluators,
            "median_seconds_per_round": _median(all_rows["seconds"]),
        },
        "design": {
            **design,
            "quality_assurance": {
                "methods": steps.loc[steps["applicable"], "rule"].tolist() if len(steps) else [],
                "excluded": excluded,
            },
        },
        "criterion": {
            "name": "boundary detection (first machine-written sentence)",
            "definition": "the index of the first sentence the annotator believes a machine wrote",
            "verbatim_instruction": info.get("task_instruction")
            or (TASK_INSTRUCTION if site else _unknown("the instructions annotators read")),
            "scale": f"positions 1..N-1 (a sentence) or N ('all human'); N = {n_max}",
            "aggregation": "points per annotation: 5 at the boundary, one less per sentence late, "
            "0 when too early; reported as the mean over annotations",
            "agreement_method": "Krippendorff's alpha (interval) over guess positions; share of "
            "annotation pairs on the same text with the same guess / within one sentence",
            "agreement_score": agreement.get("krippendorff_alpha_interval"),
        },
        "ethics": {
            **ethics,
            "approval": _unknown("ethics review body and reference"),
            "offensive_content_warning": _unknown("whether raters were warned about web text"),
        },
    }
    sheet["to_fill"] = [
        f"{section}.{key}"
        for section, fields in sheet.items()
        if isinstance(fields, dict)
        for key, value in fields.items()
        if isinstance(value, str) and UNKNOWN in value
    ]
    return sheet


def _median(values: pd.Series) -> float | None:
    median = values.median()
    return None if pd.isna(median) else float(median)


def to_markdown(sheet: dict) -> str:
    lines = ["# Human Evaluation Datasheet (prefilled)", ""]
    lines.append(
        f"Fields that say **{UNKNOWN}** cannot be established from the input; fill them in. "
        f"To fill: {', '.join(sheet.get('to_fill', [])) or 'nothing'}."
    )
    for section, fields in sheet.items():
        if section == "to_fill":
            continue
        lines += ["", f"## {section.replace('_', ' ').capitalize()}", ""]
        for key, value in fields.items():
            shown = (
                json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else value
            )
            lines.append(f"- **{key.replace('_', ' ')}**: {shown}")
    return "\n".join(lines) + "\n"


def write(sheet: dict, folder: Path) -> None:
    (folder / "heds.json").write_text(json.dumps(sheet, indent=2, ensure_ascii=False))
    (folder / "heds.md").write_text(to_markdown(sheet))
