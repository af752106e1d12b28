"""Prometheus metrics with kube-scheduler's names where the meaning matches."""

from __future__ import annotations

from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client import Counter as _Counter
from prometheus_client import Gauge as _Gauge
from prometheus_client import Histogram as _Histogram
from prometheus_client.metrics import MetricWrapperBase

__all__ = ["Metrics"]

M = TypeVar("M", bound=MetricWrapperBase)


class _KeptChildren(MetricWrapperBase):
    """A labelled metric whose ``labels()`` keeps each child by the values as given.

    prometheus_client's ``labels()`` checks and converts the values and takes a lock on
    every call (about a microsecond), and a scheduling cycle asks a dozen times for the
    same few children; a dictionary lookup answers instead. ``remove`` and ``clear``
    drop what was kept, so a removed series is made anew, as prometheus_client does.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._kept: dict[tuple[object, ...], Any] = {}
        super().__init__(*args, **kwargs)

    def labels(self: M, *labelvalues: object, **labelkwargs: object) -> M:
        kept: dict[tuple[object, ...], M] = self._kept  # type: ignore[attr-defined]
        child = None if labelkwargs else kept.get(labelvalues)
        if child is None:
            child = super().labels(*labelvalues, **labelkwargs)
            if not labelkwargs:
                kept[labelvalues] = child
        return child

    def remove(self, *labelvalues: Any) -> None:
        self._kept.clear()
        super().remove(*labelvalues)

    def clear(self) -> None:
        self._kept.clear()
        super().clear()


class Counter(_KeptChildren, _Counter):
    pass


class Gauge(_KeptChildren, _Gauge):
    pass


class Histogram(_KeptChildren, _Histogram):
    pass


_DURATION_BUCKETS = (
    0.0005,
    0.001,
    0.002,
    0.004,
    0.008,
    0.016,
    0.032,
    0.064,
    0.128,
    0.256,
    0.512,
    1.0,
    2.0,
    5.0,
    10.0,
)
_SLI_BUCKETS = (
    0.01,
    0.02,
    0.04,
    0.08,
    0.16,
    0.32,
    0.64,
    1.28,
    2.56,
    5.12,
    10.24,
    20.48,
    40.96,
    81.92,
    163.84,
    327.68,
)


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ExponentialBuckets: kube-scheduler's buckets, for the same quantiles."""
    return tuple(start * factor**i for i in range(count))


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        # process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds, ...:
        # the names kube-scheduler's process metrics have.
        ProcessCollector(registry=r)
        self.attempts = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=r,
        )
        self.attempt_duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding).",
            ["result", "profile"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.pending = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type.",
            ["queue"],
            registry=r,
        )
        self.sli = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from its first scheduling attempt "
            "(gated time does not count).",
            ["attempts"],
            buckets=_SLI_BUCKETS,
            registry=r,
        )
        self.extension_point = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.event_handling = Histogram(
            "scheduler_event_handling_duration_seconds",
            "Event handling latency in seconds.",
            ["event"],
            buckets=_exponential(0.0001, 2, 12),
            registry=r,
        )
        self.plugin_evaluations = Counter(
            "scheduler_plugin_evaluation_total",
            "Number of attempts to schedule pods by each plugin and the extension point "
            "(available only in PreFilter, Filter, PreScore, and Score).",
            ["plugin", "extension_point", "profile"],
            registry=r,
        )
        self.plugin_duration = Histogram(
            "scheduler_plugin_execution_duration_seconds",
            "Duration for running a plugin at a specific extension point, on a sample of cycles.",
            ["plugin", "extension_point", "status"],
            buckets=_exponential(0.00001, 1.5, 20),
            registry=r,
        )
        # Opportunistic batching (framework/batch.py), kube-scheduler's names and labels.
        self.batch_attempts = Counter(
            "scheduler_batch_attempts_total",
            "Counts of results when we attempt to use batching.",
            ["profile", "result"],
            registry=r,
        )
        self.batch_flushes = Counter(
            "scheduler_batch_cache_flushed_total",
            "Counts of cache flushes by reason.",
            ["profile", "reason"],
            registry=r,
        )
        self.batch_rescores = Counter(
            "scheduler_batch_rescore_attempts_total",
            "Counts of rescore attempts during opportunistic batching.",
            ["profile"],
            registry=r,
        )
        self.node_hint_duration = Histogram(
            "scheduler_get_node_hint_duration_seconds",
            "Latency for getting a node hint.",
            ["hinted", "profile"],
            buckets=_exponential(0.00001, 2, 12),
            registry=r,
        )
        self.store_results_duration = Histogram(
            "scheduler_store_schedule_results_duration_seconds",
            "Latency for storing scheduling results.",
            ["profile"],
            buckets=_exponential(0.00001, 2, 12),
            registry=r,
        )
        self.batch_rescore_duration = Histogram(
            "scheduler_batch_rescore_duration_seconds",
            "Latency for rescoring a node during opportunistic batching.",
            ["profile"],
            buckets=_exponential(0.00001, 2, 12),
            registry=r,
        )
        self.algorithm_duration = Histogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "Scheduling algorithm latency in seconds.",
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.pod_attempts = Histogram(
            "scheduler_pod_scheduling_attempts",
            "Number of attempts to successfully schedule a pod.",
            buckets=_exponential(1, 2, 5),
            registry=r,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "The number of unschedulable pods broken down by plugin name. A pod will "
            "increment the gauge for all plugins that caused it to not schedule.",
            ["plugin", "profile"],
            registry=r,
        )
        self.queued_entities = Gauge(
            "scheduler_queued_entities",
            "Number of pending entities, by the queue type and the entity type.",
            ["queue", "type"],
            registry=r,
        )
        self.queue_incoming = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=r,
        )
        self.cache_size = Gauge(
            "scheduler_cache_size",
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=r,
        )
        # Pod groups (GenericWorkload): one attempt per pod-group cycle.
        self.podgroup_attempts = Counter(
            "scheduler_podgroup_schedule_attempts_total",
            "Number of attempts to schedule pod groups, by the result.",
            ["result", "profile"],
            registry=r,
        )
        self.podgroup_attempt_duration = Histogram(
            "scheduler_podgroup_scheduling_attempt_duration_seconds",
            "Pod group scheduling attempt latency in seconds.",
            ["result", "profile"],
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.podgroup_algorithm_duration = Histogram(
            "scheduler_podgroup_scheduling_algorithm_duration_seconds",
            "Pod group scheduling algorithm latency in seconds.",
            buckets=_exponential(0.001, 2, 15),
            registry=r,
        )
        self.preemption_attempts = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now.",
            registry=r,
        )
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims.",
            buckets=_exponential(1, 2, 7),
            registry=r,
        )
        self.preemption_evaluation = Histogram(
            "scheduler_preemption_evaluation_duration_seconds",
            "Duration in seconds of the preemption evaluation (the dry run that picks "
            "victims), by the preemptor type and the status.",
            ["preemptor", "result"],
            buckets=_exponential(0.001, 2, 16),
            registry=r,
        )
        self.preemption_execution = Histogram(
            "scheduler_preemption_execution_duration_seconds",
            "Duration in seconds of preempting the victims, by the preemptor type and result.",
            ["preemptor", "result"],
            buckets=_exponential(0.001, 2, 16),
            registry=r,
        )
        self.preemption_goroutines = Counter(
            "scheduler_preemption_goroutines_execution_total",
            "Number of preemption actuations (victim deletions) that ran, by the result.",
            ["result"],
            registry=r,
        )
        self.bind_results = Counter(
            "podium_bind_results_total",
            "Outcomes of Binding calls.",
            ["outcome"],
            registry=r,
        )
        self.workload_preemption_attempts = Counter(
            "scheduler_workload_preemption_attempts_total",
            "Total preemption attempts initiated by workload (including pod groups).",
            ["result"],
            registry=r,
        )
        self.policy_reloads = Counter(
            "podium_policy_reloads_total",
            "SchedulerPolicy loads, by the result.",
            ["result"],
            registry=r,
        )
        self.cache_nodes = Gauge("podium_cache_nodes", "Nodes in the cache.", registry=r)
        self.cache_pods = Gauge("podium_cache_pods", "Pods in the cache.", ["state"], registry=r)
        self.cache_objects = Gauge(
            "podium_cache_objects",
            "Objects of each other watched kind in the cache, counted at each scrape.",
            ["kind"],
            registry=r,
        )
        self.flushed = Counter(
            "scheduler_pod_scheduled_after_flush_total",
            "Pods scheduled after being moved by the periodic unschedulable flush.",
            registry=r,
        )
        self.leader = Gauge("podium_leader", "1 while this replica holds the lease.", registry=r)
        # The API client: rate limits, Retry-After, credentials, Event series.
        self.rate_limited = Histogram(
            "podium_client_rate_limiter_duration_seconds",
            "Time requests waited for the client-side rate limit, by budget.",
            ["budget"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        # client-go's families, under its names: kube-scheduler's dashboards read them.
        self.rest_requests = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "host", "method"],
            registry=r,
        )
        self.rest_duration = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ["host", "verb"],
            buckets=(0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0),
            registry=r,
        )
        self.retry_after = Counter(
            "podium_client_retry_after_total",
            "Requests sent again after a 429 or 5xx answer's Retry-After, by status code.",
            ["code"],
            registry=r,
        )
        self.reauthentications = Counter(
            "podium_client_reauthentications_total",
            "Requests answered 401 and sent once more with a freshly read token.",
            registry=r,
        )
        self.auth_failures = Counter(
            "podium_client_auth_failures_total",
            "Requests refused with 401 (after one re-authentication) or 403, by status code.",
            ["code"],
            registry=r,
        )
        # The event loop: how late a probe woke (podium.runtime.loopwatch).
        self.loop_lag = Histogram(
            "podium_event_loop_lag_seconds",
            "How late the event loop ran a probe due every 50 ms: time other callbacks "
            "held the loop (a scheduling cycle, a relist page, a garbage collection).",
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.loop_max_stall = Gauge(
            "podium_event_loop_max_stall_seconds",
            "The longest event-loop stall since start that Podium's own work held: a probe's "
            "lateness, capped at the CPU time the loop's thread used meanwhile.",
            registry=r,
        )
        self.events = Counter(
            "podium_events_total",
            "Events recorded: created, patched (an Event series), or only counted in a series.",
            ["action"],
            registry=r,
        )

    def podgroup_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One pod-group cycle ended (observePodGroupScheduleAttemptAndLatency)."""
        self.podgroup_attempts.labels(result, profile).inc()
        self.podgroup_attempt_duration.labels(result, profile).observe(seconds)
