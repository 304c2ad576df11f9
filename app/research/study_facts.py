"""What a study export says about the study it came from, read from the study itself.

`flask export --study SLUG` puts these facts in manifest.json ("study"); the dataset card,
the Croissant file and the analysis's HEDS datasheet state them from there: the pay, time limit,
bonus rule, checks, exclusion rules and decisions, the consent and instructions as workers read
them, dates and platform, and the conditions workers were randomised to (what each changes).
What the site cannot know is named as such, never guessed.
"""

from __future__ import annotations

from collections import Counter

from sqlalchemy import func, select

from app.crowd import conditions, lookup
from app.crowd.reports import latest_decisions
from app.extensions import db
from app.models import Participant

# The steps of a round as the instructions page shows them (crowd/instructions.html).
ROUND_STEPS = (
    "You see the first sentence of a text. It is always written by a person.",
    "Choose Still human (key H) to see the next sentence, or A machine wrote this one (key M) "
    "when you think a computer wrote the latest sentence, and say why.",
    "At the last sentence you can say the whole text is human-written.",
)
FEEDBACK_STEP = {
    True: "Then you see the answer. 5 points for the exact sentence, one less for each sentence "
    "late, 0 for too early.",
    False: "Your answer is recorded and the next text comes; you do not see the right answer.",
}
NOT_KNOWN = (
    "ethics review body and reference",
    "the platform's own eligibility filters (country, age, approval rate, ...)",
)
NO_DEMOGRAPHICS = (
    "workers' demographics (the platform's export was not given: `flask export --study SLUG "
    "--demographics FILE` joins it)"
)


def _iso(value) -> str | None:
    return value.isoformat() if value is not None else None


def exclusion_rules(config) -> list[str]:
    human, inside = config.checks
    rules = []
    if human + inside:
        rules.append(
            f"failed_checks: {config.fail_after_checks} or more of the {human + inside} attention "
            "checks failed (rejected"
            + (", stopped at once" if config.stop_after_failed_checks else "")
            + "); checks answered before their instruction was shown count neither way, and two "
            "or more of them send the worker to review"
        )
    rules.append(
        f"review: median seconds per round under {config.speeder_fraction:.0%} of the study's "
        "median"
        + (f" or under {config.min_seconds_per_round:g} s" if config.min_seconds_per_round else "")
    )
    if config.straight_line_threshold:
        rules.append(
            f"review: the same answer position {config.straight_line_threshold} times in a row"
        )
    rules.append("returned or timed out on the platform: neither approved nor rejected")
    if config.screening or config.comprehension:
        rules.append(
            "screened_out: "
            + " or ".join(
                part
                for part in (
                    "the screening question answered outside the accepted options"
                    if config.screening
                    else "",
                    "two wrong tries at the comprehension questions"
                    if config.comprehension
                    else "",
                )
                if part
            )
            + "; no rounds played"
        )
    return rules


def study_facts(slug: str, demographics: dict | None = None) -> dict:
    """The facts of study `slug` for its export (JSON-ready); `demographics` says what of the
    platform's demographic export was joined to the workers (None: not given)."""
    study = lookup.get_study(slug)
    config = lookup.config_of(study)
    human, inside = config.checks
    first, last_finish, last_left = db.session.execute(
        select(
            func.min(Participant.started_at),
            func.max(Participant.finished_at),
            func.max(Participant.left_at),
        ).where(Participant.study_id == study.id)
    ).one()
    last = max((d for d in (last_finish, last_left) if d is not None), default=None)
    outcomes = Counter(
        status.value
        for status in db.session.scalars(
            select(Participant.status).where(Participant.study_id == study.id)
        )
    )
    decisions = Counter(row.decision for row in latest_decisions(study).values())
    steps = [*ROUND_STEPS, FEEDBACK_STEP[config.show_feedback]]
    return {
        "slug": study.slug,
        "title": config.title,
        "platform": config.display_platform,
        "reward": config.reward,
        "currency": config.currency,
        "expected_minutes": config.expected_minutes,
        "hourly_reward": round(config.hourly_reward, 2) if config.hourly_reward else None,
        "time_limit_minutes": config.time_limit_minutes,
        "bonus": config.bonus.describe(config.currency) if config.bonus else None,
        "screened_out_pay": config.screened_out_pay,
        "rounds_per_worker": config.rounds,
        "optional_rounds": config.total_rounds - config.rounds,
        "practice_texts": len(study.pool.get("tutorial", [])),
        "attention_checks": {
            "per_worker": human + inside,
            "inside_a_text": inside,
            "all_human": human,
            "fail_after": config.fail_after_checks,
        },
        "feedback_after_each_round": config.show_feedback,
        "ratings": [c.question for c in config.likert],
        "places": config.places,
        "consent": config.consent.strip(),
        "instructions": config.instructions.strip(),
        "round_steps": steps,
        "screening": config.screening.question if config.screening else None,
        "comprehension": [q.question for q in config.comprehension],
        "exclusion_rules": exclusion_rules(config),
        "outcomes": dict(sorted(outcomes.items())),
        "decisions": dict(sorted(decisions.items())),
        "first_entry": _iso(first),
        "last_activity": _iso(last),
        "contact": config.contact or None,
        "conditions": _conditions(study, config),
        "not_known_to_the_site": [*NOT_KNOWN, *(() if demographics else (NO_DEMOGRAPHICS,))],
        "demographics": demographics,
    }


def _conditions(study, config) -> list[dict]:
    """Each condition: its name, the settings it changes (as in the study file) and how many
    workers were allocated to it; empty for a study without conditions."""
    entered = conditions.counts(study)
    return [
        {
            "name": item["name"],
            "changes": {k: v for k, v in item.items() if k != "name"},
            "workers": entered.get(item["name"], {}).get("entered", 0),
        }
        for item in config.conditions
    ]


def instruction_text(facts: dict) -> str:
    """The task as the study's workers read it: its instructions, then the round's steps."""
    return facts["instructions"] + "\n\n" + " ".join(facts["round_steps"])
