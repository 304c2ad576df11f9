"""What the platforms' rules say about a valid study file (app/crowd/config.py): the pay
figures (`PayRules`) and `platform_findings`, errors where the study cannot run as written and
warnings where it runs but breaks a rule or can never do what it says.

Pure: no Flask, no database.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.crowd.config import StudyConfig


@dataclass(frozen=True)
class PayRules:
    """Hourly pay figures per currency: below `minimum` Prolific will not run a study, below
    `recommended` the pay is not fair by Prolific's own advice (settings STUDY_PAY_MINIMUM and
    STUDY_PAY_RECOMMENDED)."""

    minimum: dict[str, float]
    recommended: dict[str, float]


def parse_rates(text: str, name: str) -> dict[str, float]:
    """'GBP=6,USD=8' -> {'GBP': 6.0, 'USD': 8.0}; ValueError naming the setting otherwise."""
    rates = {}
    for part in filter(None, (p.strip() for p in (text or "").split(","))):
        currency, _, amount = part.partition("=")
        try:
            rates[currency.strip().upper()] = float(amount)
        except ValueError:
            raise ValueError(f"{name}: {part!r} is not CURRENCY=AMOUNT (e.g. GBP=6)") from None
    return rates


@dataclass(frozen=True)
class Findings:
    errors: list[str]
    warnings: list[str]


def platform_findings(config: StudyConfig, pay: PayRules) -> Findings:
    """What the platform's rules say about a valid study file: errors where the study cannot run
    as written, warnings where it runs but breaks a rule or can never do what it says."""
    errors: list[str] = []
    warnings: list[str] = []
    prolific = config.platform == "prolific"
    checks = _check_warnings(config, prolific, warnings)
    outcomes = {
        "failed_checks": checks > 0 and config.fail_after_checks <= checks,
        "screened_out": bool(config.screening or config.comprehension),
    }
    for outcome, possible in outcomes.items():
        if prolific and possible and outcome not in config.completion_codes:
            warnings.append(
                f"completion_codes.{outcome} is missing: workers with this outcome get a personal "
                "code that Prolific does not know. Add the code Prolific shows for it."
            )
    _pay_findings(config, pay, prolific, errors, warnings)
    if (
        config.time_limit_minutes is not None
        and config.time_limit_minutes < config.expected_minutes
    ):
        warnings.append(
            f"time_limit_minutes = {config.time_limit_minutes:g} is shorter than "
            f"expected_minutes = {config.expected_minutes:g}: most workers would run out of time."
        )
    if not config.show_feedback and not config.tutorial:
        warnings.append(
            "show_feedback = false and no tutorial: workers never see a right answer before the "
            "paid rounds; consider a few practice texts."
        )
    return Findings(errors, warnings)


def _check_warnings(config: StudyConfig, prolific: bool, warnings: list[str]) -> int:
    """Add the warnings on the attention checks; the number of checks a worker sees."""
    human, inside = config.checks
    checks = human + inside
    if checks:
        if config.fail_after_checks > checks:
            warnings.append(
                f"fail_after_checks = {config.fail_after_checks} but each worker sees only "
                f"{checks} attention check(s): the failed_checks outcome can never happen."
            )
        elif inside < config.fail_after_checks:
            warnings.append(
                f"only {inside} of the {checks} checks are inside a text: a worker who answers "
                f"'all human' everywhere fails {inside} and passes (fail_after_checks = "
                f"{config.fail_after_checks}); lower all_human_checks or raise the rate."
            )
        if prolific and (checks < 2 or config.fail_after_checks < 2):
            warnings.append(
                "Prolific allows a rejection only after a participant fails at least two attention "
                f"checks: this study has {checks} per worker and fail_after_checks = "
                f"{config.fail_after_checks}."
            )
    if config.all_human_checks > checks:
        warnings.append(
            f"all_human_checks = {config.all_human_checks} but each worker sees only {checks} "
            "check(s)."
        )
    return checks


def _pay_findings(
    config: StudyConfig, pay: PayRules, prolific: bool, errors: list[str], warnings: list[str]
) -> None:
    """Add what the pay figures say about the study's hourly pay."""
    hourly = config.hourly_reward
    currency = config.currency.upper()
    if not (prolific or config.reward > 0) or hourly is None:
        return
    minimum = pay.minimum.get(currency)
    recommended = pay.recommended.get(currency)
    shown = f"{config.reward:.2f} {currency} for {config.expected_minutes:g} minutes"
    if minimum is None and recommended is None:
        warnings.append(f"no pay figures are known for {currency}: check the hourly pay yourself.")
    elif prolific and minimum is not None and hourly < minimum:
        errors.append(
            f"pay of {shown} is {hourly:.2f} {currency}/h, below Prolific's minimum of "
            f"{minimum:.2f} {currency}/h: raise reward or check expected_minutes."
        )
    elif recommended is not None and hourly < recommended:
        warnings.append(
            f"pay of {shown} is {hourly:.2f} {currency}/h, below the recommended "
            f"{recommended:.2f} {currency}/h."
        )
