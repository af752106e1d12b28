"""Reading what explain needs from the live cluster (GET and LIST only), then explaining."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podium.kube.kinds import NAMESPACES
from podium.kube.objects import parse_node, parse_pod
from podium.kube.pdb import parse_pdb
from podium.policy import GROUP, PLURAL, VERSION, default_profile
from podium.state import dra, selectors, volumes
from podium.state.podgroups import WORKLOAD_API, parse_pod_group
from podium.state.snapshot import build_snapshot
from podium.tools.explain.engine import explain_pod
from podium.tools.explain.group import explain_group
from podium.tools.explain.model import ExplainError, Explanation
from podium.tools.inputs import load_policy, profile_from_policy


@dataclass(slots=True)
class ClusterState:
    pod: dict[str, Any]
    nodes: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    policies: list[dict[str, Any]] | None  # None: the CRD is not installed
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # PVs, PVCs, StorageClasses and CSINodes, each with its kind set.
    storage: list[dict[str, Any]] = field(default_factory=list)
    # Services, ReplicationControllers, ReplicaSets and StatefulSets, each with its kind set.
    selectors: list[dict[str, Any]] = field(default_factory=list)
    # The pod's PodGroup (spec.schedulingGroup), None when it has none or it is missing.
    pod_group: dict[str, Any] | None = None
    # For a pod of a group: every PodGroup (the victims' disruption modes) and the PDBs.
    pod_groups: list[dict[str, Any]] = field(default_factory=list)
    pdbs: list[dict[str, Any]] = field(default_factory=list)


def select_policy(
    policies: Sequence[Mapping[str, Any]] | None, scheduler_name: str
) -> tuple[Mapping[str, Any] | None, str]:
    """The SchedulerPolicy serving ``scheduler_name``, and a note on how it was chosen."""
    if policies is None:
        return None, "the SchedulerPolicy CRD is not installed"
    matching = [
        p
        for p in policies
        if str((p.get("spec") or {}).get("schedulerName") or "podium") == scheduler_name
    ]
    if not matching:
        return None, f"no SchedulerPolicy has spec.schedulerName {scheduler_name!r}"

    def accepted(policy: Mapping[str, Any]) -> bool:
        conditions = (policy.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Accepted" and c.get("status") == "True" for c in conditions)

    matching.sort(
        key=lambda p: (
            not accepted(p),
            str((p.get("metadata") or {}).get("creationTimestamp") or ""),
            str((p.get("metadata") or {}).get("name") or ""),
        )
    )
    chosen = matching[0]
    name = (chosen.get("metadata") or {}).get("name")
    note = f"SchedulerPolicy {name}"
    if len(matching) > 1:
        note += f" (of {len(matching)} naming {scheduler_name!r}; the accepted/oldest one)"
    return chosen, note


async def _list(client: Any, path: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = ""
    while True:
        params = {"limit": "500", **({"continue": token} if token else {})}
        page = await client.get(path, params=params)
        items.extend(page.get("items") or [])
        token = str((page.get("metadata") or {}).get("continue") or "")
        if not token:
            return items


async def fetch_state(client: Any, namespace: str, name: str) -> ClusterState:
    """Read what explain needs; GET and LIST only."""
    from podium.kube.client import ApiError

    try:
        pod = await client.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
    except ApiError as exc:
        if exc.status == 404:
            raise ExplainError(f"pod {namespace}/{name} not found") from exc
        raise ExplainError(f"cannot read pod {namespace}/{name}: {exc}") from exc
    nodes, pods = await asyncio.gather(
        _list(client, "/api/v1/nodes"), _list(client, "/api/v1/pods")
    )
    state = ClusterState(pod=pod, nodes=nodes, pods=pods, policies=None)
    group = str(((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName") or "")
    if group:
        try:
            state.pod_group = await client.get(
                f"{WORKLOAD_API}/namespaces/{namespace}/podgroups/{group}"
            )
        except ApiError as exc:
            if exc.status != 404:
                state.notes.append(f"cannot read PodGroup {group} ({exc})")
        try:
            state.pod_groups = await _list(client, f"{WORKLOAD_API}/podgroups")
            state.pdbs = await _list(client, "/apis/policy/v1/poddisruptionbudgets")
        except ApiError as exc:
            state.notes.append(f"cannot list PodGroups or PDBs ({exc}); preemption sees none")
    try:
        state.policies = await _list(client, f"/apis/{GROUP}/{VERSION}/{PLURAL}")
    except ApiError as exc:
        if exc.status == 403:
            state.notes.append(f"cannot list SchedulerPolicies ({exc}); using the default profile")
        elif exc.status != 404:
            raise ExplainError(f"cannot list SchedulerPolicies: {exc}") from exc
    try:
        for ns in await _list(client, NAMESPACES.path):
            meta = ns.get("metadata") or {}
            state.namespace_labels[str(meta.get("name"))] = dict(meta.get("labels") or {})
    except ApiError as exc:
        state.notes.append(f"cannot list namespaces ({exc}); namespaceSelectors see no labels")
    stores = (
        (volumes.RESOURCES, state.storage, "the volume plugins see none"),
        (selectors.RESOURCES, state.selectors, "default spreading sees none"),
        (dra.RESOURCES, state.storage, "DynamicResources sees none"),
    )
    for kinds, into, consequence in stores:
        for kind in kinds:
            try:
                items = await _list(client, kind.path)
            except ApiError as exc:
                state.notes.append(f"cannot list {kind.kind} objects ({exc}); {consequence}")
                continue
            into.extend({**item, "kind": kind.kind} for item in items)
    return state


def explain_state(
    state: ClusterState, policy_file: str | None = None, details_for: int | None = None
) -> Explanation:
    """Build the snapshot and profile from fetched objects, then explain."""
    pod = parse_pod(state.pod)
    notes = list(state.notes)
    if pod.bound:
        notes.append(
            f"the pod is bound to {pod.node_name}; this shows where it would go if it were "
            "pending now (its own usage left out)"
        )
        # Judged as a pending pod: its spec's requests, not its resize status.
        spec = dict(state.pod.get("spec") or {})
        spec.pop("nodeName", None)
        pod = parse_pod({**state.pod, "spec": spec})
    if pod.problem:
        notes.append(f"the scheduler rejects this pod as invalid: {pod.problem}")
    if pod.scheduling_gates:
        notes.append(
            f"the pod has scheduling gates ({', '.join(pod.scheduling_gates)}): "
            "no scheduler tries it until they are removed"
        )
    if policy_file is not None:
        profile = load_policy(policy_file)
        profile_note = f"{profile.policy} from {policy_file} (--policy)"
    else:
        chosen, why = select_policy(state.policies, pod.scheduler_name)
        if chosen is None:
            profile = default_profile(pod.scheduler_name)
            profile_note = f"<built-in> default profile ({why})"
        else:
            profile = profile_from_policy(chosen)
            profile_note = why
    others = [p for p in (parse_pod(body) for body in state.pods) if p.uid and p.uid != pod.uid]
    cache, snapshot = build_snapshot(
        [parse_node(body) for body in state.nodes],
        others,
        storage=state.storage,
        selectors=state.selectors,
        namespace_labels=state.namespace_labels,
    )
    out = explain_pod(profile, snapshot, pod, cache, details_for=details_for)
    out.profile = profile_note
    if pod.pod_group:
        members = [
            p
            for p in (parse_pod(body) for body in state.pods)
            if p.uid != pod.uid and p.group_key == pod.group_key and not p.terminal
        ]
        out.group = explain_group(
            profile,
            cache,
            snapshot,
            parse_pod_group(state.pod_group) if state.pod_group is not None else None,
            pod.pod_group,
            [pod, *(p for p in members if not p.bound)],
            [p for p in members if p.bound],
            {g.key: g for g in (parse_pod_group(body) for body in state.pod_groups)},
            [b for b in (parse_pdb(body) for body in state.pdbs) if b is not None],
        )
    out.notes = notes + out.notes
    return out


async def explain_cluster(
    namespace: str,
    name: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    policy_file: str | None = None,
    details_for: int | None = None,
) -> Explanation:
    """Explain one live pod; the whole read-only path that ``podium explain`` runs."""
    from podium.kube.client import KubeClient
    from podium.kube.credentials import load_credentials

    creds = await load_credentials(kubeconfig, context)
    client = KubeClient(creds, pool_size=4)
    try:
        state = await fetch_state(client, namespace, name)
    finally:
        await client.close()
    return explain_state(state, policy_file, details_for)
