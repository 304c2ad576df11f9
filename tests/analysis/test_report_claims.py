"""The report prints no claim its data cannot support, on a fresh export of the demo site and on a
roft.csv file.

The demo export is built as a researcher would: `flask load-demo`, players who play through the
game service (honest, lazy, random; tests/analysis/demo_site.py), `flask export`. Nothing here
hard-codes the demo's counts: each expectation is derived from the export or the report's own
tables, and the limits come from analysis.sections.limits.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from analysis.__main__ import main
from analysis.load import load
from analysis.report import ReportSettings, build_report
from analysis.sections import limits
from app import create_app
from app.extensions import db
from tests.analysis import demo_site
from tests.analysis.test_inference import CONFOUNDED


@pytest.fixture(scope="module")
def demo_export(tmp_path_factory, database_url):
    folder = tmp_path_factory.mktemp("demo_site")
    application = create_app(
        {
            "TESTING": True,
            "SQLALCHEMY_DATABASE_URI": database_url or f"sqlite:///{folder / 'site.sqlite3'}",
            "SECRET_KEY": "test-secret-key",
            "RATELIMIT_STORAGE_URI": "memory://",
            "CACHE_TYPE": "SimpleCache",
        }
    )
    with application.app_context(), pytest.MonkeyPatch.context() as patch:
        if database_url:
            db.drop_all()
        db.create_all()
        try:
            demo_site.build(application, demo_site.use_clock(patch), folder / "export")
        finally:
            db.session.remove()
            if database_url:
                db.drop_all()
            db.engine.dispose()
    return folder / "export"


def _report(source, out) -> dict:
    summary = build_report(source, out, ReportSettings(bootstrap=100))
    text = (out / "report.md").read_text()
    return {"summary": summary, "out": out, "text": text, "source": source}


@pytest.fixture(scope="module")
def demo(demo_export, tmp_path_factory):
    return _report(demo_export, tmp_path_factory.mktemp("demo_report"))


@pytest.fixture(scope="module")
def roft(tmp_path_factory):
    return _report(CONFOUNDED, tmp_path_factory.mktemp("roft_report"))


@pytest.fixture(params=["demo", "roft"])
def report(request):
    return request.getfixturevalue(request.param)


def section(text: str, number: int) -> str:
    start = text.index(f"## {number}.")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else None]


def filtered_rows(report) -> pd.DataFrame:
    """The rows the report analysed (the annotations left by its cleaning filters)."""
    from analysis import cleaning

    return cleaning.clean(load(report["source"])).frame


# -- 1. sizes: pooled numbers say so, and few annotators make intervals rough ------------------


def test_pooled_headline_is_labelled_as_pooled(report):
    sizes = section(report["text"], 1)
    assert "pool machine and all-human texts" in sizes
    assert "section 2" in sizes


def test_few_annotators_warn_that_intervals_are_rough(report):
    annotators = report["summary"]["filtered"]["n_annotators"]
    warning = f"fewer than {limits.MIN_ANNOTATORS_FOR_INTERVALS} annotators"
    sizes = section(report["text"], 1)
    if annotators < limits.MIN_ANNOTATORS_FOR_INTERVALS:
        assert warning in sizes and f"{annotators} annotators" in sizes
    else:
        assert warning not in sizes


def test_cli_prints_rounded_pooled_mean(tmp_path, capsys):
    assert main(["report", str(CONFOUNDED), "--out", str(tmp_path), "--bootstrap", "20"]) == 0
    line = capsys.readouterr().out
    assert re.search(r"mean points \(all texts\) \d\.\d{3};", line), line
    assert not re.search(r"\d\.\d{5,}", line), line


# -- 2. boundary distance: the headline comparison with its interval and n --------------------


def test_exact_rate_sentence_carries_interval_and_n(report):
    machine = report["summary"]["statistics_machine_texts"]["exact_rate"]
    rows = filtered_rows(report)
    n_machine = int((rows["boundary"] < rows["n_sentences"]).sum())
    text = section(report["text"], 2)
    assert (
        f"exact boundary {machine['estimate']:.3f} [{machine['ci_low']:.3f}, "
        f"{machine['ci_high']:.3f}] of the time on {n_machine:,} annotations of machine texts"
    ) in text


# -- 3. factors: a level that is really a system is named as one -------------------------------


def test_unknown_p_level_is_named_as_the_systems_without_p(demo):
    rows = filtered_rows(demo)
    machine = rows[rows["boundary"] < rows["n_sentences"]]
    without_p = sorted(machine.loc[machine["p"].isna(), "system"].unique())
    assert without_p, "the demo has a system without a decoding p (the splice baseline)"
    assert machine.loc[machine["system"].isin(without_p), "p"].isna().all()
    factors = section(demo["text"], 3)
    assert (
        f"level 'unknown' of p is the texts without a decoding p (system {', '.join(without_p)})"
    ) in factors


def test_unknown_p_is_not_called_a_system_when_it_spans_systems(tmp_path):
    # A p missing at random in every system is no system's level: no such note.
    rows = pd.read_csv(CONFOUNDED)
    rows.loc[rows.index % 7 == 0, "dec_strat_value"] = None
    source = tmp_path / "roft.csv"
    rows.to_csv(source, index=False)
    report = _report(source, tmp_path / "out")
    loaded = load(source)
    machine = loaded[loaded["boundary"] < loaded["n_sentences"]]
    assert machine.loc[machine["p"].isna(), "system"].nunique() > 1
    assert "level 'unknown' of p" not in section(report["text"], 3)


# -- 4. learning: no test across a handful of annotators; no sessions invented ----------------


def test_wilcoxon_is_withheld_on_few_annotators(report):
    rows = filtered_rows(report)
    counts = rows.groupby("annotator").size()
    with_rounds = int((counts >= ReportSettings().min_rounds).sum())
    learning = section(report["text"], 4)
    if with_rounds < limits.MIN_ANNOTATORS_FOR_TEST:
        assert "Wilcoxon" not in learning
        assert (
            f"too few to test across annotators (at least {limits.MIN_ANNOTATORS_FOR_TEST} needed)"
        ) in learning
    else:
        assert "Wilcoxon" in learning


def test_no_sessions_are_reported_where_the_data_has_none(report):
    learning = section(report["text"], 4)
    assert "within the session" not in learning
    assert "no session" in learning


# -- 5. skill: no top and bottom 5% of a handful; no difficulty from texts seen once ------------


def test_skill_range_is_withheld_below_the_limit(report):
    rows = filtered_rows(report)
    counts = rows.groupby("annotator").size()
    with_rounds = int((counts >= ReportSettings().min_rounds).sum())
    skill = section(report["text"], 5)
    assert with_rounds < limits.MIN_ANNOTATORS_FOR_RANGE  # both sets are small
    assert "averaged" not in skill and "the top 1" not in skill
    assert (
        f"too few to report the top and bottom 5% (at least {limits.MIN_ANNOTATORS_FOR_RANGE} "
        "needed)"
    ) in skill


def test_skill_baseline_says_it_pools_all_texts(report):
    # Section 2's random guessing is on machine texts; this one is on every text.
    skill = section(report["text"], 5)
    assert re.search(r"random guessing on the same texts, all texts pooled: \d\.\d{3}", skill)


def test_text_difficulty_needs_texts_seen_twice(report):
    rows = filtered_rows(report)
    per_text = rows.groupby("example")["annotator"].nunique()
    share = float((per_text >= 2).mean())
    skill = section(report["text"], 5)
    if share < limits.MIN_SHARE_OF_TEXTS_SEEN_TWICE:
        assert "difficulty SD" not in skill
        assert f"{int((per_text < 2).sum())} of {len(per_text)} texts" in skill
        assert "not identified" in skill
    else:
        assert "difficulty SD" in skill


def test_demo_texts_are_mostly_seen_once_and_roft_texts_twice(demo, roft):
    # The two datasets take opposite branches of the test above.
    for report, expected in ((demo, True), (roft, False)):
        per_text = filtered_rows(report).groupby("example")["annotator"].nunique()
        assert bool((per_text >= 2).mean() < limits.MIN_SHARE_OF_TEXTS_SEEN_TWICE) == expected


# -- 6. agreement: not measured without texts seen by two players ------------------------------


def test_agreement_is_withheld_without_enough_shared_texts(report):
    per_text = filtered_rows(report).groupby("example").size()
    shared = int((per_text >= 2).sum())
    agreement = section(report["text"], 6)
    if shared < limits.MIN_TEXTS_FOR_AGREEMENT:
        assert "Krippendorff's alpha (interval) –" not in agreement
        assert "_(no rows)_" not in agreement
        assert (
            f"{shared} text(s) have two or more annotations: too few to measure agreement "
            f"(at least {limits.MIN_TEXTS_FOR_AGREEMENT} needed)"
        ) in agreement
        assert "agreement.png" not in agreement
        assert "agreement.png" not in report["summary"]["figures"]
        heds = json.loads((report["out"] / "heds.json").read_text())
        assert heds["criterion"]["agreement_score"].startswith("none: ")
    else:
        assert "Krippendorff's alpha (interval) 0." in agreement


# -- 7. reasons and comments --------------------------------------------------------------------


def test_reason_means_are_withheld_on_few_rounds(report):
    table = pd.read_csv(report["out"] / "reason_points.csv")
    few = table[(table["rounds"] > 0) & (table["rounds"] < limits.MIN_ROUNDS_PER_REASON)]
    enough = table[table["rounds"] >= limits.MIN_ROUNDS_PER_REASON]
    assert few["mean_points"].isna().all() and few["ci_low"].isna().all()
    assert enough["mean_points"].notna().all()
    text = section(report["text"], 7)
    if len(few):
        assert (
            f"fewer than {limits.MIN_ROUNDS_PER_REASON} rounds: too few to estimate their mean "
            "points"
        ) in text


def test_reason_shares_name_their_denominator(report):
    rows = filtered_rows(report)
    human = int((rows["guess"] >= rows["n_sentences"]).sum())
    none = int((rows["reasons"].astype(str) == "").sum())
    text = section(report["text"], 7)
    assert (
        f"Shares (figure and table) are of all {len(rows):,} rounds, of which {human:,} answered "
        f"'all human' and {none:,} cite no reason"
    ) in text
    hunch = int(rows["reasons"].astype(str).str.contains("hunch").sum())
    assert (f"'hunch' {hunch}" in text) == bool(hunch)


def test_demo_has_a_rarely_cited_reason(demo):
    table = pd.read_csv(demo["out"] / "reason_points.csv").set_index("reason")
    assert 0 < table.loc["coreference", "rounds"] < limits.MIN_ROUNDS_PER_REASON


def test_comment_section_without_explanations_says_so(roft):
    text = section(roft["text"], 7)
    assert roft["summary"]["comments"]["non_empty"] == 0
    assert "The input has no free-text explanations" in text
    assert "How far to trust the comment classes" not in text
    assert "| reason_type |" not in text and "_(no rows)_" not in text


def test_comment_class_shares_need_enough_comments(demo):
    unique = demo["summary"]["comments"]["unique_near"]
    text = section(demo["text"], 7)
    assert 0 < unique < limits.MIN_COMMENTS_FOR_SHARES
    header = next(line for line in text.splitlines() if line.startswith("| reason_type |"))
    assert "share" not in header
    assert (
        f"{unique} unique comments: too few for shares (at least "
        f"{limits.MIN_COMMENTS_FOR_SHARES} needed)"
    ) in text
    assert "How far to trust the comment classes" in text  # the dev-set caveat stays


# -- 9. the detector: no TPR at an FPR its negatives cannot measure ----------------------------


def test_detector_tpr_needs_enough_negatives(tiny_model_dir, tmp_path):
    out = tmp_path / "detect"
    args = ["detect", str(CONFOUNDED), "--out", str(out), "--model", str(tiny_model_dir)]
    assert main([*args, "--no-progress", "--bootstrap", "50"]) == 0
    metrics = pd.read_csv(out / "detection_metrics.csv")
    text = (out / "detect.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| ") and " · " in line]
    rows = [line for line in rows if line.count("|") == 9]  # the detection table
    assert len(rows) == len(metrics)
    few = metrics["n_negative"] < 100
    assert few.any(), "the fixture has few all-human texts"
    for line, (_, metric) in zip(rows, metrics.iterrows(), strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        at_1, at_5 = cells[-2], cells[-1]
        assert (at_1 == "– (< 100 negatives)") == (metric["n_negative"] < 100)
        assert (at_5 == "– (< 20 negatives)") == (metric["n_negative"] < 20)
    assert "resample texts, so they differ from section 2's" in text


def test_learning_curve_draws_only_rounds_with_enough_annotators(report):
    table = pd.read_csv(report["out"] / "learning_by_order.csv")
    hidden = int((table["annotators"] < limits.MIN_ANNOTATORS_PER_POINT).sum())
    learning = section(report["text"], 4)
    note = (
        f"The figure draws a round only where at least {limits.MIN_ANNOTATORS_PER_POINT} "
        f"annotators played it ({hidden} later round(s) rest on fewer"
    )
    assert (note in learning) == bool(hidden)


def test_roft_has_late_rounds_played_by_few(roft):
    table = pd.read_csv(roft["out"] / "learning_by_order.csv")
    assert (table["annotators"] < limits.MIN_ANNOTATORS_PER_POINT).any()
