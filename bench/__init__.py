"""Podium against kube-scheduler on the same workloads: `python -m bench` (`make bench`).

The cases mirror Kubernetes' scheduler_perf (test/integration/scheduler_perf):
the same node and pod templates, fewer nodes and pods so that the whole set fits
a two-core machine. Each scheduler runs alone on fresh nodes against a real
etcd + kube-apiserver started with scheduler_perf's performance flags, and
everything is measured from outside it: throughput and latency from a watch, CPU
and memory from /proc, API requests from the apiserver's own counters, and
correctness from the final state. See docs/benchmark.md.

`run_bench` is the Python API; the smoke test drives it against the test
session's control plane.
"""

from .cases import Case, CaseError, Workload, load_cases
from .results import BenchResults
from .run_result import Correctness, RunResult
from .runner import BenchConfig, run_bench

__all__ = [
    "BenchConfig",
    "BenchResults",
    "Case",
    "CaseError",
    "Correctness",
    "RunResult",
    "Workload",
    "load_cases",
    "run_bench",
]
