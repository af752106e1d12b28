"""A pod as the scheduling queue holds it: Go's QueuedPodInfo, plain data.

Below the queue, so that the cycles that read an entry (the pod-group placement, the
offline tools) need not import the running scheduler.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from podium.kube.objects import PodInfo

if TYPE_CHECKING:
    from podium.tracing import AttemptTrace

__all__ = ["QueuedPod", "Where"]

Where = Literal["active", "backoff", "unschedulable", "gated", "in_flight"]


@dataclass(slots=True)
class QueuedPod:
    pod: PodInfo
    attempts: int = 0
    # When the queue last took the pod in: first seen, or back after an attempt (Go's
    # Timestamp); a pod group's members are tried in its order among equals.
    added: float = field(default_factory=time.monotonic)
    first_attempt: float = 0.0
    last_failure: float = 0.0
    cycle: int = 0
    rejected_by: frozenset[str] = frozenset()
    error: bool = False
    where: Where = "active"
    # A newer copy of the pod that arrived while this one was in flight.
    pending_update: PodInfo | None = None
    # Moved out of the unschedulable set by the periodic flush, not by an event.
    flushed: bool = False
    # The attempt's open span while tracing samples it (podium.tracing), else None.
    trace: AttemptTrace | None = None
