"""Sharding across two processes with torch.distributed (gloo, CPU), then merging."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

from app import PROJECT_ROOT
from generation.cli import main
from tests.generation.conftest import cli_args


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def args(corpus, out, model) -> list[str]:
    options = "--device cpu -n 4 --per-doc 2 --seed 3 --p 0.9,1 --tokens-per-sentence 40"
    return cli_args(corpus, out, f"{options} --batch-size 4 --no-progress", "--model", str(model))


def lines(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_two_processes_shard_and_merge_to_the_single_process_result(
    corpus_file, tiny_model_dir, tmp_path
):
    single = tmp_path / "single.jsonl"
    assert main(args(corpus_file, single, tiny_model_dir)) == 0

    sharded = tmp_path / "sharded.jsonl"
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "-m",
        "generation",
        *args(corpus_file, sharded, tiny_model_dir),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(PROJECT_ROOT)}
    done = subprocess.run(
        command, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-3000:]
    shard_rows = [lines(tmp_path / f"sharded.shard-{i:02d}-of-02.jsonl") for i in range(2)]
    assert all(shard_rows) and not {r["id"] for r in shard_rows[0]} & {
        r["id"] for r in shard_rows[1]
    }
    assert lines(sharded) == lines(single)
    manifest = json.loads((tmp_path / "sharded.jsonl.manifest.json").read_text())
    assert manifest["counts"]["planned"] == 12
    assert manifest["counts"]["made"] == len(lines(single))

    # The same by hand: --shard I/K, then merge --shards.
    by_hand = tmp_path / "hand.jsonl"
    for index in range(2):
        assert main([*args(corpus_file, by_hand, tiny_model_dir), "--shard", f"{index}/2"]) == 0
    assert main(["merge", "--out", str(by_hand), "--shards"]) == 0
    assert lines(by_hand) == lines(single)
