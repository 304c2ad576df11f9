"""Study files against the platforms' rules, the new settings, agreement: pure functions."""

from __future__ import annotations

import random
import tomllib

import numpy as np
import pytest

from app import PROJECT_ROOT
from app.crowd import agreement
from app.crowd.config import StudyConfigError
from app.crowd.platform_rules import PayRules, parse_rates, platform_findings
from app.crowd.study_file import load_study_file, parse_study
from tests.crowd.helpers import BASE

PROLIFIC_PAY = PayRules({"GBP": 6.0, "USD": 8.0}, {"GBP": 9.0, "USD": 12.0})
EXAMPLE = PROJECT_ROOT / "docs" / "examples" / "study.toml"


def findings(**changes):
    return platform_findings(parse_study({**BASE, **changes}, "s.toml"), PROLIFIC_PAY)


def test_the_shipped_example_passes_prolifics_rules_without_a_warning():
    config = load_study_file(EXAMPLE)
    assert config.platform == "prolific"
    result = platform_findings(config, PROLIFIC_PAY)
    assert result.errors == [] and result.warnings == []
    assert len(config.comprehension) == 2 and config.bonus.cap == 0.40


def test_what_the_old_example_did_is_now_flagged():
    # One check per worker, failed after one: Prolific's two-check rule is broken.
    old = findings(attention_check_rate=0.1, fail_after_checks=1)
    assert any("at least two attention checks" in w for w in old.warnings)
    # More failures needed than checks shown: the failed outcome can never happen.
    never = findings(attention_check_rate=0.1, fail_after_checks=3)
    assert any("can never happen" in w for w in never.warnings)
    # £2.50 an hour is below Prolific's minimum: an error, the study would not run.
    cheap = findings(reward=0.5, expected_minutes=12)
    assert cheap.errors and "below Prolific's minimum of 6.00 GBP/h" in cheap.errors[0]
    fair_but_low = findings(reward=1.6, expected_minutes=12)  # 8.00/h
    assert not fair_but_low.errors
    assert any("below the recommended 9.00 GBP/h" in w for w in fair_but_low.warnings)


def test_all_human_checks_that_let_the_lazy_answer_pass_are_flagged():
    lazy = findings(attention_check_rate=0.2, all_human_checks=1, fail_after_checks=2)
    assert any("answers 'all human' everywhere fails 1 and passes" in w for w in lazy.warnings)
    assert not findings(attention_check_rate=0.3, all_human_checks=1).warnings


def test_missing_outcome_codes_and_short_time_limits_are_flagged():
    no_fail_code = findings(completion_codes={"completed": "C1DONE01"})
    assert any("completion_codes.failed_checks is missing" in w for w in no_fail_code.warnings)
    questions = [{"question": "Q?", "options": ["a", "b"], "answer": "a"}]
    screen = findings(comprehension=questions)
    assert any("completion_codes.screened_out is missing" in w for w in screen.warnings)
    short = findings(time_limit_minutes=5, expected_minutes=12)
    assert any("shorter than expected_minutes" in w for w in short.warnings)
    generic = platform_findings(
        parse_study({**BASE, "platform": "generic", "reward": 0, "completion_codes": {}}, "g"),
        PROLIFIC_PAY,
    )
    assert generic.errors == [] and not any("pay" in w for w in generic.warnings)
    odd = findings(currency="CHF")
    assert any("no pay figures are known for CHF" in w for w in odd.warnings)


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"likert": [{"name": "fluency", "question": "Fluent?", "lables": ["a"] * 5}]},
         "s.toml: likert[0].lables: is not a known setting"),
        ({"screening": {"question": "Q", "options": ["a", "b"], "accept": ["a"], "acept": 1}},
         "screening.acept: is not a known setting"),
        ({"comprehension": [{"question": "Q", "options": ["a", "b"], "answer": "c"}]},
         "comprehension[0].answer: must be one of the options"),
        ({"comprehension": [{"question": "Q", "options": ["a"], "answer": "a"}]},
         "comprehension[0].options: needs at least two different options"),
        ({"comprehension": [{"question": "Q", "options": ["a", "b"], "anwser": "a"}]},
         "comprehension[0].anwser: is not a known setting"),
        ({"bonus": {"per_exact": 0.1}}, "bonus.cap: is required"),
        ({"bonus": {"per_hit": 0.1, "cap": 1}}, "bonus.per_hit: is not a known setting"),
        ({"bonus": {"cap": 1}}, "bonus: needs per_point or per_exact"),
        ({"show_feedback": "no"}, "show_feedback: must be true or false"),
        ({"time_limit_minutes": 0}, "time_limit_minutes: must be at least 1"),
        ({"places": 2.5}, "places: must be a whole number"),
        ({"speeder_fraction": 2}, "speeder_fraction: must be at most 1"),
        ({"completion_url": "https://x.org/done"}, "completion_url: must contain {code} or {pid}"),
        ({"completion_url": "https://x.org/?c={cod}"}, "unknown placeholder {cod}"),
    ],
)  # fmt: skip
def test_every_nested_table_is_checked(change, fragment):
    with pytest.raises(StudyConfigError) as error:
        parse_study({**BASE, **change}, "s.toml")
    assert fragment in str(error.value)


def test_a_typo_in_the_shipped_example_is_caught(tmp_path):
    text = EXAMPLE.read_text(encoding="utf-8").replace("question_all_human", "question_all_humam")
    broken = tmp_path / "study.toml"
    broken.write_text(text, encoding="utf-8")
    with pytest.raises(StudyConfigError, match=r"likert\[0\]\.question_all_humam"):
        load_study_file(broken)
    assert tomllib.loads(text)  # valid TOML: only the study's own check finds it


def test_pay_rates_and_bonus_rule():
    assert parse_rates("GBP=6, usd=8", "X") == {"GBP": 6.0, "USD": 8.0}
    with pytest.raises(ValueError, match="X: 'GBP6' is not CURRENCY=AMOUNT"):
        parse_rates("GBP6", "X")
    config = parse_study({**BASE, "bonus": {"per_point": 0.01, "per_exact": 0.1, "cap": 0.5}}, "s")
    assert config.bonus.amount(points=20, exact=2) == 0.4
    assert config.bonus.amount(points=200, exact=9) == 0.5  # capped


def test_likert_wording_fits_an_all_human_answer():
    criterion = {"name": "fluency", "question": "How fluent is the sentence you flagged?",
                 "labels": ["a", "b", "c", "d", "e"]}  # fmt: skip
    config = parse_study({**BASE, "likert": [criterion]}, "s")
    c = config.likert[0]
    assert c.wording(False) == "How fluent is the sentence you flagged?"
    assert "flagged" not in c.wording(True) and "whole" in c.wording(True)
    own = parse_study(
        {**BASE, "likert": [{**criterion, "question_all_human": "How fluent is the text?"}]}, "s"
    )
    assert own.likert[0].wording(True) == "How fluent is the text?"


def test_agreement_counts_pairs_and_matches_the_reference_alpha():
    import krippendorff

    result = agreement.agreement([[3, 3, 4], [5, 7], [2]])
    # Text 1: pairs (3,3) (3,4) (3,4): 1 exact, 3 within one; text 2: (5,7): neither.
    assert (result.texts, result.answers, result.pairs) == (2, 5, 4)
    assert result.exact_rate == 0.25 and result.within_one_rate == 0.75
    rng = random.Random(3)
    units = [[rng.randint(0, 9) for _ in range(rng.randint(1, 6))] for _ in range(60)]
    data = np.full((6, len(units)), np.nan)
    for j, unit in enumerate(units):
        data[: len(unit), j] = unit
    for level in ("interval", "nominal"):
        expected = krippendorff.alpha(reliability_data=data, level_of_measurement=level)
        assert agreement.krippendorff_alpha(units, level) == pytest.approx(expected, abs=1e-9)
    assert agreement.krippendorff_alpha([[4, 4], [4, 4]]) is None  # no variation: undefined
    perfect = agreement.agreement([[1, 1], [6, 6], [3, 3, 3]])
    assert perfect.alpha_interval == 1.0 and perfect.exact_rate == 1.0
    assert agreement.agreement([]).exact_rate is None


def test_a_sona_style_completion_url_takes_the_participant_id(ctx):
    """SONA's survey_code is the participant id: `{pid}` alone is enough, and is filled in."""
    from app.crowd import admission, verdicts
    from app.crowd.platforms import Entry
    from tests.crowd.helpers import make_pool, make_study

    make_pool()
    url = "https://uni.sona-systems.com/webstudy_credit.aspx?experiment_id=7&survey_code={pid}"
    study = make_study(
        platform="generic", completion_url=url, attention_check_rate=0, rounds=1,
        screening={"question": "Q", "options": ["a", "b"], "accept": ["a"]},
    )  # fmt: skip
    entry = Entry(worker_id="id 4&5", session=None, study=None)
    worker = admission.enter(study, entry, None, consent=True, screening="b")  # screened out
    assert verdicts.completion_url(worker) == url.replace("{pid}", "id%204%265")
    both = "https://x.org/done?pid={pid}&code={code}"
    study.config = {**study.config, "completion_url": both}
    code = verdicts.completion_code(worker)
    assert verdicts.completion_url(worker) == f"https://x.org/done?pid=id%204%265&code={code}"
