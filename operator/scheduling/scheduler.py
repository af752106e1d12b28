"""The running scheduler: watch events in, decisions out.

``PodiumScheduler`` ties the cache, the queue, the algorithm and the binder
together. Handlers call ``on_pod``/``on_node``/``set_profile``; one loop pops
pods and run one cycle each; binds run concurrently in the background. Each
path out of a cycle ends in the queue (requeue), in ``done`` (bound), or in
``delete`` (the pod is gone), never nowhere.

Why one module of this size: every path of a pod through the scheduler
(event in, cycle, assume, bind, fail, requeue) touches the same cache, queue
and nominator, and reading them in one place is how the invariant above is
checked. The pure parts live elsewhere (``framework``, ``state``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from collections.abc import Callable, Coroutine, Mapping
from dataclasses import dataclass, replace
from typing import Any

import structlog

from podium.framework.batch import BatchStats
from podium.framework.binding import (
    BindingHandle,
    Failure,
    run_hints,
    run_permit,
    run_post_bind,
    run_post_filter,
    run_pre_bind,
    run_pre_bind_pre_flights,
    run_pre_enqueue,
    run_reserve,
    run_unreserve,
    wait_on_permit,
    warm_ups,
)
from podium.framework.cycle import Placement, Scheduler
from podium.framework.decision import EVENT, build_record
from podium.framework.extension import FailedCycle
from podium.framework.plugin import ClusterEvent, PluginError
from podium.framework.probe import PluginStats
from podium.framework.profile import Profile
from podium.framework.queued import QueuedPod
from podium.kube.client import ApiError, KubeClient, list_pages
from podium.kube.kinds import NAMESPACES, NODES, PODDISRUPTIONBUDGETS, PODS, paths
from podium.kube.objects import NodeInfo, PodInfo, parse_node, parse_pod
from podium.kube.pdb import Pdb, parse_pdb
from podium.kube.resources import requests_decreased
from podium.metrics import Metrics
from podium.scheduling import traces
from podium.scheduling.binder import Binder, BindOutcome
from podium.scheduling.first_listing import FirstListing
from podium.scheduling.nominator import Nominator
from podium.scheduling.podgroup_cycle import group_members, schedule_group
from podium.scheduling.queue import QueueSettings, SchedulingQueue, event_label
from podium.scheduling.resync import Resyncer
from podium.scheduling.shadow import ShadowJob, ShadowRunner, shadows_by_target
from podium.state.cache import Cache
from podium.state.dra import KINDS as DRA_KINDS
from podium.state.podgroups import KINDS as WORKLOAD_KINDS
from podium.state.podgroups import POD_GROUPS, WORKLOAD_API, PodGroupStore
from podium.state.selectors import KINDS as SELECTOR_KINDS
from podium.state.snapshot import Snapshot
from podium.state.volumes import KINDS as VOLUME_KINDS

__all__ = ["PodiumScheduler", "node_change"]

log = structlog.get_logger("podium.scheduling.scheduler")

NO_POLICY = "SchedulerPolicy"
# Bindings a pod-group member is given, in place, before its room is given up.
GROUP_BIND_TRIES = 5


def node_change(old: NodeInfo | None, new: NodeInfo) -> ClusterEvent:
    """Which node properties changed, as the cluster events plugins subscribe to."""
    if old is None:
        return ClusterEvent.NODE_ADD
    event = ClusterEvent(0)
    if old.allocatable != new.allocatable:
        event |= ClusterEvent.NODE_ALLOCATABLE
    if old.labels != new.labels:
        event |= ClusterEvent.NODE_LABEL
    if old.taints != new.taints or old.unschedulable != new.unschedulable:
        event |= ClusterEvent.NODE_TAINT
    if old.conditions != new.conditions:
        event |= ClusterEvent.NODE_CONDITION
    if old.images != new.images:
        event |= ClusterEvent.NODE_IMAGES
    if old.declared_features != new.declared_features:
        event |= ClusterEvent.NODE_DECLARED_FEATURES
    return event


def _queue_settings(profile: Profile) -> QueueSettings:
    """A profile's podInitialBackoffSeconds, podMaxBackoffSeconds and flush interval."""
    return QueueSettings(
        initial_backoff=profile.initial_backoff,
        max_backoff=profile.max_backoff,
        unschedulable_flush=profile.unschedulable_flush,
    )


@dataclass(frozen=True, slots=True)
class _ObjectStore:
    """A store of watched objects: its kinds (plural -> LIST path), what it holds, and
    the handler its events go to (priming, resyncs and missed deletes all use it)."""

    kinds: Mapping[str, str]
    cached: Callable[[str], dict[str, str]]
    apply: Callable[[str, str | None, Mapping[str, Any]], None]


class PodiumScheduler:
    def __init__(
        self,
        binder: Binder,
        profiles: Mapping[str, Profile],
        metrics: Metrics | None = None,
        rng: random.Random | None = None,
        preemption: bool = True,
    ) -> None:
        self.binder = binder
        # False (``podium run --disable-preemption``): no profile preempts, whatever its
        # policy says, since the chart then withholds the rights to delete and evict pods.
        self.preemption = preemption
        self.profiles: dict[str, Profile] = {
            name: self._allowed(profile) for name, profile in profiles.items()
        }
        # Names whose policy was deleted: their pods wait, with an Event saying why.
        self.orphaned: set[str] = set()
        self.metrics = metrics or Metrics()
        self.cache = Cache()
        self.snapshot = Snapshot()
        self.volumes = self.snapshot.volumes
        self.dra = self.snapshot.dra
        # Plugins whose warm-up has started (framework.extension.WarmUpPlugin).
        self._warmed: set[str] = set()
        # Preemption state: nominations waiting for their victims to leave, and PDBs.
        self.nominator = Nominator()
        self.pdbs: dict[str, Pdb] = {}
        # resourceVersions of the namespaces and PDBs held, for the resync after a gap.
        self._versions: dict[str, dict[str, str]] = {
            k.plural: {} for k in (NAMESPACES, PODDISRUPTIONBUDGETS)
        }
        self.pod_groups = PodGroupStore()
        self.queue = SchedulingQueue(metrics=self.metrics, pre_enqueue=self._pre_enqueue)
        # (plugin, profile) pairs scheduler_unschedulable_pods was last set for.
        self._rejected_seen: set[tuple[str, str]] = set()
        for profile in self.profiles.values():
            self.queue.profile_settings[profile.scheduler_name] = _queue_settings(profile)
        self.shadow = ShadowRunner()
        self.binds_in_flight = 0  # shadows wait while a live Binding is out
        self._refresh_interest()
        self.algorithm = Scheduler(rng)
        self.algorithm.plugin_stats = PluginStats()
        self.algorithm.batch_stats = BatchStats()
        self.active = asyncio.Event()  # cleared on standby replicas
        self.active.set()
        self._tasks: set[asyncio.Task[Any]] = set()
        # Plugins' view of the scheduler at the points outside the cycle (framework/extension).
        self.handle = BindingHandle(
            binder.client,
            self.spawn,
            self.snapshot,
            self.on_dra,
            self.queue.hint,
            self._note,
            nominator=self.nominator,
            preempting=self.preempting,
            instance=binder.instance,
            pdbs=self.pdbs,
            pod_groups=self.pod_groups,
            group_size=self._group_size,
            rng=self.algorithm.rng,
            metrics=self.metrics,
        )
        self.resync = Resyncer(binder.client, self.cached_versions, self._forget)
        self.first_listing = FirstListing()

    # -- profiles -----------------------------------------------------------------------
    def _refresh_interest(self) -> None:
        interest: dict[str, ClusterEvent] = {}
        for profile in self.profiles.values():
            for name, events in profile.interest().items():
                interest[name] = interest.get(name, ClusterEvent(0)) | events
        interest[NO_POLICY] = ClusterEvent.POLICY
        self.queue.interest = interest
        self.shadow.profiles = shadows_by_target(self.profiles.values())

    def _allowed(self, profile: Profile) -> Profile:
        if profile.preemption and not self.preemption:
            return replace(profile, preemption=False)
        return profile

    def set_profile(self, profile: Profile) -> None:
        """Install or replace a profile; queued pods use it from their next attempt."""
        profile = self._allowed(profile)
        self.profiles[profile.scheduler_name] = profile
        self.orphaned.discard(profile.scheduler_name)
        self.queue.profile_settings[profile.scheduler_name] = _queue_settings(profile)
        self._refresh_interest()
        self.queue.on_event(ClusterEvent.POLICY | ClusterEvent.any_node_change())

    def remove_profile(self, scheduler_name: str) -> None:
        self.queue.profile_settings.pop(scheduler_name, None)
        if self.profiles.pop(scheduler_name, None) is not None:
            self.orphaned.add(scheduler_name)
            self._refresh_interest()

    def serves(self, scheduler_name: str) -> bool:
        return scheduler_name in self.profiles or scheduler_name in self.orphaned

    # -- watch events ------------------------------------------------------------------
    def on_node(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A Node event, timed as scheduler_event_handling_duration_seconds under Go's
        label (addNodeToCache, updateNodeInCache, deleteNodeFromCache)."""
        started = time.perf_counter()
        label = self._handle_node(event_type, body)
        if label:
            self.metrics.event_handling.labels(label).observe(time.perf_counter() - started)

    def _handle_node(self, event_type: str | None, body: Mapping[str, Any]) -> str:
        """Apply a Node event; the event's label, "" for one that changes nothing."""
        meta = body.get("metadata")
        name = str(meta.get("name") or "") if isinstance(meta, Mapping) else ""
        if not name:
            return ""
        if event_type == "DELETED":
            orphans = self.cache.remove_node(name)
            for pod in orphans:
                log.info("assumed_pod_orphaned", pod=pod.name, namespace=pod.namespace, node=name)
            self.queue.on_event(ClusterEvent.NODE_DELETE)
            return "NodeDelete"
        node = parse_node(body)
        if node.problems:
            log.warning("node_parse_problems", node=name, reasons=node.problems)
        state = self.cache.nodes.get(name)
        event = node_change(state.node if state else None, node)
        self.cache.add_node(node)
        if event:
            self.queue.on_event(event)
        if state is None or state.node is None:
            return "NodeAdd"
        return event_label(event) if event else ""

    def on_namespace(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        meta = body.get("metadata")
        if not isinstance(meta, Mapping) or not meta.get("name"):
            return
        name = str(meta["name"])
        if event_type == "DELETED":
            self.snapshot.namespace_labels.pop(name, None)
            self._versions["namespaces"].pop(name, None)
            return
        self._versions["namespaces"][name] = str(meta.get("resourceVersion") or "")
        raw = meta.get("labels")
        labels = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, Mapping) else {}
        if self.snapshot.namespace_labels.get(name) != labels:
            self.snapshot.namespace_labels[name] = labels
            self.queue.on_event(ClusterEvent.ASSIGNED_POD_UPDATE)

    def on_pdb(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        pdb = parse_pdb(body)
        if pdb is None:
            return
        versions = self._versions["poddisruptionbudgets"]
        if event_type == "DELETED":
            self.pdbs.pop(pdb.key, None)
            versions.pop(pdb.key, None)
        else:
            self.pdbs[pdb.key] = pdb
            versions[pdb.key] = str((body.get("metadata") or {}).get("resourceVersion") or "")

    def on_selector(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A Service, ReplicationController, ReplicaSet or StatefulSet event.

        No pod is requeued: kube-scheduler registers no event on these kinds.
        """
        self.snapshot.selectors.apply(kind, event_type, body)

    def on_volume(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A PV, PVC, StorageClass or CSINode event; a change may free waiting pods."""
        if self.volumes.apply(kind, event_type, body):
            self.queue.on_event(ClusterEvent.VOLUME)

    def on_pod_group(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A Workload or PodGroup event; a new or changed PodGroup may free its members."""
        group = self.pod_groups.apply(kind, event_type, body)
        if group is not None:
            self._hint(POD_GROUPS, group.key)

    def _hint(self, kind: str, key: str) -> None:
        """The profiles' queueing hints for one changed object (each plugin asked once)."""
        done: set[str] = set()
        for profile in self.profiles.values():
            run_hints(profile, self.handle, kind, key, done)

    def _pre_enqueue(self, pod: PodInfo) -> str | None:
        """The queue's PreEnqueue: the pod's profile's plugins (RunPreEnqueuePlugins); the
        one that holds the pod back, logged, or None. A pod no profile serves goes in,
        for its cycle to say so."""
        profile = self.profiles.get(pod.scheduler_name)
        waiting = None if profile is None else run_pre_enqueue(profile, self.handle, pod)
        if waiting is None:
            return None
        plugin, reason = waiting
        log.debug(
            "pre_enqueue_waiting",
            pod=pod.name,
            namespace=pod.namespace,
            plugin=plugin,
            reason=reason,
        )
        return plugin

    def _group_size(self, key: str) -> int:
        """The group's pods in the queue, assumed or bound: what PreEnqueue counts."""
        queued, scheduled = group_members(self, key)
        return len(queued) + len(scheduled)

    def on_dra(self, kind: str, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A DeviceClass, ResourceSlice, ResourceClaim, template or DeviceTaintRule event.

        Slices, taint rules, classes and a freed allocation are cluster events for every
        pod a plugin listening for them rejected; an object the store reports changed
        goes to the plugins' queueing hints, which wake the pods it concerns.
        """
        update = self.dra.apply(kind, event_type, body)
        event = ClusterEvent(0)
        if update.devices:
            event |= ClusterEvent.RESOURCE_SLICE
        if update.classes:
            event |= ClusterEvent.DEVICE_CLASS
        if update.freed:
            event |= ClusterEvent.RESOURCE_CLAIM
        if event:
            self._warm_up(event)
            self.queue.on_event(event)
        if update.changed:
            self._hint(kind, update.changed)

    async def preempting(
        self, preemptor: str, uids: list[str], preempting: Coroutine[Any, Any, bool]
    ) -> None:
        """The preemption goroutine (Go's prepareCandidateAsync), for a pod or a PodGroup
        (``preemptor``: "pod" or "podgroup", Go's preemptor types): counted and timed; after
        a refusal the preemptor's pods (``uids``) are activated, since no victim's deletion
        may come to move them."""
        started = time.perf_counter()
        done = await preempting
        result = "success" if done else "error"
        self.metrics.preemption_goroutines.labels(result).inc()
        seconds = time.perf_counter() - started
        self.metrics.preemption_execution.labels(preemptor, result).observe(seconds)
        if not done:
            self.queue.activate(uids)

    def _warm_up(self, event: ClusterEvent) -> None:
        """The profiles' plugins whose one-off work waits for ``event`` (WarmUpPlugin),
        each started once, in a worker thread, so the cycle that needs it does not hold
        the loop (a compiled runtime, say)."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # a test driving the scheduler without a loop
            return
        for profile in self.profiles.values():
            for plugin in warm_ups(profile, event):
                if plugin.name not in self._warmed:
                    self._warmed.add(plugin.name)
                    self.spawn(asyncio.to_thread(plugin.warm_up))

    def on_pod(self, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A Pod event, timed as scheduler_event_handling_duration_seconds under Go's
        label: Unscheduled or Assigned, Pod, Add, Update or Delete. A pod's binding is
        counted once, as AssignedPodAdd (Go's informer also reports its
        UnscheduledPodDelete)."""
        started = time.perf_counter()
        label = self._handle_pod(event_type, body)
        if label:
            self.metrics.event_handling.labels(label).observe(time.perf_counter() - started)

    def _handle_pod(self, event_type: str | None, body: Mapping[str, Any]) -> str:
        """Apply a Pod event; its label, "" for a pod this scheduler does not handle."""
        pod = parse_pod(body)
        if not pod.uid:
            return ""
        joined = bool(pod.pod_group) and self.pod_groups.join(pod)
        label = self._apply_pod(event_type, pod)
        if joined:
            # It may complete its gang's minCount: the group's hint runs once the pod is
            # queued (or cached), so PreEnqueue counts it (Go: AddPodGroupMember and
            # Add, then MoveAllToActiveOrBackoffQueue).
            self._hint(POD_GROUPS, pod.group_key)
        return label

    def _apply_pod(self, event_type: str | None, pod: PodInfo) -> str:
        """The pod event's effect on the cache, the queue and the nominations; its label."""
        # Pending pods indexed by the DRA objects they name (a no-op for the others).
        self.dra.track(pod, not pod.bound and event_type != "DELETED" and not pod.terminal)
        if pod.bound or event_type == "DELETED" or pod.deleting or pod.terminal:
            self.nominator.remove(pod.uid)
        elif self.serves(pod.scheduler_name) and not self.cache.is_assumed(pod.uid):
            # An assumed pod's nomination is its own, written before PreBind: not
            # another pod's hold on the node (Go skips assumed pods' updates).
            self.nominator.update(pod)
        if event_type == "DELETED" or (pod.bound and pod.terminal):
            assigned = pod.uid in self.cache.pods
            self._pod_gone(pod.uid)
            return "AssignedPodDelete" if assigned else "UnscheduledPodDelete"
        if pod.bound:
            if pod.problem:
                # Counted with the values that parsed; the API server never stores such a pod.
                log.warning(
                    "bound_pod_parse_problems",
                    pod=pod.name,
                    namespace=pod.namespace,
                    node=pod.node_name,
                    reasons=pod.problem,
                )
            known = self.cache.pods.get(pod.uid)
            self.cache.add_pod(pod)
            self.queue.delete(pod.uid)
            if known is None or known.assumed:
                self.queue.on_event(ClusterEvent.ASSIGNED_POD_ADD)
                return "AssignedPodAdd"
            event = ClusterEvent(0)
            if known.pod.labels != pod.labels:
                event |= ClusterEvent.ASSIGNED_POD_UPDATE
            if requests_decreased(known.pod.requests, pod.requests):
                event |= ClusterEvent.ASSIGNED_POD_SCALE_DOWN
            if event:
                self.queue.on_event(event)
            return "AssignedPodUpdate"
        if not self.serves(pod.scheduler_name):
            self.queue.delete(pod.uid)
            return ""
        if pod.deleting or pod.terminal:
            self.queue.delete(pod.uid)
            return "UnscheduledPodUpdate"
        if self.cache.is_assumed(pod.uid):
            return "UnscheduledPodUpdate"  # a stale unbound copy while our bind is in flight
        known_pending = pod.uid in self.queue
        self.queue.add(pod)
        return "UnscheduledPodUpdate" if known_pending else "UnscheduledPodAdd"

    def _object_stores(self) -> list[_ObjectStore]:
        """The watched kinds kept by name or namespace/name outside the node and pod cache;
        namespaces come first, as every selector with a namespaceSelector reads them."""
        stores = [
            _ObjectStore(
                paths([NAMESPACES]),
                self._versions.__getitem__,
                lambda _, event_type, body: self.on_namespace(event_type, body),
            ),
            _ObjectStore(
                paths([PODDISRUPTIONBUDGETS]),
                self._versions.__getitem__,
                lambda _, event_type, body: self.on_pdb(event_type, body),
            ),
            _ObjectStore(VOLUME_KINDS, self.volumes.cached_versions, self.on_volume),
            _ObjectStore(SELECTOR_KINDS, self.snapshot.selectors.cached_versions, self.on_selector),
            _ObjectStore(DRA_KINDS, self.dra.cached_versions, self.on_dra),
        ]
        if self.pod_groups.served:
            stores.append(
                _ObjectStore(WORKLOAD_KINDS, self.pod_groups.cached_versions, self.on_pod_group)
            )
        return stores

    def cached_versions(self, kind: str) -> dict[str, str]:
        """What Podium holds of ``kind``, key -> resourceVersion, for a resync."""
        if kind == NODES.plural:
            return {
                name: str((state.node.raw.get("metadata") or {}).get("resourceVersion") or "")
                for name, state in self.cache.nodes.items()
                if state.node is not None
            }
        for store in self._object_stores():
            if kind in store.kinds:
                return store.cached(kind)
        held = {uid: entry.pod.resource_version for uid, entry in self.queue.entries.items()}
        held.update((uid, state.pod.resource_version) for uid, state in self.cache.pods.items())
        return held

    def _forget(self, kind: str, key: str) -> None:
        """An object a relist shows gone: handled as its missed DELETED event."""
        log.debug("resync_forgot", kind=kind, key=key)
        if kind == NODES.plural:
            self.on_node("DELETED", {"metadata": {"name": key}})
            return
        for store in self._object_stores():
            if kind in store.kinds:
                namespace, _, name = key.rpartition("/")  # cluster-scoped keys have no "/"
                meta = {"namespace": namespace, "name": name}
                store.apply(kind, "DELETED", {"metadata": meta})
                return
        self._pod_gone(key)

    def _pod_gone(self, uid: str) -> None:
        self.nominator.remove(uid)
        self.pod_groups.leave(uid)
        self.dra.untrack(uid)
        removed = self.cache.remove_pod(uid)
        self.queue.delete(uid)
        if removed is not None:
            self.queue.on_event(ClusterEvent.ASSIGNED_POD_DELETE)

    async def discover(self, client: KubeClient) -> None:
        """Whether the API server serves the Workload API (GenericWorkload gate on)."""
        try:
            found = await client.get(WORKLOAD_API)
        except ApiError:
            found = {}
        served = {str(r.get("name")) for r in found.get("resources") or []}
        self.pod_groups.served = set(WORKLOAD_KINDS) <= served
        if self.pod_groups.served:
            self.resync.add(WORKLOAD_KINDS)
        log.info("workload_api", served=self.pod_groups.served)

    async def prime(self, client: KubeClient) -> None:
        """Load every node and pod before the first cycle, as informers sync first.

        Without it a pod listed before the nodes would be judged against an
        empty cluster. Watch events that race with this list are harmless:
        every handler is level-triggered and idempotent. What kopf watches is
        also noted for ``first_listing``, which readiness waits on.
        """
        expect = self.first_listing.expect

        async def load(kind: str, path: str, apply: Callable[[None, Any], object]) -> None:
            def primed(event_type: None, body: Any) -> None:
                apply(event_type, body)
                expect(kind, body)

            await _apply_listed(client, path, primed)

        await load(NODES.plural, NODES.path, self.on_node)
        # Namespaces, PDBs, storage for the volume plugins, selectors for default spreading:
        # a kind that cannot be listed leaves its plugin seeing none of it, as without the
        # watch (preemption then ignores budgets).
        for store in self._object_stores():
            for kind, path in store.kinds.items():
                try:
                    await load(kind, path, functools.partial(store.apply, kind))
                except ApiError as exc:
                    log.warning("list_failed", kind=kind, error=str(exc))
        await _apply_listed(client, PODS.path, self.on_pod)  # watched directly
        self.first_listing.start()
        log.info("cache_primed", nodes=len(self.cache.nodes), pending=len(self.queue))

    # -- the scheduling loop ------------------------------------------------------------
    def spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def settle(self) -> None:
        """Wait until every bind, status write and preemption spawned so far, and any they
        spawn in turn, has finished: for callers that drive cycles themselves (tests,
        simulations) and then read the outcome. Their errors are raised."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks))

    async def run(self) -> None:
        """Run the scheduling loop and the queue timers until cancelled.

        One loop: a cycle is synchronous numpy work, so more loops on one event
        loop would only interleave, never overlap. Binds run concurrently.
        """
        timers = asyncio.create_task(self.queue.run_timers())
        gauges = asyncio.create_task(self._gauge_loop())
        resync = asyncio.create_task(self.resync.run_periodic())
        loop = asyncio.create_task(self._worker())
        shadow = asyncio.create_task(self.shadow.run(self._live_busy, self._shadow_decide))
        background = [timers, gauges, resync, shadow, loop]
        try:
            await asyncio.gather(timers, loop)
        finally:
            self.queue.close()
            for task in [*background, *self._tasks]:
                task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.gather(*background, *self._tasks, return_exceptions=True)
            await self.resync.close()

    async def _worker(self) -> None:
        while True:
            await self.active.wait()
            entry = await self.queue.pop()
            try:
                self.schedule_one(entry)
            except Exception as exc:  # never let one pod take the worker down
                log.exception("scheduling_error", pod=entry.pod.name, namespace=entry.pod.namespace)
                self.fail(
                    entry,
                    "SchedulerError",
                    f"scheduler error: {exc}",
                    error=True,
                    profile=self.profiles.get(entry.pod.scheduler_name),
                )
            await asyncio.sleep(0)

    def _live_busy(self) -> bool:
        return self.binds_in_flight > 0 or self.queue.ready()

    def _shadow_decide(self, job: ShadowJob) -> None:
        self.shadow.decide(job, self.cache, self.snapshot, self.nominator.by_node)

    def record(
        self,
        entry: QueuedPod,
        profile: Profile | None,
        placement: Placement | None,
        **fields: Any,
    ) -> dict[str, Any] | None:
        """The attempt's decision record, or None when the policy turned records off."""
        if profile is not None and not profile.record_decisions:
            return None
        top = profile.record_top_nodes if profile is not None else 0
        return build_record(
            profile, self.snapshot, entry.pod, entry.attempts, placement, top=top, **fields
        )

    async def _gauge_loop(self, period: float = 1.0) -> None:
        """Queue sizes for /metrics, sampled: counting per cycle would cost O(queue) each.
        The loop also drains the plugins' sampled durations when nothing scrapes."""
        while True:
            self.update_gauges()
            await asyncio.sleep(period)

    def count_objects(self) -> None:
        """podium_cache_objects: how many objects of each kind the stores hold. O(objects),
        so only a /metrics scrape runs it, not the one-second loop."""
        for store in self._object_stores():
            for kind in store.kinds:
                self.metrics.cache_objects.labels(kind).set(len(store.cached(kind)))

    def update_gauges(self) -> None:
        """Set the cache, queue and unschedulable-pod gauges from the state of the moment;
        every /metrics scrape runs it first, so a scrape never reads a second-old count."""
        counts = self.queue.counts()
        self.metrics.pending.labels("active").set(counts["active"] + counts["in_flight"])
        self.metrics.pending.labels("backoff").set(counts["backoff"])
        self.metrics.pending.labels("unschedulable").set(counts["unschedulable"])
        self.metrics.pending.labels("gated").set(counts["gated"])
        self.metrics.cache_nodes.set(len(self.cache.nodes))
        self._drain_plugin_stats()
        assumed = sum(1 for state in self.cache.pods.values() if state.assumed)
        self.metrics.cache_pods.labels("assumed").set(assumed)
        self.metrics.cache_pods.labels("bound").set(len(self.cache.pods) - assumed)
        sizes = self.metrics.cache_size
        sizes.labels("nodes").set(len(self.cache.nodes))
        sizes.labels("pods").set(len(self.cache.pods))
        sizes.labels("assumed_pods").set(assumed)
        entities = self.metrics.queued_entities
        entities.labels("active", "pod").set(counts["active"] + counts["in_flight"])
        entities.labels("backoff", "pod").set(counts["backoff"])
        entities.labels("unschedulable", "pod").set(counts["unschedulable"])
        entities.labels("gated", "pod").set(counts["gated"])
        rejections = self.queue.rejections()
        for key in self._rejected_seen - rejections.keys():  # a plugin no pod waits on now
            self.metrics.unschedulable_pods.labels(*key).set(0)
        for key, count in rejections.items():
            self.metrics.unschedulable_pods.labels(*key).set(count)
        self._rejected_seen = set(rejections)

    def _drain_plugin_stats(self) -> None:
        """Move the cycles' per-plugin counts and sampled durations into /metrics."""
        stats = self.algorithm.plugin_stats
        if stats is None:
            return
        for key, count in stats.evaluations.items():
            self.metrics.plugin_evaluations.labels(*key).inc(count)
        for plugin, point, status, seconds in stats.durations:
            self.metrics.plugin_duration.labels(plugin, point, status).observe(seconds)
        stats.evaluations.clear()
        stats.durations.clear()
        if self.algorithm.batch_stats is not None:
            self.algorithm.batch_stats.drain(self.metrics)

    def schedule_one(self, entry: QueuedPod) -> None:
        pod = entry.pod
        profile = self.profiles.get(pod.scheduler_name)
        started = time.perf_counter()
        if profile is None:
            self.fail(
                entry,
                "Unschedulable",
                f"no SchedulerPolicy serves schedulerName {pod.scheduler_name!r}; "
                "the pod waits until one is created",
                rejected_by=frozenset({NO_POLICY}),
            )
            return
        if pod.deleting or self.cache.is_assumed(pod.uid) or pod.uid in self.cache.pods:
            self.queue.done(pod.uid)
            return
        if pod.problem:
            self.fail(
                entry, "SchedulerError", f"invalid pod: {pod.problem}", error=True, profile=profile
            )
            return
        if pod.pod_group and profile.gang_scheduling and self.pod_groups.served:
            schedule_group(self, entry, profile)
            return
        traces.begin(entry, profile, self.algorithm.plugin_stats, started)
        self.snapshot.update(self.cache)
        if len(self.snapshot) == 0:
            # Go's ErrNoNodesAvailable: no rejecting plugin, so backoffQ (queueAfterBackoff).
            self.fail(
                entry,
                "Unschedulable",
                "no nodes available to schedule pods",
                profile=profile,
                nominating="",  # Go's clearNominatedNode
            )
            return
        nominated_node = self.nominator.node_of(pod.uid)
        try:
            placement = self.algorithm.schedule(
                profile,
                self.snapshot,
                pod,
                record=profile.record_decisions and profile.record_top_nodes > 0,
                nominated=self.nominator.by_node,
                nominated_node=nominated_node,
                cycle_count=entry.cycle,
            )
        except PluginError as exc:  # kube's Error status: abort, retry with backoff
            self.fail(entry, "SchedulerError", str(exc), error=True, profile=profile, nominating="")
            return
        traces.cycle_done(entry, placement, self.algorithm.plugin_stats)
        if not profile.dry_run:
            self.shadow.submit(pod, entry.attempts, profile.scheduler_name)
        elapsed = time.perf_counter() - started
        if placement.node:  # a failed cycle's algorithm ends after PostFilter, below
            self.metrics.algorithm_duration.observe(elapsed)
        status = "Success" if placement.node else "Unschedulable"
        points = self.metrics.extension_point
        name = profile.scheduler_name
        points.labels("PreFilter", status, name).observe(placement.prefilter_seconds)
        points.labels("Filter", status, name).observe(placement.filter_seconds)
        points.labels("Score", status, name).observe(placement.score_seconds)
        if not placement.node:
            diagnosis = placement.diagnosis
            assert diagnosis is not None
            # The profile's PostFilter plugins (preemption's evictions among them);
            # a dry-run profile's answer with no write.
            failed = FailedCycle(profile, diagnosis, nominated_node)
            answer = run_post_filter(profile, self.handle, pod, failed)
            diagnosis.post_filter_msg = answer.status.reason
            nominating = answer.nominating
            traces.point(entry, "PostFilter")
            self.metrics.algorithm_duration.observe(time.perf_counter() - started)
            reasons = sorted(diagnosis.reasons)
            self.fail(
                entry,
                "Unschedulable",
                diagnosis.message(),
                rejected_by=frozenset(diagnosis.rejected_by),
                profile=profile,
                elapsed=elapsed,
                reasons=reasons,
                placement=placement,
                nominating=nominating,
            )
            return
        node = placement.node
        if profile.dry_run:
            record = self.record(
                entry,
                profile,
                placement,
                result="dry_run",
                duration_ms=round(elapsed * 1000, 3),
            )
            if record is not None:  # the record replaces the shorter line
                log.info(EVENT, **record)
            else:
                log.info(
                    "dry_run_decision",
                    pod=pod.name,
                    namespace=pod.namespace,
                    node=node,
                    attempt=entry.attempts,
                    duration_ms=round(elapsed * 1000, 3),
                )
            self.queue.requeue(entry, rejected_by=frozenset({NO_POLICY}))
            traces.end(entry, "dry_run")
            return
        record = self.record(entry, profile, placement)
        self.cache.assume_pod(pod, node)
        self.nominator.remove(pod.uid)
        # Reserve (the filters' binding halves, then the extensions), then Permit.
        failure = run_reserve(profile, self.handle, pod, node)
        traces.point(entry, "Reserve")
        if failure is None:
            failure = run_permit(profile, self.handle, pod, node)
            traces.point(entry, "Permit")
        if failure is not None:
            self._abandon(entry, node, profile, started, record, failure)
            return
        self.start_bind(entry, node, profile, started, record)

    def _abandon(
        self,
        entry: QueuedPod,
        node: str,
        profile: Profile,
        started: float,
        record: dict[str, Any] | None,
        failure: Failure,
    ) -> None:
        """Reserve or Permit failed the pod: every reservation is undone (Go's Unreserve;
        its API work runs beside the loop), then the failure is reported, a rejection as
        Unschedulable and anything else as an error, and the nomination cleared (Go's
        clearNominatedNode)."""
        pod = entry.pod
        undo = run_unreserve(profile, self.handle, pod, node)
        if undo is not None:
            self.spawn(undo)
        self._report_abandoned(entry, profile, started, record, failure)

    async def _abandon_binding(
        self,
        entry: QueuedPod,
        node: str,
        profile: Profile,
        started: float,
        record: dict[str, Any] | None,
        failure: Failure,
    ) -> None:
        """A binding-cycle point failed the pod: Unreserve, its API work awaited before
        the failure is reported, as Go's handleBindingCycleError."""
        self.binds_in_flight -= 1
        undo = run_unreserve(profile, self.handle, entry.pod, node)
        if undo is not None:
            await undo
        self._report_abandoned(entry, profile, started, record, failure)
        self._room_released()

    def _room_released(self) -> None:
        """handleBindingCycleError: the forgotten assumption is an AssignedPodDelete for
        the pods its room may now fit. Played after the failure is reported, so the pod
        itself, reported without rejecting plugins, is not among them."""
        self.queue.on_event(ClusterEvent.ASSIGNED_POD_DELETE)

    def _report_abandoned(
        self,
        entry: QueuedPod,
        profile: Profile,
        started: float,
        record: dict[str, Any] | None,
        failure: Failure,
    ) -> None:
        pod = entry.pod
        self.cache.forget_pod(pod)
        self.fail(
            entry,
            "Unschedulable" if failure.rejected else "SchedulerError",
            failure.message,
            error=not failure.rejected,
            profile=profile,
            elapsed=time.perf_counter() - started,
            record=record,
            nominating="",
        )

    def start_bind(
        self,
        entry: QueuedPod,
        node: str,
        profile: Profile,
        started: float,
        record: dict[str, Any] | None,
    ) -> None:
        """Bind an assumed pod in the background; shadows wait while it is in flight."""
        self.binds_in_flight += 1
        self.spawn(self._bind(entry, node, profile, started, record))

    async def _bind(
        self,
        entry: QueuedPod,
        node: str,
        profile: Profile,
        started: float,
        record: dict[str, Any] | None,
    ) -> None:
        pod = entry.pod
        traces.binding(entry, node)
        # RunPreBindPreFlights, then the nomination when PreBind or a Permit wait will work.
        works = run_pre_bind_pre_flights(profile, self.handle, pod, node)
        if isinstance(works, Failure):
            await self._abandon_binding(entry, node, profile, started, record, works)
            return
        if works or self.handle.is_waiting(pod.uid):
            entry.pod = pod = await self.binder.nominate(pod, node)
        failure = await wait_on_permit(self.handle, pod)
        traces.point(entry, "WaitOnPermit")
        if failure is None:
            failure = await run_pre_bind(profile, self.handle, pod, node)
        if failure is not None:
            await self._abandon_binding(entry, node, profile, started, record, failure)
            return
        traces.point(entry, "PreBind")
        grouped = bool(pod.pod_group) and profile.gang_scheduling and self.pod_groups.served
        outcome, why = await self._post_binding(pod, node, grouped)
        self.binds_in_flight -= 1
        traces.point(entry, "Bind")
        self.metrics.bind_results.labels(outcome.value).inc()
        if record is not None and outcome is not BindOutcome.RETRY:
            record["result"] = "scheduled" if outcome is BindOutcome.BOUND else "abandoned"
            record["message"] = "" if outcome is BindOutcome.BOUND else outcome.value
            record["duration_ms"] = round((time.perf_counter() - started) * 1000, 3)
            log.info(EVENT, **record)
        if outcome is BindOutcome.BOUND:
            self.queue.done(pod.uid)
            self.spawn(traces.post_bind(entry, run_post_bind(profile, self.handle, pod, node)))
            traces.end(entry, "scheduled")
            total = time.perf_counter() - started
            self.metrics.attempts.labels("scheduled", profile.scheduler_name).inc()
            self.metrics.attempt_duration.labels("scheduled", profile.scheduler_name).observe(total)
            self.metrics.pod_attempts.observe(entry.attempts)
            if entry.first_attempt:
                attempts = "15+" if entry.attempts >= 15 else str(entry.attempts)
                waited = self.queue.clock() - entry.first_attempt
                self.metrics.sli.labels(attempts).observe(waited)
            if entry.flushed:
                self.metrics.flushed.inc()
            if record is None:
                log.info(
                    "scheduled",
                    pod=pod.name,
                    namespace=pod.namespace,
                    result="scheduled",
                    node=node,
                    attempt=entry.attempts,
                    duration_ms=round(total * 1000, 3),
                )
            if profile.post_success_events:
                await self.binder.event(
                    pod,
                    "Scheduled",
                    f"Successfully assigned {pod.key} to {node}",
                    profile.scheduler_name,
                )
            return
        self.cache.forget_pod(pod)
        undo = run_unreserve(profile, self.handle, pod, node)
        if undo is not None:
            await undo
        if outcome is BindOutcome.GONE:
            traces.end(entry, outcome.value)
            self.queue.delete(pod.uid)
            log.info("bind_target_gone", pod=pod.name, namespace=pod.namespace, node=node)
        elif outcome is BindOutcome.ELSEWHERE:
            traces.end(entry, outcome.value)
            self.queue.done(pod.uid)
            log.info("bound_elsewhere", pod=pod.name, namespace=pod.namespace, node=node)
        else:
            self.fail(
                entry,
                "SchedulerError",
                f'running Bind plugin "DefaultBinder": {why}',  # RunBindPlugins' wording
                error=True,
                profile=profile,
                elapsed=time.perf_counter() - started,
                record=record,
                nominating="",
            )
        self._room_released()

    async def _post_binding(
        self, pod: PodInfo, node: str, grouped: bool
    ) -> tuple[BindOutcome, str]:
        """The Binding, and for a member a pod-group cycle placed (``grouped``) one
        retried in place.

        Go gives a failed member's room up (handleBindingCycleError) while its siblings
        may be bound already, and a pod waiting for room can then take it: the group
        stays below minCount for good. A member's Binding that certainly did not apply
        is posted again instead, with the binder's backoff, while the cache still holds
        it assumed on that node (a node deleted, or the pod, drops the assumption):
        ``GROUP_BIND_TRIES`` Bindings in all.
        """
        tries = 0
        while True:
            tries += 1
            try:
                outcome, why = await self.binder.bind(pod, node)
            except Exception as exc:  # the reservation must be resolved whatever happens
                log.exception("bind_crashed", pod=pod.name, namespace=pod.namespace, node=node)
                return BindOutcome.RETRY, str(exc)
            if outcome is not BindOutcome.RETRY or not grouped or tries >= GROUP_BIND_TRIES:
                return outcome, why
            delay = self.binder.resolve_backoff * 2 ** (tries - 1)
            await asyncio.sleep(min(delay, self.binder.resolve_max_backoff))
            if not self._still_assumed(pod, node):
                return outcome, why
            log.warning(
                "bind_retried_in_place",
                pod=pod.name,
                namespace=pod.namespace,
                node=node,
                attempt=tries + 1,
                error=why,
            )

    def _still_assumed(self, pod: PodInfo, node: str) -> bool:
        state = self.cache.pods.get(pod.uid)
        return state is not None and state.assumed and state.node == node

    async def _note(self, pod: PodInfo, reason: str, note: str) -> None:
        """A Normal Event from a plugin, in the name of the pod's scheduler."""
        await self.binder.event(pod, reason, note, pod.scheduler_name)

    def fail(
        self,
        entry: QueuedPod,
        reason: str,
        message: str,
        *,
        rejected_by: frozenset[str] = frozenset(),
        error: bool = False,
        profile: Profile | None = None,
        elapsed: float = 0.0,
        reasons: list[str] | None = None,
        placement: Placement | None = None,
        record: dict[str, Any] | None = None,
        nominating: str | None = None,
    ) -> None:
        """handleSchedulingFailure: requeue, log, and report the condition with the
        nomination (``nominating``: None keeps it, "" clears it, a name sets it)."""
        pod = entry.pod
        self.queue.requeue(entry, rejected_by=rejected_by, error=error)
        nominator = None
        if nominating is not None and not (profile and profile.dry_run):
            # AddNominatedPod: memory first, so the next cycle sees it before the write lands.
            self.nominator.add(pod, nominating)
            nominator = self.nominator
        result = "error" if error else "unschedulable"
        traces.end(entry, result, message)
        name = profile.scheduler_name if profile else pod.scheduler_name
        if record is None:
            record = self.record(entry, profile, placement)
        if record is not None:
            record.update(result=result, message=message, duration_ms=round(elapsed * 1000, 3))
            log.info(EVENT, **record)
        else:
            log.info(
                "schedule_failed",
                pod=pod.name,
                namespace=pod.namespace,
                result=result,
                reasons=reasons or [message],
                attempt=entry.attempts,
                duration_ms=round(elapsed * 1000, 3),
            )
        self.metrics.attempts.labels(result, name).inc()
        self.metrics.attempt_duration.labels(result, name).observe(elapsed)
        self.spawn(self._report_failure(pod, reason, message, name, nominator))

    async def _report_failure(
        self,
        pod: PodInfo,
        reason: str,
        message: str,
        controller: str,
        nominator: Nominator | None = None,
    ) -> None:
        await self.binder.set_condition(pod, reason, message, nominator)
        await self.binder.event(pod, "FailedScheduling", message, controller, kind="Warning")

    # -- introspection --------------------------------------------------------------------
    def pending(self) -> dict[str, int]:
        return self.queue.counts()


async def _apply_listed(
    client: KubeClient, path: str, apply: Callable[[None, Any], object]
) -> None:
    """Hand every listed object to ``apply`` as a watch's listing would, a page at a time;
    the loop's other tasks run between pages."""
    async for page in list_pages(client, path):
        for item in page.items:
            apply(None, item)
        await asyncio.sleep(0)
