"""The extension points after Score, for any plugin: Reserve, Permit, PreBind, PostBind.

kube-scheduler's interfaces (``k8s.io/kube-scheduler/framework/interface.go``) with
Python's shape: Reserve and Permit run in the scheduling cycle and answer at once;
Permit may answer Wait, and the binding cycle then holds the pod until a plugin allows
or rejects it through the ``Handle`` or the wait times out (``WaitOnPermit``); PreBind
and PostBind run in the binding cycle and may await the API. A plugin class implements
any of them and is enabled by a SchedulerPolicy's ``extensions`` (``docs/plugins.md``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from podium.framework.plugin import Plugin

if TYPE_CHECKING:
    from podium.kube.objects import PodInfo

__all__ = [
    "ALLOW",
    "SKIP",
    "ApiClient",
    "Handle",
    "PermitPlugin",
    "PostBindPlugin",
    "PreBindPlugin",
    "ReservePlugin",
    "Status",
]

Code = Literal["Success", "Unschedulable", "Error", "Wait", "Skip"]
# Go's maxTimeout for a Permit wait (framework/runtime/framework.go).
MAX_PERMIT_WAIT = 15 * 60.0


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer at these points: Go's Status with the codes they use.

    Unschedulable rejects the pod (it is retried after a cluster event or backoff);
    Error is a failure of the plugin itself; Wait (Permit only) holds the pod for at
    most ``timeout`` seconds; Skip (PreBindPreFlight only) says PreBind has nothing to do.
    """

    code: Code = "Success"
    reason: str = ""
    timeout: float = 0.0

    @property
    def ok(self) -> bool:
        return self.code == "Success"


ALLOW = Status()
SKIP = Status("Skip")


class ApiClient(Protocol):
    """The API calls a plugin may make (Go's ``Handle.ClientSet()``): Podium's client,
    with its credentials, rate budgets and retries."""

    async def get(
        self, path: str, params: dict[str, str] | None = None, accept: str | None = None
    ) -> Any: ...

    async def post(self, path: str, body: Any) -> Any: ...

    async def patch(self, path: str, body: Any, kind: str = "strategic-merge-patch") -> Any: ...

    async def delete(self, path: str, body: Any = None) -> Any: ...


class Handle(Protocol):
    """What a plugin may use of the running scheduler: Go's ``framework.Handle``, narrowed
    to the API client, the waiting pods and the plugin's own background work."""

    @property
    def client(self) -> ApiClient: ...

    def allow(self, uid: str, plugin: str) -> None:
        """Let a pod waiting at Permit go on, as far as ``plugin`` is concerned."""

    def reject(self, uid: str, plugin: str, reason: str) -> None:
        """Reject a pod waiting at Permit."""

    def is_waiting(self, uid: str) -> bool:
        """Whether the pod still waits at Permit (a plugin's poller stops when it does not)."""

    def spawn(self, work: Coroutine[Any, Any, object]) -> None:
        """Run ``work`` beside the scheduler; it is cancelled when the scheduler stops."""


class ReservePlugin(Plugin):
    """Reserve and Unreserve: the pod is assumed on ``node`` in the scheduler's cache.

    A rejection fails the attempt; Unreserve then runs for every Reserve plugin, in
    reverse order, as it does whenever a later point fails (Go's RunReservePluginsUnreserve).
    """

    @abstractmethod
    def reserve(self, handle: Handle, pod: PodInfo, node: str) -> Status: ...

    def unreserve(self, handle: Handle, pod: PodInfo, node: str) -> None:
        return None


class PermitPlugin(Plugin):
    """Permit: Success binds, Unschedulable rejects, Wait holds the pod until the plugin
    calls ``handle.allow`` or ``handle.reject`` for it, or the wait times out."""

    @abstractmethod
    def permit(self, handle: Handle, pod: PodInfo, node: str) -> Status: ...


class PreBindPlugin(Plugin):
    """PreBind: work that must be done before the Binding (a volume, a label).

    ``pre_bind_pre_flight`` (Go's PreBindPreFlight) runs first in the binding cycle and
    says whether PreBind will do work for the pod: Success (the default) or Skip. When
    some plugin answers Success, the pod's ``status.nominatedNodeName`` is written before
    PreBind runs, so that autoscalers see where the pod goes; Error fails the attempt.
    """

    def pre_bind_pre_flight(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        return ALLOW

    @abstractmethod
    async def pre_bind(self, handle: Handle, pod: PodInfo, node: str) -> Status: ...


class PostBindPlugin(Plugin):
    """PostBind: informational, after the Binding succeeded; it cannot fail the pod."""

    @abstractmethod
    async def post_bind(self, handle: Handle, pod: PodInfo, node: str) -> None: ...
