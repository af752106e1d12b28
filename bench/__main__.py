"""`python -m bench`: the command line of the benchmark (see docs/benchmark.md).

Exit codes: 0 when every run finished and was correct, 1 when a run failed, timed
out or placed pods wrongly (the results are written either way), 2 on a bad flag.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import sys
from collections.abc import Sequence
from pathlib import Path

from podium.cli import number_type

from .cases import DEFAULT_PRESET, CaseError, load_cases, select
from .runner import BenchConfig, run_bench
from .schedulers import SCHEDULERS, py_spy_path

_positive_float = number_type(float, lambda n: 0 < n < math.inf, "a positive number")
_positive_int = number_type(int, lambda n: n >= 1, "a positive integer")


def _names(value: str) -> list[str]:
    names = [item.strip() for item in value.split(",") if item.strip()]
    if not names:
        raise argparse.ArgumentTypeError("expected a comma-separated list of names")
    return names


def _schedulers(value: str) -> list[str]:
    names = _names(value)
    unknown = [name for name in names if name not in SCHEDULERS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scheduler(s) {', '.join(unknown)}; choose from {', '.join(SCHEDULERS)}"
        )
    if len(set(names)) != len(names):
        raise argparse.ArgumentTypeError("a scheduler is listed twice")
    return names


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark Podium against kube-scheduler on scheduler_perf-style workloads.",
    )
    parser.add_argument(
        "--cases",
        type=_names,
        default=[],
        metavar="NAME[,NAME]",
        help="cases to run, as Case or Case/Workload (default: all; see --list)",
    )
    presets = parser.add_mutually_exclusive_group()
    presets.add_argument(
        "--upstream",
        action="store_true",
        help="scheduler_perf's 5,000-node sizes and the sweep up to 15,000 nodes "
        "(a bare Case means its upstream workload)",
    )
    presets.add_argument(
        "--batching",
        action="store_true",
        help="scheduler_perf's batching shapes on 5,000 nodes, in its batching profile, "
        "batching on and off (docs/batching.md)",
    )
    parser.add_argument(
        "--scale",
        type=_positive_float,
        default=1.0,
        help="multiply every node and pod count (default: 1.0)",
    )
    parser.add_argument(
        "--repeat",
        type=_positive_int,
        default=1,
        metavar="N",
        help="run each workload N times, alternating the schedulers, and report the "
        "median and range (default: 1)",
    )
    parser.add_argument(
        "--out", type=Path, default=Path("out/bench"), help="output folder (default: out/bench)"
    )
    parser.add_argument(
        "--schedulers",
        type=_schedulers,
        default=list(SCHEDULERS),
        metavar="NAME[,NAME]",
        help=f"which schedulers, in run order (default: {','.join(SCHEDULERS)})",
    )
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=600.0,
        metavar="SECONDS",
        help="limit per phase (create nodes, init pods, measured pods); default 600",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="record a py-spy profile of Podium over each measured phase (needs py-spy)",
    )
    parser.add_argument(
        "--podium-arg",
        action="append",
        default=[],
        metavar="ARG",
        dest="podium_args",
        help="extra argument for `podium run` (repeatable), e.g. --podium-arg=--log-level=DEBUG",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the cases and their sizes, then exit"
    )
    return parser


def _list_cases(scale: float) -> None:
    for case in load_cases().values():
        print(f"{case.name}: {case.description}")
        for workload in case.workloads:
            w = workload.scaled(scale)
            print(
                f"    {case.name}/{w.name}: {w.nodes} nodes, {w.init_pods} init pods, "
                f"{w.measure_pods} measured pods [{', '.join(w.presets)}]"
            )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    preset = "upstream" if args.upstream else "batching" if args.batching else DEFAULT_PRESET
    try:
        cases = load_cases()
        select(cases, args.cases, preset)
    except CaseError as exc:
        parser.error(str(exc))
    if args.list:
        _list_cases(args.scale)
        return 0
    if args.profile and py_spy_path() is None:
        parser.error("--profile needs py-spy on PATH or next to this Python (pip install py-spy)")
    config = BenchConfig(
        cases=args.cases,
        preset=preset,
        scale=args.scale,
        repeat=args.repeat,
        out=args.out,
        schedulers=args.schedulers,
        timeout=args.timeout,
        profile=args.profile,
        podium_args=args.podium_args,
    )
    try:
        results = asyncio.run(run_bench(config))
    except KeyboardInterrupt:
        return 130
    print(f"\nresults: {config.out / 'results.json'}, plot: {config.out / 'bound_over_time.png'}")
    ok = all(run.status == "ok" and run.correctness.ok for run in results.runs)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
