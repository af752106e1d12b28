"""What each cached pod and node costs, per 1,000, and what the imports cost.

``python -m bench.memory`` feeds N bound pods and N nodes through the real
handlers (``PodiumScheduler.on_node`` / ``on_pod``, as a watch event does) and
reports the Python heap they keep (tracemalloc), per 1,000 objects. The bodies
are the benchmark's own manifests (``podium.kube.manifests``) with what the API
server adds on create and bind: uid, resourceVersion, timestamps, managedFields
of the create, the binding and the status update, the defaulted spec fields and
a PodScheduled condition; nodes carry the status a kubelet (or kwok) reports.
``--imports`` reports instead the heap and RSS that importing ``podium run``'s
modules costs, with the imports ``run`` blocks (``podium.cli.block_unused_imports``)
blocked and, for comparison, with kubernetes_asyncio's client loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import resource
import subprocess
import sys
import tracemalloc
from typing import Any

import orjson

from podium.kube.manifests import make_node, make_pod

__all__ = ["node_body", "pod_body"]

_TIME = "2026-12-04T10:00:00Z"


def _managed(manager: str, operation: str, fields: dict[str, Any], sub: str = "") -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": "v1",
        "time": _TIME,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }
    if sub:
        entry["subresource"] = sub
    return entry


def pod_body(index: int, node: str) -> dict[str, Any]:
    """A bound pause pod as a watch event carries it."""
    body = make_pod(
        f"pod-{index:06d}",
        cpu="100m",
        memory="500Mi",
        scheduler_name="podium",
        labels={"podium.dev/bench": "true", "podium.dev/run": "r1", "podium.dev/role": "measured"},
    )
    meta = body["metadata"]
    meta.update(
        namespace="bench",
        uid=f"00000000-0000-4000-8000-{index:012d}",
        resourceVersion=str(100_000 + index),
        creationTimestamp=_TIME,
        managedFields=[
            _managed(
                "python",
                "Update",
                {
                    "f:metadata": {"f:labels": {f"f:{k}": {} for k in meta["labels"]}},
                    "f:spec": {
                        "f:containers": {
                            'k:{"name":"pause"}': {
                                ".": {},
                                "f:image": {},
                                "f:imagePullPolicy": {},
                                "f:name": {},
                                "f:resources": {"f:requests": {"f:cpu": {}, "f:memory": {}}},
                                "f:terminationMessagePath": {},
                                "f:terminationMessagePolicy": {},
                            }
                        },
                        "f:dnsPolicy": {},
                        "f:enableServiceLinks": {},
                        "f:restartPolicy": {},
                        "f:schedulerName": {},
                        "f:securityContext": {},
                        "f:terminationGracePeriodSeconds": {},
                    },
                },
            ),
            _managed(
                "podium",
                "Update",
                {"f:status": {"f:conditions": {'k:{"type":"PodScheduled"}': {".": {}}}}},
                "status",
            ),
        ],
    )
    spec = body["spec"]
    spec.update(
        nodeName=node,
        restartPolicy="Always",
        terminationGracePeriodSeconds=30,
        dnsPolicy="ClusterFirst",
        securityContext={},
        priority=0,
        enableServiceLinks=True,
        preemptionPolicy="PreemptLowerPriority",
    )
    for container in spec["containers"]:
        container.update(
            terminationMessagePath="/dev/termination-log",
            terminationMessagePolicy="File",
            imagePullPolicy="IfNotPresent",
        )
    body["status"] = {
        "phase": "Pending",
        "conditions": [
            {
                "type": "PodScheduled",
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": _TIME,
            }
        ],
        "qosClass": "Burstable",
    }
    return body


def node_body(index: int) -> dict[str, Any]:
    """A Ready node as the benchmark creates it, with the status it reports."""
    body = make_node(
        f"node-{index:06d}",
        cpu="4",
        memory="32Gi",
        pods=110,
        labels={"podium.dev/bench": "true", "topology.kubernetes.io/zone": f"zone-{index % 3}"},
    )
    meta = body["metadata"]
    meta.update(
        uid=f"10000000-0000-4000-8000-{index:012d}",
        resourceVersion=str(index + 1),
        creationTimestamp=_TIME,
        managedFields=[
            _managed(
                "python",
                "Update",
                {"f:metadata": {"f:labels": {f"f:{k}": {} for k in meta["labels"]}}},
            ),
            _managed("python", "Update", {"f:status": {"f:allocatable": {}}}, "status"),
        ],
    )
    return body


def _cached(nodes: int, pods: int) -> float:
    """Bytes the scheduler keeps for ``nodes`` nodes and ``pods`` bound pods."""
    from podium.metrics import Metrics
    from podium.policy import default_profile
    from podium.scheduling.binder import Binder
    from podium.scheduling.scheduler import PodiumScheduler

    # Serialised first: each event's objects are decoded under tracing, as a watch does.
    node_bodies = [orjson.dumps(node_body(i)) for i in range(nodes)]
    pod_bodies = [orjson.dumps(pod_body(i, f"node-{i % max(nodes, 1):06d}")) for i in range(pods)]

    async def build() -> tuple[PodiumScheduler, int, int]:
        scheduler = PodiumScheduler(
            Binder(None, "memory"),  # type: ignore[arg-type]
            {"podium": default_profile("podium")},
            Metrics(),
        )
        gc.collect()
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
        for raw in node_bodies:
            scheduler.on_node("ADDED", orjson.loads(raw))
        middle = tracemalloc.get_traced_memory()[0]
        for raw in pod_bodies:
            scheduler.on_pod("ADDED", orjson.loads(raw))
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        return scheduler, middle - before, after - middle

    _, node_bytes, pod_bytes = asyncio.run(build())
    print(
        f"{nodes} nodes: {node_bytes / 1024 / 1024 * 1000 / max(nodes, 1):.2f} MiB per 1,000; "
        f"{pods} pods: {pod_bytes / 1024 / 1024 * 1000 / max(pods, 1):.2f} MiB per 1,000"
    )
    return node_bytes + pod_bytes


_IMPORTS = (
    "import sys, tracemalloc; {trace}{setup}; import {modules}; "
    "heap = tracemalloc.get_traced_memory()[0]; "
    "rss = int(next(l for l in open('/proc/self/status') if l.startswith('VmHWM')).split()[1]); "
    "print(f'{{heap / 2**20:.1f}} {{rss / 1024:.1f}} "
    '{{sys.modules.get("kubernetes_asyncio") is not None}} {{"celpy" in sys.modules}}\')'
)

_BLOCKED = "from podium.cli import block_unused_imports; block_unused_imports()"


def _measure(setup: str, modules: str, trace: bool) -> list[str]:
    code = _IMPORTS.format(
        trace="tracemalloc.start(); " if trace else "", setup=setup or "pass", modules=modules
    )
    return subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.split()


def _imports() -> None:
    """Heap and peak RSS of a fresh interpreter after importing what ``podium run`` imports.

    The heap comes from a run under tracemalloc, the RSS from one without it (tracing
    roughly doubles the memory of what it traces). The RSS is VmHWM, not ru_maxrss: a
    child inherits its parent's ru_maxrss across fork and exec, which would hide
    anything smaller than this process.
    """
    for label, setup, modules in (
        ("podium run (wiring, kopf, aiohttp)", _BLOCKED, "podium.runtime.wiring"),
        (
            "podium run without block_unused_imports (kubernetes_asyncio, rich)",
            "",
            "podium.runtime.wiring, podium.cli, kubernetes_asyncio.client",
        ),
        ("credentials only", "", "podium.kube.credentials"),
        ("DRA CEL, once a selector is compiled", "", "celpy, lark"),
    ):
        heap = _measure(setup, modules, trace=True)[0]
        _, rss, k8s, cel = _measure(setup, modules, trace=False)
        print(
            f"{label}: {heap} MiB heap, {rss} MiB peak RSS; kubernetes_asyncio: {k8s}, celpy: {cel}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.memory", description=__doc__)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pods", type=int, default=10000)
    parser.add_argument("--imports", action="store_true", help="measure import memory instead")
    args = parser.parse_args(argv)
    if args.imports:
        _imports()
    else:
        _cached(args.nodes, args.pods)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"peak RSS {peak:.0f} MiB (bodies, parsed objects and tracemalloc's own records)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
