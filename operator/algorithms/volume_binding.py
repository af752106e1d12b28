"""VolumeBinding: bound claims' PV node affinity, and PVs to bind for delayed claims.

kube-scheduler's volumebinding plugin, minus CSIStorageCapacity:

- PreFilter rejects the pod (unresolvable) for a missing, lost or deleting
  claim and for an unbound claim whose class binds Immediately (the PV
  controller, not the scheduler, binds those). The v1.37 binary no longer
  narrows the nodes to a bound local PV's hostnames in PreFilter: every
  node is filtered and the others report the node-affinity reason.
- Filter, per node: every bound claim's PV must accept the node's labels;
  every WaitForFirstConsumer claim needs an Available PV of its class with
  the access modes, volume mode, selector and size, whose node affinity
  accepts the node (the smallest that fits; claims are matched smallest
  first), or else a class that can provision here.
- Score (StorageCapacityScoring's shape, default least utilised first):
  how full the chosen static PVs would be.

- Reserve (``plan_volumes``, AssumePodVolumes), PreBindPreFlight, PreBind and
  Unreserve: the chosen node's PVs, recomputed with ``find_pod_volumes``, are assumed,
  then written by ``podium.algorithms.volume_binder`` before the Binding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from podium.algorithms.volume_binder import VolumeBinder, VolumePlan
from podium.framework import signers
from podium.framework.extension import (
    ALLOW,
    SKIP,
    Handle,
    PreBindPlugin,
    ReservePlugin,
    Status,
)
from podium.framework.plugin import (
    MAX_NODE_SCORE,
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    IntArray,
    PreFilterResult,
    Rejection,
    ScorePlugin,
    SignFragments,
)
from podium.framework.profile import Profile
from podium.framework.registry import register
from podium.kube.objects import NodeInfo, PodInfo
from podium.state.volumes import (
    SELECTED_NODE,
    PersistentVolume,
    PersistentVolumeClaim,
    VolumeStore,
    pod_claims,
)

__all__ = [
    "BIND_CONFLICT",
    "IMMEDIATE",
    "NODE_CONFLICT",
    "NodeVolumes",
    "PodClaims",
    "VolumeBinding",
    "VolumePlan",
    "find_pod_volumes",
    "plan_volumes",
    "pod_volume_claims",
    "volume_binding",
]

# The v1.37 binary's wording (older releases: "node(s) had volume node affinity conflict").
NODE_CONFLICT = "node(s) didn't match PersistentVolume's node affinity"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"
NOT_PROVISIONABLE = {"", "kubernetes.io/no-provisioner"}
DEFAULT_SHAPE = ((0, 10), (100, 0))
DEFAULT_BIND_TIMEOUT = 600
_STATE = "VolumeBinding/claims"
_NODES = "VolumeBinding/nodes"


@dataclass(slots=True)
class PodClaims:
    """GetPodVolumeClaims: the pod's claims by how the scheduler must treat them."""

    bound: list[PersistentVolumeClaim] = field(default_factory=list)
    delayed: list[PersistentVolumeClaim] = field(default_factory=list)
    immediate: list[PersistentVolumeClaim] = field(default_factory=list)


@dataclass(slots=True)
class NodeVolumes:
    """FindPodVolumes for one node: why it fails, or which PVs it would bind."""

    reasons: list[str] = field(default_factory=list)
    static: list[tuple[PersistentVolumeClaim, PersistentVolume]] = field(default_factory=list)
    provision: list[PersistentVolumeClaim] = field(default_factory=list)


def pod_volume_claims(store: VolumeStore, pod: PodInfo) -> PodClaims | str | None:
    """podHasPVCs + GetPodVolumeClaims: None without claims, a reason string to reject."""
    names = pod_claims(pod)
    if not names:
        return None
    claims = PodClaims()
    found: list[PersistentVolumeClaim] = []
    for name, ephemeral in names:
        claim = store.claim(pod.namespace, name)
        if claim is None:
            if ephemeral:
                return (
                    "waiting for ephemeral volume controller to create the "
                    f'persistentvolumeclaim "{name}"'
                )
            return f'persistentvolumeclaim "{name}" not found'
        if claim.phase == "Lost":
            return (
                f'persistentvolumeclaim "{name}" bound to non-existent persistentvolume '
                f'"{claim.volume_name}"'
            )
        if claim.deleting:
            return f'persistentvolumeclaim "{name}" is being deleted'
        found.append(claim)
    for claim in found:
        if claim.fully_bound:
            claims.bound.append(claim)
            continue
        storage_class = store.classes.get(claim.storage_class) if claim.storage_class else None
        delayed = storage_class is not None and storage_class.wait_for_first_consumer
        if delayed and not claim.volume_name:
            claims.delayed.append(claim)
            continue
        claims.immediate.append(claim)  # prebound claims wait for the PV controller too
    return claims


def _access_ok(claim: PersistentVolumeClaim, pv: PersistentVolume) -> bool:
    return claim.access_modes <= pv.access_modes


def find_matching_volume(
    claim: PersistentVolumeClaim,
    pvs: Sequence[PersistentVolume],
    labels: Mapping[str, str],
    excluded: set[str],
) -> PersistentVolume | None:
    """FindMatchingVolume, scheduler path: a PV prebound to the claim, else the smallest fit."""
    best: PersistentVolume | None = None
    for pv in pvs:
        if pv.name in excluded:
            continue
        if pv.claim_ref is not None and not pv.bound_to(claim):
            continue
        if pv.capacity < claim.request or pv.volume_mode != claim.volume_mode or pv.deleting:
            continue
        fits = pv.fits(labels)
        if pv.bound_to(claim):
            return pv if fits else None
        if pv.phase != "Available":
            continue
        if claim.selector_error:
            continue
        if claim.selector is not None and not claim.selector.matches(pv.labels):
            continue
        if pv.storage_class != claim.storage_class or not fits or not _access_ok(claim, pv):
            continue
        if best is None or pv.capacity < best.capacity:
            best = pv
    return best


def find_pod_volumes(store: VolumeStore, claims: PodClaims, node: NodeInfo) -> NodeVolumes:
    """FindPodVolumes: the reasons ``node`` fails, or its static bindings and provisions."""
    out = NodeVolumes()
    bound_ok = pvs_found = unbound_ok = True
    for claim in claims.bound:
        pv = store.pv(claim.volume_name)
        if pv is None:
            pvs_found = False
            break
        if not pv.fits(node.labels):
            bound_ok = False
            break
    to_match: list[PersistentVolumeClaim] = []
    for claim in claims.delayed:
        selected = claim.annotations.get(SELECTED_NODE)
        if selected is None:
            to_match.append(claim)
        elif selected != node.name:
            unbound_ok = False
            to_match = []
            break
        else:
            out.provision.append(claim)
    else:
        chosen: set[str] = set()
        for claim in sorted(to_match, key=lambda c: c.request):
            pv = find_matching_volume(
                claim, store.pvs_of_class(claim.storage_class), node.labels, chosen
            )
            if pv is None:
                unbound_ok = False
                out.provision.append(claim)
                continue
            chosen.add(pv.name)
            out.static.append((claim, pv))
        if out.provision:
            unbound_ok = all(_provisionable(store, c, node) for c in out.provision)
    for failed, reason in (
        (not bound_ok, NODE_CONFLICT),
        (not unbound_ok, BIND_CONFLICT),
        (not pvs_found, PV_NOT_EXIST),
    ):
        if failed:
            out.reasons.append(reason)
    return out


def _provisionable(store: VolumeStore, claim: PersistentVolumeClaim, node: NodeInfo) -> bool:
    """checkVolumeProvisions without CSIStorageCapacity: a provisioner allowed on the node."""
    storage_class = store.classes.get(claim.storage_class)
    if storage_class is None or storage_class.provisioner in NOT_PROVISIONABLE:
        return False
    return storage_class.allows(node.labels)


def _shape(args: Mapping[str, Any]) -> tuple[tuple[int, int], ...]:
    raw = args.get("shape")
    if not raw:
        return DEFAULT_SHAPE
    return tuple((int(p["utilization"]), int(p["score"])) for p in raw)


def _broken_linear(shape: Sequence[tuple[int, int]], utilization: int) -> int:
    """helper.BuildBrokenLinearFunction for one value, scores scaled to 0..100."""
    scale = MAX_NODE_SCORE // 10
    for i, (u, s) in enumerate(shape):
        if utilization <= u:
            if i == 0:
                return s * scale
            u0, s0 = shape[i - 1]
            return s0 * scale + (s - s0) * scale * (utilization - u0) // (u - u0)
    return shape[-1][1] * scale


log = structlog.get_logger("podium.algorithms.volume_binding")


@register
class VolumeBinding(FilterPlugin, ScorePlugin, ReservePlugin, PreBindPlugin):
    name = "VolumeBinding"
    description = (
        "Checks bound PVs' node affinity and finds PVs to bind for WaitForFirstConsumer claims."
    )
    events = ClusterEvent.NODE_ADD | ClusterEvent.NODE_LABEL | ClusterEvent.VOLUME
    default_weight = 1

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """VolumeBinding.SignPod: the volumes but configMaps and secrets."""
        pod = cycle.pod
        return {signers.VOLUMES: signers.volumes_signer(pod)}

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        timeout = self.args.get("bindTimeoutSeconds", DEFAULT_BIND_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, int) or timeout < 0:
            raise ValueError(f"bindTimeoutSeconds must be a non-negative integer, got {timeout!r}")
        self.bind_timeout = float(timeout)
        self.shape = _shape(self.args)
        # Reserve's plan per pod (Go's CycleState), until PreBind writes it or Unreserve.
        self._plans: dict[str, VolumePlan] = {}

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        claims = pod_volume_claims(cycle.snapshot.volumes, cycle.pod)
        if isinstance(claims, str):
            return PreFilterResult(reject=claims)
        cycle.state[_STATE] = claims
        cycle.state[_NODES] = {}
        if claims is None:
            return None
        if claims.immediate:
            return PreFilterResult(reject=IMMEDIATE)
        return None

    def _node(self, cycle: Cycle, row: int) -> NodeVolumes:
        memo: dict[int, NodeVolumes] = cycle.state[_NODES]
        found = memo.get(row)
        if found is None:
            claims: PodClaims = cycle.state[_STATE]
            found = memo[row] = find_pod_volumes(
                cycle.snapshot.volumes, claims, cycle.snapshot.nodes[row]
            )
        return found

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        if cycle.state.get(_STATE) is None:
            return []
        masks: dict[str, np.ndarray] = {}
        for position, row in enumerate(nodes):
            for reason in self._node(cycle, int(row)).reasons:
                mask = masks.setdefault(reason, np.zeros(nodes.size, dtype=bool))
                mask[position] = True
        return [Rejection(reason, mask, unresolvable=True) for reason, mask in masks.items()]

    def explain(self, cycle: Cycle, node: int) -> str:
        if cycle.state.get(_STATE) is None:
            return ""
        return "; ".join(self._node(cycle, node).reasons)

    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        if cycle.state.get(_STATE) is None:
            return False
        return any(self._node(cycle, int(r)).static for r in nodes)

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        out = np.zeros(nodes.size, dtype=np.int64)
        for position, row in enumerate(nodes):
            classes: dict[str, list[int]] = {}
            for claim, pv in self._node(cycle, int(row)).static:
                total = classes.setdefault(pv.storage_class, [0, 0])
                total[0] += claim.request
                total[1] += pv.capacity
            if not classes:
                continue
            scores = [
                _broken_linear(
                    self.shape,
                    100 if capacity == 0 or requested > capacity else requested * 100 // capacity,
                )
                for requested, capacity in classes.values()
            ]
            out[position] = round(sum(scores) / len(scores))
        return out

    def reserve(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        """Reserve: AssumePodVolumes, so later cycles see the chosen PVs as taken."""
        if not pod_claims(pod):
            return ALLOW
        snapshot = handle.snapshot
        plan = plan_volumes(snapshot.volumes, pod, snapshot.nodes[snapshot.index[node]])
        if not plan.empty:
            VolumeBinder(handle.client, snapshot.volumes).assume(plan)
            self._plans[pod.uid] = plan
        return ALLOW

    def unreserve(self, handle: Handle, pod: PodInfo, node: str) -> None:
        """Unreserve: RevertAssumedPodVolumes, for a plan PreBind has not taken."""
        plan = self._plans.pop(pod.uid, None)
        if plan is not None:
            VolumeBinder(handle.client, handle.snapshot.volumes).revert(plan)

    def pre_bind_pre_flight(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        """Skip when every claim is bound already."""
        return ALLOW if pod.uid in self._plans else SKIP

    async def pre_bind(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        """PreBind: BindPodVolumes, waiting ``bindTimeoutSeconds`` for the claims to be
        bound; the assumptions are dropped whatever happens."""
        plan = self._plans.pop(pod.uid, None)
        if plan is None:
            return ALLOW
        binder = VolumeBinder(handle.client, handle.snapshot.volumes)
        try:
            why = await binder.bind(pod, node, plan, self.bind_timeout)
        except Exception as exc:  # the reservation must be resolved whatever happens
            log.exception("volume_bind_crashed", pod=pod.name, namespace=pod.namespace, node=node)
            binder.revert(plan)
            why = f"binding volumes: {exc}"
        return Status("Error", why) if why else ALLOW


def volume_binding(profile: Profile) -> VolumeBinding | None:
    """The profile's VolumeBinding filter; without one, claims are left alone, as in kube."""
    return next((p for p in profile.filters if isinstance(p, VolumeBinding)), None)


def plan_volumes(store: VolumeStore, pod: PodInfo, node: NodeInfo) -> VolumePlan:
    """Recompute the Filter's choice for the selected node (deterministic on the same store)."""
    claims = pod_volume_claims(store, pod)
    if claims is None or isinstance(claims, str):
        return VolumePlan()
    found = find_pod_volumes(store, claims, node)
    return VolumePlan(list(found.static), list(found.provision))
