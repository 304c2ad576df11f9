"""The shipped demo set, built by the pipeline: `python -m generation demo`.

For every `<category>.jsonl` in the demo corpus and every document long enough for N = 10
sentences: one all-human example, two splice-baseline examples and four continuations by a tiny
word-level GPT-2 trained on the corpus itself (`generation.tiny.DEMO_CONFIG`; nucleus p uniform on
[0, 1], repetition penalty 1.2), so every word it writes is a word of the corpus. The tiny model is
trained first when `data/demo/model` is missing (or with --retrain); the manifest's "model" names
its weights and how it was trained (its training.json).

`python -m generation.demo` is kept as an alias of `python -m generation demo`.
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from generation.corpus import corpus_sha256, read_corpus
from generation.decoding import DecodingPlan
from generation.prompts import make_plan
from generation.records import RunWriter, code_version, merge

N = 10
DATASET = "roft-demo"
TINY_SYSTEM = "tiny-gpt2"
SEED = 2026
PER_DOC = {"human": 1, "splice-baseline": 2, TINY_SYSTEM: 4}
REPETITION_PENALTY = 1.2
TOKENS_PER_SENTENCE = 40


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def _build_category(file: Path, model: Path, work: Path, seed: int, progress: bool) -> dict:
    """One category's three runs (human, splice baseline, tiny model) into `work`; returns their
    part files and the model's description. Runs in a worker process of its own (one thread)."""
    import torch

    from generation import models
    from generation.engines.hf import HFEngine
    from generation.pipeline import GenerateOptions, run_baseline, run_generate, run_human

    torch.set_num_threads(1)  # categories run side by side; threads waiting on each other are slow
    engine = HFEngine(
        models.load(str(model), device="cpu", dtype="float32", progress=progress), batch_size=16
    )
    settings = {"n": N, "seed": seed, "per_doc": PER_DOC, "dataset": DATASET}
    category = file.stem
    docs = read_corpus(file)
    parts: list[Path] = []

    def plan(system, per_doc, share, p=None):
        return make_plan(
            docs,
            category=category,
            system_slug=system,
            n=N,
            per_doc=per_doc,
            seed=seed,
            human_share=share,
            decoding=p,
        )

    def writer(system):
        path = work / f"{category}-{system}.jsonl"
        parts.append(path)
        run = {**settings, "category": category, "system": system}
        return RunWriter(path, {**run, "corpus_sha256": corpus_sha256(file)})

    w = writer("human")
    run_human(plan("human", 1, 1.0), w, DATASET, progress=progress)
    w.finish()
    w = writer("splice-baseline")
    run_baseline(
        plan("splice-baseline", PER_DOC["splice-baseline"], 0.0),
        w,
        docs,
        dataset=DATASET,
        progress=progress,
    )
    w.finish()
    w = writer(TINY_SYSTEM)
    options = GenerateOptions(
        system=TINY_SYSTEM,
        dataset=DATASET,
        batch_size=16,
        tokens_per_sentence=TOKENS_PER_SENTENCE,
        progress=progress,
        provenance={**engine.provenance(code_version()), "model": "data/demo/model"},
    )
    decoding = DecodingPlan.build(repetition_penalty=str(REPETITION_PENALTY))
    run_generate(plan(TINY_SYSTEM, PER_DOC[TINY_SYSTEM], 0.0, decoding), w, engine, options)
    w.finish(extra={"model": engine.describe()})
    return {"parts": parts, "model": engine.describe()}


def build_demo(
    corpus: Path = Path("data/demo/corpus"),
    model: Path = Path("data/demo/model"),
    out: Path = Path("data/demo/examples.jsonl"),
    seed: int = SEED,
    retrain: bool = False,
    progress: bool = True,
    jobs: int | None = None,
) -> dict:
    """Build the demo set; the categories run in up to `jobs` worker processes side by side
    (default: one per category; each uses one thread), which gives the same records as one by
    one, since each category's plan has its own seed."""
    from generation.tiny import DEMO_CONFIG, corpus_texts, train_tiny

    corpus, model, out = Path(corpus), Path(model), Path(out)
    files = sorted(corpus.glob("*.jsonl"))
    if not files:
        raise FileNotFoundError(f"{corpus}: no <category>.jsonl files")
    if retrain or not (model / "config.json").exists():
        _log(f"training the tiny model into {model}")
        train_tiny(corpus_texts(corpus), model, DEMO_CONFIG, log=_log)
    training_file = model / "training.json"
    training = json.loads(training_file.read_text("utf-8")) if training_file.exists() else None
    settings = {"n": N, "seed": seed, "per_doc": PER_DOC, "dataset": DATASET}
    jobs = jobs or len(files)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".demo-") as work:
        spawn = multiprocessing.get_context("spawn")  # no fork of a process that holds torch
        with ProcessPoolExecutor(max_workers=jobs, mp_context=spawn) as pool:
            count = len(files)
            built = list(
                pool.map(
                    _build_category,
                    files,
                    [model] * count,
                    [Path(work)] * count,
                    [seed] * count,
                    [progress] * count,
                )
            )
        parts = [part for one in built for part in one["parts"]]
        merged = merge(
            parts,
            out,
            extra={
                "demo": settings,
                "model": {**built[0]["model"], "name_or_path": str(model), "training": training},
            },
        )
    _log(f"wrote {merged['examples']} examples to {out}: {merged['counts']['made_by_system']}")
    return merged


if __name__ == "__main__":  # the alias runs the CLI; this module never imports generation.cli
    import runpy

    sys.argv = [sys.argv[0], "demo", *sys.argv[1:]]
    runpy.run_module("generation", run_name="__main__")
