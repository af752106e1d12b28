"""`make demo`: a local control plane, a few nodes and pods, and Podium binding them live.

Run as ``python -m podium.devcluster demo``.

Podium's decisions print as one line each. The closing count is read back
from the API server's watch: the demo never claims a binding the server has
not recorded. The SchedulerPolicy CRD and a default policy are installed
first, as the Helm chart does, so Podium serves the policy it would serve in
a cluster.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client import ApiClient

from podium.devcluster import ControlPlane, ensure_binaries
from podium.devcluster.objects import create_nodes, wait_for
from podium.kube.manifests import make_node, make_pod
from podium.policy import GROUP, PLURAL, VERSION
from podium.runtime.logs import configure_logging
from podium.runtime.wiring import RunOptions, run_operator

__all__ = ["run_demo"]

NAMESPACE = "podium-demo"
CRD = Path(__file__).resolve().parents[2] / "charts" / "podium" / "crds" / f"{PLURAL}.{GROUP}.yaml"
# The chart's default policy: Active, every other field the CRD's default.
POLICY = {
    "apiVersion": f"{GROUP}/{VERSION}",
    "kind": "SchedulerPolicy",
    "metadata": {"name": "podium"},
    "spec": {"schedulerName": "podium", "mode": "Active"},
}


async def _install_policy(api: ApiClient) -> None:
    """The CRD from the chart, once established, and the default SchedulerPolicy."""
    ext = client.ApiextensionsV1Api(api)
    crd = yaml.safe_load(CRD.read_text())
    await ext.create_custom_resource_definition(crd)

    async def established() -> bool:
        read = await ext.read_custom_resource_definition(crd["metadata"]["name"])
        conditions = (read.status and read.status.conditions) or []
        return any(c.type == "Established" and c.status == "True" for c in conditions)

    await wait_for(established, timeout=30, interval=0.1, message="the CRD established")
    await client.CustomObjectsApi(api).create_cluster_custom_object(
        GROUP, VERSION, PLURAL, cast(Any, POLICY)
    )


async def _demo(nodes: int, pods: int) -> int:
    binaries = ensure_binaries()
    print("starting etcd and kube-apiserver ...", flush=True)
    async with ControlPlane(binaries) as plane:
        print(f"kube-apiserver ready at {plane.server}", flush=True)
        api = await plane.api_client()
        core = client.CoreV1Api(api)
        zones = ("zone-a", "zone-b", "zone-c")
        await create_nodes(
            api,
            [
                make_node(
                    f"node-{i}",
                    cpu="2",
                    memory="8Gi",
                    labels={"topology.kubernetes.io/zone": zones[i % 3]},
                )
                for i in range(nodes)
            ],
        )
        await core.create_namespace(cast(Any, {"metadata": {"name": NAMESPACE}}))
        print(f"created {nodes} nodes (2 cpu, 8Gi each)", flush=True)
        await _install_policy(api)
        print("installed the SchedulerPolicy CRD and the default policy 'podium'", flush=True)

        stop = asyncio.Event()
        operator = asyncio.create_task(
            run_operator(RunOptions(kubeconfig=str(plane.kubeconfig)), stop)
        )
        # One pod too large for any node shows the "why Pending" message.
        bodies = [make_pod(f"web-{i}", cpu="500m", memory="1Gi") for i in range(pods)]
        bodies.append(make_pod("too-big", cpu="16", memory="1Gi"))
        print(f"creating {len(bodies)} pods with schedulerName=podium; Podium decides:", flush=True)
        for body in bodies:
            await core.create_namespaced_pod(NAMESPACE, cast(Any, body))

        bound: set[str] = set()
        explained = False
        stream = watch.Watch()

        async def record() -> None:
            nonlocal explained
            async for event in stream.stream(
                core.list_namespaced_pod, NAMESPACE, _preload_content=False
            ):
                pod: dict[str, Any] = event["raw_object"]
                if pod["spec"].get("nodeName"):
                    bound.add(pod["metadata"]["name"])
                conditions = pod["status"].get("conditions") or []
                explained |= any(c.get("reason") == "Unschedulable" for c in conditions)
                if len(bound) >= pods and explained:
                    return

        # Until every pod is settled, or Podium stops first (Ctrl+C), or a minute passes.
        watcher = asyncio.create_task(record())
        try:
            done, _ = await asyncio.wait(
                {watcher, operator}, timeout=60, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                print("timed out waiting for bindings", flush=True)
        finally:
            watcher.cancel()
            with contextlib.suppress(BaseException):
                await watcher
            await stream.close()
            stop.set()
            with contextlib.suppress(BaseException):
                await operator
            await api.close()
        print(
            f"{len(bound)}/{pods} pods bound by Podium, as recorded by the API server", flush=True
        )
        if explained:
            print("too-big stays Pending, with PodScheduled=False and the reason", flush=True)
        return 0 if len(bound) == pods else 1


def run_demo(nodes: int = 3, pods: int = 12) -> int:
    if not CRD.is_file():
        print(f"the demo runs from a source checkout: {CRD} is missing", file=sys.stderr)
        return 1
    configure_logging("demo", "INFO")
    return asyncio.run(_demo(nodes, pods))
