"""`podium demo`: a local control plane, a few nodes and pods, and Podium binding them live.

Every binding printed here is read back from the API server's watch; the
demo never reports a placement the server has not recorded.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any, cast

from kubernetes_asyncio import client, watch

from podium.devcluster import ControlPlane, ensure_binaries
from podium.devcluster.objects import create_nodes
from podium.logs import configure_logging
from podium.manifests import make_node, make_pod
from podium.runtime import RunOptions, run_operator

__all__ = ["run_demo"]

NAMESPACE = "podium-demo"


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

        stop = asyncio.Event()
        operator = asyncio.create_task(
            run_operator(RunOptions(kubeconfig=str(plane.kubeconfig)), stop)
        )
        # One pod too large for any node shows the "why Pending" message.
        bodies = [make_pod(f"web-{i}", cpu="500m", memory="1Gi") for i in range(pods)]
        bodies.append(make_pod("too-big", cpu="16", memory="1Gi"))
        for body in bodies:
            await core.create_namespaced_pod(NAMESPACE, cast(Any, body))
        print(f"created {len(bodies)} pods with schedulerName=podium", flush=True)

        bound: dict[str, str] = {}
        explained = False
        started = time.monotonic()
        stream = watch.Watch()
        try:
            async with asyncio.timeout(60):
                async for event in stream.stream(
                    core.list_namespaced_pod, NAMESPACE, _preload_content=False
                ):
                    pod: dict[str, Any] = event["raw_object"]
                    name = pod["metadata"]["name"]
                    node = pod["spec"].get("nodeName")
                    if node and name not in bound:
                        bound[name] = node
                        print(
                            f"  bound {NAMESPACE}/{name} -> {node} "
                            f"({time.monotonic() - started:.2f}s)",
                            flush=True,
                        )
                    for cond in pod["status"].get("conditions") or []:
                        if cond.get("reason") == "Unschedulable" and not explained:
                            print(f"  pending {NAMESPACE}/{name}: {cond['message']}", flush=True)
                            explained = True
                    if len(bound) >= pods and explained:
                        break
        except TimeoutError:
            print("timed out waiting for bindings", flush=True)
        finally:
            await stream.close()
            stop.set()
            with contextlib.suppress(BaseException):
                await operator
            await api.close()
        print(
            f"{len(bound)}/{pods} pods bound by Podium, as recorded by the API server", flush=True
        )
        return 0 if len(bound) == pods else 1


def run_demo(nodes: int = 3, pods: int = 12) -> int:
    configure_logging("console", "INFO")
    return asyncio.run(_demo(nodes, pods))
