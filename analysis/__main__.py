"""Command line: `python -m analysis report INPUT --out DIR`, `python -m analysis detect` and
`python -m analysis power`."""

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
        help="rounds an annotator needs for the skill range and trends (default 10, or fewer "
        "when a crowd study gives its workers fewer rounds, so none of them is left out)",
    )
    report.add_argument(
        "--all-workers",
        action="store_true",
        help="crowd studies: keep every worker's rounds (by default only approved workers' "
        "rounds that are no attention check are analysed; the others are listed with why)",
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
        "--coder-labels",
        metavar="CSV",
        help="researchers' labels of a random sample of the comments (explanation,label; "
        "`flask validation export`): the report then gives the coder's agreement with them and "
        "reason shares corrected for its errors",
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
        help="zero-shot detectors (local causal LMs) score the shown sentences and play every "
        "text, offline and online; compared with the players on the same texts",
        description="Score the sentences players were shown of every text of INPUT (an export "
        "folder with its examples table, or a roft.csv: its first 10 sentences) with a causal "
        "language model: log-likelihood, log-rank and Fast-DetectGPT's curvature, and with "
        "--performer Binoculars' two-model ratio. Reports AUROC and TPR at 1% and 5% FPR at "
        "sentence and text level, and plays each text as a player (offline: sees all shown "
        "sentences; online: commits sentence by sentence, threshold chosen on other texts), "
        "beside the players, always-human and random on the same texts, machine and all-human "
        "texts apart. Writes detections.csv, sentence_scores.csv, detection_metrics.csv, "
        "comparison.csv, detect_summary.json, detect.md and detector_vs_players.png.",
        epilog=EPILOG,
    )
    detect.add_argument("input", metavar="INPUT", help="export folder or file, or roft.csv")
    detect.add_argument("--out", required=True, metavar="DIR", help="folder for the results")
    detect.add_argument(
        "--model",
        required=True,
        help="the scoring model (Binoculars' observer): a local folder (save_pretrained) or a "
        "hub id",
    )
    detect.add_argument(
        "--performer",
        help="a second model with the same tokenizer: adds Binoculars' two-model score",
    )
    detect.add_argument(
        "--threshold",
        type=float,
        default=2.0,
        help="offline play: smallest z of the best split for a machine guess; below it, 'all "
        "human' (default %(default)s)",
    )
    detect.add_argument(
        "--folds",
        type=int,
        default=5,
        help="online play: the threshold for each text is chosen on the other folds of texts "
        "(default %(default)s)",
    )
    detect.add_argument("--device", default="cpu", help="cpu (default), cuda, auto")
    detect.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="bootstrap resamples over texts for the intervals (default %(default)s; 0 = none)",
    )
    detect.add_argument("--max-texts", type=int, help="score only the first N texts")
    detect.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    add_taxonomy_check(commands)
    from analysis import coding

    coding.add_command(commands)
    add_power(commands)
    return top


def run_detect(args) -> int:
    import json
    from pathlib import Path

    from analysis import cleaning, detect
    from analysis.load import load
    from generation.models import ModelError
    from generation.models import load as load_model

    if args.folds < 2:
        raise LoadError("--folds must be at least 2: online thresholds come from other texts")
    out = Path(args.out)
    texts = detect.read_texts(args.input)
    if args.max_texts:
        texts = texts.head(args.max_texts)
    if not len(texts):
        raise LoadError(f"{args.input}: no texts to score")
    try:
        lm = load_model(args.model, device=args.device)
        performer = load_model(args.performer, device=args.device) if args.performer else None
    except ModelError as error:
        raise LoadError(str(error)) from None
    found = detect.detect(
        texts, lm, args.threshold, not args.no_progress, performer=performer, folds=args.folds
    )
    out.mkdir(parents=True, exist_ok=True)
    neutralise_frame(found).to_csv(out / "detections.csv", index=False)
    sentences = detect.sentence_table(found)
    neutralise_frame(sentences).to_csv(out / "sentence_scores.csv", index=False)
    try:
        players = cleaning.clean(load(args.input)).frame
    except LoadError as error:  # texts without rounds: the detector and the baselines only
        print(f"note: no players' rounds to compare with ({error})", file=sys.stderr)
        players = None
    if players is not None and not players["example"].isin(found["example"]).any():
        raise LoadError(f"{args.input}: none of the scored texts has a player's annotation")
    result = detect.compare(players, found, n_boot=args.bootstrap)
    neutralise_frame(result["metrics"]).to_csv(out / "detection_metrics.csv", index=False)
    neutralise_frame(result["table"]).to_csv(out / "comparison.csv", index=False)
    summary = {
        "model": lm.describe(),
        "performer": performer.describe() if performer else None,
        "threshold": args.threshold,
        "folds": args.folds,
        **result["summary"],
    }
    (out / "detect_summary.json").write_text(json.dumps(summary, indent=2, default=str))
    detect.figure(out, result["table"], result["summary"])
    (out / "detect.md").write_text("\n".join(detect.markdown(result)) + "\n")
    s = result["summary"]
    print(
        f"scored {len(found)} texts ({s['sentences_dropped']} never-shown sentences dropped); "
        f"compared on {s['machine_texts']} machine and {s['all_human_texts']} all-human texts "
        f"({s['annotations']} annotations); results in {out}"
    )
    return 0


# -- taxonomy-check: the comment taxonomy measured on a researcher's own labels ---------------


def add_taxonomy_check(commands) -> None:
    from analysis.taxonomy import GOLD_LABELS

    check = commands.add_parser(
        "taxonomy-check",
        help="measure the comment taxonomy on your own labelled explanations",
        description=(
            "LABELS.csv is a CSV file with a header row, an 'explanation' (or 'text') column and "
            "a 'labels' (or 'label') column holding one class or several joined by ';' (other "
            f"columns are ignored). Classes: {', '.join(GOLD_LABELS)} ('unclassified' = no "
            "class fits, so abstaining is right; it and 'not_a_reason' stand alone). Prints "
            "coverage (share not abstained), accuracy where labelled, per-class precision and "
            "recall, and the confusion matrix of main classes. Exits 2 on a malformed file, "
            "naming the file and line."
        ),
        epilog="How the classes are defined and measured: docs/taxonomy.md.",
    )
    check.add_argument("labels", metavar="LABELS.csv", help="your labelled explanations")


def run_taxonomy_check(args) -> int:
    from analysis import taxonomy

    try:
        result = taxonomy.check_labels(args.labels)
    except taxonomy.LabelsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"The comment taxonomy on {args.labels}:")
    print(taxonomy.format_scores(result))
    return 0


# -- power: how many workers and texts a planned study needs ----------------------------------


def add_power(commands) -> None:
    from analysis.power import Scenario

    d = Scenario()
    power = commands.add_parser(
        "power",
        help="power of a planned study by simulation over a grid of workers × texts",
        description=(
            "Simulate the planned study many times for every design of the grid (workers × "
            "texts), run on each the confirmatory analysis the plan names (the same mixed model "
            "as the report), and print the share that rejects at the plan's alpha (the power) "
            "with its Monte-Carlo error, and the smallest design that reaches --target. The "
            "generating model comes from PILOT, an export of a pilot study (its "
            "preregistration.json gives the plan; its fitted variances, control level and rounds "
            "per worker the rest), or from the values stated below. Two conditions, allocated "
            "in alternation; each worker reads --rounds distinct texts."
        ),
        epilog="Exact hit: --base is the control's hit rate and --effect a log odds ratio "
        "(0.5 ≈ odds ratio 1.65); points and distance: --effect is a difference in points. "
        "Guide: docs/analysis.md.",
    )
    power.add_argument("pilot", nargs="?", metavar="PILOT", help="a pilot export (optional)")
    power.add_argument("--workers", type=int, nargs="+", default=[40, 80, 120, 160])
    power.add_argument("--texts", type=int, nargs="+", default=[20, 40, 60])
    power.add_argument(
        "--simulations", type=int, default=200, help="studies per design (default %(default)s)"
    )
    power.add_argument(
        "--target", type=float, default=0.8, help="the power to reach (default %(default)s)"
    )
    power.add_argument("--outcome", choices=["exact_hit", "points", "distance"])
    power.add_argument("--contrast", choices=["condition", "condition:order"])
    power.add_argument("--alpha", type=float, help=f"default: the plan's, else {d.alpha}")
    power.add_argument(
        "--effect", type=float, help=f"the effect to find (default: the pilot's, else {d.effect})"
    )
    for name, help_text in (
        ("base", "the control's hit rate (exact hit) or mean"),
        ("sd-annotator", "SD of the workers' random intercepts"),
        ("sd-text", "SD of the texts' random intercepts"),
        ("sd-slope", "SD of the condition's effect between texts"),
        ("sd-residual", "residual SD (points and distance)"),
    ):
        default = getattr(d, name.replace("-", "_"))
        power.add_argument(f"--{name}", type=float, help=f"{help_text} (default {default})")
    power.add_argument("--rounds", type=int, help=f"texts per worker (default {d.rounds})")
    power.add_argument("--seed", type=int, default=0)
    power.add_argument(
        "--jobs", type=int, help="processes (default: every core; 1 = no subprocess)"
    )
    power.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    power.add_argument(
        "--out",
        metavar="JSON",
        help="also write the result as JSON; `flask study check FILE --power JSON` then warns "
        "when the plan's workers and texts fall short of the smallest design found",
    )


STATED = ("outcome", "contrast", "alpha", "base", "sd_annotator", "sd_text", "sd_slope")
STATED += ("sd_residual", "rounds")


def run_power(args) -> int:
    from dataclasses import replace

    from analysis import power
    from analysis.load import load, read_preregistration
    from analysis.render import md_table

    stated = {key: getattr(args, key) for key in STATED if getattr(args, key) is not None}
    notes: list[str] = []
    if args.pilot:
        prereg = read_preregistration(args.pilot)
        plan = dict(prereg["versions"][-1]["plan"]) if prereg else {}
        for key in ("outcome", "contrast", "alpha"):
            if key in stated:
                plan[key] = stated[key]
        plan.setdefault("outcome", "exact_hit")
        plan.setdefault("contrast", "condition")
        frame = load(args.pilot)
        scenario, notes = power.from_pilot(frame, plan, args.effect)
        notes.insert(0, "plan from " + ("preregistration.json" if prereg else "the options"))
        scenario = replace(scenario, **{k: v for k, v in stated.items() if k.startswith("sd_")})
    else:
        scenario = power.Scenario()
        if args.effect is not None:
            stated["effect"] = args.effect
        if "base" not in stated and stated.get("outcome") in ("points", "distance"):
            stated["base"] = 2.0 if stated["outcome"] == "points" else 0.0
        scenario = replace(scenario, **stated)
    print(power.describe(scenario))
    for note in notes:
        print(f"note: {note}")
    table = power.grid(
        scenario,
        args.workers,
        args.texts,
        args.simulations,
        args.seed,
        args.jobs,
        progress=not args.no_progress,
    )
    shown = table.assign(
        power=[f"{p:.3f} ± {se:.3f}" for p, se in zip(table["power"], table["mc_se"], strict=True)]
    )[["workers", "texts", "rows", "power", "simulations", "warned"]]
    print(
        f"Power at alpha {scenario.alpha} (± one Monte-Carlo standard error), "
        f"fitted by {table['library'].iloc[0]}:"
    )
    print(md_table(shown))
    best = power.smallest(table, args.target)
    if args.out:
        power.write_result(args.out, scenario, table, args.target, best)
    if best is None:
        print(f"No design of the grid reaches power {args.target}: try more workers or texts.")
    else:
        print(
            f"Smallest design reaching power {args.target}: {best['workers']} workers × "
            f"{best['texts']} texts (power {best['power']:.3f} ± {best['mc_se']:.3f})."
        )
    return 0


def left_out_lines(left_out: list[dict], all_workers: bool, limit: int = 40) -> list[str]:
    """The crowd workers the analysis left out, one line each, for the terminal."""
    if all_workers or not left_out:
        return []
    import pandas as pd

    from analysis.render import md_table

    frame = pd.DataFrame(left_out)
    shown = frame[["study", "annotator", "why", "rounds_left_out", "rounds_kept"]]
    lines = [
        f"Left out of the analysis ({len(frame)} crowd worker(s); --all-workers keeps everyone):",
        *md_table(shown.head(limit)).splitlines(),
    ]
    if len(frame) > limit:
        lines.append(f"… and {len(frame) - limit} more: see left_out.csv in the report folder.")
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "taxonomy-check":
        return run_taxonomy_check(args)
    if args.command == "taxonomy":
        from analysis import coding

        return coding.run(args)
    if args.command == "power":
        from analysis.confirmatory import PlanError

        try:
            return run_power(args)
        except (LoadError, PlanError) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
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
        all_workers=args.all_workers,
        coder_labels=args.coder_labels,
    )
    started = time.perf_counter()
    try:
        summary = build_report(args.input, args.out, settings)
    except LoadError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    a, f = summary["all"], summary["filtered"]
    for line in left_out_lines(summary.get("left_out") or [], args.all_workers):
        print(line)
    print(
        f"{a['n_annotations']} annotations ({f['n_annotations']} after filters) from "
        f"{a['n_annotators']} annotators; mean points (all texts) {f['mean_points']:.3f}; "
        f"report in {args.out} "
        f"({time.perf_counter() - started:.1f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
