"""A two-condition study end to end: allocation, what each condition changes, the condition on
every round and in the export, the frozen plan (publish, edit, new versions) and the dashboard."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import pandas as pd
import pytest
from sqlalchemy import func, select

from app.crowd import admission, conditions, lookup, preregistration, reports, serving
from app.extensions import db
from app.models import Example, Participant, Round, Study, StudyPlan
from app.research import export_options, exports
from tests import factories
from tests.conftest import csrf_token
from tests.crowd.helpers import join, make_pool, make_study, play_slot
from tests.crowd.test_crowd_http import join_http
from tests.crowd.test_prolific_flow import stand_in  # noqa: F401  (a fixture)

FEEDBACK = [
    {"name": "feedback", "show_feedback": True},
    {"name": "no-feedback", "show_feedback": False, "time_limit_minutes": 45},
]
PLAN = {
    "hypotheses": ["Workers shown feedback find the exact boundary more often."],
    "outcome": "exact_hit",
    "contrast": "condition",
    "control": "no-feedback",
    "exclude_decisions": ["rejected"],
    "planned_workers": 120,
    "planned_texts": 60,
    "stopping_rule": "Stop when 120 workers are approved or on 2027-01-31.",
}


def feedback_study(**changes):
    return make_study(
        rounds=4, attention_check_rate=0, time_limit_minutes=30, expected_minutes=10,
        conditions=FEEDBACK, preregistration=PLAN, **changes,
    )  # fmt: skip


def test_workers_are_balanced_and_keep_their_condition(ctx):
    make_pool()
    study = feedback_study()
    workers = [join(study, f"w{i}", session=f"s{i}") for i in range(6)]
    given = [w.condition for w in workers]
    assert sorted(given) == ["feedback"] * 3 + ["no-feedback"] * 3
    for block in (given[0:2], given[2:4], given[4:6]):
        assert sorted(block) == ["feedback", "no-feedback"]
    # A reload, a second tab, a return: the same participant, the same condition.
    again = join(study, "w0", session="s0")
    assert again.id == workers[0].id and again.condition == given[0]
    admission.mark_left(workers[1], admission.ParticipantStatus.returned)
    db.session.commit()
    assert join(study, "w1", session="s1").condition == given[1]
    # The returned place goes to the next worker, with its condition.
    assert join(study, "w6", session="s6").condition == given[1]
    report = reports.study_report(study)
    assert report.conditions == {
        "feedback": {"entered": 4 if given[1] == "feedback" else 3, "holding": 3},
        "no-feedback": {"entered": 3 if given[1] == "feedback" else 4, "holding": 3},
    }


def test_each_condition_plays_under_its_own_settings(ctx):
    make_pool()
    study = feedback_study()
    first = join(study, "w0", session="s0")
    second = join(study, "w1", session="s1")
    by_name = {p.condition: p for p in (first, second)}
    shown, hidden = by_name["feedback"], by_name["no-feedback"]
    for participant in (shown, hidden):
        play_slot(study, participant)
    rounds_of = {
        p.condition: db.session.scalar(select(Round).where(Round.participant_id == p.id))
        for p in (shown, hidden)
    }
    assert {name: r.condition for name, r in rounds_of.items()} == {
        "feedback": "feedback",
        "no-feedback": "no-feedback",
    }
    assert "template" not in serving.round_context(rounds_of["feedback"])
    assert serving.round_context(rounds_of["no-feedback"])["template"] == "crowd/recorded.html"
    assert not serving.truth_hidden(shown.player_id)
    assert serving.truth_hidden(hidden.player_id)
    minutes = {
        p.condition: (admission.deadline(p) - p.started_at).total_seconds() / 60
        for p in (shown, hidden)
    }
    assert minutes == {"feedback": 30, "no-feedback": 45}


def test_a_condition_with_its_own_texts_reads_only_those(ctx):
    make_pool(normal=12, human=4)
    own = list(db.session.scalars(select(Example.external_id).order_by(Example.id).limit(6)))
    study = make_study(
        rounds=4,
        attention_check_rate=0,
        conditions=[{"name": "all"}, {"name": "few", "examples": own}],
    )
    workers = [join(study, f"w{i}", session=f"s{i}") for i in range(4)]
    few_ids = set(study.pool["conditions"]["few"]["normal"])
    assert len(few_ids) == 6
    for participant in workers:
        for _ in range(4):
            play_slot(study, participant)
        mine = select(Round.example_id).where(Round.participant_id == participant.id)
        read = set(db.session.scalars(mine))
        if participant.condition == "few":
            assert read <= few_ids
    assert "all" not in study.pool["conditions"]


def test_export_carries_conditions_and_the_frozen_plan(ctx, tmp_path):
    make_pool()
    study = feedback_study()
    workers = [join(study, f"w{i}", session=f"s{i}") for i in range(4)]
    for participant in workers:
        for _ in range(2):
            play_slot(study, participant)
    exports.export(export_options.ExportOptions(out=tmp_path / "dump", format="csv", study="pilot"))
    folder = tmp_path / "dump"
    rounds = pd.read_csv(folder / "rounds.csv")
    table = pd.read_csv(folder / "workers.csv")
    assert len(rounds) == 8 and rounds["condition"].notna().all()
    assert sorted(table["condition"]) == ["feedback"] * 2 + ["no-feedback"] * 2
    joined = rounds.merge(table[["annotator", "condition"]], on="annotator", suffixes=("", "_w"))
    assert (joined["condition"] == joined["condition_w"]).all()
    document = json.loads((folder / "preregistration.json").read_text())
    assert document["study"] == "pilot" and len(document["versions"]) == 1
    version = document["versions"][0]
    assert set(version) == {"version", "frozen_at", "sha256", "reason", "plan"}
    assert version["version"] == 1 and version["reason"] is None
    canonical = json.dumps(version["plan"], sort_keys=True, separators=(",", ":"))
    assert version["sha256"] == hashlib.sha256(canonical.encode()).hexdigest()
    assert version["plan"]["control"] == "no-feedback" and version["plan"]["alpha"] == 0.05
    assert "preregistration.json" in (folder / "README.md").read_text()
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["preregistration"]["sha256"] == version["sha256"]


def test_a_study_without_conditions_exports_empty_conditions_and_no_plan(ctx, tmp_path):
    make_pool()
    study = make_study(rounds=4, attention_check_rate=0)
    participant = join(study)
    assert participant.condition is None
    play_slot(study, participant)
    exports.export(export_options.ExportOptions(out=tmp_path / "d", format="parquet"))
    rounds = pd.read_parquet(tmp_path / "d" / "rounds.parquet")
    workers = pd.read_parquet(tmp_path / "d" / "workers.parquet")
    assert rounds["condition"].isna().all() and workers["condition"].isna().all()
    assert not (tmp_path / "d" / "preregistration.json").exists()
    assert reports.study_report(study).conditions == {}


def test_the_first_entry_freezes_an_unpublished_plan(ctx):
    make_pool()
    study = feedback_study()
    assert preregistration.latest(study) is None
    join(study, "w0", session="s0")
    frozen = preregistration.latest(study)
    assert frozen.version == 1 and frozen.participants_then == 0
    assert frozen.sha256 == preregistration.digest(lookup.config_of(study).preregistration)


STUDY_TOML = """
slug = "pilot"
title = "Spot the machine"
platform = "prolific"
rounds = 4
attention_check_rate = 0
reward = 1.50
expected_minutes = 6
categories = ["news"]
consent = "You will read short texts."
instructions = "Say when a machine took over."

[completion_codes]
completed = "C1DONE01"

[[conditions]]
name = "feedback"
show_feedback = true

[[conditions]]
name = "no-feedback"
show_feedback = false
tutorial = []

[preregistration]
hypotheses = ["Workers shown feedback find the exact boundary more often."]
outcome = "{outcome}"
contrast = "condition"
control = "no-feedback"
planned_workers = 120
planned_texts = 60
stopping_rule = "Stop when 120 workers are approved."
"""


def test_publish_freezes_and_the_plan_is_never_edited_in_place(app, ctx, runner, tmp_path):
    make_pool()
    path = tmp_path / "study.toml"
    path.write_text(STUDY_TOML.format(outcome="exact_hit"))
    assert runner.invoke(args=["study", "create", str(path)]).exit_code == 0
    published = runner.invoke(args=["study", "publish", "pilot"])
    assert published.exit_code == 0, published.output
    assert "Analysis plan frozen: version 1, SHA-256 " in published.output
    assert "Conditions: feedback, no-feedback" in published.output
    again = runner.invoke(args=["study", "publish", "pilot"])
    assert "version 1," in again.output  # nothing changed: still version 1

    changed = tmp_path / "changed.toml"
    changed.write_text(STUDY_TOML.format(outcome="points"))
    edit = runner.invoke(args=["study", "edit", "pilot", str(changed)])
    assert edit.exit_code != 0
    assert "analysis plan of study 'pilot' is frozen (version 1" in edit.output
    assert "flask study edit` cannot change it" in edit.output
    # Before any data, a new version with its reason.
    no_reason = runner.invoke(args=["study", "publish", "pilot", str(changed)])
    assert no_reason.exit_code != 0 and "--reason" in no_reason.output
    second = runner.invoke(
        args=["study", "publish", "pilot", str(changed), "--reason", "points are the outcome"]
    )
    assert second.exit_code == 0, second.output
    assert "version 2" in second.output

    study = lookup.get_study("pilot")
    join(study, "w0", session="s0")
    back = tmp_path / "back.toml"
    back.write_text(STUDY_TOML.format(outcome="exact_hit"))
    refused = runner.invoke(
        args=["study", "publish", "pilot", str(back), "--reason", "changed my mind"]
    )
    assert refused.exit_code != 0
    assert "1 worker(s) have entered: it cannot be edited" in refused.output
    third = runner.invoke(
        args=["study", "publish", "pilot", str(back), "--reason", "late fix", "--new-version"]
    )
    assert third.exit_code == 0, third.output
    rows = db.session.scalars(select(StudyPlan).order_by(StudyPlan.version)).all()
    assert [(r.version, r.reason, r.participants_then) for r in rows] == [
        (1, None, 0),
        (2, "points are the outcome", 0),
        (3, "late fix", 1),
    ]
    listed = runner.invoke(args=["study", "plan", "pilot"])
    assert "Version 3" in listed.output and "1 worker(s) had entered: late fix" in listed.output
    # The same plan as frozen: edit may change other settings.
    db.session.expire_all()
    assert lookup.config_of(study).preregistration["outcome"] == "exact_hit"
    wording = tmp_path / "wording.toml"
    wording.write_text(STUDY_TOML.format(outcome="exact_hit").replace("Say when", "Tell us when"))
    ok = runner.invoke(args=["study", "edit", "pilot", str(wording)])
    assert ok.exit_code == 0, ok.output


def test_bad_plan_and_conditions_are_clear_errors_on_the_command_line(app, ctx, runner, tmp_path):
    make_pool()  # check builds the study's pool to try every place's schedule
    path = tmp_path / "study.toml"
    path.write_text(STUDY_TOML.format(outcome="exact_hit"))
    result = runner.invoke(args=["study", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "Conditions, allocated in balanced blocks: feedback, no-feedback." in result.output
    assert "Analysis plan: exact_hit by condition, mixed model, alpha 0.05" in result.output
    path.write_text(STUDY_TOML.format(outcome="accuracy"))
    result = runner.invoke(args=["study", "check", str(path)])
    assert result.exit_code != 0
    assert f"{path}: preregistration.outcome: is required: one of exact_hit" in result.output
    path.write_text(
        STUDY_TOML.format(outcome="points").replace("show_feedback = true", "rounds = 3")
    )
    result = runner.invoke(args=["study", "check", str(path)])
    assert f"{path}: conditions[0].rounds: is not a setting a condition can change" in (
        result.output
    )


def test_check_refuses_a_condition_whose_own_pool_runs_out(app, ctx, runner, tmp_path):
    """The common pool is big enough; the second condition's own (stories only) is not, and
    `study check` names it before any worker can be trapped in it."""
    make_pool()
    for _ in range(3):  # fewer stories than one worker's four rounds take
        factories.example(boundary=3, category_slug="stories")
    path = tmp_path / "study.toml"
    text = STUDY_TOML.format(outcome="exact_hit").replace(
        "tutorial = []", 'categories = ["stories"]'
    )
    path.write_text(text.replace("[completion_codes]", "places = 10\n\n[completion_codes]"))
    result = runner.invoke(args=["study", "check", str(path)])
    assert result.exit_code != 0
    assert (
        "condition no-feedback: the pool has 3 examples, fewer than the 4 normal rounds each "
        "worker plays"
    ) in result.output
    assert db.session.scalar(select(func.count()).select_from(Study)) == 0
    # With enough stories the same file passes and says each condition's pool.
    for _ in range(40):
        factories.example(boundary=3, category_slug="stories")
    result = runner.invoke(args=["study", "check", str(path)])
    assert result.exit_code == 0, result.output
    assert "for condition no-feedback" in result.output


def test_dashboard_shows_counts_per_condition(app, client, runner):
    with app.app_context():
        make_pool()
        study = feedback_study()
        for i in range(3):
            join(study, f"w{i}", session=f"s{i}")
        counts = conditions.counts(study)
    assert sum(v["holding"] for v in counts.values()) == 3
    runner.invoke(args=["create-researcher", "lab", "--password", "a long password"])
    token = csrf_token(client)
    client.post(
        "/login", data={"csrf_token": token, "username": "lab", "password": "a long password"}
    )
    page = client.get("/research/studies/pilot").get_data(as_text=True)
    assert 'data-field="conditions.no-feedback.holding"' in page
    data = client.get("/research/studies/pilot.json").get_json()
    assert data["conditions"] == counts


@pytest.mark.usefixtures("stand_in")
def test_the_prolific_publish_freezes_the_plan(runner, ctx, tmp_path):
    make_pool()
    path = tmp_path / "study.toml"
    path.write_text(STUDY_TOML.format(outcome="exact_hit"))
    assert runner.invoke(args=["study", "create", str(path)]).exit_code == 0
    made = runner.invoke(args=["study", "prolific", "create", "pilot", "--places", "10"])
    assert made.exit_code == 0, made.output
    published = runner.invoke(args=["study", "prolific", "publish", "pilot"])
    assert published.exit_code == 0, published.output
    assert "Analysis plan frozen: version 1, SHA-256 " in published.output
    assert "Prolific says ACTIVE" in published.output
    frozen = preregistration.latest(lookup.get_study("pilot"))
    assert frozen.sha256 in published.output and frozen.participants_then == 0


def test_each_condition_runs_out_of_time_at_its_own_limit(app):
    with app.app_context():
        make_pool()
        feedback_study()
    clients = {}
    for worker in ("w0", "w1"):
        clients[worker] = app.test_client()
        link = f"/study/pilot?PROLIFIC_PID={worker}&STUDY_ID=st1&SESSION_ID=s{worker}"
        join_http(clients[worker], link)
    with app.app_context():
        found = db.session.scalars(select(Participant)).all()
        for participant in found:
            participant.started_at -= timedelta(minutes=40)  # past 30, within 45
        db.session.commit()
        given = {p.worker_id: p.condition for p in found}
    pages = {given[w]: client.get("/study/pilot/continue") for w, client in clients.items()}
    assert pages["feedback"].status_code == 410
    assert "(30 minutes) has run out" in pages["feedback"].get_data(as_text=True)
    assert pages["no-feedback"].status_code != 410
    with app.app_context():
        for participant in db.session.scalars(select(Participant)):
            participant.started_at -= timedelta(minutes=10)  # now past 45 too
        db.session.commit()
    late = next(c for w, c in clients.items() if given[w] == "no-feedback")
    page = late.get("/study/pilot/continue")
    assert page.status_code == 410
    assert "(45 minutes) has run out" in page.get_data(as_text=True)


def test_check_warns_when_the_plan_is_smaller_than_the_power_simulation_found(
    app, ctx, runner, tmp_path
):
    from analysis.__main__ import main as analysis_main

    make_pool()
    result_file = tmp_path / "power.json"
    options = "--outcome points --effect 1.5 --sd-residual 1 --rounds 4 --jobs 1 --no-progress"
    grid = "--workers 6 30 --texts 8 --simulations 6"
    argv = ["power", *grid.split(), *options.split(), "--out", str(result_file)]
    assert analysis_main(argv) == 0
    found = json.loads(result_file.read_text())
    assert found["smallest"]["workers"] == 30 and found["smallest"]["texts"] == 8
    path = tmp_path / "study.toml"

    def check(outcome: str, workers: int) -> str:
        text = STUDY_TOML.format(outcome=outcome)
        path.write_text(text.replace("planned_workers = 120", f"planned_workers = {workers}"))
        result = runner.invoke(args=["study", "check", str(path), "--power", str(result_file)])
        assert result.exit_code == 0, result.output
        return result.output

    assert (
        "Warning: the plan's 10 workers × 60 texts is below the smallest design reaching power "
        "0.8: 30 workers × 8 texts"
    ) in check("points", 10)
    assert "Warning" not in check("points", 40)
    assert "the power file simulated outcome 'points', the plan says 'exact_hit'" in check(
        "exact_hit", 40
    )
    result_file.write_text('{"designs": []}')
    result = runner.invoke(args=["study", "check", str(path), "--power", str(result_file)])
    assert result.exit_code != 0 and "not the JSON of `python -m analysis power --out`" in (
        result.output
    )
