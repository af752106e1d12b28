"""The numbers one run produces.

One RunResult per (case, workload, scheduler, repeat), plain data that
``results.BenchResults`` writes to results.json and ``stats`` summarises; it sits
below both so that neither has to import the other's module for its type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Correctness", "RunResult"]


@dataclass(slots=True)
class Correctness:
    """What a correct scheduler would have done, and how far this one was from it."""

    init_unbound: int = 0
    measure_unbound: int = 0
    churn_wrongly_bound: int = 0
    """Pods expected to fit nowhere that were bound anyway."""
    churn_not_reported: int = 0
    """Never-fitting pods left without PodScheduled=False/Unschedulable."""
    churn_unschedulable_checked: int = 0
    violations: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)
    quality: dict[str, float] = field(default_factory=dict)
    on_deleted_nodes: int = 0

    @property
    def ok(self) -> bool:
        return not (
            self.init_unbound
            or self.measure_unbound
            or self.churn_wrongly_bound
            or self.churn_not_reported
            or any(self.violations.values())
        )

    def summary(self) -> str:
        """A few words for the table: "ok", or what went wrong."""
        problems = []
        if self.init_unbound:
            problems.append(f"{self.init_unbound} init unbound")
        if self.measure_unbound:
            problems.append(f"{self.measure_unbound} unbound")
        if self.churn_wrongly_bound:
            problems.append(f"{self.churn_wrongly_bound} unfit bound")
        if self.churn_not_reported:
            problems.append(f"{self.churn_not_reported} not marked Unschedulable")
        problems += [
            f"{count} {kind} violations" for kind, count in self.violations.items() if count
        ]
        return "; ".join(problems) or "ok"


@dataclass(slots=True)
class RunResult:
    case: str
    workload: str
    scheduler: str
    scheduler_name: str
    nodes: int
    init_pods: int
    measure_pods: int
    repeat: int = 1
    """Which of the --repeat runs of this case, workload and scheduler (from 1)."""
    status: str = "ok"
    """ok, timeout (the measured phase ran past --timeout), or error: <why>."""
    bound: int = 0
    throughput: float | None = None
    """scheduler_perf's SchedulingThroughput Average: the mean of 1 s samples, pods/s."""
    throughput_overall: float | None = None
    """Measured pods bound / seconds from the first create to the last bind."""
    throughput_samples: list[float] = field(default_factory=list)
    create_rate: float | None = None
    """Measured pods created per second by the harness; throughput cannot exceed it."""
    latency_ms: dict[str, float | None] = field(default_factory=dict)
    measure_seconds: float | None = None
    cpu_seconds: float | None = None
    """Scheduler CPU (user+system) over the measured phase."""
    cpu_seconds_total: float | None = None
    """Scheduler CPU from its start (informer sync, init pods) to the end of the run."""
    cpu_ms_per_pod: float | None = None
    """Scheduler CPU over the measured phase per measured pod bound, in milliseconds."""
    peak_rss_mib: float | None = None
    apiserver_cpu_seconds: float | None = None
    apiserver_cpu_ms_per_pod: float | None = None
    etcd_cpu_seconds: float | None = None
    etcd_cpu_ms_per_pod: float | None = None
    harness_cpu_seconds: float | None = None
    background_cpu_seconds: float | None = None
    """CPU used on the machine by anything else during the measured phase (noise)."""
    requests: dict[str, int] = field(default_factory=dict)
    """Scheduler API requests in the measured phase, `VERB resource` -> count."""
    requests_per_pod: float | None = None
    requests_internal: dict[str, int] = field(default_factory=dict)
    """The apiserver's own requests in the window (leases, IPAddresses), not counted above."""
    requests_mismatch: dict[str, int] = field(default_factory=dict)
    correctness: Correctness = field(default_factory=Correctness)
    timeline: list[tuple[float, int]] = field(default_factory=list)
    """(seconds since the first measured create, measured pods bound), from each bind."""
    batch_attempts: dict[str, int] = field(default_factory=dict)
    """A batching workload's scheduler_batch_attempts_total at the run's end, by result."""
    log: str = ""
    profile: str = ""

    @property
    def key(self) -> str:
        return f"{self.case}/{self.workload}"
