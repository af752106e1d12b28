"""A Permit plugin for Podium: a pod binds only once the ConfigMap ``podium-gate`` in its
namespace has ``data.go: "true"``, e.g. while a maintenance window is open.

Permit answers Wait; a poller started through the handle reads the ConfigMap and allows
the pod when the gate opens. A pod still waiting after ``timeoutSeconds`` is rejected
by the scheduler with kube-scheduler's message and tried again later.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from podium.api import Handle, PermitPlugin, PodInfo, Status

__all__ = ["GATE", "ConfigMapGate", "gate_open"]

GATE = "podium-gate"


def gate_open(configmap: Mapping[str, Any] | None) -> bool:
    """Whether the gate's ConfigMap says go; a missing one keeps pods waiting."""
    data = (configmap or {}).get("data") or {}
    return str(data.get("go", "")).lower() == "true"


class ConfigMapGate(PermitPlugin):
    name = "example.com/ConfigMapGate"
    description = 'Holds pods at Permit until ConfigMap podium-gate says go: "true".'

    @property
    def timeout(self) -> float:
        return float(self.args.get("timeoutSeconds", 300))

    @property
    def interval(self) -> float:
        return float(self.args.get("intervalSeconds", 0.5))

    def permit(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        handle.spawn(self._watch(handle, pod))
        return Status("Wait", timeout=self.timeout)

    async def _watch(self, handle: Handle, pod: PodInfo) -> None:
        path = f"/api/v1/namespaces/{pod.namespace}/configmaps/{GATE}"
        while handle.is_waiting(pod.uid):
            try:
                configmap = await handle.client.get(path)
            except Exception:  # absent (404) or unreadable: the gate stays shut
                configmap = None
            if gate_open(configmap):
                handle.allow(pod.uid, self.name)
                return
            await asyncio.sleep(self.interval)
