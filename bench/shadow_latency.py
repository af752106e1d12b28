"""`python -m bench.shadow_latency`: a live profile's pop-to-bind latency with and without a shadow.

Starts the cached etcd + kube-apiserver, installs the SchedulerPolicy CRD, and
for each mode runs ``python -m podium run`` as its own process with a live
policy (and, in the second mode, a DryRun policy with ``shadowOf`` the live
one). Pods are created at a steady rate, so the queue is often empty and the
shadow gets turns between live pods: the case where it could get in the way.
Latency is each live decision record's ``duration_ms``: from the pop to the
Binding being accepted.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes_asyncio import client

from podium.devcluster import ControlPlane, ensure_binaries
from podium.devcluster.objects import create_nodes
from podium.framework.decision import read_records
from podium.kube.manifests import make_node, make_pod

CRD = Path(__file__).parents[1] / "charts" / "podium" / "crds" / "schedulerpolicies.podium.dev.yaml"
GROUP, VERSION, PLURAL = "podium.dev", "v1alpha1", "schedulerpolicies"


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "SchedulerPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


async def _mode(
    api: client.ApiClient, kubeconfig: Path, tag: str, shadow: bool, pods: int, rate: float
) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    core = client.CoreV1Api(api)
    live = f"live-{tag}"
    names = [live]
    await objects.create_cluster_custom_object(
        GROUP, VERSION, PLURAL, _policy(live, {"schedulerName": live})
    )
    if shadow:
        names.append(f"shadow-{tag}")
        spec = {
            "schedulerName": names[1],
            "mode": "DryRun",
            "shadowOf": live,
            "scores": [{"name": "NodeResourcesFit"}],
            "pluginArgs": {"nodeResourcesFit": {"strategy": "MostAllocated"}},
        }
        await objects.create_cluster_custom_object(GROUP, VERSION, PLURAL, _policy(names[1], spec))
    await core.create_namespace(cast(Any, {"metadata": {"name": tag}}))
    log = Path(tempfile.mkstemp(prefix=f"podium-{tag}-", suffix=".log")[1])
    with log.open("wb") as out:  # noqa: ASYNC230 - once per mode, before any timing
        proc = subprocess.Popen(  # noqa: ASYNC220 - a long-lived child, awaited through the API
            [sys.executable, "-m", "podium", "run", "--kubeconfig", str(kubeconfig)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        await asyncio.sleep(5)  # policies load and the cache primes
        for i in range(pods):
            body = make_pod(f"p{i}", cpu="50m", memory="64Mi", scheduler_name=live)
            await core.create_namespaced_pod(tag, cast(Any, body))
            await asyncio.sleep(1 / rate)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            listed = await core.list_namespaced_pod(tag)
            if all(p.spec.node_name for p in listed.items) and len(listed.items) == pods:
                break
            await asyncio.sleep(0.5)
        await asyncio.sleep(3 if shadow else 0)  # the shadow catches up
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        for name in names:
            await objects.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
    records = read_records(log.read_text(errors="replace").splitlines())  # noqa: ASYNC240
    latencies = sorted(
        r["duration_ms"] for r in records if not r["shadow"] and r["result"] == "scheduled"
    )
    shadowed = {r["uid"] for r in records if r["shadow"]}
    return {
        "mode": "with shadow" if shadow else "live only",
        "bound": len(latencies),
        "shadow_records": len(shadowed),
        "p50_ms": round(statistics.median(latencies), 3),
        "p95_ms": latencies[int(0.95 * (len(latencies) - 1))],
        "mean_ms": round(statistics.fmean(latencies), 3),
        "log": str(log),
    }


async def _main(pods: int, rate: float, rounds: int) -> None:
    async with ControlPlane(ensure_binaries()) as plane:
        api = await plane.api_client()
        ext = client.ApiextensionsV1Api(api)
        await ext.create_custom_resource_definition(yaml.safe_load(CRD.read_text()))
        await asyncio.sleep(2)
        await create_nodes(api, [make_node(f"node-{i}") for i in range(50)])
        for n in range(rounds):
            for shadow in (False, True):
                tag = f"r{n}-{'shadow' if shadow else 'live'}"
                print(await _mode(api, plane.kubeconfig, tag, shadow, pods, rate), flush=True)
        await api.close()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.shadow_latency")
    parser.add_argument("--pods", type=int, default=200)
    parser.add_argument("--rate", type=float, default=40.0, help="pods created per second")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    asyncio.run(_main(args.pods, args.rate, args.rounds))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
