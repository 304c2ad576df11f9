"""A randomised two-condition study (feedback vs none) run end to end through the site and the
researcher's commands: `flask study create` with a preregistration, simulated workers who join
by the study link and play every round through the pages, a pilot half exported with `flask
export` and sized with `python -m analysis power`, then the second half, the final export and
the report's confirmatory analysis.

The simulated workers learn only from what the site shows them: a worker's chance of flagging
the exact sentence where the machine took over rises after each round whose result page showed
them the true boundary. The feedback condition's pages show it; the other condition's pages do
not, so only the feedback workers improve across rounds. If the site ignored show_feedback,
both conditions would learn alike and the preregistered condition × order test would fail.

On SQLite, and on PostgreSQL with TEST_DATABASE_URL (tests/conftest.py).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from dataclasses import dataclass

import pandas as pd
import pytest
from sqlalchemy import select

from analysis import mixed
from analysis.__main__ import main as analysis_main
from analysis.load import read_preregistration
from analysis.report import ReportSettings, build_report
from app.crowd import conditions, lookup, preregistration, verdicts
from app.extensions import db
from app.models import Participant, ParticipantStatus, Round
from app.research import pseudonyms
from tests import factories
from tests.conftest import csrf_token
from tests.crowd.test_crowd_http import join_http
from tests.crowd.test_study_cli import create
from tests.game_helpers import answer_http, reveal_http

pytestmark = pytest.mark.skipif(mixed.r_available() is None, reason="R with lme4 is not installed")

WORKERS = 40  # in two halves: the pilot, then the rest
ROUNDS = 8
TEXTS = 30
TOML = f"""
slug = "pilot"
title = "Spot the machine"
platform = "prolific"
rounds = {ROUNDS}
attention_check_rate = 0
target_per_example = {WORKERS}
reward = 1.50
currency = "GBP"
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
name = "none"
show_feedback = false

[preregistration]
hypotheses = ["With feedback, workers' exact hits rise across rounds; without, they do not."]
outcome = "exact_hit"
contrast = "condition:order"
control = "none"
model = "mixed"
alpha = 0.05
exclude_decisions = ["rejected"]
planned_workers = {WORKERS}
planned_texts = {TEXTS}
stopping_rule = "Stop when {WORKERS} workers have finished."
"""
SENTENCE = re.compile(r'<li class="sentence([^"]*)"([^>]*)>')
# The simulated workers: log odds of an exact hit = BASE + their own skill + LEARN for every
# result page that showed them the true boundary.
BASE, SD_SKILL, LEARN = -1.6, 0.3, 0.7


def link(worker: str) -> str:
    return f"/study/pilot?PROLIFIC_PID={worker}&STUDY_ID=st1&SESSION_ID=s-{worker}"


def browser(app, number: int):
    """A worker's browser, from the worker's own address (the link's rate limit is per address)."""
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = f"10.0.0.{number + 1}"
    return client


@dataclass
class Worker:
    name: str
    rng: random.Random
    skill: float
    learned: int = 0  # result pages that showed this worker the true boundary
    hidden: int = 0  # result pages that did not

    @classmethod
    def make(cls, index: int) -> Worker:
        rng = random.Random(f"worker-{index}")
        return cls(f"w{index:02d}", rng, rng.gauss(0, SD_SKILL))

    def hit_chance(self) -> float:
        return 1 / (1 + math.exp(-(BASE + self.skill + LEARN * self.learned)))


def shown_boundary(page: str) -> int | None:
    """The sentence (from 0) the result page marks as the machine's first, None when the page
    does not say."""
    for index, (classes, attributes) in enumerate(SENTENCE.findall(page)):
        if "boundary" in classes.split() or 'id="boundary"' in attributes:
            return index
    return None


def play_round(app, client, clock, worker: Worker) -> int | None:
    """One round through the pages: read up to the chosen sentence, 4 seconds a sentence, flag
    it, then read the result page (and learn from it when it shows the truth). Returns the
    round's id, None when the study is done."""
    token = csrf_token(client)
    response = client.post("/study/pilot/next", data={"csrf_token": token})
    if "/done" in response.headers["Location"]:
        return None
    round_id = int(re.search(r"/play/round/(\d+)", response.headers["Location"]).group(1))
    with app.app_context():
        example = db.session.get(Round, round_id).example
        n, truth = example.n_sentences, example.boundary
    if worker.rng.random() < worker.hit_chance():
        flag = truth
    else:
        flag = worker.rng.choice([g for g in range(1, n) if g != truth])
    for seen in range(1, flag + 1):
        clock.advance(4.0)
        step = reveal_http(client, token, round_id, seen)
        assert step.status_code in (200, 302), step.get_data(as_text=True)
    clock.advance(4.0)
    answer = {"choice": "machine", "explanation": "The topic drifts here."}
    answered = answer_http(client, token, round_id, flag + 1, **answer)
    assert answered.status_code == 302, answered.get_data(as_text=True)
    page = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    shown = shown_boundary(page)
    if shown is None:
        worker.hidden += 1
    else:
        assert shown == truth  # the page shows the truth, never something else
        worker.learned += 1
    return round_id


def play_all(app, client, clock, worker: Worker, most: int = 99) -> int:
    played = 0
    while played < most and play_round(app, client, clock, worker) is not None:
        played += 1
    return played


def conditions_now(app) -> dict[str, str]:
    with app.app_context():
        return {p.worker_id: p.condition for p in db.session.scalars(select(Participant))}


def run_half(app, clock, workers: list[Worker], started: dict[str, str]) -> None:
    """Each worker joins by the link and plays every round; allocation stays balanced as they
    arrive. The half's sixth worker leaves after three rounds and comes back in another browser
    through the link: the same participant, the same condition."""
    for worker in workers:
        number = int(worker.name[1:])
        client = browser(app, number)
        assert join_http(client, link(worker.name)).status_code == 302
        given = conditions_now(app)
        assert set(given) == {*started, worker.name}
        assert all(given[w] == c for w, c in started.items())  # nobody's condition changed
        started[worker.name] = given[worker.name]
        counts = pd.Series(list(started.values())).value_counts()
        assert set(counts.index) <= {"feedback", "none"}
        assert abs(counts.get("feedback", 0) - counts.get("none", 0)) <= 1  # one block of two
        if number % (WORKERS // 2) == 5:
            assert play_all(app, client, clock, worker, most=3) == 3
            client = browser(app, number)
            assert join_http(client, link(worker.name)).status_code == 302
            assert conditions_now(app) == started
        play_all(app, client, clock, worker)


def export(runner, out) -> pd.DataFrame:
    result = runner.invoke(args=["export", str(out), "--study", "pilot"])
    assert result.exit_code == 0, result.output
    return pd.read_csv(out / "rounds.csv", keep_default_na=False)


@pytest.mark.timeout(600)
def test_a_feedback_experiment_finds_its_preregistered_effect(
    app, runner, clock, tmp_path, monkeypatch, capsys
):
    monkeypatch.setattr(conditions, "new_seed", lambda: "feedback-experiment")
    layout = random.Random("texts")
    with app.app_context():
        for _ in range(TEXTS):
            factories.example(boundary=layout.randint(1, 8), n=10, category_slug="news")
        made = create(runner, tmp_path, TOML)
        assert made.exit_code == 0, made.output
        plan = lookup.config_of(lookup.get_study("pilot")).preregistration
        assert (plan["contrast"], plan["control"], plan["model"]) == (
            "condition:order",
            "none",
            "mixed",
        )

    workers = [Worker.make(i) for i in range(WORKERS)]
    started: dict[str, str] = {}
    run_half(app, clock, workers[: WORKERS // 2], started)

    # The pilot: the first half's export, and the power of designs of the grid from it.
    pilot = export(runner, tmp_path / "pilot")
    assert pilot["annotator"].nunique() == WORKERS // 2 and len(pilot) == WORKERS // 2 * ROUNDS
    assert (pilot["condition"] != "").all()
    power_file = tmp_path / "power.json"
    grid = f"--workers 10 20 {WORKERS} --texts {TEXTS} --simulations 12 --effect 0.7"
    argv = ["power", str(tmp_path / "pilot"), *grid.split(), "--jobs", "1", "--no-progress"]
    assert analysis_main([*argv, "--out", str(power_file)]) == 0
    printed = capsys.readouterr().out
    assert "note: plan from preregistration.json" in printed
    assert "Scenario: outcome=exact_hit, contrast=condition:order" in printed
    found = json.loads(power_file.read_text())
    best = found["smallest"]
    assert best is not None, printed

    run_half(app, clock, workers[WORKERS // 2 :], started)

    with app.app_context():
        study = lookup.get_study("pilot")
        participants = list(db.session.scalars(select(Participant)))
        assert len(participants) == WORKERS
        assert all(p.status == ParticipantStatus.completed for p in participants)
        assert {p.worker_id: p.condition for p in participants} == started
        assert sorted(started.values()).count("feedback") == WORKERS // 2
        frozen = preregistration.latest(study)
        assert frozen.version == 1 and frozen.sha256 == preregistration.digest(plan)
        key = pseudonyms.pseudonym_key()
        names = {pseudonyms.pseudonym(p.player_id, key): p.worker_id for p in participants}
        lines = ["Submission id,Participant id,Status,Completion code"]
        lines += [
            f"sub-{p.worker_id},{p.worker_id},AWAITING REVIEW,{verdicts.completion_code(p)}"
            for p in participants
        ]
    platform = tmp_path / "prolific.csv"
    platform.write_text("\n".join(lines) + "\n", encoding="utf-8")
    verified = runner.invoke(
        args=["study", "verify", "pilot", "--prolific-export", str(platform), "--out",
              str(tmp_path / "verify"), "--apply"]
    )  # fmt: skip
    assert verified.exit_code == 0, verified.output

    # Only the feedback condition's pages showed the truth.
    for worker in workers:
        if started[worker.name] == "feedback":
            assert (worker.learned, worker.hidden) == (ROUNDS, 0), worker.name
        else:
            assert (worker.learned, worker.hidden) == (0, ROUNDS), worker.name

    final = tmp_path / "final"
    rounds = export(runner, final)
    assert len(rounds) == WORKERS * ROUNDS
    assert (rounds["condition"] != "").all() and (rounds["decision"] == "approve").all()
    assert (rounds["annotator"].map(names).map(started) == rounds["condition"]).all()
    texts = rounds["example_id"].nunique()
    # The study as run is at least the smallest design the pilot found powered.
    assert best["workers"] <= WORKERS and best["texts"] <= texts, found

    document = json.loads((final / "preregistration.json").read_text())
    (version,) = document["versions"]
    assert (
        version["sha256"]
        == frozen.sha256
        == hashlib.sha256(preregistration.canonical(version["plan"]).encode()).hexdigest()
    )
    assert version["plan"] == plan
    read = read_preregistration(final)
    assert read["versions"][0]["sha256_ok"] is True

    hits = rounds.assign(hit=rounds["true_boundary_index"] == rounds["predicted_boundary_index"])
    by = hits.groupby(["condition", hits["order_index"] > ROUNDS // 2])["hit"].mean()
    assert by["feedback", True] > by["feedback", False] + 0.2  # the feedback workers learned
    assert abs(by["none", True] - by["none", False]) < 0.15

    summary = build_report(final, tmp_path / "report", ReportSettings(bootstrap=20))
    text = (tmp_path / "report" / "report.md").read_text()
    assert "## Confirmatory analysis (preregistered)" in text
    result = summary["confirmatory"]
    assert "contrast: condition:order (control: none); model: mixed; alpha 0.05." in text
    fitted = result["model"]  # the planned mixed model: crossed workers and texts, by lme4
    assert "glmer" in fitted["library"] and "clustered" not in fitted["model"]
    assert fitted["family"] == "binomial" and set(fitted["groups"]) == {"annotators", "texts"}
    # Nothing departs from the plan (the fit's own notes, such as a dropped random slope, aside).
    departures = [d for d in result["deviations"] if not d.startswith("model: ")]
    assert departures == [], result["deviations"]
    assert result["terms"] == ["feedback × order"]
    (term,) = [e for e in result["model"]["effects"] if e["term"] == "feedback × order"]
    assert term["estimate"] > 0
    assert result["p_value"] < plan["alpha"] and result["reject"] is True
    assert result["workers"] == WORKERS and result["rows"] == WORKERS * ROUNDS
    assert "**rejects the null hypothesis**" in text and "matches its content" in text
