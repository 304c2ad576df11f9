"""`python -m analysis taxonomy INPUT --out DIR`: code each unique free-text explanation.

The coder is the offline taxonomy (`analysis.taxonomy`, the default) or, with `--engine openai
--base-url URL --model NAME`, a language model served by any OpenAI-compatible server
(`analysis.llm_coder`). Writes `coded_comments.csv` (one row per unique comment: text, rows,
labels, decided_by) and `coding.json` (the counts and the coder's provenance); with
`--coder-labels`, `validation.md`: the coder against researchers' labels of a sample, and the
reason shares corrected for its errors (`analysis.validation`).
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pandas as pd

import analysis
from analysis import taxonomy, validation
from analysis.load import LoadError
from roftcore.version import code_version


def read_comments(path: str | Path) -> list[str]:
    """Non-empty explanations: from a CSV with an `explanation` (or `text`) column, or from any
    input `python -m analysis report` reads (an export, roft.csv)."""
    path = Path(path)
    if path.is_file() and path.suffix.lower() == ".csv":
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header = next(csv.reader(handle), [])
        column = next((c for c in taxonomy.TEXT_COLUMNS if c in header), None)
        if column is not None:
            frame = pd.read_csv(path, dtype=str, keep_default_na=False)
            return [t.strip() for t in frame[column] if t.strip()]
    from analysis.load import load

    texts = load(path)["explanation"].astype("str").fillna("")
    return [t.strip() for t in texts if t.strip()]


def add_command(commands) -> None:
    command = commands.add_parser(
        "taxonomy",
        help="code each unique free-text explanation (offline rules, or a language model)",
        description=(
            "INPUT is a CSV with an 'explanation' (or 'text') column, an export folder or file, "
            "or roft.csv. Each unique explanation is coded with the offline taxonomy, or with "
            "--engine openai by a language model on an OpenAI-compatible server (e.g. vLLM) "
            "given a written codebook (RoFT's eight reasons, other, not_a_reason) at "
            "temperature 0 with a fixed seed; an unreadable or off-codebook answer is asked "
            "again once, then counted and left uncoded. Writes coded_comments.csv and "
            "coding.json (counts and provenance: model, prompt SHA-256, settings)."
        ),
        epilog="Guide: docs/taxonomy.md.",
    )
    command.add_argument("input", metavar="INPUT")
    command.add_argument("--out", required=True, metavar="DIR")
    command.add_argument(
        "--engine", choices=("rules", "openai"), default="rules", help="default: rules"
    )
    command.add_argument("--base-url", help="the server, e.g. http://127.0.0.1:8000/v1")
    command.add_argument("--model", help="the model id the server lists at /v1/models")
    command.add_argument("--api-key-env", default="OPENAI_API_KEY", metavar="VAR")
    command.add_argument("--seed", type=int, default=0, help="default %(default)s")
    command.add_argument("--concurrency", type=int, default=8, help="default %(default)s")
    command.add_argument(
        "--coder-labels",
        metavar="CSV",
        help="researchers' labels of a random sample of these comments (explanation,label): "
        "adds the coder's agreement with them and reason shares corrected for its errors "
        "(validation.md in DIR)",
    )
    command.add_argument("--bootstrap", type=int, default=1000, help="default %(default)s")


def _coder(args):
    from analysis.llm_coder import LLMCoder
    from generation.engines.base import EngineError
    from generation.engines.openai import OpenAIEngine

    if not args.base_url or not args.model:
        raise LoadError("--engine openai needs --base-url and --model")
    try:
        engine = OpenAIEngine(
            args.model,
            [args.base_url],
            api_key_env=args.api_key_env,
            concurrency=args.concurrency,
            max_retries=2,
            retry_base=0.2,
            prompt_format="chat",
        )
        engine.check()
    except EngineError as error:
        raise LoadError(str(error)) from None
    return LLMCoder(engine, seed=args.seed)


def run(args) -> int:
    from generation.engines.base import EngineError

    try:
        texts = read_comments(args.input)
        if not texts:
            raise LoadError(f"{args.input}: no free-text explanations to code")
        counts = pd.Series(texts).value_counts(sort=False)
        unique = list(counts.index)
        checked = validation.read_labels(args.coder_labels) if args.coder_labels else []
        asked = list(dict.fromkeys([*unique, *(text for text, _ in checked)]))
        if args.engine == "openai":
            coder = _coder(args)
            found = coder.code(asked)
            problems = {k: v for k, v in coder.counts.items()}
            provenance = coder.provenance()
        else:
            found = taxonomy.classify_many(asked)
            problems = {}
            provenance = {
                "coder": "rules",
                "settings": taxonomy.DEFAULT_SETTINGS.describe(),
            }
        by_text = dict(zip(asked, found, strict=True))
        found = [by_text[text] for text in unique]
        labels = [";".join(c.labels) or taxonomy.UNCLASSIFIED for c in found]
        decided = [c.decided_by for c in found]
        main = {t: validation.coder_label(c.labels, c.primary) for t, c in by_text.items()}
    except (LoadError, EngineError, validation.LabelsError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(
        {"text": unique, "rows": counts.to_numpy(), "labels": labels, "decided_by": decided}
    )
    from roftcore.spreadsheet import neutralise_frame

    neutralise_frame(table).to_csv(out / "coded_comments.csv", index=False)
    coded = sum(label != taxonomy.UNCLASSIFIED for label in labels)
    summary = {
        "comments": len(texts),
        "unique": len(unique),
        "coded": coded,
        "uncoded": len(unique) - coded,
        **problems,
        "provenance": {
            **provenance,
            "code_version": code_version("analysis", analysis.__version__),
            "input": str(args.input),
        },
    }
    if checked:
        result = validation.report(
            [label for _, label in checked],
            [main[text] for text, _ in checked],
            [main[text] for text in unique],
            None,
            args.bootstrap,
            args.seed,
        )
        (out / "validation.md").write_text("\n".join(validation.markdown(result)))
        summary["validation"] = {"sample": result["sample"], "kappa": result["kappa"]}
    (out / "coding.json").write_text(json.dumps(summary, indent=2))
    extra = ", ".join(f"{k} {v}" for k, v in problems.items())
    print(
        f"coded {coded} of {len(unique)} unique comments ({len(texts)} in all)"
        + (f"; {extra}" if extra else "")
        + f"; results in {out}"
    )
    return 0
