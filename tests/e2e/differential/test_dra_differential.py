"""DynamicResources, Podium against the real kube-scheduler on the same DRA states.

Each generated scenario (``dra_scenarios``) creates nodes, their ResourceSlices
and claims allocated beforehand, then gives a pod whose claim comes from a
template to kube-scheduler (percentageOfNodesToScore 100, -v=10) and then,
after deleting the pod and its claim, to Podium. The harness makes each claim
from the template as kube-controller-manager's resourceclaim controller would
(``tests.e2e.dra``). They must agree on schedulability, on the condition's
reason and message byte for byte (Unschedulable, or SchedulerError for a
selector that fails at run time), on the node wherever kube-scheduler's own
final scores make the best node unique, and then on the devices allocated.

Every fourth scenario (``generate_extended``) asks for a DRA-backed extended resource
instead: through a DeviceClass's ``extendedResourceName`` or its implicit
``deviceclass.resource.kubernetes.io/<class>`` name, with devices in slices, device-plugin
capacity in node status, or both on different nodes. There both must also agree on the
claim each writes for the pod (its device requests and devices) and on the pod's
``status.extendedResourceClaimStatus`` (request mappings; the claim's generated name
checked against ``<pod>-extended-resources-``).

kube-scheduler's log shows when its informers delivered each node; DRA objects
get a settle period before the pod is created.
"""

from __future__ import annotations

import asyncio
import collections
import json
import re
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.client.exceptions import ApiException

from podium.devcluster.objects import create_nodes, delete_nodes, pod_events, wait_for
from podium.kube.manifests import make_node, make_pod
from tests.e2e.differential import kube_scores
from tests.e2e.differential.dra_scenarios import (
    DraScenario,
    ExtendedScenario,
    generate,
    generate_extended,
)
from tests.e2e.differential.kube_scores import KubeLog
from tests.e2e.differential.podium_cache import counts, holds
from tests.e2e.dra import (
    ATTACH_FAILED,
    ATTACHED,
    DRIVER,
    Dra,
    claim_spec,
    claim_template,
    device_class,
    exactly,
    gated_device,
    resource_claim,
    resource_slice,
    with_claims,
)
from tests.e2e.test_policy import crd  # noqa: F401
from tests.e2e.test_volumes import accepted, scheduler_policy

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="session")]

KUBE, PODIUM = "dradiff-kube", "dradiff-podium"
SETTLE = 0.3  # seconds for kube-scheduler's informers to see DRA objects: it logs no event


# Each side's claim has its own generated name; an aborted attempt names the device
# (and so the node) where it failed, and kube-scheduler filters nodes in parallel, so
# which node's device it names is a race.
_CLAIM = re.compile(r"incoming-dradiff-(kube|podium)-gpu-[a-z0-9]{5}")
EXTENDED_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
_DEVICE = re.compile(r"gpu\.example\.com/[^ :]+")


def _normalized(message: str) -> str:
    return _DEVICE.sub("<device>", _CLAIM.sub("<claim>", message))


async def _decision(core: client.CoreV1Api, namespace: str, name: str) -> dict[str, Any]:
    """The pod's node, or the reason and message of its failed PodScheduled condition."""

    async def outcome() -> dict[str, Any] | None:
        raw: Any = await core.read_namespaced_pod(name, namespace, _preload_content=False)
        pod = await raw.json()
        if pod["spec"].get("nodeName"):
            return {"node": pod["spec"]["nodeName"], "reason": "", "message": ""}
        for cond in pod["status"].get("conditions") or []:
            failed = cond.get("reason") in ("Unschedulable", "SchedulerError")
            if cond["type"] == "PodScheduled" and cond.get("status") == "False" and failed:
                return {"node": "", "reason": cond["reason"], "message": cond["message"]}
        return None

    decision = await wait_for(outcome, timeout=30, interval=0.02, message=f"decision on {name}")
    assert decision is not None
    return cast(dict[str, Any], decision)


async def _decide(
    api: ApiClient, dra: Dra, namespace: str, scheduler: str, template: str
) -> dict[str, Any]:
    """The scheduler's decision on a fresh pod, and the devices its claim got."""
    core = client.CoreV1Api(api)
    name = f"incoming-{scheduler}"
    pod = make_pod(name, cpu="500m", scheduler_name=scheduler)
    body = with_claims(pod, {"gpu": template})
    await core.create_namespaced_pod(namespace, cast(Any, body))
    (claim_name,) = await dra.instantiate(name)
    decision = await _decision(core, namespace, name)
    (claim,) = [c for c in await dra.claims() if c["metadata"]["name"] == claim_name]
    allocation = (claim.get("status") or {}).get("allocation") or {}
    decision["devices"] = sorted(
        f"{r['request']}={r['pool']}/{r['device']}"
        for r in allocation.get("devices", {}).get("results", [])
    )
    reserved = [r["uid"] for r in (claim.get("status") or {}).get("reservedFor") or []]
    if decision["node"]:
        pods = await core.read_namespaced_pod(name, namespace)
        if reserved != [pods.metadata.uid] or not allocation:
            decision["unreserved"] = True
    await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    await dra.delete_claim(claim_name)
    return decision


_STREAMS = ("nodes", "resourceslices", "devicetaintrules", "resourceclaims")


async def _baseline(podium: Any) -> dict[str, int]:
    held = await counts(podium)
    return {kind: held.get(kind, 0) for kind in _STREAMS}


async def _podium_holds(podium: Any, base: dict[str, int], **added: int) -> None:
    """Wait until Podium's cache holds ``added`` objects of each kind over ``base``."""
    await holds(podium, {kind: base[kind] + count for kind, count in added.items()})


async def _run(
    api: ApiClient,
    dra: Dra,
    namespace: str,
    scenario: DraScenario,
    kube_log: KubeLog,
    podium: Any,
    base: dict[str, int],
) -> dict[str, Any]:
    names = [n["metadata"]["name"] for n in scenario.nodes]
    mark = kube_log.mark()
    await create_nodes(api, scenario.nodes)
    slices = [
        str((await dra.create("resourceslices", s))["metadata"]["name"]) for s in scenario.slices
    ]
    rules = []
    for rule_name, spec in scenario.taint_rules:
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule", "spec": spec}
        body["metadata"] = {"name": rule_name}
        rules.append(str((await dra.create("devicetaintrules", body))["metadata"]["name"]))
    template = f"t{scenario.seed}"
    decisions: dict[str, dict[str, Any]] = {}
    try:
        for claim_name, spec, allocation in scenario.taken:
            await dra.create("resourceclaims", resource_claim(claim_name, spec))
            await dra.allocate(claim_name, allocation)
        await dra.create("resourceclaimtemplates", claim_template(template, scenario.template))
        await kube_log.wait_events([(kube_scores.NODE_ADDED, n) for n in names], after=mark)
        await asyncio.sleep(SETTLE)  # kube-scheduler logs no DRA event to wait on
        asked = kube_log.mark()
        kube = decisions[KUBE] = await _decide(api, dra, namespace, KUBE, template)
        seen = kube_log.mark()
        # Claims and pods reach Podium in their streams' order, before its own claim and
        # pod: only the nodes, slices and rules, each in a stream of its own, are awaited.
        await _podium_holds(
            podium, base, nodes=len(names), resourceslices=len(slices), devicetaintrules=len(rules)
        )
        mine = decisions[PODIUM] = await _decide(api, dra, namespace, PODIUM, template)
        cycle = kube_log.cycle(namespace, f"incoming-{KUBE}", asked, seen) if kube["node"] else None
    finally:
        for claim_name, _, _ in scenario.taken:
            await dra.delete_claim(claim_name)
        await dra.custom.delete_namespaced_custom_object(
            "resource.k8s.io", "v1", namespace, "resourceclaimtemplates", template
        )
        for name in slices:
            await dra.delete("resourceslices", name)
        for name in rules:
            await dra.delete("devicetaintrules", name)
        await delete_nodes(api, names)
        await kube_log.wait_events([(kube_scores.NODE_DELETED, n) for n in names], after=mark)
        await _podium_holds(podium, base, nodes=0, resourceslices=0, devicetaintrules=0)
    best = cycle.unique_best(kube["node"]) if cycle else ""
    result: dict[str, Any] = {
        "seed": scenario.seed,
        "kube": kube,
        "podium": mine,
        "unique": best,
        "kube_scores": cycle.scores if cycle else {},
    }
    if kube.get("unreserved") or mine.get("unreserved"):
        result["disagree"] = "bound without its claim reserved"
    elif bool(kube["node"]) != bool(mine["node"]):
        result["disagree"] = "schedulability"
    elif not kube["node"] and (kube["reason"], _normalized(kube["message"])) != (
        mine["reason"],
        _normalized(mine["message"]),
    ):
        result["disagree"] = "message"
    elif best and kube["node"] != mine["node"]:
        result["disagree"] = "node"
    elif best and kube["devices"] != mine["devices"]:
        result["disagree"] = "devices"
    return result


async def test_dra_agrees_with_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    dra: Dra,
    kube_scheduler: Any,
    podium: Any,
    pytestconfig: pytest.Config,
    tmp_path: Path,
) -> None:
    classes = (f"{namespace}-gpu", f"{namespace}-ok")
    await dra.create("deviceclasses", device_class(classes[0]))
    ok = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].ok'
    await dra.create("deviceclasses", device_class(classes[1], ok))
    # The class behind the extended resource, by its explicit name and its implicit one.
    explicit = f"example.com/{namespace[:20]}-gpu"
    backing = device_class(f"{namespace}-ext")
    backing["spec"]["extendedResourceName"] = explicit
    await dra.create("deviceclasses", backing)
    implicit = f"deviceclass.resource.kubernetes.io/{namespace}-ext"
    kube = await kube_scheduler(KUBE, percentage_of_nodes_to_score=100, verbosity=10)
    proc = await podium("--scheduler-name", PODIUM)
    base = await _baseline(proc)
    kube_log = KubeLog(kube.log_path)
    count = int(pytestconfig.getoption("--scenarios"))
    results = []
    for seed in range(count):
        prefix = f"{namespace[:20]}-d{seed}"
        try:
            if seed % 4 == 3:
                extended = generate_extended(seed, prefix, explicit)
                resource = implicit if extended.mode == "implicit" else explicit
                results.append(
                    await _run_extended(
                        api_client, dra, namespace, extended, resource, kube_log, proc, base
                    )
                )
            else:
                scenario = generate(seed, prefix, classes)
                results.append(
                    await _run(api_client, dra, namespace, scenario, kube_log, proc, base)
                )
        except (TimeoutError, ApiException, ValueError) as exc:
            results.append({"seed": seed, "disagree": f"harness: {exc}"})
    report = tmp_path / "dra-differential.json"
    report.write_text(json.dumps(results, indent=1))
    bad = [r for r in results if "disagree" in r]
    kinds = collections.Counter(str(r["disagree"]).split(":")[0] for r in bad)
    failed = sum(1 for r in results if "kube" in r and not r["kube"]["node"])
    compared = sum(1 for r in results if "kube" in r and r["unique"])
    extended = collections.Counter(str(r["mode"]) for r in results if "mode" in r)
    summary = (
        f"[dra] {len(results) - len(bad)}/{len(results)} scenarios agree "
        f"(extended resources: {dict(sorted(extended.items()))}); "
        f"{failed} unschedulable or failed with messages compared, "
        f"{compared} with a unique best node (and its devices) compared; "
        f"disagreements by kind: {dict(sorted(kinds.items()))} (report: {report})"
    )
    print(summary)
    assert not bad, summary + "\n" + "\n".join(json.dumps(r) for r in bad[:10])


async def test_scenarios_are_valid_and_varied() -> None:
    """The generator's states: valid shapes, and the cases the family is meant to cover."""
    scenarios = [generate(seed, "x", ("c1", "c2")) for seed in range(200)]
    requests = [r for s in scenarios for r in s.template["devices"]["requests"]]
    exact = [r["exactly"] for r in requests if "exactly" in r]
    assert any(r.get("allocationMode") == "All" for r in exact)
    assert any("selectors" in r for r in exact)
    assert any("firstAvailable" in r for r in requests)
    assert any(s.taint_rules for s in scenarios)
    assert any("constraints" in s.template["devices"] for s in scenarios)
    assert any("taints" in d for s in scenarios for sl in s.slices for d in sl["spec"]["devices"])
    assert any(s.taken for s in scenarios)
    assert any(not s.slices[0]["spec"]["devices"] for s in scenarios)
    for s in scenarios:
        pools = {sl["spec"]["pool"]["name"] for sl in s.slices}
        assert pools == {n["metadata"]["name"] for n in s.nodes}
        for _, _, allocation in s.taken:
            (result,) = allocation["devices"]["results"]
            assert result["pool"] in pools
    extended = [generate_extended(seed, "x", "example.com/gpu") for seed in range(3, 200, 4)]
    assert {e.mode for e in extended} == {"dra", "plugin", "both", "implicit"}
    capacity = [
        e for e in extended if any("example.com/gpu" in n["status"]["allocatable"] for n in e.nodes)
    ]
    devices = [e for e in extended if any(sl["spec"]["devices"] for sl in e.slices)]
    assert {e.mode for e in capacity} == {"plugin", "both"}
    assert {e.mode for e in devices} == {"dra", "both", "implicit"}
    shapes = {(init, sidecar) for e in extended for _, _, init, sidecar in e.containers}
    assert shapes == {(False, False), (True, False), (True, True)}


# -- binding conditions ---------------------------------------------------------------------

BC_KUBE, BC_PODIUM = "drabc-kube", "drabc-podium"
BC_TIMEOUT = 6  # seconds, on both sides: past Go's first 5 s poll, so "met" is seen there
OUTCOMES = ("met", "failed", "timed-out")
_BC_CLAIM = re.compile(r"bc-[a-z-]+-(kube|podium)-gpu-[a-z0-9]{5}")


async def _bind_with_conditions(
    api: ApiClient, dra: Dra, namespace: str, scheduler: str, outcome: str, template: str
) -> dict[str, Any]:
    """One pod on a gated device: the driver reports Attached (met), AttachFailed
    (failed) or nothing (timed-out) once PreBind has written the claim; returns whether it
    was bound, the binding failure's message and the message that followed it."""
    core = client.CoreV1Api(api)
    name = f"bc-{outcome}-{scheduler.split('-')[1]}"
    body = with_claims(make_pod(name, cpu="100m", scheduler_name=scheduler), {"gpu": template})
    await core.create_namespaced_pod(namespace, cast(Any, body))
    (claim_name,) = await dra.instantiate(name)

    async def reserved() -> bool:
        (claim,) = [c for c in await dra.claims() if c["metadata"]["name"] == claim_name]
        status = claim.get("status") or {}
        return bool(status.get("allocation") and status.get("reservedFor"))

    await wait_for(reserved, timeout=30, interval=0.05, message=f"{name}'s claim written")
    if outcome != "timed-out":
        await dra.report(claim_name, ATTACHED if outcome == "met" else ATTACH_FAILED)

    async def messages() -> list[str]:
        events = await pod_events(api, namespace, name, "FailedScheduling")
        return [_BC_CLAIM.sub("<claim>", str(e.message)) for e in events]

    async def settled() -> dict[str, Any] | None:
        raw: Any = await core.read_namespaced_pod(name, namespace, _preload_content=False)
        if (await raw.json())["spec"].get("nodeName"):
            return {"bound": True, "failure": "", "after": ""}
        seen = await messages()
        failure = next((i for i, m in enumerate(seen) if "device binding" in m), None)
        if failure is None or failure + 1 >= len(seen):
            return None
        return {"bound": False, "failure": seen[failure], "after": seen[failure + 1]}

    decision = await wait_for(settled, timeout=60, interval=0.1, message=f"{name} settled")
    assert decision is not None
    await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    await dra.delete_claim(claim_name)
    return cast(dict[str, Any], decision)


@pytest.mark.usefixtures("crd")
async def test_binding_conditions_agree_with_kube_scheduler(
    api_client: ApiClient,
    namespace: str,
    dra: Dra,
    node_factory: Any,
    kube_scheduler: Any,
    podium: Any,
) -> None:
    """A device with binding conditions, under a 6 s binding timeout on both sides: the
    condition reported True binds the pod; a failure condition, or none within the
    timeout, fails the attempt with the same message, and the next attempt deallocates
    the claim with the same message (compared with the claim's name left out)."""
    (node,) = await node_factory([make_node(f"{namespace}-bc")])
    klass = f"{namespace}-bc"
    await dra.create("deviceclasses", device_class(klass))
    await dra.create(
        "resourceslices", resource_slice(f"{node}-gpus", node, [gated_device("gpu-0")])
    )
    template = "bc"
    await dra.create(
        "resourceclaimtemplates", claim_template(template, claim_spec(exactly("gpu", klass)))
    )
    args = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "DynamicResourcesArgs",
        "bindingTimeout": f"{BC_TIMEOUT}s",
    }
    await kube_scheduler(BC_KUBE, plugin_config=[{"name": "DynamicResources", "args": args}])
    spec = {"pluginArgs": {"dynamicResources": {"bindingTimeoutSeconds": BC_TIMEOUT}}}
    results = []
    async with scheduler_policy(api_client, BC_PODIUM, spec):
        await podium()
        await accepted(api_client, BC_PODIUM)
        for outcome in OUTCOMES:
            kube = await _bind_with_conditions(
                api_client, dra, namespace, BC_KUBE, outcome, template
            )
            mine = await _bind_with_conditions(
                api_client, dra, namespace, BC_PODIUM, outcome, template
            )
            results.append(
                {"outcome": outcome, "kube": kube, "podium": mine, "agree": kube == mine}
            )
    agree = sum(1 for r in results if r["agree"])
    summary = f"[dra] binding conditions: {agree}/{len(results)} outcomes agree"
    print(summary, *(json.dumps(r) for r in results), sep="\n")
    assert [r["kube"]["bound"] for r in results] == [True, False, False], results
    assert agree == len(results), summary + "\n" + "\n".join(json.dumps(r) for r in results)


# -- DRA-backed extended resources ----------------------------------------------------------


def _extended_pod(name: str, scheduler: str, scenario: ExtendedScenario, resource: str) -> Any:
    """A pod whose containers ask ``resource`` as the scenario says (limits = requests)."""
    pod = make_pod(name, cpu="500m", scheduler_name=scheduler)
    (main,) = pod["spec"]["containers"]
    containers, inits = [], []
    for container, amount, init, sidecar in scenario.containers:
        asked = {resource: str(amount)}
        entry = {"name": container, "image": main["image"]}
        entry["resources"] = {"requests": dict(asked), "limits": dict(asked)}
        if container == "main":
            entry["resources"]["requests"]["cpu"] = "500m"
        if sidecar:
            entry["restartPolicy"] = "Always"
        (inits if init else containers).append(entry)
    pod["spec"]["containers"] = containers
    if inits:
        pod["spec"]["initContainers"] = inits
    return pod


async def _decide_extended(
    api: ApiClient,
    dra: Dra,
    namespace: str,
    scheduler: str,
    scenario: ExtendedScenario,
    resource: str,
) -> dict[str, Any]:
    """The decision on a pod asking an extended resource, the claim the scheduler made
    for it (requests, devices) and the pod's extendedResourceClaimStatus."""
    core = client.CoreV1Api(api)
    name = f"incoming-{scheduler}"
    pod = _extended_pod(name, scheduler, scenario, resource)
    made = await core.create_namespaced_pod(namespace, pod)
    decision = await _decision(core, namespace, name)
    raw: Any = await core.read_namespaced_pod(name, namespace, _preload_content=False)
    status = ((await raw.json()).get("status") or {}).get("extendedResourceClaimStatus") or {}
    claims = [
        c
        for c in await dra.claims()
        if any(o.get("uid") == made.metadata.uid for o in c["metadata"].get("ownerReferences", []))
    ]
    decision["claims"] = len(claims)
    decision["mappings"] = status.get("requestMappings") or []
    decision["devices"], decision["requests"] = [], []
    if claims:
        claim = claims[0]
        claim_name = claim["metadata"]["name"]
        decision["named"] = (
            claim_name == status.get("resourceClaimName")
            and claim_name.startswith(f"{name}-extended-resources-")
            and claim["metadata"].get("annotations", {}).get(EXTENDED_ANNOTATION) == "true"
        )
        decision["requests"] = claim["spec"]["devices"]["requests"]
        allocation = (claim.get("status") or {}).get("allocation") or {}
        decision["devices"] = sorted(
            f"{r['request']}={r['pool']}/{r['device']}"
            for r in allocation.get("devices", {}).get("results", [])
        )
        reserved = [r["uid"] for r in (claim.get("status") or {}).get("reservedFor") or []]
        if decision["node"] and (reserved != [made.metadata.uid] or not allocation):
            decision["unreserved"] = True
    await core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
    for claim in claims:
        await dra.delete_claim(claim["metadata"]["name"])
    return decision


async def _run_extended(
    api: ApiClient,
    dra: Dra,
    namespace: str,
    scenario: ExtendedScenario,
    resource: str,
    kube_log: KubeLog,
    podium: Any,
    base: dict[str, int],
) -> dict[str, Any]:
    names = [n["metadata"]["name"] for n in scenario.nodes]
    mark = kube_log.mark()
    await create_nodes(api, scenario.nodes)
    slices = [
        str((await dra.create("resourceslices", s))["metadata"]["name"]) for s in scenario.slices
    ]
    try:
        await kube_log.wait_events([(kube_scores.NODE_ADDED, n) for n in names], after=mark)
        await asyncio.sleep(SETTLE)  # kube-scheduler logs no DRA event to wait on
        asked = kube_log.mark()
        kube = await _decide_extended(api, dra, namespace, KUBE, scenario, resource)
        seen = kube_log.mark()
        # Podium's pod may come before the deletion of kube-scheduler's claim, which is in
        # another stream: the claims are awaited too.
        await _podium_holds(
            podium, base, nodes=len(names), resourceslices=len(slices), resourceclaims=0
        )
        mine = await _decide_extended(api, dra, namespace, PODIUM, scenario, resource)
        cycle = kube_log.cycle(namespace, f"incoming-{KUBE}", asked, seen) if kube["node"] else None
    finally:
        for name in slices:
            await dra.delete("resourceslices", name)
        await delete_nodes(api, names)
        await kube_log.wait_events([(kube_scores.NODE_DELETED, n) for n in names], after=mark)
        await _podium_holds(podium, base, nodes=0, resourceslices=0, devicetaintrules=0)
    best = cycle.unique_best(kube["node"]) if cycle else ""
    result: dict[str, Any] = {
        "seed": scenario.seed,
        "mode": scenario.mode,
        "kube": kube,
        "podium": mine,
        "unique": best,
        "kube_scores": cycle.scores if cycle else {},
    }
    shape = ("claims", "named", "requests", "mappings")
    if kube.get("unreserved") or mine.get("unreserved"):
        result["disagree"] = "bound without its claim reserved"
    elif bool(kube["node"]) != bool(mine["node"]):
        result["disagree"] = "schedulability"
    elif not kube["node"] and (kube["reason"], _normalized(kube["message"])) != (
        mine["reason"],
        _normalized(mine["message"]),
    ):
        result["disagree"] = "message"
    elif best and kube["node"] != mine["node"]:
        result["disagree"] = "node"
    elif best and kube["devices"] != mine["devices"]:
        result["disagree"] = "devices"
    elif (kube["node"] == mine["node"] or not kube["node"]) and any(
        kube.get(k) != mine.get(k) for k in shape
    ):
        result["disagree"] = "extended claim or status"
    return result
