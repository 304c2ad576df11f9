"""--engine openai against a real OpenAI-compatible server (tests/generation/openai_server.py,
a separate process on 127.0.0.1 serving the session's tiny GPT-2): the same records as --engine
hf, provenance as sent, concurrency, retries on 429 and 5xx, a killed run resumed, the API key."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.catalog.records import parse_lines
from generation.cli import main
from generation.engines.openai import backoff_seconds, retry_after_seconds, safe_url
from roftcore.records import validate
from tests.generation.conftest import cli_args, demo_docs, read
from tests.generation.openai_server import serve

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "ROFT_TEST_SERVER_KEY"
KEY = "sk-test-d0c5e1f2a3b4-never-printed"
SERVED = "tiny-served"
N = 4


@pytest.fixture(scope="module")
def server(tiny_model_dir):
    """The test server as its own process; its base URL, and functions to steer it."""
    with serve(tiny_model_dir, SERVED, KEY_ENV, KEY) as running:
        yield running


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture(scope="module")
def uninterrupted(server, tmp_path_factory) -> Path:
    """The records of one clean run against the test server (default concurrency), made once
    for the module: the reference that retried, resumed and sharded runs must reproduce. The
    same arguments always give the same records (each request carries its own seed), so one run
    stands for the clean run each of those tests used to make for itself."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    corpus = folder / "news.jsonl"
    docs = [*demo_docs("news", 6), {"id": "short-1", "text": "Too short. Only two sentences."}]
    corpus.write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    out = folder / "whole.jsonl"
    server["control"](reset=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(KEY_ENV, KEY)
        assert main(args(corpus, out, *api(server))) == 0
    assert len(read(out)) > 0
    return out


def read_plain(path) -> list[dict]:
    """The records less `provenance.generation.served_root` (the folder /v1/models names)."""
    rows = read(path)
    for row in rows:
        row["provenance"].get("generation", {}).pop("served_root", None)
    return rows


def args(corpus, out, *extra) -> list[str]:
    options = f"-n {N} --per-doc 2 --seed 11 --p uniform:0.8:1 --tokens-per-sentence 30"
    return cli_args(corpus, out, f"{options} --max-attempts 3 --no-progress", *extra)


def api(server, *extra) -> list[str]:
    return [
        "--engine",
        "openai",
        "--model",
        SERVED,
        "--base-url",
        server["base"],
        "--api-key-env",
        KEY_ENV,
        "--system",
        "tiny-api",
        "--retry-base",
        "0.01",
        *extra,
    ]


def test_hf_and_openai_make_the_same_examples_that_import(
    corpus_file, tmp_path, tiny_model_dir, server, key, runner, ctx
):
    server["control"](reset=True)
    local, remote = tmp_path / "hf.jsonl", tmp_path / "api.jsonl"
    hf_args = ["--model", str(tiny_model_dir), "--device", "cpu", "--system", "tiny-hf"]
    assert main(args(corpus_file, local, "--engine", "hf", *hf_args)) == 0
    assert main(args(corpus_file, remote, *api(server, "--concurrency", "3"))) == 0
    ours, theirs = read(local), read(remote)
    assert len(ours) == len(theirs) > 0
    machine = 0
    for a, b in zip(ours, theirs, strict=True):  # plan order in both
        assert (a["source"]["doc_id"], a["boundary"]) == (b["source"]["doc_id"], b["boundary"])
        # The server samples with the same rule and the same seed: the same text.
        assert a["sentences"] == b["sentences"]
        assert (a["seed"], a["decoding"]) == (b["seed"], b["decoding"])
        machine += b["boundary"] < N
    assert machine > 0
    # Both pass the contract and the site's importer.
    for path in (local, remote):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert all(not isinstance(r, Exception) for r in parse_lines(lines))
        for number, row in enumerate(read(path), start=1):
            validate(row, number)
    merged = tmp_path / "both.jsonl"
    assert main(["merge", "--out", str(merged), str(local), str(remote)]) == 0
    # The all-human passages both runs made are the same texts, named as human: kept once.
    shared = [r for r in theirs if r["boundary"] == N]
    assert shared and all(r["id"] == f"{r['source']['doc_id']}-human-{r['id'][-1]}" for r in shared)
    assert len(read(merged)) == len(ours) + len(theirs) - len(shared)
    result = runner.invoke(args=["import", str(merged)])
    assert result.exit_code == 0, result.output
    assert f"Imported {len(read(merged))} example(s)" in result.output

    # Provenance: the request exactly as the server received it, and what the server reported.
    received = {body["seed"]: body for body in server["stats"]()["bodies"]}
    for row in theirs:
        if row["boundary"] == N:  # all human: says so, and names no model or request
            assert row["provenance"]["generation"]["method"] == "human"
            assert "request" not in row["provenance"]["generation"]
            continue
        prov = row["provenance"]
        assert prov["model"] == SERVED
        gen = prov["generation"]
        assert gen["engine"] == "openai" and gen["endpoint"] == "completions"
        assert gen["request"] == received[row["seed"]]
        assert gen["request"]["seed"] == row["seed"]
        assert gen["request"]["top_p"] == row["decoding"]["p"]
        assert gen["request"]["max_tokens"] == row["decoding"]["max_new_tokens"]
        assert gen["served_model"] == SERVED
        assert gen["system_fingerprint"].startswith("fp_tiny_")
        assert gen["finish_reason"] in ("stop", "length")
    manifest = json.loads((tmp_path / "api.jsonl.manifest.json").read_text())
    assert manifest["model"]["served"][0]["id"] == SERVED
    assert manifest["model"]["api_key_set"] is True
    assert manifest["requests"]["retries"] == 0
    # The key is sent (the server refuses requests without it) but written nowhere.
    assert server["stats"]()["bad_keys"] == 0
    for path in tmp_path.iterdir():
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace")


def test_requests_run_concurrently(corpus_file, tmp_path, server, key):
    server["control"](reset=True, delay=0.3)
    out = tmp_path / "api.jsonl"
    assert main(args(corpus_file, out, *api(server, "--concurrency", "4"))) == 0
    server["control"](delay=0)
    seen = server["stats"]()["most_in_flight"]
    assert 2 <= seen <= 4
    manifest = json.loads((tmp_path / "api.jsonl.manifest.json").read_text())
    assert 2 <= manifest["requests"]["most_in_flight"] <= 4


def test_429_and_5xx_are_retried_and_change_nothing(
    corpus_file, tmp_path, server, key, uninterrupted
):
    clean = uninterrupted
    server["control"](reset=True, fail=[429, 500, 503, 429], retry_after="0")
    bumpy = tmp_path / "bumpy.jsonl"
    assert main(args(corpus_file, bumpy, *api(server))) == 0
    assert server["stats"]()["failures_sent"] == [429, 500, 503, 429]
    manifest = json.loads((tmp_path / "bumpy.jsonl.manifest.json").read_text())
    assert manifest["requests"]["retries"] == 4
    assert manifest["requests"]["retried_by_status"] == {"429": 2, "500": 1, "503": 1}
    assert read(bumpy) == read(clean)


def test_retry_after_is_waited_for(corpus_file, tmp_path, server, key):
    server["control"](reset=True, fail=[429], retry_after="1.5")
    out = tmp_path / "api.jsonl"
    started = time.monotonic()
    assert main(args(corpus_file, out, *api(server, "--concurrency", "1"))) == 0
    assert time.monotonic() - started >= 1.5


def test_a_server_that_keeps_failing_stops_the_run_and_resume_finishes_it(
    corpus_file, tmp_path, server, key, capsys, uninterrupted
):
    server["control"](reset=True, fail=[500] * 3)
    out = tmp_path / "api.jsonl"
    assert main(args(corpus_file, out, *api(server, "--max-retries", "2", "--concurrency", "1")))
    err = capsys.readouterr().err
    assert "still failing after 3 tries (HTTP 500)" in err and "--resume" in err
    assert json.loads((tmp_path / "api.jsonl.manifest.json").read_text())["status"] == (
        "incomplete"
    )
    assert main(args(corpus_file, out, *api(server, "--resume"))) == 0
    assert read(out) == read(uninterrupted)


def test_a_wrong_key_is_refused_clearly_and_never_printed(
    corpus_file, tmp_path, server, monkeypatch, capsys
):
    monkeypatch.setenv(KEY_ENV, "sk-wrong-key-0000")
    out = tmp_path / "api.jsonl"
    assert main(args(corpus_file, out, *api(server))) == 2
    err = capsys.readouterr().err
    assert "HTTP 401" in err and f"${KEY_ENV}" in err
    assert "sk-wrong-key-0000" not in err
    assert not out.exists()


def test_an_unknown_model_or_missing_url_is_a_usage_error(corpus_file, tmp_path, server, key):
    out = tmp_path / "api.jsonl"
    bad_model = args(corpus_file, out, *api(server))
    bad_model[bad_model.index(SERVED)] = "no-such-model"
    assert main(bad_model) == 2
    no_url = args(corpus_file, out, "--engine", "openai", "--model", SERVED)
    assert main(no_url) == 2


@pytest.mark.parametrize("models", ["empty", "500", "missing"])
def test_a_server_whose_model_list_fails_or_lists_nothing_still_runs(
    corpus_file, tmp_path, server, models, uninterrupted
):
    """`transformers serve` lists no model at /v1/models (and answers 500 there when its cache
    folder is missing): one warning, one short completion to check, and the run goes on, run
    as a player would, with `python -m generation generate`."""
    server["control"](reset=True, models=models)
    out = tmp_path / "api.jsonl"
    done = subprocess.run(
        [sys.executable, "-m", "generation", *args(corpus_file, out, *api(server))],
        cwd=ROOT,
        env={**os.environ, KEY_ENV: KEY},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if "not found in the model list" in line]
    assert len(warnings) == 1, done.stderr
    assert server["base"] in warnings[0] and "one short completion" in warnings[0]
    # The same records, less the model folder the list would have named.
    assert read_plain(out) == read_plain(uninterrupted)
    manifest = json.loads((tmp_path / "api.jsonl.manifest.json").read_text())
    assert warnings[0].removeprefix("warning: ") in manifest["warnings"]
    assert manifest["model"]["served"] == [{"id": SERVED, "listed": False, "model": SERVED}]
    # One check request (max_tokens 1), then the run's own.
    bodies = server["stats"]()["bodies"]
    assert bodies[0]["max_tokens"] == 1 and "seed" not in bodies[0]
    assert len(bodies) == 1 + manifest["requests"]["requests"]
    assert KEY not in done.stderr + done.stdout


def test_a_server_that_lists_nothing_and_cannot_complete_stops_the_run(
    corpus_file, tmp_path, server, key, capsys
):
    server["control"](reset=True, models="empty")
    out = tmp_path / "api.jsonl"
    wrong = args(corpus_file, out, *api(server))
    wrong[wrong.index(SERVED)] = "no-such-model"
    assert main(wrong) == 2
    err = capsys.readouterr().err
    assert "HTTP 404" in err and "could not complete with model 'no-such-model'" in err
    assert "--model" in err
    assert not out.exists()
    assert server["stats"]()["requests"] == 1  # the one check, not retried
    server["control"](reset=True)


def test_a_killed_run_resumes_to_the_uninterrupted_records(
    corpus_file, tmp_path, server, key, uninterrupted
):
    whole = uninterrupted
    server["control"](reset=True, delay=0.4)
    killed = tmp_path / "killed.jsonl"
    part = tmp_path / "killed.jsonl.part"
    command = [sys.executable, "-m", "generation"]
    command += args(corpus_file, killed, *api(server, "--concurrency", "1"))
    process = subprocess.Popen(
        command, cwd=ROOT, env={**os.environ}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and process.poll() is None:
        if part.exists() and part.read_text(encoding="utf-8").count("\n") >= 1:
            break
        time.sleep(0.05)
    assert process.poll() is None, process.stderr.read()
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=10)
    server["control"](delay=0)
    written = read(part)
    assert 0 < len(written) < len(read(whole))
    assert not killed.exists()
    assert main(args(corpus_file, killed, *api(server, "--concurrency", "1", "--resume"))) == 0
    assert read(killed) == read(whole)


def test_retry_helpers():
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert retry_after_seconds("-3") == 0.0
    import random

    rng = random.Random(1)
    waits = [backoff_seconds(a, 0.5, rng) for a in range(12) for _ in range(20)]
    assert all(0 <= w <= 60 for w in waits)
    assert max(backoff_seconds(0, 0.5, rng) for _ in range(50)) <= 0.5
    assert safe_url("https://user:secret@api.example.com:8443/v1/?key=abc") == (
        "https://api.example.com:8443/v1"
    )


def test_replicas_and_shards_merge_to_the_single_server_records(
    corpus_file, tmp_path, tiny_model_dir, server, key, uninterrupted
):
    """Data parallelism: two servers, either both behind one run or one shard of the plan each
    (then merged), give the records of one server."""
    server["control"](reset=True)
    single = uninterrupted
    with serve(tiny_model_dir, SERVED, KEY_ENV, KEY) as second:
        both = tmp_path / "both.jsonl"
        two_urls = [*api(server, "--concurrency", "4"), "--base-url", second["base"]]
        assert main(args(corpus_file, both, *two_urls)) == 0
        assert second["stats"]()["requests"] > 0
        sharded = tmp_path / "sharded.jsonl"
        for index, replica in enumerate((server, second)):
            shard = [*api(replica), "--shard", f"{index}/2"]
            assert main(args(corpus_file, sharded, *shard)) == 0
    assert main(["merge", "--out", str(sharded), "--shards"]) == 0
    assert read(both) == read(single)
    assert sharded.read_bytes() == single.read_bytes()
