"""GangScheduling: a PodGroup's pods wait at PreEnqueue until the group can start.

Go's ``gangscheduling.go`` (``preEnqueueHierarchiesDisabled``): a pod of a group waits,
with no condition or Event, while its PodGroup is missing or, for a gang, while fewer
of the group's pods exist than ``minCount``. Its queueing hint wakes the group's pods
when a member arrives or the PodGroup is added or changed. The pod-group cycle that
then places the members together is the scheduler's own, as ``schedule_one_podgroup.go``
is Go's, not the plugin's.
"""

from __future__ import annotations

from podium.framework.extension import (
    ALLOW,
    Handle,
    PreEnqueuePlugin,
    QueueingHintPlugin,
    Status,
)
from podium.framework.plugin import ClusterEvent
from podium.framework.podgroup import waiting_reason
from podium.kube.objects import PodInfo
from podium.state.podgroups import POD_GROUPS

NAME = "GangScheduling"


class GangScheduling(PreEnqueuePlugin, QueueingHintPlugin):
    name = NAME
    description = "Holds a PodGroup's pods back until the group exists and can meet minCount."

    def pre_enqueue(self, handle: Handle, pod: PodInfo) -> Status:
        """PreEnqueue: Go's Status message while the group cannot start, else Success.
        Pods outside a group, or any pod while the Workload API is not served, pass."""
        groups = handle.pod_groups
        if not pod.pod_group or groups is None:
            return ALLOW
        key = pod.group_key
        reason = waiting_reason(groups.get(key), pod.pod_group, handle.pod_group_size(key))
        return Status("Unschedulable", reason) if reason else ALLOW

    def hint(self, handle: Handle, kind: str, key: str) -> None:
        """A new member, or a new or changed PodGroup: the group's pods may start now."""
        if kind == POD_GROUPS:
            handle.wake(handle.pod_group_members(key), NAME, ClusterEvent.POD_GROUP)
