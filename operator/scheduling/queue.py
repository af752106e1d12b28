"""The scheduling queue: activeQ, backoffQ, unschedulable pods, and the gated set.

Modelled on kube-scheduler's PriorityQueue. Every pod the scheduler knows to
be pending lives in exactly one place, and every path out of a scheduling
attempt leads back into the queue (``requeue``) or out of it because the pod
was bound or deleted (``done``/``delete``). That is the invariant whose
absence caused kube-scheduler #49314.

- activeQ: higher ``spec.priority`` first, then earlier creation.
- backoffQ: pods whose last attempt failed, released after 1s, 2s, 4s ... up
  to the maximum.
- unschedulable: pods no node fits; they move back when a cluster event that
  one of their rejecting plugins cares about arrives, or after the leftover
  flush interval as a safety net.
- gated: pods a PreEnqueue plugin holds back (scheduling gates, a missing
  PodGroup, ...). PreEnqueue runs as a pod enters activeQ or backoffQ (Go's
  moveToActiveQ and moveToBackoffQ); a held pod spends no cycle until an update
  or its plugin's queueing hint lets PreEnqueue run again.

An event that arrives while a pod is being scheduled is remembered through
the move-request cycle, so a pod that then fails goes to backoffQ instead of
waiting for an event that has already passed (kube-scheduler #72925).
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from podium.framework.plugin import ClusterEvent
from podium.framework.queued import QueuedPod, Where
from podium.kube.objects import PodInfo, requirements_changed
from podium.metrics import Metrics

__all__ = ["QueueSettings", "SchedulingQueue", "event_label"]


# kube-scheduler's ClusterEvent.Label() (Resource + ActionType) for each of Podium's
# coarser events; the label of a combined event is that of its first member.
_EVENT_LABELS: dict[ClusterEvent, str] = {
    ClusterEvent.NODE_ADD: "NodeAdd",
    ClusterEvent.NODE_DELETE: "NodeDelete",
    ClusterEvent.NODE_ALLOCATABLE: "NodeUpdateNodeAllocatable",
    ClusterEvent.NODE_LABEL: "NodeUpdateNodeLabel",
    ClusterEvent.NODE_TAINT: "NodeUpdateNodeTaint",
    ClusterEvent.NODE_CONDITION: "NodeUpdateNodeCondition",
    ClusterEvent.NODE_IMAGES: "NodeUpdate",
    ClusterEvent.NODE_DECLARED_FEATURES: "NodeUpdateNodeDeclaredFeature",
    ClusterEvent.ASSIGNED_POD_ADD: "AssignedPodAdd",
    ClusterEvent.ASSIGNED_POD_UPDATE: "AssignedPodUpdate",
    ClusterEvent.ASSIGNED_POD_DELETE: "AssignedPodDelete",
    ClusterEvent.ASSIGNED_POD_SCALE_DOWN: "AssignedPodUpdatePodScaleDown",
    ClusterEvent.VOLUME: "PersistentVolumeClaimUpdate",
    ClusterEvent.POLICY: "ForceActivate",
    ClusterEvent.RESOURCE_SLICE: "ResourceSliceUpdate",
    ClusterEvent.DEVICE_CLASS: "DeviceClassUpdate",
    ClusterEvent.RESOURCE_CLAIM: "ResourceClaimUpdate",
    ClusterEvent.POD_GROUP: "PodGroupAdd",
}
# The queue's own moves, as kube-scheduler labels them (framework/events.go).
POD_ADD = "UnscheduledPodAdd"
POD_UPDATE = "UnscheduledPodUpdate"
ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
GATES_REMOVED = "UnscheduledPodUpdatePodSchedulingGatesEliminated"

# The profile's PreEnqueue for a pod about to enter activeQ or backoffQ: the name of the
# plugin that holds it back, or None to let it in (Go's runPreEnqueuePlugins).
PreEnqueue = Callable[[PodInfo], str | None]


def _admit_all(pod: PodInfo) -> str | None:
    return None


def event_label(event: ClusterEvent) -> str:
    """The ``event`` label of scheduler_queue_incoming_pods_total for a cluster event."""
    for member in event:
        return _EVENT_LABELS[member]
    return "Unknown"


@dataclass(slots=True)
class QueueSettings:
    initial_backoff: float = 1.0
    max_backoff: float = 10.0
    unschedulable_flush: float = 300.0
    flush_period: float = 30.0


class SchedulingQueue:
    def __init__(
        self,
        settings: QueueSettings | None = None,
        clock: Callable[[], float] = time.monotonic,
        metrics: Metrics | None = None,
        pre_enqueue: PreEnqueue = _admit_all,
    ) -> None:
        self.settings = settings or QueueSettings()
        self.pre_enqueue = pre_enqueue
        # scheduler_queue_incoming_pods_total: every move into a queue, by its cause.
        self.metrics = metrics
        # Backoff and flush per schedulerName, from each profile; others use ``settings``.
        self.profile_settings: dict[str, QueueSettings] = {}
        self.clock = clock
        self.entries: dict[str, QueuedPod] = {}
        # The unschedulable entries, so that cluster events and flushes scan only those.
        self._unschedulable: dict[str, QueuedPod] = {}
        self._active: list[tuple[int, float, int, str]] = []
        self._backoff: list[tuple[float, int, str]] = []
        self._seq = itertools.count()
        self._wakeup = asyncio.Event()
        self._backoff_changed = asyncio.Event()
        self.scheduling_cycle = 0
        self.move_request_cycle = -1
        self.interest: dict[str, ClusterEvent] = {}
        self.closed = False

    # -- counts ----------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        out = {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0, "in_flight": 0}
        for entry in self.entries.values():
            out[entry.where] += 1
        return out

    def rejections(self) -> Counter[tuple[str, str]]:
        """scheduler_unschedulable_pods by (plugin, schedulerName): every waiting pod counts
        once for each plugin that rejected it in its last attempt, a gated pod for the
        PreEnqueue plugin that holds it (Go increments on AddUnschedulableIfNotPresent and
        PreEnqueue, decrements on Pop and delete)."""
        out: Counter[tuple[str, str]] = Counter()
        for entry in self.entries.values():
            if entry.where == "in_flight":
                continue
            for plugin in entry.rejected_by:
                out[plugin, entry.pod.scheduler_name] += 1
        return out

    def __len__(self) -> int:
        return len(self.entries)

    def ready(self) -> bool:
        """Whether a pod may be waiting in activeQ (stale heap entries count): O(1)."""
        return bool(self._active)

    def __contains__(self, uid: object) -> bool:
        return uid in self.entries

    # -- placement ---------------------------------------------------------------
    def _set_where(self, entry: QueuedPod, where: Where, event: str = "") -> None:
        """Move ``entry``; ``event`` (kube-scheduler's label) counts the move as a pod
        entering ``where`` (recordIncomingEntitiesMetrics)."""
        if event and self.metrics is not None:
            # Go keeps gated pods among the unschedulable ones (PreEnqueue rejected them).
            queue = "unschedulable" if where == "gated" else where
            self.metrics.queue_incoming.labels(queue, event).inc()
        if entry.where == "unschedulable":
            self._unschedulable.pop(entry.pod.uid, None)
        entry.where = where
        if where == "unschedulable":
            self._unschedulable[entry.pod.uid] = entry

    def _held(self, entry: QueuedPod, event: str) -> bool:
        """Run PreEnqueue on a pod about to enter activeQ or backoffQ; one it turns away
        is gated under the plugin's name instead, and counted as entering the
        unschedulable pods if it was not gated already (moveToActiveQ)."""
        plugin = self.pre_enqueue(entry.pod)
        if plugin is None:
            if entry.where == "gated":
                entry.rejected_by = frozenset()  # held back, not rejected by a cycle
            return False
        entry.rejected_by = frozenset({plugin})
        if entry.where != "gated":
            self._set_where(entry, "gated", event)
        return True

    def _push_active(self, entry: QueuedPod, event: str) -> None:
        if not self._held(entry, event):
            self._enter_active(entry, event)

    def _enter_active(self, entry: QueuedPod, event: str) -> None:
        """Into activeQ, PreEnqueue passed; from backoffQ with no second run, as Go's
        moveToBackoffQ runs it on the way in."""
        self._set_where(entry, "active", event)
        pod = entry.pod
        heapq.heappush(self._active, (-pod.priority, pod.created, next(self._seq), pod.uid))
        self._wakeup.set()

    def settings_for(self, pod: PodInfo) -> QueueSettings:
        return self.profile_settings.get(pod.scheduler_name, self.settings)

    def backoff_duration(self, pod: PodInfo, attempts: int) -> float:
        settings = self.settings_for(pod)
        duration = settings.initial_backoff
        for _ in range(1, attempts):
            duration *= 2
            if duration >= settings.max_backoff:
                return settings.max_backoff
        return min(duration, settings.max_backoff)

    def _push_backoff(self, entry: QueuedPod, event: str) -> None:
        if self._held(entry, event):
            return
        expiry = entry.last_failure + self.backoff_duration(entry.pod, entry.attempts)
        if expiry <= self.clock():
            self._enter_active(entry, event)
            return
        self._set_where(entry, "backoff", event)
        heapq.heappush(self._backoff, (expiry, next(self._seq), entry.pod.uid))
        self._backoff_changed.set()

    def _place(self, entry: QueuedPod) -> None:
        if entry.attempts == 0:
            self._push_active(entry, POD_ADD)
        else:
            self._push_backoff(entry, POD_ADD)

    # -- pod events ----------------------------------------------------------------
    def add(self, pod: PodInfo) -> None:
        """A pending pod was seen (new, or updated) by the watch."""
        entry = self.entries.get(pod.uid)
        if entry is None:
            entry = self.entries[pod.uid] = QueuedPod(pod, added=self.clock())
            self._place(entry)
            return
        if entry.where == "in_flight":
            entry.pending_update = pod
            return
        ungated = bool(entry.pod.scheduling_gates) and not pod.scheduling_gates
        changed = requirements_changed(entry.pod, pod)
        entry.pod = pod
        if entry.where == "gated":
            # The update may be what the holding plugin waits for (the last gate removed,
            # a generated claim's name in the status): PreEnqueue runs again, no pop.
            self._push_active(entry, GATES_REMOVED if ungated else POD_UPDATE)
        elif entry.where == "unschedulable" and changed:
            # An update to the pod itself may make it fit (UpdatePodToleration, ...).
            self._push_backoff(entry, POD_UPDATE)

    def delete(self, uid: str) -> None:
        """The pod was deleted, bound elsewhere, or no longer asks for this scheduler."""
        entry = self.entries.pop(uid, None)
        if entry is not None:
            self._set_where(entry, "gated")  # heap entries for it are skipped from now on

    # -- the scheduling loop ------------------------------------------------------------
    async def pop(self) -> QueuedPod:
        while True:
            while self._active:
                _, _, _, uid = heapq.heappop(self._active)
                entry = self.entries.get(uid)
                if entry is None or entry.where != "active":
                    continue
                self.scheduling_cycle += 1
                entry.cycle = self.scheduling_cycle
                self._set_where(entry, "in_flight")
                entry.attempts += 1
                if entry.first_attempt == 0.0:
                    entry.first_attempt = self.clock()
                return entry
            if self.closed:
                raise asyncio.CancelledError
            self._wakeup.clear()
            await self._wakeup.wait()

    def take(self, uid: str) -> QueuedPod | None:
        """Claim a waiting pod for a pod-group cycle, as ``pop`` would; None if it is not
        waiting (in flight, gated, or gone)."""
        entry = self.entries.get(uid)
        if entry is None or entry.where not in ("active", "backoff", "unschedulable"):
            return None
        entry.cycle = self.scheduling_cycle
        self._set_where(entry, "in_flight")  # heap entries for it are skipped from now on
        entry.attempts += 1
        if entry.first_attempt == 0.0:
            entry.first_attempt = self.clock()
        return entry

    def requeue(
        self, entry: QueuedPod, rejected_by: frozenset[str] = frozenset(), error: bool = False
    ) -> None:
        """Return a pod after a failed attempt: backoffQ, or unschedulable until an event."""
        if self.entries.get(entry.pod.uid) is not entry:
            return  # deleted while in flight
        if entry.pending_update is not None:
            entry.pod, entry.pending_update = entry.pending_update, None
        entry.rejected_by = rejected_by
        entry.error = error
        entry.flushed = False
        entry.last_failure = self.clock()
        entry.added = entry.last_failure  # Go refreshes the Timestamp as the pod is re-added
        if error or not rejected_by or self.move_request_cycle >= entry.cycle:
            self._push_backoff(entry, ATTEMPT_FAILURE)
        else:
            self._set_where(entry, "unschedulable", ATTEMPT_FAILURE)

    def activate(self, uids: Iterable[str]) -> None:
        """Activate: pods waiting in the unschedulable pool or backoffQ go to activeQ now.
        kube-scheduler does this for a preemptor whose victims could not all be preempted:
        no victim's deletion may come to move it otherwise."""
        for uid in uids:
            entry = self.entries.get(uid)
            if entry is not None and entry.where in ("unschedulable", "backoff"):
                self._push_active(entry, "ForceActivate")

    def hint(
        self,
        uids: Iterable[str],
        plugin: str,
        event: ClusterEvent,
    ) -> None:
        """An event that concerns only these pods (a queueing hint): those ``plugin`` held
        back at PreEnqueue go to activeQ (PreEnqueue runs again), those it rejected in a
        cycle to backoffQ. ``event`` labels the move (plugins' hints through
        ``Handle.wake``)."""
        for uid in uids:
            entry = self.entries.get(uid)
            if entry is None or plugin not in entry.rejected_by:
                continue
            if entry.where == "gated":
                self._push_active(entry, event_label(event))
            elif entry.where == "unschedulable":
                self._push_backoff(entry, event_label(event))

    def done(self, uid: str) -> None:
        """The pod was bound (or assumed and handed to the binder)."""
        entry = self.entries.pop(uid, None)
        if entry is not None:
            self._set_where(entry, "gated")  # heap entries for it are skipped from now on

    # -- cluster events -------------------------------------------------------------------
    def on_event(self, event: ClusterEvent) -> int:
        """Move unschedulable pods whose rejecting plugins care about ``event``."""
        self.move_request_cycle = self.scheduling_cycle
        moved = 0
        label = event_label(event)
        for entry in list(self._unschedulable.values()):
            if any(self.interest.get(p, ClusterEvent(0)) & event for p in entry.rejected_by):
                self._push_backoff(entry, label)
                moved += 1
        return moved

    def flush_backoff(self) -> float | None:
        """Release expired backoffs; returns seconds until the next expiry."""
        now = self.clock()
        while self._backoff:
            expiry, _, uid = self._backoff[0]
            entry = self.entries.get(uid)
            if entry is None or entry.where != "backoff":
                heapq.heappop(self._backoff)
                continue
            if expiry > now:
                return expiry - now
            heapq.heappop(self._backoff)
            self._enter_active(entry, BACKOFF_COMPLETE)
        return None

    def flush_unschedulable(self) -> int:
        """Safety net: pods unschedulable for longer than the flush interval get another try."""
        now = self.clock()
        moved = 0
        for entry in list(self._unschedulable.values()):
            if now - entry.last_failure >= self.settings_for(entry.pod).unschedulable_flush:
                entry.flushed = True
                self._push_backoff(entry, UNSCHEDULABLE_TIMEOUT)
                moved += 1
        return moved

    async def run_timers(self) -> None:
        """Background task: backoff expiry and the periodic unschedulable flush."""
        next_flush = self.clock() + self.settings.flush_period
        while not self.closed:
            wait = self.flush_backoff()
            until_flush = next_flush - self.clock()
            if until_flush <= 0:
                self.flush_unschedulable()
                next_flush = self.clock() + self.settings.flush_period
                continue
            timeout = until_flush if wait is None else min(wait, until_flush)
            self._backoff_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._backoff_changed.wait(), timeout=max(timeout, 0.001))

    def close(self) -> None:
        self.closed = True
        self._wakeup.set()
        self._backoff_changed.set()
