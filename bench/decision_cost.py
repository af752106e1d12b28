"""`python -m bench.decision_cost`: what a decision record costs next to the cycle it describes.

Runs the real algorithm over a generated cluster (as ``podium simulate`` does)
and times, per pod: the cycle without per-plugin scores kept (records off or
topNodes 0), the cycle with them kept (topNodes > 0), building the record,
logging it through Podium's structlog JSON setup into /dev/null, and logging
the short "scheduled" line that a record replaces. Prints medians and means in
microseconds. No API server is involved.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Sequence

import structlog

from podium.framework.cycle import Scheduler
from podium.framework.decision import EVENT, build_record
from podium.kube.objects import parse_node, parse_pod
from podium.policy import default_profile
from podium.runtime.logs import configure_logging
from podium.state.cache import Cache
from podium.state.snapshot import Snapshot
from podium.tools.generate import generate_cluster


def _run(nodes: int, pods: int, top: int) -> dict[str, list[float]]:
    cluster = generate_cluster(nodes, pods, seed=1)
    profile = default_profile()
    cache = Cache()
    for body in cluster.nodes:
        cache.add_node(parse_node(body))
    snapshot = Snapshot()
    state = Scheduler(random.Random(0))
    log = structlog.get_logger("podium.scheduling.scheduler")
    out: dict[str, list[float]] = {"cycle": [], "build": [], "log": [], "old_line": []}
    for body in cluster.pods:
        pod = parse_pod(body)
        snapshot.update(cache)
        t0 = time.perf_counter()
        placement = state.schedule(profile, snapshot, pod, record=top > 0)
        t1 = time.perf_counter()
        record = build_record(profile, snapshot, pod, 1, placement, top=top, result="scheduled")
        t2 = time.perf_counter()
        log.info(EVENT, **record)
        t3 = time.perf_counter()
        log.info(
            "scheduled",
            pod=pod.name,
            namespace=pod.namespace,
            result="scheduled",
            node=placement.node,
            attempt=1,
            duration_ms=1.0,
        )
        t4 = time.perf_counter()
        out["old_line"].append((t4 - t3) * 1e6)
        out["cycle"].append((t1 - t0) * 1e6)
        out["build"].append((t2 - t1) * 1e6)
        out["log"].append((t3 - t2) * 1e6)
        if placement.node:
            cache.assume_pod(pod, placement.node)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.decision_cost")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=2000)
    args = parser.parse_args(argv)
    # Podium's records are written to whatever sys.stderr is at the time, kopf's to
    # the stream configure_logging found: point both at /dev/null.
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process
    configure_logging("json")
    print(f"{args.nodes} nodes, {args.pods} pods; microseconds per pod, median / mean")
    _run(args.nodes, min(args.pods, 200), 3)  # warm-up: imports, numpy paths, caches
    for top in (0, 3, 10, 0, 3):
        timings = _run(args.nodes, args.pods, top)
        cells = [
            f"{name} {statistics.median(v):8.1f} / {statistics.fmean(v):8.1f}"
            for name, v in timings.items()
        ]
        print(f"topNodes {top:2d}: " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
