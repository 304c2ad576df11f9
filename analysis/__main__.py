"""Command line: `python -m analysis report INPUT --out DIR` and `python -m analysis detect`."""

from __future__ import annotations

import argparse
import sys
import time

from analysis.load import LoadError
from analysis.report import ReportSettings, build_report
from roftcore.boundary import CONVENTION
from roftcore.spreadsheet import neutralise_frame

EPILOG = f"Positions: {CONVENTION} (docs/boundary.md). Guide: docs/analysis.md."


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="python -m analysis",
        description="Analyse RoFT annotations from one of our exports or the public roft.csv.",
        epilog=EPILOG,
    )
    commands = top.add_subparsers(dest="command", required=True)
    report = commands.add_parser(
        "report",
        help="write report.md, figures, CSV tables, summary.json and a HEDS datasheet",
        description=(
            "INPUT is an export folder from `flask export` (CSV, Parquet or SQLite), one of its "
            "files (rounds.csv, rounds.parquet, the .sqlite file), or a roft.csv file from the "
            "public RoFT dataset."
        ),
        epilog=EPILOG,
    )
    defaults = ReportSettings()
    report.add_argument("input", metavar="INPUT", help="export folder or file, or roft.csv")
    report.add_argument("--out", required=True, metavar="DIR", help="folder for the report")
    report.add_argument(
        "--min-median-seconds",
        type=float,
        default=defaults.min_median_seconds,
        help="drop annotators whose median seconds per round is below this "
        "(default %(default)s; rows without times are kept)",
    )
    report.add_argument(
        "--double-submit-seconds",
        type=float,
        default=defaults.double_submit_seconds,
        help="a repeat of the same guess on the same text within this many seconds is a double "
        "submission, not a replay (default %(default)s)",
    )
    report.add_argument(
        "--detections",
        metavar="CSV",
        help="detections.csv from `python -m analysis detect`: adds a section comparing the "
        "detector with the players",
    )
    report.add_argument(
        "--straight-line",
        type=int,
        default=defaults.straight_line_k,
        metavar="K",
        help="drop annotators who gave the same guess K times in a row (default %(default)s)",
    )
    report.add_argument(
        "--min-rounds",
        type=int,
        default=defaults.min_rounds,
        help="rounds an annotator needs for the skill range and trends (default %(default)s)",
    )
    report.add_argument(
        "--session-length",
        type=int,
        default=defaults.session_length,
        help="within-session learning pools positions beyond this (default %(default)s); "
        "sessions come from the data (a crowd study's rounds), never from cutting rows",
    )
    report.add_argument(
        "--bootstrap",
        type=int,
        default=defaults.bootstrap,
        metavar="N",
        help="bootstrap resamples for confidence intervals (default %(default)s; 0 = none)",
    )
    report.add_argument("--seed", type=int, default=defaults.seed, help="random seed")
    report.add_argument(
        "--max-comments",
        type=int,
        default=defaults.max_comments,
        help="unique comments classified and clustered; more are sampled (default %(default)s)",
    )
    report.add_argument(
        "--clusters", type=int, default=defaults.clusters, help="comment clusters (default 8)"
    )
    report.add_argument(
        "--category", action="append", default=[], help="only this category (repeatable)"
    )
    report.add_argument(
        "--system", action="append", default=[], help="only this system (repeatable)"
    )
    report.add_argument("--since", help="only rounds answered on or after this ISO date")

    detect = commands.add_parser(
        "detect",
        help="a zero-shot detector (a local causal LM) guesses every text's boundary; compared "
        "with the players on the same texts",
        description="Score every sentence of every text of INPUT (an export folder with its "
        "examples table, or a roft.csv) with a local causal language model: mean token "
        "log-likelihood and log-rank given the sentences before. A change-point rule turns the "
        "scores into a guess (the split after which sentences are most machine-like, or 'all "
        "human'), scored with RoFT's rule and compared with the players' annotations of the same "
        "texts. Writes detections.csv, comparison.csv, detect_summary.json, detect.md and "
        "detector_vs_players.png.",
        epilog=EPILOG,
    )
    detect.add_argument("input", metavar="INPUT", help="export folder or file, or roft.csv")
    detect.add_argument("--out", required=True, metavar="DIR", help="folder for the results")
    detect.add_argument(
        "--model", required=True, help="a local model folder (save_pretrained) or a hub id"
    )
    detect.add_argument(
        "--statistic",
        choices=["logrank", "loglik"],
        default="logrank",
        help="the sentence score the change point uses (default %(default)s)",
    )
    detect.add_argument(
        "--threshold",
        type=float,
        default=2.0,
        help="smallest z of the best split for a machine guess; below it, 'all human' "
        "(default %(default)s)",
    )
    detect.add_argument("--device", default="cpu", help="cpu (default), cuda, auto")
    detect.add_argument("--max-texts", type=int, help="score only the first N texts")
    detect.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return top


def run_detect(args) -> int:
    import json
    from pathlib import Path

    from analysis import cleaning, detect
    from analysis.load import load
    from generation.models import ModelError
    from generation.models import load as load_model

    out = Path(args.out)
    texts = detect.read_texts(args.input)
    if args.max_texts:
        texts = texts.head(args.max_texts)
    try:
        lm = load_model(args.model, device=args.device)
    except ModelError as error:
        raise LoadError(str(error)) from None
    found = detect.detect(texts, lm, args.statistic, args.threshold, not args.no_progress)
    out.mkdir(parents=True, exist_ok=True)
    neutralise_frame(found).to_csv(out / "detections.csv", index=False)
    players = cleaning.clean(load(args.input)).frame
    result = detect.compare(players, found)
    neutralise_frame(result["table"]).to_csv(out / "comparison.csv", index=False)
    summary = {
        "model": lm.describe(),
        "statistic": args.statistic,
        "threshold": args.threshold,
        **result["summary"],
    }
    (out / "detect_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    detect.figure(out, result["table"], result["summary"])
    (out / "detect.md").write_text("\n".join(detect.markdown(result)) + "\n")
    s = result["summary"]
    print(
        f"scored {len(found)} texts; compared on {s['texts']} texts ({s['annotations']} "
        f"annotations); results in {out}"
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "detect":
        try:
            return run_detect(args)
        except LoadError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    settings = ReportSettings(
        min_median_seconds=args.min_median_seconds,
        straight_line_k=args.straight_line,
        double_submit_seconds=args.double_submit_seconds,
        detections=args.detections,
        min_rounds=args.min_rounds,
        session_length=args.session_length,
        bootstrap=args.bootstrap,
        seed=args.seed,
        max_comments=args.max_comments,
        clusters=args.clusters,
        categories=args.category,
        systems=args.system,
        since=args.since,
    )
    started = time.perf_counter()
    try:
        summary = build_report(args.input, args.out, settings)
    except LoadError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    a, f = summary["all"], summary["filtered"]
    print(
        f"{a['n_annotations']} annotations ({f['n_annotations']} after filters) from "
        f"{a['n_annotators']} annotators; mean points {f['mean_points']}; report in {args.out} "
        f"({time.perf_counter() - started:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
