"""NodeDeclaredFeatures and the default profile against the real kube-scheduler v1.37.2.

The API server runs with its default gates: a container ``restartPolicyRules`` action
RestartAllContainers is admitted (ContainerRestartRules and
RestartAllContainersOnContainerExits are beta, on) and node ``status.declaredFeatures``
is kept (NodeDeclaredFeatures is GA).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient

from podium.algorithms import FILTERS, SCORES
from podium.algorithms.node_declared_features import REASON, RESTART_ALL_CONTAINERS
from podium.devcluster import ControlPlane
from podium.devcluster.objects import wait_for
from podium.framework.profile import DEFAULT_FILTERS, DEFAULT_SCORES
from podium.kube.manifests import make_node, make_pod

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

KUBE, PODIUM = "ndf-kube", "ndf-podium"
HOSTNAME = "kubernetes.io/hostname"
# kube-scheduler's default plugins that are no Podium filter or score: the queue sort,
# gates, preemption and binding live in Podium's core.
NOT_FILTER_OR_SCORE = {
    "SchedulingGates",
    "PrioritySort",
    "DefaultPreemption",
    "DefaultBinder",
}


def logged_config(log: Path) -> dict[str, Any]:
    """The KubeSchedulerConfiguration that kube-scheduler logs at --v=2 as it starts."""
    lines = iter(log.read_text(errors="replace").splitlines())
    for line in lines:
        if '"Using component config"' in line:
            break
    else:
        raise AssertionError(f"no 'Using component config' line in {log}")
    body = []
    for line in lines:
        if not line.startswith("\t"):
            break
        body.append(line[1:])
    config: dict[str, Any] = yaml.safe_load("\n".join(body))
    return config


async def test_default_profile_is_kube_schedulers(
    control_plane: ControlPlane, kube_scheduler: Any
) -> None:
    """profile.py's defaults are the running binary's, in its order."""
    await kube_scheduler(KUBE)
    config = logged_config(control_plane.workdir / "logs" / f"kube-scheduler-{KUBE}.log")
    (profile,) = config["profiles"]
    enabled = profile["plugins"]["multiPoint"]["enabled"]
    names = [p["name"] for p in enabled]
    assert [n for n in names if n in FILTERS] == list(DEFAULT_FILTERS)
    # A score plugin's multiPoint weight 0 means its default weight, 1.
    scores = [(p["name"], p.get("weight") or 1) for p in enabled if p["name"] in SCORES]
    assert scores == list(DEFAULT_SCORES)
    assert set(names) - set(FILTERS) - set(SCORES) == NOT_FILTER_OR_SCORE
    assert not {"NodeConditions", "NoDiskConflict", "NodePreferAvoidPods"} & set(names)


def restart_all_pod(name: str, scheduler: str, node: str | None = None) -> dict[str, Any]:
    """A pod whose container restarts the whole pod on exit code 42."""
    body = make_pod(
        name, scheduler_name=scheduler, node_selector={HOSTNAME: node} if node else None
    )
    body["spec"]["containers"][0].update(
        restartPolicy="Never",
        restartPolicyRules=[
            {"action": "RestartAllContainers", "exitCodes": {"operator": "In", "values": [42]}}
        ],
    )
    return body


async def pod_outcome(core: client.CoreV1Api, namespace: str, name: str) -> tuple[str, str]:
    """(node, "") once bound, ("", message) once unschedulable, ("", "") before either."""
    raw = await core.read_namespaced_pod(name, namespace, _preload_content=False)
    pod = await raw.json()
    if pod["spec"].get("nodeName"):
        return pod["spec"]["nodeName"], ""
    for cond in pod["status"].get("conditions") or []:
        if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
            return "", str(cond.get("message", ""))
    return "", ""


async def test_both_schedulers_match_pods_to_declared_features(
    api_client: ApiClient, namespace: str, node_factory: Any, kube_scheduler: Any, podium: Any
) -> None:
    core = client.CoreV1Api(api_client)
    declares = make_node(f"{namespace}-declares")
    declares["status"]["declaredFeatures"] = [RESTART_ALL_CONTAINERS]
    plain = make_node(f"{namespace}-plain")
    await node_factory([declares, plain])
    stored = await (
        await core.read_node(declares["metadata"]["name"], _preload_content=False)
    ).json()
    assert stored["status"].get("declaredFeatures") == [RESTART_ALL_CONTAINERS]
    await kube_scheduler(KUBE)
    await podium("--scheduler-name", PODIUM)

    pods = {}
    for scheduler in (KUBE, PODIUM):
        free = restart_all_pod(f"free-{scheduler}", scheduler)
        pinned = restart_all_pod(f"pinned-{scheduler}", scheduler, plain["metadata"]["name"])
        for body in (free, pinned):
            created = await core.create_namespaced_pod(
                namespace, cast(Any, body), _preload_content=False
            )
            spec = (await created.json())["spec"]
            assert spec["containers"][0].get("restartPolicyRules"), "the API server dropped them"
        pods[scheduler] = (free["metadata"]["name"], pinned["metadata"]["name"])

    async def decided(name: str) -> tuple[str, str] | None:
        outcome = await pod_outcome(core, namespace, name)
        return outcome if any(outcome) else None

    pending: dict[str, str] = {}
    for scheduler, (free, pinned) in pods.items():
        node, _ = await wait_for(lambda n=free: decided(n), timeout=30, message=f"{free} decided")
        assert node == declares["metadata"]["name"], scheduler
        node, message = await wait_for(
            lambda n=pinned: decided(n), timeout=30, message=f"{pinned} decided"
        )
        assert node == "", scheduler
        pending[scheduler] = message
    assert pending[PODIUM] == pending[KUBE]
    assert f"1 {REASON}" in pending[KUBE]
    assert "Preemption is not helpful for scheduling" in pending[KUBE]

    # The plain node declaring the feature requeues the pinned pods on both schedulers.
    await core.patch_node_status(
        plain["metadata"]["name"], {"status": {"declaredFeatures": [RESTART_ALL_CONTAINERS]}}
    )
    for scheduler, (_, pinned) in pods.items():

        async def bound(name: str = pinned) -> str | None:
            node, _ = await pod_outcome(core, namespace, name)
            return node or None

        node = await wait_for(bound, timeout=30, message=f"{pinned} bound after the node update")
        assert node == plain["metadata"]["name"], scheduler
