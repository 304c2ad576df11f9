"""What a study export's dataset card and Croissant file say about the study (pure).

From the facts `flask export --study` puts in manifest.json (app/research/study_facts.py).
"""

from __future__ import annotations

import json

# The RoFT paper, as the Croissant files cite it.
CITATION = (
    "Dugan, L., Ippolito, D., Kirubarajan, A., Shi, S. and Callison-Burch, C. (2023). Real or "
    "Fake Text?: Investigating Human Ability to Detect Boundaries between Human-Written and "
    "Machine-Generated Text. AAAI."
)


def croissant_part(study: dict, url: str | None) -> dict:
    """What a study export's Croissant file says about the study, from the export's facts."""
    dates = [d[:10] for d in (study["first_entry"], study["last_activity"]) if d]
    return {
        "name": f"roft-study-{study['slug']}",
        "description": (
            f"Annotations from the crowd study “{study['title']}” on the Real or Fake "
            f"Text site: {study['platform']} workers, paid {study_pay(study)}, read texts "
            "sentence by sentence and said where a machine took over; with the texts they read "
            "and pseudonymised workers."
        ),
        "citeAs": (
            f"“{study['title']}”, a crowd study run on the Real or Fake Text site"
            + (f" ({url})" if url else "")
            + f". Task from {CITATION}"
        ),
        "rai:dataCollectionType": ["Crowdsourced"],
        "rai:dataCollectionTimeframe": dates,
        "rai:dataAnnotationPlatform": f"{study['platform']}, through the RoFT site's study link",
        "rai:annotatorDemographics": demographics_line(study),
        "rai:dataBiases": (
            f"{study['platform']} workers who chose this study: not a sample of any population."
        ),
        "rai:dataManipulationProtocol": "; ".join(study["exclusion_rules"]),
    }


def demographics_line(study: dict) -> str:
    """What the export holds of the workers' demographics, in one sentence."""
    given = study.get("demographics")
    if not given:
        return (
            "Not collected by the site; the platform holds them and they are not part of this "
            "dataset."
        )
    return (
        f"From the platform's own export ({given['file']}), joined by worker id for "
        f"{given['workers_matched']} of {given['workers']} workers: "
        + ", ".join(given["columns"])
        + " (age in bands; empty where the platform withheld an answer)."
    )


def study_pay(study: dict) -> str:
    """The reward in words, with the time it was set for and the time limit."""
    text = (
        f"{study['reward']:.2f} {study['currency']} for about {study['expected_minutes']:g} minutes"
    )
    if study["time_limit_minutes"]:
        text += f" (time limit {study['time_limit_minutes']:g} minutes)"
    return text


def _changes(changes: dict) -> str:
    return "; ".join(f"{k} = {json.dumps(v, ensure_ascii=False)}" for k, v in changes.items())


def design(study: dict, plan: dict | None) -> list[str]:
    """The card's lines on the study's conditions and its frozen analysis plan (none when the
    study has neither)."""
    lines = []
    if study.get("conditions"):
        lines += [
            "Conditions (each worker randomised to one at entry, in balanced blocks; their "
            "`condition` column says which):",
            "",
            *[
                f"- `{c['name']}`: {c['workers']} worker(s); changes {_changes(c['changes'])}"
                if c["changes"]
                else f"- `{c['name']}`: {c['workers']} worker(s); the study's own settings"
                for c in study["conditions"]
            ],
            "",
        ]
    if plan:
        lines += [
            f"Preregistration: `{plan['file']}`, the analysis plan frozen before the data "
            f"({plan['versions']} version(s); the latest's SHA-256 `{plan['sha256']}`).",
            "",
        ]
    return lines


def section(study: dict, plan: dict | None = None) -> list[str]:
    """The dataset card's section on the study, from the export's facts (and `plan`, the
    manifest's note of its preregistration)."""
    checks = study["attention_checks"]
    feedback = "yes" if study["feedback_after_each_round"] else "no"
    settled = f"{json.dumps(study['outcomes'])}; decisions: {json.dumps(study['decisions'])}"
    lines = [
        "## The study",
        "",
        f"“{study['title']}” (`{study['slug']}`), on {study['platform']}; "
        f"first worker {study['first_entry'] or 'none'}, last activity "
        f"{study['last_activity'] or 'none'}.",
        "",
        f"- Pay: {study_pay(study)}"
        + (
            f", {study['hourly_reward']:.2f} {study['currency']} an hour"
            if study["hourly_reward"]
            else ""
        )
        + ".",
        f"- Bonus: {study['bonus'] or 'none'}",
        "- Screen-out payment: "
        + (
            f"{study['screened_out_pay']:.2f} {study['currency']}"
            if study["screened_out_pay"] is not None
            else "none set"
        ),
        f"- Rounds per worker: {study['rounds_per_worker']} "
        f"({study['optional_rounds']} optional more), after {study['practice_texts']} practice "
        f"text(s); feedback after each round: {feedback}.",
        f"- Attention checks per worker: {checks['per_worker']} ({checks['inside_a_text']} inside "
        f"a text, {checks['all_human']} all-human); failed_checks after {checks['fail_after']}.",
        f"- Places: {study['places'] or 'no limit'}.",
        f"- Workers' demographics: {demographics_line(study)}",
        f"- Outcomes: {settled}.",
        "",
        "Exclusion rules:",
        "",
        *[f"- {rule}" for rule in study["exclusion_rules"]],
        "",
        *design(study, plan),
        "Consent, as workers read it:",
        "",
        *[f"> {line}" if line else ">" for line in study["consent"].splitlines()],
        "",
        "Instructions, as workers read them (then the steps of a round):",
        "",
        *[f"> {line}" if line else ">" for line in study["instructions"].splitlines()],
        "",
        *[f"{n}. {step}" for n, step in enumerate(study["round_steps"], start=1)],
        "",
        "Not known to the site: " + "; ".join(study["not_known_to_the_site"]) + ".",
        "",
    ]
    return lines


def limitations(manifest: dict, general: list[str]) -> list[str]:
    """The card's limitations (`general`), the first about who took part: for a study export,
    its paid workers."""
    study = manifest.get("study")
    if not study:
        return general
    who = (
        f"The annotators are {study['platform']} workers who chose this study and were paid "
        f"{study_pay(study)}: they are not a sample of any population (analyse with worker as a "
        "random effect or cluster, not as independent rows)."
    )
    return [who, *general[1:]]
