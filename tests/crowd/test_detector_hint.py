"""The detector hint condition: scores from a detections.csv stored with the texts, shown in
plain words per revealed sentence to the hint condition only, recorded with the round and
exported; and the model's name disclosed to the condition that says so."""

from __future__ import annotations

import json
import re

import pandas as pd
from sqlalchemy import select

from app.crowd import hints, serving
from app.extensions import db
from app.models import Example, Round
from app.research import export_options, exports
from tests.conftest import csrf_token
from tests.crowd.helpers import answer, join, make_pool, make_study, study_round
from tests.crowd.test_crowd_http import join_http
from tests.game_helpers import reveal_http

ARMS = [
    {"name": "alone"},
    {"name": "hint", "detector_hint": True, "disclose_model": True},
]


def write_detections(path, examples, scorer="loglik"):
    """A detections.csv as `analysis detect` writes it: machine sentences score high."""
    rows = [
        {
            "example": e.external_id,
            "n_sentences": e.n_sentences,
            "boundary": e.boundary,
            f"{scorer}_sentences": json.dumps(
                [(5.0 if i >= e.boundary else 1.0) + i / 100 for i in range(e.n_sentences)]
            ),
            f"{scorer}_model": "gpt2 (124M)",
        }
        for e in examples
    ]
    pd.DataFrame(rows).to_csv(path, index=False)


def test_hints_are_stored_shown_to_the_hint_condition_and_exported(app, ctx, runner, tmp_path):
    make_pool(normal=12, human=4)
    study = make_study(rounds=4, attention_check_rate=0.25, conditions=ARMS)
    texts = db.session.scalars(select(Example).where(Example.kind == "normal")).all()
    path = tmp_path / "detections.csv"
    write_detections(path, texts)
    result = runner.invoke(args=["study", "hints", "pilot", str(path)])
    assert result.exit_code == 0, result.output
    assert "Detector hints (loglik) stored for 16 text(s); 0 without scores" in result.output
    check_ids = study.pool["inside_checks"] + study.pool["checks"]
    checks = db.session.scalars(select(Example).where(Example.id.in_(check_ids))).all()
    assert checks and all(c.meta["detector"]["scores"] for c in checks)
    machine = next(t for t in texts if t.boundary < t.n_sentences)
    shown = hints.levels(study, machine)
    assert (shown[1], shown[-1]) == ("low", "high")

    workers = {p.condition: p for p in (join(study, "w0", "s0"), join(study, "w1", "s1"))}
    seen = {}
    for name, participant in workers.items():
        round_ = study_round(study, participant)
        context = serving.round_context(round_)
        seen[name] = context
        if name == "hint":
            example = round_.example
            words = context["detector_hints"]
            assert len(words) == example.n_sentences
            assert set(words) <= set(hints.WORDS.values())
            if round_.kind == "normal" and example.boundary < example.n_sentences:
                assert words[-1] == hints.WORDS["high"]
                assert words[1] == hints.WORDS["low"]
            assert context["study_models"] == ["gpt2-xl"]
            assert round_.detector_hints == hints.levels(study, example)
        else:
            assert "detector_hints" not in context and "study_models" not in context
        answer(round_, round_.example.n_sentences)

    exports.export(export_options.ExportOptions(out=tmp_path / "dump", format="csv"))
    rounds = pd.read_csv(tmp_path / "dump" / "rounds.csv")
    by_condition = rounds.set_index("condition")["detector_hints"]
    assert pd.isna(by_condition["alone"])
    assert set(json.loads(by_condition["hint"])) <= set(hints.LEVELS)


def test_a_detections_file_that_fits_no_text_is_a_clear_error(app, ctx, runner, tmp_path):
    make_pool()
    make_study(rounds=4, attention_check_rate=0, conditions=ARMS)
    path = tmp_path / "other.csv"
    write_detections(path, [])
    pd.DataFrame({"example": ["nope"], "loglik_sentences": ["[1.0, 2.0]"]}).to_csv(path)
    result = runner.invoke(args=["study", "hints", "pilot", str(path)])
    assert result.exit_code != 0
    assert f"{path}: no detector scores for any text of study 'pilot'" in result.output
    result = runner.invoke(args=["study", "hints", "pilot", str(path), "--scorer", "binoculars"])
    assert "--scorer 'binoculars' is not in it (it has loglik)" in result.output
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    result = runner.invoke(args=["study", "hints", "pilot", str(tmp_path / "bad.csv")])
    assert "not a detections.csv" in result.output


def test_hint_words_reach_the_page_for_revealed_sentences_only(app, tmp_path):
    with app.app_context():
        make_pool(normal=12, human=4)
        study = make_study(rounds=4, attention_check_rate=0, conditions=ARMS)
        texts = db.session.scalars(select(Example).where(Example.kind == "normal")).all()
        write_detections(tmp_path / "d.csv", texts)
        hints.store(study, tmp_path / "d.csv")
    pages = {}
    for worker in ("w0", "w1"):
        client = app.test_client()
        join_http(client, f"/study/pilot?PROLIFIC_PID={worker}&STUDY_ID=st1&SESSION_ID=s{worker}")
        token = csrf_token(client)
        response = client.post("/study/pilot/next", data={"csrf_token": token})
        round_id = int(re.search(r"/play/round/(\d+)", response.headers["Location"]).group(1))
        for seen in (1, 2):
            reveal_http(client, token, round_id, seen)
        with app.app_context():
            condition = db.session.get(Round, round_id).condition
        pages[condition] = client.get(f"/play/round/{round_id}").get_data(as_text=True)
    # Three sentences revealed: hints on the second and third, none on the first or beyond.
    assert pages["hint"].count('class="detector-hint"') == 2
    assert "The machine-written parts of this study's texts come from: gpt2-xl." in pages["hint"]
    assert "detector-hint" not in pages["alone"] and "study-models" not in pages["alone"]
