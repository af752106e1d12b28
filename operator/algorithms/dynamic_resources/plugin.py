"""DynamicResources: a pod with ResourceClaims goes only where its claims can be allocated.

kube-scheduler v1.37.2's ``dynamicresources`` plugin; its DRA-backed extended
resources are in ``extended`` (the pod's extra claim, last), and the devices of a pod
group's members are held from one member to the next by ``group``:

- PreEnqueue (``pre_enqueue``): the pod waits, with no cycle, Event or
  condition, until every claim it names exists (``ResourceClaim not created
  yet`` while a template's claim has no name in the pod's status).
- PreFilter: a claim being deleted, not owned by the pod (template claims), or
  in flight for another pod rejects the pod, unless an earlier member of the same
  pod-group cycle allocated it in flight: the pod then takes that allocation as it
  is (``GROUP_PENDING``, Go's ``pendingAllocations``) and must go where it is
  reachable; so does a request whose DeviceClass
  does not exist. Allocated claims pin the pod to their node selector; an
  allocated claim whose device reports a binding failure condition, or whose
  binding conditions are still unmet ``bindingTimeoutSeconds`` after its
  ``allocationTimestamp``, is available on no node (so PostFilter frees it).
- Filter, per node: the allocator must find devices for every unallocated claim
  (``cannot allocate all claims``), and every allocated claim's node selector
  must match (``resourceclaim not available on the node``). An allocator error
  (a CEL selector that fails) aborts the attempt, as in kube-scheduler; so does
  a search longer than ``filterTimeoutSeconds`` (``node N: timed out trying to
  allocate devices``, Go's DRASchedulerFilterTimeout).
- PostFilter (``stale_claim``): an allocated claim some node could not use and no
  other pod reserves is deallocated, so the next attempt can allocate it afresh; it
  runs before DefaultPreemption's.
- Score: 8 minus the index of each chosen ``firstAvailable`` subrequest, summed,
  normalized, weight 2.

Reserve, PreBind and Unreserve (writing the allocation and ``reservedFor``, then
waiting for binding conditions) are the plugin's own points, carried out by
``claim_binder``; ``plan_claims`` gives them the chosen node's allocations, from the
Filter's memo when the cycle just computed them; ``binding_ready`` and
``binding_timed_out`` (in ``claim_binder``) are the checks PreFilter and PreBind share.
The plugin also loads the CEL runtime in a worker thread when the first device or
class arrives (``warm_up``).

Arguments (``spec.pluginArgs.dynamicResources``, Go's DynamicResourcesArgs):
``bindingTimeoutSeconds`` (default 600, at least 1) and ``filterTimeoutSeconds``
(default 10; 0 turns the limit off), validated as Go validates them.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import structlog

from podium.algorithms.dynamic_resources.allocator import (
    AllocationError,
    AllocationTimeout,
    Allocator,
)
from podium.algorithms.dynamic_resources.cel import load_runtime
from podium.algorithms.dynamic_resources.claim_binder import (
    ClaimBinder,
    ClaimPlan,
    ExtendedPlan,
    binding_ready,
    binding_timed_out,
)
from podium.algorithms.dynamic_resources.extended import (
    DELETED,
    Extended,
    NodeExtended,
    for_node,
    is_dra_extended_name,
    is_extended_claim,
    pod_extended,
    uses_dra,
)
from podium.framework.extension import (
    ALLOW,
    REJECTED,
    SKIP,
    FailedCycle,
    Handle,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    QueueingHintPlugin,
    ReservePlugin,
    Status,
    Undo,
    WarmUpPlugin,
)
from podium.framework.plugin import (
    ClusterEvent,
    Cycle,
    FilterPlugin,
    IndexArray,
    IntArray,
    PluginError,
    PreFilterResult,
    Rejection,
    ScorePlugin,
    SignFragments,
    default_normalize,
)
from podium.framework.profile import Profile
from podium.framework.registry import register
from podium.kube.labels import NodeTerm, parse_node_terms
from podium.kube.objects import NodeInfo, PodInfo
from podium.state.dra import CachedAllocation, Claim, DraStore, parse_claim

__all__ = [
    "CANNOT_ALLOCATE",
    "DEALLOCATED",
    "GROUP_PENDING",
    "NAME",
    "NOT_AVAILABLE",
    "ClaimPlan",
    "DynamicResources",
    "ExtendedPlan",
    "PodClaims",
    "binding_ready",
    "binding_timed_out",
    "dynamic_resources",
    "plan_claims",
    "pod_claims",
    "pre_enqueue",
    "stale_claim",
]

NAME = "DynamicResources"
log = structlog.get_logger("podium.algorithms.dynamic_resources")
CANNOT_ALLOCATE = "cannot allocate all claims"
NOT_AVAILABLE = "resourceclaim not available on the node"
DEALLOCATED = "deallocation of ResourceClaim completed"
# Cycle.group's key for the claims members of the cycle allocated in flight: claim uid ->
# the members sharing that allocation (Go's podGroupStateData.pendingAllocations).
GROUP_PENDING = "DynamicResources/pendingAllocations"
# resourceapi.FirstAvailableDeviceRequestMaxSize
FIRST_AVAILABLE_MAX = 8
# config.DynamicResourcesBindingTimeoutDefault and DynamicResourcesFilterTimeoutDefault.
BINDING_TIMEOUT = 600.0
FILTER_TIMEOUT = 10.0
_STATE = "DynamicResources/claims"


def _dict(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def pod_claims(store: DraStore, pod: PodInfo) -> list[Claim] | str:
    """foreachPodResourceClaim: the pod's claims in spec order, or why it cannot go on."""
    claims: list[Claim] = []
    for ref in pod.resource_claims:
        must_check_owner = False
        if ref.claim_name:
            name = ref.claim_name
        elif ref.template:
            if ref.generated is None:
                return f'pod "{pod.namespace}/{pod.name}": ResourceClaim not created yet'
            if not ref.generated:
                continue  # no claim was needed for this entry
            name, must_check_owner = ref.generated, True
        else:
            return (
                f'pod "{pod.namespace}/{pod.name}", spec.resourceClaim "{ref.name}": '
                "none of the supported fields are set"
            )
        claim = store.claim(pod.namespace, name)
        if claim is None:
            return f'could not find ResourceClaim "{pod.namespace}/{name}"'
        if claim.deleting:
            return f'resourceclaim "{name}" is being deleted'
        if must_check_owner and claim.controller != pod.uid:
            return (
                f"ResourceClaim {claim.namespace}/{claim.name} was not created for Pod "
                f"{pod.namespace}/{pod.name} (Pod is not owner)"
            )
        claims.append(claim)
    return claims


def pre_enqueue(store: DraStore, pod: PodInfo) -> str:
    """PreEnqueue: '' when every claim exists, else why the pod waits."""
    if not pod.resource_claims:
        return ""
    found = pod_claims(store, pod)
    return found if isinstance(found, str) else ""


def _check_class(store: DraStore, class_name: str, request: str) -> str:
    """validateDeviceClass: a missing class leaves the pod unschedulable until one appears."""
    if not class_name:
        raise PluginError(
            f'running PreFilter plugin "{NAME}": request {request}: unsupported request type'
        )
    if class_name not in store.classes:
        return f"request {request}: device class {class_name} does not exist"
    return ""


def _check_requests(store: DraStore, claim: Claim) -> str:
    for request in claim.requests():
        name = str(request.get("name") or "")
        exactly = request.get("exactly")
        first = _list(request.get("firstAvailable"))
        if isinstance(exactly, Mapping):
            why = _check_class(store, str(exactly.get("deviceClassName") or ""), name)
        elif first:
            why = ""
            for sub in first:
                sub = _dict(sub)
                qualified = f"{name}/{sub.get('name') or ''}"
                why = _check_class(store, str(sub.get("deviceClassName") or ""), qualified)
                if why:
                    break
        else:
            why = f"resource claim {claim.key}, request {name}: unknown request type"
        if why:
            return why
    return ""


def _node_terms(allocation: Mapping[str, Any]) -> tuple[NodeTerm, ...] | None:
    """nodeSelectorFromAllocation: None when the allocation is usable on every node."""
    selector = allocation.get("nodeSelector")
    if not isinstance(selector, Mapping):
        return None
    return parse_node_terms(selector.get("nodeSelectorTerms"))


def _unbindable(claim: Claim, timeout: float, now: float) -> bool:
    """PreFilter's check of an allocated claim: its binding failed or timed out."""
    ready = binding_ready(claim)
    return isinstance(ready, str) or (not ready and binding_timed_out(claim, timeout, now))


def _positive_seconds(args: Mapping[str, Any], key: str, default: float, least: float) -> float:
    """A DynamicResourcesArgs duration in seconds, validated as ValidateDynamicResourcesArgs."""
    value = args.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key} must be a number of seconds, got {value!r}")
    if value < least:
        bound = "must be at least 1 second" if least else "must be zero or positive"
        raise ValueError(f"{key}: Invalid value: {value!r}: {bound}")
    return float(value)


@dataclass(slots=True)
class PodClaims:
    """PreFilter's state: the pod's claims and what each node would allocate."""

    claims: list[Claim]
    # Per claim: the allocated claim's node selector terms (None: any node, or unallocated).
    terms: list[tuple[NodeTerm, ...] | None]
    to_allocate: list[Claim]
    allocator: Allocator | None
    # Node row -> the allocations for ``to_allocate`` there, or the rejection reason.
    nodes: dict[int, list[dict[str, Any]] | str] = field(default_factory=dict)
    # Indexes of allocated claims some node could not use (PostFilter's candidates).
    unavailable: set[int] = field(default_factory=set)
    # The store and its version the allocator was built from, and the store's outcomes
    # by node for claims like ``to_allocate`` (None: not cacheable), used while the store
    # is unchanged.
    store: DraStore | None = None
    version: int = -1
    outcomes: dict[str, CachedAllocation] | None = None
    # Whether node labels can change an outcome (some slice or device has a node selector).
    reads_labels: bool = True
    # filterTimeoutSeconds: how long one node's allocation search may run (0: no limit).
    filter_timeout: float = 0.0
    # DRA-backed extended resources: the pod's extra claim, allocated after ``to_allocate``.
    extended: Extended | None = None
    # The pod-group cycle's pending allocations (``GROUP_PENDING``); None for a single pod.
    group: dict[str, set[str]] | None = None
    # Claim uid -> the allocation an earlier member of the cycle made in flight, which
    # this pod shares: not allocated again, written by PreBind if still unwritten.
    pending: dict[str, Mapping[str, Any]] = field(default_factory=dict)


def claims_signature(claims: Sequence[Claim]) -> tuple[str, ...] | None:
    """What the allocator reads of the claims (their specs, in order; names only go into
    error texts, which are never cached), or None when a spec is not plain JSON."""
    try:
        return tuple(json.dumps(c.raw.get("spec"), separators=(",", ":")) for c in claims)
    except (TypeError, ValueError):
        return None


def _node_json(node: NodeInfo) -> dict[str, Any]:
    """What the allocator reads of a Node: its name and labels."""
    return {"metadata": {"name": node.name, "labels": node.labels}}


def prepare(
    store: DraStore,
    pod: PodInfo,
    binding_timeout: float = BINDING_TIMEOUT,
    filter_timeout: float = FILTER_TIMEOUT,
    group: dict[str, set[str]] | None = None,
) -> PodClaims | str | None:
    """PreFilter: None without claims, a reason to reject the pod, or its state. An
    allocated claim whose binding failed or timed out gets no node terms: no node can
    use it (Filter's unavailableClaims). ``group``: the pending allocations of the
    pod-group cycle the pod is in; a claim among them is shared as allocated, pinned to
    its allocation's node selector (Go's "reusing pending allocation")."""
    found = pod_claims(store, pod) if pod.resource_claims else []
    if isinstance(found, str):
        return found
    extended = pod_extended(store, pod)
    if not found and extended is None:
        return None
    terms: list[tuple[NodeTerm, ...] | None] = []
    to_allocate: list[Claim] = []
    pending: dict[str, Mapping[str, Any]] = {}
    now = time.time()
    for claim in found:
        if claim.allocation is not None:
            unbindable = _unbindable(claim, binding_timeout, now)
            terms.append(() if unbindable else _node_terms(claim.allocation))
            continue
        in_flight = store.pending_allocation(claim.uid)
        if in_flight is not None and group is not None and claim.uid in group:
            pending[claim.uid] = in_flight
            terms.append(_node_terms(in_flight))
            continue
        terms.append(None)
        if in_flight is not None:
            return f"resource claim {claim.key} is in the process of being allocated"
        why = _check_requests(store, claim)
        if why:
            return why
        to_allocate.append(claim)
    if not to_allocate and (extended is None or extended.stale):
        return PodClaims(
            found,
            terms,
            to_allocate,
            None,
            filter_timeout=filter_timeout,
            extended=extended,
            group=group,
            pending=pending,
        )
    index = store.slice_index()
    allocator = Allocator(store.allocated_state(), store.classes, index)
    # The extended claim differs per node: its outcomes are looked up per variant.
    signature = claims_signature(to_allocate) if extended is None else None
    return PodClaims(
        found,
        terms,
        to_allocate,
        allocator,
        store=store,
        version=store.version,
        outcomes=None if signature is None else store.outcomes(signature),
        reads_labels=index.reads_labels,
        filter_timeout=filter_timeout,
        extended=extended,
        group=group,
        pending=pending,
    )


def _allocate(
    state: PodClaims, node: NodeInfo, variant: NodeExtended | None = None
) -> tuple[list[dict[str, Any]] | None, str]:
    """The allocator's outcome on ``node`` and its ``last_reason``, from the store's cache
    when the store has not changed since PreFilter. Errors are never cached. ``variant``:
    the node's variant of the extended-resource claim, allocated last."""
    allocator = state.allocator
    assert allocator is not None
    extra = variant.claim if variant is not None else None
    outcomes = (
        _valid_outcomes(state) if state.extended is None else _variant_outcomes(state, variant)
    )
    if outcomes is not None:
        hit = outcomes.get(node.name)
        if hit is not None and (not state.reads_labels or hit.labels == node.labels):
            return hit.result, hit.reason
    deadline = time.monotonic() + state.filter_timeout if state.filter_timeout > 0 else None
    try:
        found = allocator.allocate(
            _node_json(node),
            [c.raw for c in state.to_allocate] + ([extra] if extra is not None else []),
            deadline=deadline,
        )
    except AllocationTimeout as exc:
        # Go returns Error: the attempt is aborted and retried after backoff.
        message = f"node {node.name}: timed out trying to allocate devices"
        raise PluginError(f'running "{NAME}" filter plugin: {message}') from exc
    except AllocationError as exc:
        raise PluginError(f'running "{NAME}" filter plugin: {exc}') from exc
    reason = allocator.last_reason
    # A shareID is drawn afresh by every allocation: such outcomes are not reused.
    if outcomes is not None and not _has_share_ids(found):
        outcomes[node.name] = CachedAllocation(dict(node.labels), found, reason)
    return found, reason


def _valid_outcomes(state: PodClaims) -> dict[str, CachedAllocation] | None:
    """The store's outcomes for the pod's claims while the store is as PreFilter saw it."""
    store = state.store
    if state.allocator is None or store is None or store.version != state.version:
        return None
    return state.outcomes


def _variant_outcomes(
    state: PodClaims, variant: NodeExtended | None
) -> dict[str, CachedAllocation] | None:
    """The store's outcomes for the pod's claims plus the node's variant of its
    extended-resource claim (its spec: the requests and their names), while the store is
    as PreFilter saw it."""
    store = state.store
    if state.allocator is None or store is None or store.version != state.version:
        return None
    signature = claims_signature(state.to_allocate)
    if signature is None:
        return None
    if variant is not None and variant.claim is not None:
        if variant.spec_json is None:
            return None
        signature += (variant.spec_json,)
    return store.outcomes(signature)


def _has_share_ids(found: list[dict[str, Any]] | None) -> bool:
    return any(
        "shareID" in r for a in found or () for r in (a.get("devices") or {}).get("results") or ()
    )


def node_result(state: PodClaims, node: NodeInfo, row: int) -> list[dict[str, Any]] | str:
    """Filter for one node: the allocations for the unallocated claims, or the reason."""
    known = state.nodes.get(row)
    if known is not None:
        return known
    result: list[dict[str, Any]] | str = []
    variant: NodeExtended | None = None
    if state.extended is not None:
        found_variant = for_node(state.extended, node)
        state.extended.nodes[row] = found_variant
        if isinstance(found_variant, str):
            state.nodes[row] = found_variant
            return found_variant
        variant = found_variant
    extra = variant is not None and variant.claim is not None
    if state.allocator is not None and (state.to_allocate or extra):
        found, reason = _allocate(state, node, variant)
        result = _filter_result(state, found, reason, extra)
    if not isinstance(result, str):
        for index, terms in enumerate(state.terms):
            if terms is not None and not any(t.matches(node) for t in terms):
                state.unavailable.add(index)
                result = NOT_AVAILABLE
    state.nodes[row] = result
    return result


def _filter_result(
    state: PodClaims, found: list[dict[str, Any]] | None, reason: str, extra: bool = False
) -> list[dict[str, Any]] | str:
    """The allocator's outcome as Filter's: ErrFailedAllocationOnNode's own text (invalid
    pools), else Go's length check (``extra``: the extended claim was allocated too)."""
    if found is None:
        return reason or CANNOT_ALLOCATE
    return found if len(found) == len(state.to_allocate) + extra else CANNOT_ALLOCATE


def first_available_score(
    claims: Sequence[Claim],
    allocations: Sequence[Mapping[str, Any]],
    shared: Mapping[str, Mapping[str, Any]] | None = None,
) -> int:
    """computeScore: FIRST_AVAILABLE_MAX - index for every chosen subrequest.
    ``shared``: the allocations of claims an earlier member of the pod group made."""
    score = 0
    pending = iter(allocations)
    for claim in claims:
        allocation = claim.allocation
        if allocation is None:
            allocation = (shared or {}).get(claim.uid) or next(pending, {})
        chosen = {
            str(_dict(r).get("request") or "")
            for r in _list(_dict(_dict(allocation).get("devices")).get("results"))
        }
        for request in claim.requests():
            if isinstance(request.get("exactly"), Mapping):
                continue
            for index, sub in enumerate(_list(request.get("firstAvailable"))):
                if f"{request.get('name') or ''}/{_dict(sub).get('name') or ''}" in chosen:
                    score += FIRST_AVAILABLE_MAX - index
    return score


@register
class DynamicResources(
    FilterPlugin,
    ScorePlugin,
    PreEnqueuePlugin,
    PostFilterPlugin,
    QueueingHintPlugin,
    ReservePlugin,
    PreBindPlugin,
    PostBindPlugin,
    WarmUpPlugin,
):
    name = NAME
    description = "Allocates the devices of a pod's ResourceClaims (DRA, structured parameters)."
    events = (
        ClusterEvent.NODE_ADD
        | ClusterEvent.NODE_LABEL
        | ClusterEvent.NODE_ALLOCATABLE
        | ClusterEvent.RESOURCE_SLICE
        | ClusterEvent.DEVICE_CLASS
        | ClusterEvent.RESOURCE_CLAIM
    )
    default_weight = 2
    warm_up_on = ClusterEvent.RESOURCE_SLICE | ClusterEvent.DEVICE_CLASS

    def sign_pod(self, cycle: Cycle) -> SignFragments | None:
        """DynamicResources.SignPod: pods with resource claims are unsignable."""
        pod = cycle.pod
        if pod.resource_claims:
            return None
        return {}

    def __init__(self, args: Mapping[str, Any] | None = None) -> None:
        super().__init__(args)
        self.binding_timeout = _positive_seconds(
            self.args, "bindingTimeoutSeconds", BINDING_TIMEOUT, 1.0
        )
        self.filter_timeout = _positive_seconds(
            self.args, "filterTimeoutSeconds", FILTER_TIMEOUT, 0.0
        )
        # The last Filter's state, for Reserve: (pod uid, store version, state).
        self._memo: tuple[str, int, PodClaims] | None = None
        # Reserve's plan per pod (Go's CycleState), until the Binding or Unreserve.
        self._plans: dict[str, ClaimPlan] = {}

    def pre_filter(self, cycle: Cycle) -> PreFilterResult | None:
        pod = cycle.pod
        if not pod.resource_claims and not any(
            q > 0 and is_dra_extended_name(r) for r, q in pod.requests.items()
        ):
            cycle.state[_STATE] = None
            return None
        store = cycle.snapshot.dra
        group = None if cycle.group is None else cycle.group.setdefault(GROUP_PENDING, {})
        state = prepare(store, cycle.pod, self.binding_timeout, self.filter_timeout, group)
        if isinstance(state, str):
            cycle.state[_STATE] = None
            return PreFilterResult(reject=state)
        cycle.state[_STATE] = state
        if state is not None:
            self._memo = (cycle.pod.uid, store.version, state)
        return None

    def filter(self, cycle: Cycle, nodes: IndexArray) -> list[Rejection]:
        state: PodClaims | None = cycle.state.get(_STATE)
        if state is None:
            return []
        # Reason -> positions, in the order reasons first appear.
        rejected: dict[str, list[int]] = {}
        snapshot_nodes = cycle.snapshot.nodes
        known = state.nodes
        # node_result's cache hits, inlined: this loop runs for every node of every pod.
        outcomes = None if any(t is not None for t in state.terms) else _valid_outcomes(state)
        reads_labels = state.reads_labels
        for position, row in enumerate(nodes.tolist()):
            result = known.get(row)
            if result is None:
                node = snapshot_nodes[row]
                hit = None if outcomes is None else outcomes.get(node.name)
                if hit is not None and (not reads_labels or hit.labels == node.labels):
                    result = known[row] = _filter_result(state, hit.result, hit.reason)
                else:
                    result = node_result(state, node, row)
            if isinstance(result, str):
                rejected.setdefault(result, []).append(position)
        rejections = []
        for reason, positions in rejected.items():
            mask = np.zeros(nodes.size, dtype=bool)
            mask[positions] = True
            rejections.append(Rejection(reason, mask, unresolvable=True))
        return rejections

    def explain(self, cycle: Cycle, node: int) -> str:
        state: PodClaims | None = cycle.state.get(_STATE)
        if state is None:
            return ""
        result = node_result(state, cycle.snapshot.nodes[node], node)
        return result if isinstance(result, str) else ""

    def pre_score(self, cycle: Cycle, nodes: IndexArray) -> bool:
        state: PodClaims | None = cycle.state.get(_STATE)
        if state is None:
            return False
        return any(
            _list(r.get("firstAvailable")) for claim in state.claims for r in claim.requests()
        )

    def score(self, cycle: Cycle, nodes: IndexArray) -> IntArray:
        state: PodClaims = cycle.state[_STATE]
        out = np.zeros(nodes.size, dtype=np.int64)
        for position, row in enumerate(nodes):
            result = state.nodes.get(int(row))
            if isinstance(result, list):
                out[position] = first_available_score(state.claims, result, state.pending)
        return out

    def normalize(self, cycle: Cycle, nodes: IndexArray, scores: IntArray) -> IntArray:
        return default_normalize(scores, reverse=False)

    def memo(self, pod: PodInfo, store: DraStore) -> PodClaims | None:
        """The Filter's state for ``pod`` if the store has not changed since."""
        if self._memo is None:
            return None
        uid, version, state = self._memo
        return state if uid == pod.uid and version == store.version else None

    def memo_group(self, pod: PodInfo) -> dict[str, set[str]] | None:
        """The pod-group cycle's pending allocations that the last PreFilter for ``pod``
        saw, for a Reserve that has to compute its state again."""
        if self._memo is None or self._memo[0] != pod.uid:
            return None
        return self._memo[2].group

    def warm_up(self) -> None:
        """The CEL runtime, loaded before the first cycle that reads a device needs it
        (``load_runtime``); on the loop, the import alone held it for about 0.1 s."""
        load_runtime()

    def pre_enqueue(self, handle: Handle, pod: PodInfo) -> Status:
        """PreEnqueue: the pod waits until every claim it names exists."""
        if not pod.resource_claims:
            return ALLOW
        waiting = pre_enqueue(handle.snapshot.dra, pod)
        return Status("Unschedulable", waiting) if waiting else ALLOW

    def post_filter(self, handle: Handle, pod: PodInfo, failed: FailedCycle) -> PostFilterResult:
        """PostFilter: a stale claim's deallocation (an extended-resource claim's deletion),
        its message once the write is out; it nominates nothing."""
        store = handle.snapshot.dra
        if not uses_dra(store, pod):
            return PostFilterResult(REJECTED)
        claim = stale_claim(self, store, pod)
        if claim is None:
            return PostFilterResult(REJECTED)
        handle.spawn(self._binder(handle).deallocate(claim))
        reason = DELETED if is_extended_claim(claim) else DEALLOCATED
        return PostFilterResult(Status("Unschedulable", reason))

    def hint(self, handle: Handle, kind: str, key: str) -> None:
        """A claim created or changed: the pods that name it may fit now."""
        if kind == "resourceclaims":
            users = handle.snapshot.dra.users.get(key, ())
            handle.wake(list(users), NAME, ClusterEvent.RESOURCE_CLAIM)

    def _binder(self, handle: Handle) -> ClaimBinder:
        def wake(key: str) -> None:
            self.hint(handle, "resourceclaims", key)

        return ClaimBinder(handle.client, handle.snapshot.dra, handle.observe, wake, handle.event)

    def reserve(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        """Reserve: the chosen allocations go in flight in the store."""
        snapshot = handle.snapshot
        if not uses_dra(snapshot.dra, pod):
            return ALLOW
        row = snapshot.index[node]
        try:
            plan = plan_claims(self, snapshot.dra, pod, snapshot.nodes[row], row)
        except PluginError as exc:
            return Status("Error", str(exc), worded=True)
        self._binder(handle).assume(pod, plan)
        self._plans[pod.uid] = plan
        return ALLOW

    def unreserve(self, handle: Handle, pod: PodInfo, node: str) -> Undo | None:
        """Unreserve: the pod out of its claims' ``reservedFor`` again (API work)."""
        plan = self._plans.pop(pod.uid, None)
        if plan is None or plan.empty:
            return None
        binder = self._binder(handle)
        binder.release(pod, plan)  # the in-flight allocations, at once
        return binder.unreserve(pod, plan)

    def pre_bind_pre_flight(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        """Success for a pod with any claim, else Skip."""
        plan = self._plans.get(pod.uid)
        return ALLOW if plan is not None and plan.pre_flight else SKIP

    async def pre_bind(self, handle: Handle, pod: PodInfo, node: str) -> Status:
        """PreBind: the claims written, then their binding conditions awaited for at most
        ``bindingTimeoutSeconds``; a failure has unreserved them already."""
        plan = self._plans.get(pod.uid)
        if plan is None or not plan.pre_flight:
            return ALLOW
        binder = self._binder(handle)
        try:
            why = await binder.bind(pod, node, plan, self.binding_timeout)
        except Exception as exc:  # the reservation must be resolved whatever happens
            log.exception("claim_bind_crashed", pod=pod.name, namespace=pod.namespace, node=node)
            await binder.unreserve(pod, plan)
            why = str(exc)
        if why:
            self._plans.pop(pod.uid, None)
            return Status("Error", why)
        return ALLOW

    async def post_bind(self, handle: Handle, pod: PodInfo, node: str) -> None:
        """Bound: nothing is left to undo."""
        self._plans.pop(pod.uid, None)


def stale_claim(plugin: DynamicResources, store: DraStore, pod: PodInfo) -> Claim | None:
    """PostFilter: an allocated claim unavailable on some node that no other pod uses,
    to deallocate so the next attempt can allocate it afresh. Go picks one at random
    among several; Podium takes the first in the pod's order."""
    state = plugin.memo(pod, store)
    if state is None:
        return None
    for index in sorted(state.unavailable):
        claim = state.claims[index]
        if claim.uid in state.pending:  # allocated in flight by a member: nothing written
            continue
        if not claim.reserved_for or claim.reserved_for == (pod.uid,):
            return claim
    # deallocateOrDeletePodClaims: an extended-resource claim of a prior cycle is deleted.
    if state.extended is not None and state.extended.stale:
        return state.extended.claim
    return None


def dynamic_resources(profile: Profile) -> DynamicResources | None:
    """The profile's DynamicResources filter; without it claims are left alone, as in kube."""
    return next((p for p in profile.filters if isinstance(p, DynamicResources)), None)


def plan_claims(
    plugin: DynamicResources, store: DraStore, pod: PodInfo, node: NodeInfo, row: int
) -> ClaimPlan:
    """Reserve: the chosen node's allocations (the Filter's, or the same computed again).

    Raises PluginError when they cannot be had: the pod is never bound without them.
    """
    state = plugin.memo(pod, store)
    if state is None:
        group = plugin.memo_group(pod)
        prepared = prepare(store, pod, plugin.binding_timeout, plugin.filter_timeout, group)
        if prepared is None:
            return ClaimPlan()
        if isinstance(prepared, str):
            raise PluginError(f'running Reserve plugin "{NAME}": {prepared}')
        state = prepared
    result = node_result(state, node, row)
    if isinstance(result, str):
        raise PluginError(f'running Reserve plugin "{NAME}": claim allocation not found for node')
    # A copy: the Filter's results may be shared with other pods through the store's cache.
    result = copy.deepcopy(result)
    count = len(state.to_allocate)
    allocations = dict(zip((c.uid for c in state.to_allocate), result[:count], strict=True))
    plan = ClaimPlan(
        claims=list(state.claims), has_extended=state.extended is not None, group=state.group
    )
    variant = state.extended.nodes.get(row) if state.extended is not None else None
    if variant is not None and not isinstance(variant, str) and variant.claim is not None:
        claim = parse_claim(variant.claim)
        plan.extended = ExtendedPlan(claim, result[count], variant.mappings)
    for claim in state.claims:
        if pod.uid in claim.reserved_for:
            continue
        shared = state.pending.get(claim.uid)
        allocation = copy.deepcopy(dict(shared)) if shared is not None else None
        plan.items.append((claim, allocations.get(claim.uid, allocation)))
    return plan
