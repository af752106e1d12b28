"""SchedulingGates: a pod with ``spec.schedulingGates`` waits at PreEnqueue, with no
attempt, condition or Event, until its last gate is removed.

Go's ``schedulinggates/scheduling_gates.go``. The queue runs PreEnqueue as a pod enters
activeQ or backoffQ (``SchedulingQueue``), so a gated pod is held there and counts under
this plugin in ``scheduler_unschedulable_pods``. Removing the last gate is a pod update
(UpdatePodSchedulingGatesEliminated), and the queue runs PreEnqueue again on it.
"""

from __future__ import annotations

from podium.framework.extension import ALLOW, Handle, PreEnqueuePlugin, Status
from podium.kube.objects import PodInfo

NAME = "SchedulingGates"


class SchedulingGates(PreEnqueuePlugin):
    name = NAME
    description = "Holds a pod back while it has scheduling gates."

    def pre_enqueue(self, handle: Handle, pod: PodInfo) -> Status:
        """PreEnqueue: Go's message, "waiting for scheduling gates: [a b]", while any
        gate is left."""
        if not pod.scheduling_gates:
            return ALLOW
        names = " ".join(pod.scheduling_gates)
        return Status("Unschedulable", f"waiting for scheduling gates: [{names}]")
