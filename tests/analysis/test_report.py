"""The report command end to end on the roft.csv-format fixture."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.report import ReportSettings, build_report

ROFT = Path(__file__).parent / "data" / "roft_sample.csv"
HEADLINE = {
    "n_annotations",
    "n_annotators",
    "n_examples",
    "exact_rate",
    "mean_points",
    "mean_signed_distance",
    "points_mismatch_rows",
}


def test_report_on_roft_csv(tmp_path):
    summary = build_report(ROFT, tmp_path, ReportSettings(straight_line_k=5, bootstrap=200))
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert set(saved["all"]) >= HEADLINE and set(saved["filtered"]) >= HEADLINE
    assert {
        "pairs",
        "pair_exact_rate",
        "pair_within1_rate",
        "krippendorff_alpha_interval",
    } <= set(saved["agreement"])
    a = saved["all"]
    assert a["n_annotations"] == 27 and a["n_annotators"] == 6 and a["n_examples"] == 5
    assert a["mean_points"] == pytest.approx(87 / 27)
    assert a["exact_rate"] == pytest.approx(12 / 27)
    assert a["mean_signed_distance"] == pytest.approx(23 / 27)
    assert a["points_mismatch_rows"] == 1
    # a3 answered "all human" five times in a row: the straight-lining filter drops them.
    assert saved["filtered"]["n_annotations"] == 22 and saved["filtered"]["n_annotators"] == 5
    # Agreement on the filtered set (a3's 9s gone): see the fixture's table in docs.
    assert saved["agreement"]["pairs"] == summary["agreement"]["pairs"] == 10 + 6 + 10 + 6 + 6
    for name in ("distance_histogram", "points_by_factor", "learning", "skill_range"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
    report = (tmp_path / "report.md").read_text()
    assert "## 6. Agreement" in report and "distance_histogram.png" in report
    heds = json.loads((tmp_path / "heds.json").read_text())
    assert heds["evaluators"]["number_before_exclusions"] == 6
    assert heds["evaluators"]["number_after_exclusions"] == 5
    assert heds["design"]["quality_assurance"]["excluded"]["straight_lining"]["rows"] == 5
    assert "unknown — fill in" in (tmp_path / "heds.md").read_text()
    assert (tmp_path / "comment_rules.csv").exists()


def test_cli_help_and_errors(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    assert "roft.csv" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing"), "--out", str(tmp_path / "r")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_python_dash_m_runs(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "analysis",
            "report",
            str(ROFT),
            "--out",
            str(tmp_path),
            "--bootstrap",
            "50",
            "--category",
            "news",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert (
        json.loads((tmp_path / "summary.json").read_text())["all"]["n_annotations"] == 11
    )  # E1 x6, E4 x5


def _with_explanations(tmp_path) -> Path:
    import pandas as pd

    frame = pd.read_csv(ROFT, dtype=str, keep_default_na=False)
    said = ["it repeats the same line", "off topic", "idk", "bad grammar", "who is he"]
    frame["explanation"] = [said[i % len(said)] for i in range(len(frame))]
    path = tmp_path / "roft_with_explanations.csv"
    frame.to_csv(path, index=False)
    return path


def test_coded_shares_are_marked_uncorrected_without_labels(tmp_path):
    build_report(_with_explanations(tmp_path), tmp_path / "r", ReportSettings(bootstrap=0))
    report = (tmp_path / "r" / "report.md").read_text()
    assert "reason chips, chosen in the game, are the primary reason data" in report
    assert "Coded shares: uncorrected, coder not validated on this data" in report
    assert (tmp_path / "r" / "reasons_chips_and_coded.csv").exists()


def test_researchers_labels_give_agreement_and_corrected_shares(tmp_path):
    labels = tmp_path / "labels.csv"
    labels.write_text(
        "explanation,label\n"
        "it repeats the same line,repetition\n"
        "off topic,irrelevant\n"
        "idk,not_a_reason\n"
        "bad grammar,grammar\n"
        "who is he,coreference\n"
        "off topic,irrelevant\n"
    )
    settings = ReportSettings(bootstrap=200, coder_labels=str(labels))
    summary = build_report(_with_explanations(tmp_path), tmp_path / "r", settings)
    checked = summary["comments"]["coder_validation"]
    assert checked["sample"] == 6 and checked["kappa"]["kappa"] == pytest.approx(1.0)
    report = (tmp_path / "r" / "report.md").read_text()
    assert "Cohen's κ 1.00" in report and "| repetition | 1 | 1 | 1.00 | 1.00 |" in report
    assert "corrected share | 95% CI" in report
    assert "uncorrected" not in report


def test_a_bad_labels_file_names_file_and_line(tmp_path, capsys):
    labels = tmp_path / "labels.csv"
    labels.write_text("explanation,label\nidk,not_a_reason\noff topic,offtopic\n")
    source = _with_explanations(tmp_path)
    argv = ["report", str(source), "--out", str(tmp_path / "r"), "--coder-labels", str(labels)]
    assert main(argv) == 2
    assert f"{labels}:3: unknown label 'offtopic'" in capsys.readouterr().err
