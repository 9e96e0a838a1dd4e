"""`setupbot bench`: setupbot side by side with the `declared` and `pipreqs` baselines on
real repositories at pinned commits; JSON lines, SUMMARY.md and a chart."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bot.commands._common import add_json_flag, human, reporter_for, write_json
from bot.errors import InputError

DEFAULT_OUT = Path("bench/results")


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmark setupbot against baselines on pinned repositories", description=__doc__)
    p.add_argument(
        "--repos",
        type=Path,
        help="TSV: owner/name<TAB>sha[<TAB>difficulty<TAB>note]; an integer column is the gold test count",
    )
    p.add_argument(
        "--systems", default="setupbot,declared,pipreqs", help="comma-separated systems to run (default: %(default)s)"
    )
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="directory of the JSON lines (default: %(default)s)")
    p.add_argument(
        "--git-root",
        type=Path,
        default=Path("/work/.mirror"),
        help="where <owner>+<name>/repo git directories live (default: %(default)s)",
    )
    p.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="OWNER/NAME",
        help="run only this repository (repeatable; case-insensitive)",
    )
    p.add_argument("--jobs", type=int, default=1, help="repositories benchmarked at once (default: 1)")
    p.add_argument(
        "--timeout-per-repo",
        type=int,
        default=900,
        metavar="S",
        help="seconds for one test run in a built image (default: %(default)s)",
    )
    p.add_argument(
        "--collect-timeout",
        type=int,
        default=600,
        metavar="S",
        help="seconds for `pytest --collect-only` (default: %(default)s)",
    )
    p.add_argument("--force", action="store_true", help="rerun pairs already in the results")
    p.add_argument(
        "--determinism",
        action="store_true",
        help="build setupbot's Dockerfile a second time with no cache and compare pip freeze and dpkg-query",
    )
    p.add_argument("--keep-images", action="store_true", help="keep built images and containers")
    p.add_argument(
        "--min-free-gb",
        type=float,
        default=20.0,
        metavar="GB",
        help="after a pair, prune the engine's unused build cache when less than this is free where it "
        "keeps images (default: %(default)s; 0: never)",
    )
    p.add_argument("--report-only", action="store_true", help="only regenerate SUMMARY.md and the chart")
    p.add_argument("--summary", type=Path, help="summary path (default: <out>/../SUMMARY.md)")
    p.add_argument("--chart", type=Path, help="chart path (default: <out>/../chart.png)")
    add_json_flag(p, "the records of the run (schema setupbot.bench/1)")
    p.set_defaults(func=run)


def _report(args, records_filter=None) -> int:
    from bot.bench import results as results_io
    from bot.bench.retrieval_eval import summary_lines as retrieval_summary
    from bot.bench.summary import write_report

    records = results_io.load_records(args.out)
    if records_filter is not None:
        records = [r for r in records if records_filter(r)]
    summary = args.summary or args.out.parent / "SUMMARY.md"
    chart = args.chart or args.out.parent / "chart.png"
    meta = results_io.read_meta(args.out)
    # the retrieval figures on these results' failure logs, where the hand labels sit beside them
    labels = args.out.parent / "retrieval-labels.json"
    sections = retrieval_summary(args.out, labels) if labels.is_file() and records_filter is None else None
    # the failures by class, where hand labels for these results' failures sit beside them
    classes = args.out / "failure-classes.json"
    if classes.is_file():
        from bot.bench.classes import summary_lines as class_summary

        sections = class_summary(records, classes) + (sections or [])
    # "notes" in run.json: what a reader must know about how the results were put together
    _, drawn = write_report(
        records, summary, chart, commands=meta.get("commands", []), notes=meta.get("notes") or None, sections=sections
    )
    # the chart draws the Python figures: a run of Rust repositories only has none
    print(f"setupbot bench: {len(records)} record(s) -> {summary}" + (f", {drawn}" if drawn else ""), file=human(args))
    write_json(
        args,
        "bench",
        {
            "summary": str(summary),
            "chart": str(drawn) if drawn else None,
            "records": [
                {
                    "repo": r.get("repo"),
                    "sha": r.get("sha"),
                    "system": r.get("system"),
                    "ebsr": bool(r.get("ebsr")),
                    "tests": r.get("tests") or {},
                }
                for r in records
            ],
        },
    )
    return 0


def command_line(args: argparse.Namespace) -> str:
    """The command that reproduces this run, written at the top of the summary."""
    argv = [
        "setupbot",
        "bench",
        "--repos",
        str(args.repos),
        "--systems",
        args.systems,
        "--out",
        str(args.out),
        "--git-root",
        str(args.git_root),
    ]
    for name in args.only:
        argv += ["--only", name]
    if args.jobs != 1:
        argv += ["--jobs", str(args.jobs)]
    argv += ["--timeout-per-repo", str(args.timeout_per_repo)]
    if args.collect_timeout != 600:
        argv += ["--collect-timeout", str(args.collect_timeout)]
    if args.force:
        argv.append("--force")
    if args.determinism:
        argv.append("--determinism")
    if args.min_free_gb != 20.0:
        argv += ["--min-free-gb", str(args.min_free_gb)]
    return " ".join(shlex.quote(a) for a in argv)


def run(args: argparse.Namespace) -> int:
    from bot.bench.repos import read_repo_list

    repos = listed = None
    if args.repos:
        parsed = read_repo_list(args.repos)
        for warning in parsed.warnings:
            print(f"setupbot bench: warning: {warning}", file=sys.stderr)
        repos = listed = parsed.repos
        if args.only:
            wanted = {o.lower() for o in args.only}
            unknown = wanted - {r.name.lower() for r in repos}
            for name in sorted(unknown):
                print(f"setupbot bench: warning: --only {name}: not in {args.repos}", file=sys.stderr)
            repos = [r for r in repos if r.name.lower() in wanted]
    # The summary covers the whole list, also after a run limited by --only.
    keys = None if listed is None else {(r.name.lower(), r.sha.lower()) for r in listed}

    def in_list(record: dict) -> bool:
        return keys is None or (record["repo"].lower(), str(record.get("sha", "")).lower()) in keys

    if args.report_only:
        # With --repos: the recorded pairs of the listed repositories; without: every record.
        return _report(args, in_list if listed is not None else None)
    if repos is None:
        raise InputError("no repository list", "Pass --repos FILE (or --report-only to redraw the summary).")
    if not repos:
        raise InputError(f"no repository to run from {args.repos}", "Check the file and the --only names.")
    systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())

    from bot.bench.runner import BenchOptions, run_bench
    from bot.config import load_settings

    settings = load_settings(None)
    command = command_line(args)
    opts = BenchOptions(
        repos=repos,
        systems=systems,
        out=args.out,
        git_root=args.git_root,
        jobs=max(1, args.jobs),
        test_timeout=args.timeout_per_repo,
        collect_timeout=args.collect_timeout,
        force=args.force,
        keep_images=args.keep_images,
        settings=settings,
        command=command,
        determinism=args.determinism,
        min_free_gb=args.min_free_gb,
    )
    from bot import progress

    with progress.use(reporter_for(args, "bench")) as reporter:
        # the runner's own "[3/63 · 00:41:07] owner/name · system · build" lines become the stage
        run_bench(opts, progress_stream=progress.LineStream(reporter, as_stage=True))
    return _report(args, in_list)
