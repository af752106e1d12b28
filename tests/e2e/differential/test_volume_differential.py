"""The volume plugins against the real kube-scheduler on the same storage states.

Each generated scenario (``volume_scenarios``) is created twice, once per
scheduler, with fresh PV and class names and the claims in a namespace of
the scheduler's own, because binding changes the objects. No PV controller
runs, so kube-scheduler never finishes a WaitForFirstConsumer bind: it
writes the chosen PV's claimRef in PreBind and waits. Its decision is then
read from that write (the PV it chose) or from the pod's nominatedNodeName;
Podium's from the bound pod and the claims' volumeName. Both must agree on
schedulability, on the FailedScheduling message byte for byte, on the PVs
chosen on the same node, and on the node where kube-scheduler's own final
scores (its -v=10 log, ``kube_scores``) make the best node unique.

PVs are compared per claim. kube-scheduler keeps the first smallest PV that
fits, in the order its informer index lists them, which is map order; so
between two PVs of the same size it has no fixed choice. Such a pick is
recorded as a tie when each claim got a PV of the same size from both and
Podium's PV passes an independent check on the chosen node.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from bench.validate import node_selector_matches
from podium.devcluster.objects import create_nodes, delete_nodes, wait_for
from podium.kube.quantity import parse_quantity
from tests.e2e.differential.kube_scores import KubeLog
from tests.e2e.differential.volume_scenarios import VolumeScenario, generate

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

KUBE, PODIUM = "vdiff-kube", "vdiff-podium"
SETTLE = 0.4
UNPROTECT = {"metadata": {"finalizers": None}}


def _fill(obj: Any, p: str, ns: str) -> Any:
    return json.loads(json.dumps(obj).replace("{p}", p).replace("{ns}", ns))


@pytest_asyncio.fixture(loop_scope="session")
async def second_namespace(api_client: ApiClient) -> AsyncIterator[str]:
    core = client.CoreV1Api(api_client)
    made = await core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(generate_name="vdiff-podium-"))
    )
    yield str(made.metadata.name)
    await core.delete_collection_namespaced_pod(made.metadata.name, grace_period_seconds=0)
    await core.delete_namespace(made.metadata.name)


async def _create_storage(
    api: ApiClient, scenario: VolumeScenario, p: str, ns: str
) -> tuple[list[str], list[str]]:
    core, storage = client.CoreV1Api(api), client.StorageV1Api(api)
    classes, pvs = [], []
    for body in scenario.classes:
        made = _fill(body, p, ns)
        await storage.create_storage_class(made)
        classes.append(made["metadata"]["name"])
    for body, phase in scenario.pvs:
        made = _fill(body, p, ns)
        await core.create_persistent_volume(made)
        await core.patch_persistent_volume_status(
            made["metadata"]["name"], {"status": {"phase": phase}}
        )
        pvs.append(made["metadata"]["name"])
    for body in scenario.claims:
        await core.create_namespaced_persistent_volume_claim(ns, _fill(body, p, ns))
    for body in scenario.pods:
        await core.create_namespaced_pod(ns, cast(Any, _fill(body, p, ns)))
    return classes, pvs


async def _delete_storage(api: ApiClient, ns: str, classes: list[str], pvs: list[str]) -> None:
    core, storage = client.CoreV1Api(api), client.StorageV1Api(api)
    await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
    for item in (await core.list_namespaced_persistent_volume_claim(ns)).items:
        await core.patch_namespaced_persistent_volume_claim(item.metadata.name, ns, UNPROTECT)
        await core.delete_namespaced_persistent_volume_claim(item.metadata.name, ns)
    for name in pvs:
        await core.patch_persistent_volume(name, UNPROTECT)
        await core.delete_persistent_volume(name)
    for name in classes:
        await storage.delete_storage_class(name)


async def _decide(api: ApiClient, ns: str, body: dict[str, Any], p: str) -> dict[str, Any]:
    core = client.CoreV1Api(api)
    name = body["metadata"]["name"]
    await core.create_namespaced_pod(ns, cast(Any, body))
    claims = {v["persistentVolumeClaim"]["claimName"] for v in body["spec"].get("volumes", [])}

    async def chosen_pvs() -> dict[str, str]:
        """Claim to PV (run prefix stripped), for free PVs whose claimRef names the pod's claims."""
        raw = await core.list_persistent_volume(_preload_content=False)
        out = {}
        for pv in (await raw.json())["items"]:
            ref = pv["spec"].get("claimRef") or {}
            pv_name = pv["metadata"]["name"]
            if (
                pv_name.startswith(f"{p}-free")
                and ref.get("namespace") == ns
                and ref.get("name") in claims
            ):
                out[ref["name"]] = pv_name.removeprefix(p)
        return out

    async def read_pod() -> dict[str, Any]:
        raw = await core.read_namespaced_pod(name, ns, _preload_content=False)
        return cast(dict[str, Any], await raw.json())

    def node_of(pod: dict[str, Any]) -> str:
        """The pod's node, or its nominated node: kube-scheduler may write it after the PVs."""
        return str(pod["spec"].get("nodeName") or pod["status"].get("nominatedNodeName") or "")

    async def outcome() -> dict[str, Any] | None:
        pod = await read_pod()
        for cond in pod["status"].get("conditions") or []:
            if cond["type"] == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return {"node": "", "message": cond.get("message", ""), "pvs": {}}
        if node_of(pod) or await chosen_pvs():
            await asyncio.sleep(SETTLE)  # every chosen PV written
            return {"node": await chosen_node(), "message": "", "pvs": await chosen_pvs()}
        return None

    async def chosen_node() -> str:
        async def read() -> str:
            return node_of(await read_pod())

        try:
            return await wait_for(read, timeout=10, interval=0.05, message=f"node of {name}")
        except TimeoutError:
            return ""

    return await wait_for(outcome, timeout=30, interval=0.05, message=f"decision on {name}")


async def _run(
    api: ApiClient,
    namespaces: dict[str, str],
    scenario: VolumeScenario,
    tag: str,
    kube_log: KubeLog,
) -> dict[str, Any]:
    core, storage = client.CoreV1Api(api), client.StorageV1Api(api)
    names = [n["metadata"]["name"] for n in scenario.nodes]
    await create_nodes(api, scenario.nodes)
    for body in scenario.csinodes:
        await storage.create_csi_node(body)
    decisions: dict[str, dict[str, Any]] = {}
    marks: dict[str, tuple[int, int]] = {}
    try:
        for scheduler in (KUBE, PODIUM):
            p = f"{tag}-{'k' if scheduler == KUBE else 'p'}"
            ns = namespaces[scheduler]
            classes, pvs = await _create_storage(api, scenario, p, ns)
            try:
                await asyncio.sleep(SETTLE)
                body = copy.deepcopy(scenario.incoming)
                body["spec"]["schedulerName"] = scheduler
                asked = kube_log.mark()
                decision = await _decide(api, ns, body, p)
                marks[scheduler] = (asked, kube_log.mark())
                if scheduler == PODIUM and (decision["node"] or decision["pvs"]):
                    decision["node"] = await _bound_node(core, ns, body)
                    decision["pvs"] = await _podium_pvs(core, ns, body, p)
                decisions[scheduler] = decision
            finally:
                await _delete_storage(api, ns, classes, pvs)
    finally:
        for body in scenario.csinodes:
            await storage.delete_csi_node(body["metadata"]["name"])
        await delete_nodes(api, names)
        await asyncio.sleep(SETTLE)
    kube, mine = decisions[KUBE], decisions[PODIUM]
    name = scenario.incoming["metadata"]["name"]
    cycle = kube_log.cycle(namespaces[KUBE], name, *marks[KUBE]) if kube["node"] else None
    best = cycle.unique_best(kube["node"]) if cycle else ""
    result = {
        "seed": scenario.seed,
        "kube": kube,
        "podium": mine,
        "unique": best,
        "kube_scores": cycle.scores if cycle else {},
    }
    if bool(kube["node"] or kube["pvs"]) != bool(mine["node"]):
        result["disagree"] = "schedulability"
    elif not mine["node"] and kube["message"] != mine["message"]:
        result["disagree"] = "message"
    elif kube["pvs"] != mine["pvs"] and (best or kube["node"] == mine["node"]):
        # PVs follow the node: on a tied top the two may rightly pick different nodes.
        if _equal_sized_and_valid(scenario, kube, mine):
            result["tie"] = "pvs"
        else:
            result["disagree"] = "pvs"
    elif kube["node"] and best and kube["node"] != mine["node"]:
        result["disagree"] = "node"
    return result


async def _bound_node(core: client.CoreV1Api, ns: str, body: dict[str, Any]) -> str:
    """Podium finishes the volume bind itself: wait for the pod Binding after it."""

    async def node() -> str:
        pod = await core.read_namespaced_pod(body["metadata"]["name"], ns)
        return str(pod.spec.node_name or "")

    return await wait_for(node, timeout=15, interval=0.1, message="Podium's pod Binding")


async def _podium_pvs(
    core: client.CoreV1Api, ns: str, body: dict[str, Any], p: str
) -> dict[str, str]:
    """Claim to the free PV Podium bound it to, run prefix stripped."""
    out = {}
    for volume in body["spec"]["volumes"]:
        claim_name = volume["persistentVolumeClaim"]["claimName"]
        claim = await core.read_namespaced_persistent_volume_claim(claim_name, ns)
        name = claim.spec.volume_name or ""
        if name.startswith(f"{p}-free"):
            out[claim_name] = name.removeprefix(p)
    return out


def _equal_sized_and_valid(
    scenario: VolumeScenario, kube: dict[str, Any], mine: dict[str, Any]
) -> bool:
    """Whether Podium's PVs differ from kube-scheduler's only as one equal-sized fit for another.

    Validity is checked here from the scenario, not by Podium's own code: the
    PV is Available, of the claim's class, offers its access modes and size,
    and its node affinity admits the node (bench's API-semantics matcher).
    """
    if kube["node"] != mine["node"] or kube["pvs"].keys() != mine["pvs"].keys():
        return False
    pvs = {pv["metadata"]["name"].removeprefix("{p}"): (pv, phase) for pv, phase in scenario.pvs}
    claims = {c["metadata"]["name"]: c for c in scenario.claims}
    labels = next(
        n["metadata"]["labels"] for n in scenario.nodes if n["metadata"]["name"] == mine["node"]
    )
    node = {"name": mine["node"], "labels": labels}

    def size(pv: dict[str, Any]) -> Decimal:
        return parse_quantity(pv["spec"]["capacity"]["storage"])

    def admits(pv: dict[str, Any]) -> bool:
        required = pv["spec"].get("nodeAffinity", {}).get("required")
        return required is None or node_selector_matches(required, node)

    for claim_name, theirs in kube["pvs"].items():
        ours, phase = pvs[mine["pvs"][claim_name]]
        claim = claims[claim_name]["spec"]
        valid = (
            phase == "Available"
            and ours["spec"]["storageClassName"] == claim["storageClassName"]
            and set(claim["accessModes"]) <= set(ours["spec"]["accessModes"])
            and size(ours) >= parse_quantity(claim["resources"]["requests"]["storage"])
            and admits(ours)
        )
        if not valid or size(ours) != size(pvs[theirs][0]):
            return False
    return len(set(mine["pvs"].values())) == len(mine["pvs"])


async def test_volume_plugins_agree_with_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    second_namespace: str,
    kube_scheduler: Any,
    podium: Any,
    pytestconfig: pytest.Config,
    tmp_path: Path,
) -> None:
    kube = await kube_scheduler(KUBE, percentage_of_nodes_to_score=100, verbosity=10)
    await podium("--scheduler-name", PODIUM)
    kube_log = KubeLog(kube.log_path)
    namespaces = {KUBE: namespace, PODIUM: second_namespace}
    count = min(int(pytestconfig.getoption("--scenarios")), 60)
    results = []
    for seed in range(count):
        tag = f"v{seed}-{namespace[-5:]}"
        scenario = generate(seed, prefix=tag)
        try:
            results.append(await _run(api_client, namespaces, scenario, tag, kube_log))
        except (TimeoutError, ApiException, ValueError) as exc:
            results.append({"seed": seed, "disagree": f"harness: {exc}"})
    report = tmp_path / "volume-differential.json"
    report.write_text(json.dumps(results, indent=1))
    bad = [r for r in results if "disagree" in r]
    unschedulable = sum(1 for r in results if "kube" in r and not r["podium"]["node"])
    ties = sum(1 for r in results if "tie" in r)
    summary = (
        f"[volumes] {len(results) - len(bad)}/{len(results)} scenarios agree; "
        f"{unschedulable} unschedulable with messages compared; "
        f"{ties} with equal-sized PVs picked differently (report: {report})"
    )
    print(summary)
    assert not bad, summary + "\n" + "\n".join(json.dumps(r) for r in bad[:10])


async def test_a_prefilter_rejection_ends_with_the_dra_postfilter_error(
    api_client: ApiClient, namespace: str, kube_scheduler: Any, podium: Any
) -> None:
    """NodeAffinity's PreFilter rejection, which no volume plugin is part of, reads the same."""
    core = client.CoreV1Api(api_client)
    nodes = generate(0, f"{namespace[:20]}-pf").nodes[:2]
    await create_nodes(api_client, nodes)
    await kube_scheduler(KUBE, percentage_of_nodes_to_score=100)
    await podium("--scheduler-name", PODIUM)
    fields = [
        {"key": "metadata.name", "operator": "In", "values": [n["metadata"]["name"]]} for n in nodes
    ]
    messages = {}
    try:
        for scheduler in (KUBE, PODIUM):
            body = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"conflict-{scheduler}"},
                "spec": {
                    "schedulerName": scheduler,
                    "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchFields": fields}]
                            }
                        }
                    },
                },
            }
            decision = await _decide(api_client, namespace, body, "none")
            messages[scheduler] = decision["message"]
    finally:
        await core.delete_collection_namespaced_pod(namespace, grace_period_seconds=0)
        await delete_nodes(api_client, [n["metadata"]["name"] for n in nodes])
    assert messages[PODIUM] == messages[KUBE], messages
